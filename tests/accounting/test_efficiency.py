"""Efficiency by resource set on a hand-built two-set pool, and drift loss (seed 001).

The pool: set "fast" is one 8-core 16 GiB slot; set "slow" is two 4-core 8 GiB slots. Two
hourly snapshots; canonical unit {1 core, 2048 MiB}.

  snapshot  slot    free cores  free MiB  true overhead (CU)
  1         fast    2           8192      min(2, 4) = 2
  1         slowA   4           8192      4 (empty)
  1         slowB   0           4096      0
  2         fast    0           0         0
  2         slowA   1           0         0 (a core is free but no memory: not overhead)
  2         slowB   4           8192      4

Cores:  fast  available 8*3600*2 = 57600, dedicated (6+8)*3600 = 50400 -> 0.875
        slow  available 57600, dedicated (0+4+3+0)*3600 = 25200       -> 0.4375
        all   75600 / 115200                                            -> 0.65625
CU:     fast  capacity 8: dedicated (8-2 + 8-0)*3600 = 50400 / 57600    -> 0.875
        slow  capacity 4: dedicated (0 + 4 + 4 + 0)*3600 = 28800 / 57600 -> 0.5
        all   79200 / 115200                                            -> 0.6875
Jobs:   fast  6 cores x 1 h at half a core each (10800) + 8 cores x 1 h busy (28800):
              39600 / 50400 = 11/14;  system 0.875 * 11/14 = 0.6875
        slow  4 cores x 1 h busy (14400) + 3 cores x 1 h busy (10800): 1.0; system 0.4375
        all   64800 / 75600 = 6/7;    system 0.65625 * 6/7 = 0.5625, CU 0.6875 * 6/7 = 0.589...
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from probes.accounting.canonical import CanonicalUnit, true_overhead
from probes.accounting.efficiency import (
    ALL,
    EFFICIENCY_COLUMNS,
    add_sums,
    capacity_cu,
    drift_by,
    drift_loss,
    efficiency_table,
    job_sums,
    slot_sums,
)

UNITS = {"cpu": CanonicalUnit("cpu", {"cpus": 1, "memory": 2048})}


def pool() -> pd.DataFrame:
    rows = []
    for at, free in ((0, {"fast": (2, 8192), "slowA": (4, 8192), "slowB": (0, 4096)}),
                     (3600, {"fast": (0, 0), "slowA": (1, 0), "slowB": (4, 8192)})):  # fmt: skip
        for name, (cores, mib) in free.items():
            total = (8, 16384) if name == "fast" else (4, 8192)
            rows.append(
                {
                    "name": name, "cpu_model": "fast" if name == "fast" else "slow", "partition": "cpu",
                    "total_cpus": total[0], "total_memory": total[1], "total_disk": 1e6, "total_gpus": 0,
                    "unallocated_cpus": cores, "unallocated_memory": mib, "unallocated_disk": 1e6,
                    "unallocated_gpus": 0,
                    "observed_at": at, "interval_s": 3600.0,
                }
            )  # fmt: skip
    slots = true_overhead(pd.DataFrame(rows), UNITS)
    slots["capacity_cu"] = capacity_cu(slots, UNITS)
    return slots


JOBS = pd.DataFrame(
    {
        "cpu_model": ["fast", "fast", "slow", "slow"],
        "cpus": [6, 8, 4, 3],
        "n_hosts": [1, 1, 1, pd.NA],
        "walltime_s": [3600.0] * 4,
        "cpu_time_s": [10800.0, 28800.0, 14400.0, 10800.0],
    }
)


def test_the_hand_built_pool() -> None:
    slots = pool()
    assert slots["overhead_cu"].tolist() == [2, 4, 0, 0, 0, 4]
    assert slots["capacity_cu"].tolist() == [8, 4, 4, 8, 4, 4]
    table = efficiency_table(slot_sums(slots, "cpu_model"), job_sums(JOBS, "cpu_model")).set_index("set")
    assert list(table.reset_index().columns) == list(EFFICIENCY_COLUMNS)
    assert table.index.tolist() == ["fast", "slow", ALL]
    assert table["available_core_s"].tolist() == [57600, 57600, 115200]
    assert table["dedicated_core_s"].tolist() == [50400, 25200, 75600]
    assert table["scheduling"].tolist() == [0.875, 0.4375, 0.65625]
    assert table["dedicated_cu_s"].tolist() == [50400, 28800, 79200]
    assert table["scheduling_cu"].tolist() == [0.875, 0.5, 0.6875]
    assert table["jobs"].tolist() == [2, 2, 4]
    assert table["job"].tolist() == pytest.approx([11 / 14, 1.0, 6 / 7])
    assert table["system"].tolist() == pytest.approx([0.6875, 0.4375, 0.5625])
    assert table.loc[ALL, "system_cu"] == pytest.approx(0.6875 * 6 / 7)


def test_sums_of_chunks_are_the_sums_of_the_whole() -> None:
    slots = pool()
    whole = slot_sums(slots, "cpu_model")
    parts = add_sums([slot_sums(slots.iloc[:3], "cpu_model"), slot_sums(slots.iloc[3:], "cpu_model")])
    pd.testing.assert_frame_equal(whole, parts)


def test_without_a_set_attribute_everything_is_one_set() -> None:
    table = efficiency_table(slot_sums(pool()), job_sums(JOBS))
    assert table["set"].tolist() == [ALL]
    assert table["system"].iloc[0] == pytest.approx(0.5625)


def test_without_canonical_units_the_cu_columns_are_unknown() -> None:
    slots = pool().drop(columns=["capacity_cu"])
    table = efficiency_table(slot_sums(slots), job_sums(JOBS))
    assert np.isnan(table["scheduling_cu"].iloc[0]) and table["scheduling"].iloc[0] == 0.65625


def test_a_job_split_over_two_sets_counts_its_share_in_each() -> None:
    # job x (2 nodes x 2 cores x 1000 s = 4000 core-s, 3000 CPU-s) has one node in each set:
    # a half of it in each, 2000 core-s and 1500 CPU-s; y (fast) and z (slow) 2 x 1000 s each
    pieces = pd.DataFrame(
        {"cpu_model": ["fast", "slow", "fast", "slow"], "cpus": [2, 2, 2, 2], "n_hosts": [2, 2, 1, 1],
         "walltime_s": [1000.0] * 4, "cpu_time_s": [3000.0, 3000.0, 2000.0, 1000.0], "share": [0.5, 0.5, 1.0, 1.0]}
    )  # fmt: skip
    sums = job_sums(pieces, "cpu_model")
    assert sums.values.tolist() == [["fast", 2, 4000.0, 3500.0], ["slow", 2, 4000.0, 2500.0]]
    table = efficiency_table(slot_sums(pool(), "cpu_model"), sums, overall_jobs=3).set_index("set")
    assert table["jobs"].tolist() == [2, 2, 3]  # in each set it ran in, once overall
    assert table["job_core_s"].tolist() == [4000.0, 4000.0, 8000.0]
    assert table["job"].tolist() == [0.875, 0.625, 0.75]
    assert efficiency_table(slot_sums(pool(), "cpu_model"), sums)["jobs"].tolist() == [2, 2, 4]


def test_drift_of_a_job_spanning_two_speeds() -> None:
    # job 1 holds 8 cores of a speed-2 node and 4 cores of a speed-1 node for 1000 s; it runs
    # at speed 1, so the fast node is useful half the time: 8*1000/2 = 4000 core-s lost of
    # 12000. Job 2 holds two speed-1 nodes: nothing lost.
    nodes = pd.DataFrame(
        {
            "job": [1, 1, 2, 2],
            "user": ["u", "u", "v", "v"],
            "set": ["fast", "slow", "slow", "slow"],
            "speed": [2.0, 1.0, 1.0, 1.0],
            "cpus": [8, 4, 4, 4],
            "walltime_s": [1000.0] * 4,
        }
    )
    losses = drift_loss(nodes)
    assert losses["lost_core_s"].tolist() == [4000.0, 0.0, 0.0, 0.0]
    assert losses["mixed"].tolist() == [True, True, False, False]
    by_set = drift_by(losses, "set").set_index("set")
    assert by_set.loc["fast", ["jobs", "mixed_jobs", "dedicated_core_s", "lost_core_s"]].tolist() == [1, 1, 8000, 4000]
    assert by_set.loc["slow", "mixed_share"] == 0.5 and by_set.loc["slow", "lost_core_s"] == 0
    by_user = drift_by(losses, "user").set_index("user")
    assert by_user.loc["u", "lost_share"] == pytest.approx(4000 / 12000)
    assert by_user.loc["v", "lost_share"] == 0


@pytest.mark.parametrize(
    ("frame", "match"),
    [
        (JOBS.drop(columns=["cpu_time_s"]), r"jobs table is missing columns \['cpu_time_s'\]"),
        (JOBS.drop(columns=["cpu_model"]), r"jobs table is missing columns \['cpu_model'\]"),
    ],
)
def test_missing_columns(frame: pd.DataFrame, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        job_sums(frame, "cpu_model")


def test_a_node_without_speed_is_refused() -> None:
    nodes = pd.DataFrame({"job": [1], "set": ["a"], "speed": [0.0], "cpus": [1], "walltime_s": [1.0]})
    with pytest.raises(ValueError, match="every node needs a speed > 0"):
        drift_loss(nodes)
