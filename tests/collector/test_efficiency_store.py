"""Efficiency by resource set summed in the store (SQLite GROUP BY, osmem's composite
aggregations) is the efficiency of the same records summed in memory, on the hand-built
two-set pool of tests/accounting/test_efficiency.py, its snapshots a day apart:

  day         slot (machine)   cores  free  true overhead (CU)  jobs ending that day
  2026-01-01  fast (fast-1)    8      2     2                   6 cores x 1 h, 10800 CPU-s
              slowA (slow-1)   4      4     4                   4 cores x 1 h, 14400 CPU-s
              slowB (slow-2)   4      0     0
  2026-01-02  fast (fast-1)    8      0     0                   8 cores x 1 h, 28800 CPU-s
              slowA (slow-1)   4      1     0                   3 cores x 1 h, 10800 CPU-s (n_hosts unknown: 1)
              slowB (slow-2)   4      4     4

Each snapshot stands for an hour; canonical unit {1 core, 2 GiB}. The whole range gives the
numbers worked in that test (scheduling fast 0.875, slow 0.4375, all 0.65625; in CU 0.875,
0.5, 0.6875; job 11/14, 1, 6/7); per day, scheduling is fast 6/8 then 8/8, slow 4/8 then 3/8,
and job efficiency fast 10800/21600 then 1, slow 1 both days.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest

from collector.records import table_docs
from collector.sinks.elasticsearch import ElasticsearchSink
from probes.config import ProbeConfig
from probes.pipeline.analytics import efficiency_report
from probes.pipeline.stored_efficiency import store_efficiency

DAY0 = 1767225600.0  # 2026-01-01T00:00:00Z
CONFIG = ProbeConfig.model_validate({"partitions": [{"name": "cpu", "match": "true", "cpus": 1, "memory": "2 GiB"}]})
SLOTS = (  # name, machine, cores, free cores and MiB of each snapshot, true overhead of each
    ("fast", "fast-1", 8, ((2, 8192), (0, 0)), (2, 0)),
    ("slowA", "slow-1", 4, ((4, 8192), (1, 0)), (4, 0)),
    ("slowB", "slow-2", 4, ((0, 4096), (4, 8192)), (0, 4)),
)


def slot_docs() -> list[dict[str, Any]]:
    rows = []
    for day in (0, 1):
        for name, machine, cores, free, overhead in SLOTS:
            rows.append(
                {
                    "pool": "hand", "name": name, "machine": machine, "cpu_model": "fast" if name == "fast" else "slow",
                    "partition": "cpu", "total_cpus": float(cores), "total_memory": cores * 2048.0, "total_disk": 1e6,
                    "total_gpus": 0.0, "unallocated_cpus": float(free[day][0]),
                    "unallocated_memory": float(free[day][1]),
                    "unallocated_disk": 1e6, "unallocated_gpus": 0.0, "observed_at": DAY0 + day * 86400,
                    "interval_s": 3600.0, "overhead_cu": overhead[day], "overhead_cu_hours": float(overhead[day]),
                }
            )  # fmt: skip
    return table_docs("slot", pd.DataFrame(rows), probe="test")


def job_docs(with_set: bool, *extra: dict[str, Any]) -> list[dict[str, Any]]:
    frame = pd.DataFrame(
        {
            "job_id": ["j1", "j2", "j3", "j4"],
            "host": ["slot1_1@fast-1", "slot1_1@fast-1", "slot1_1@slow-1", "slot1_2@slow-2"],
            "cpu_model": ["fast", "fast", "slow", "slow"],
            "cpus": [6.0, 8.0, 4.0, 3.0],
            "n_hosts": [1, 1, 1, None],
            "walltime_s": [3600.0] * 4,
            "cpu_time_s": [10800.0, 28800.0, 14400.0, 10800.0],
            "end": [DAY0 + 7200, DAY0 + 86400 + 7200, DAY0 + 7200, DAY0 + 86400 + 7200],
        }
    )
    frame = pd.concat([frame, pd.DataFrame(list(extra))], ignore_index=True) if extra else frame
    return table_docs("job", frame if with_set else frame.drop(columns=["cpu_model"]), probe="test")


EXTRA = {  # more jobs, each 1 h, and what they make of the table by cpu_model
    # a parallel job on a fast and a slow node (its own cpu_model, MachineAttrCPUModel0, is
    # one node's), split between the sets: 2 cores x 1 h and 3600 CPU-s in each
    "split": [
        {"job_id": "j5", "hosts": "slot1@fast-1,slot1@slow-1", "host": "slot1@slow-1", "cpu_model": "slow",
         "cpus": 2.0, "n_hosts": 2, "walltime_s": 3600.0, "cpu_time_s": 7200.0, "end": DAY0 + 7200},
    ],
    # a job on slow-2 carrying "fast", which the slot records contradict: slow; one on a startd
    # the slot records do not show keeps its own "fast"
    "contradicted": [
        {"job_id": "j6", "hosts": "slot1_3@slow-2", "host": "slot1_3@slow-2", "cpu_model": "fast",
         "cpus": 1.0, "n_hosts": 1, "walltime_s": 3600.0, "cpu_time_s": 1800.0, "end": DAY0 + 86400 + 7200},
        {"job_id": "j7", "hosts": "slot1@gone-1", "host": "slot1@gone-1", "cpu_model": "fast",
         "cpus": 1.0, "n_hosts": 1, "walltime_s": 3600.0, "cpu_time_s": 3600.0, "end": DAY0 + 86400 + 7200},
    ],
}  # fmt: skip
EXPECTED = {  # jobs, cores x nodes x walltime and CPU time of fast, slow and (all)
    "split": ([3, 3, 5], [57600.0, 32400.0, 90000.0], [43200.0, 28800.0, 72000.0]),
    "contradicted": ([3, 3, 6], [54000.0, 28800.0, 82800.0], [43200.0, 27000.0, 70200.0]),
}


@pytest.fixture
def store(empty_store: Any) -> Any:
    return empty_store


@pytest.mark.parametrize("with_set", [True, False], ids=["jobs-carry-the-set", "set-of-the-jobs-machine"])
def test_the_store_sums_what_memory_sums(store: Any, with_set: bool) -> None:
    slots, jobs = slot_docs(), job_docs(with_set)
    store.send("slot", slots)
    store.send("job", jobs)
    before = getattr(store, "requests", 0)
    table = store_efficiency(store, CONFIG, by="cpu_model").set_index("set")
    if isinstance(store, ElasticsearchSink):  # a refresh and one page per aggregation, nothing paged in
        assert store.requests - before == 4  # the slots' sums per slot give the jobs' nodes their sets
    assert table.index.tolist() == ["fast", "slow", "(all)"]
    assert table["available_core_s"].tolist() == [57600, 57600, 115200]
    assert table["scheduling"].tolist() == [0.875, 0.4375, 0.65625]
    assert table["scheduling_cu"].tolist() == [0.875, 0.5, 0.6875]
    assert table["jobs"].tolist() == [2, 2, 4]
    assert table["job"].tolist() == pytest.approx([11 / 14, 1.0, 6 / 7])
    assert table["system"].tolist() == pytest.approx([0.6875, 0.4375, 0.5625])
    in_memory = efficiency_report(pd.DataFrame(slots), pd.DataFrame(jobs), CONFIG, by="cpu_model")
    pd.testing.assert_frame_equal(table.reset_index(), in_memory)


def test_per_day(store: Any) -> None:
    store.send("slot", slot_docs())
    store.send("job", job_docs(True))
    table = store_efficiency(store, CONFIG, by="cpu_model", period="day")
    rows = {(r.period, r.set): r for r in table.itertuples()}
    assert [k for k in rows] == [(d, s) for d in ("2026-01-01", "2026-01-02") for s in ("fast", "slow", "(all)")]
    assert [rows[k].scheduling for k in rows] == [0.75, 0.5, 0.625, 1.0, 0.375, 0.6875]
    assert [rows[k].job for k in rows] == [0.5, 1.0, 25200 / 36000, 1.0, 1.0, 1.0]
    whole = store_efficiency(store, CONFIG, by=None, since="2026-01-02T00:00:00Z")
    assert whole["set"].tolist() == ["(all)"] and whole["scheduling"].tolist() == [0.6875]


def test_an_attribute_no_slot_record_has(store: Any) -> None:
    from collector.errors import ConfigError
    from probes.errors import SourceError

    with pytest.raises(SourceError, match="no slot records in the store between the first and the last"):
        store_efficiency(store, CONFIG, by=None)
    store.send("slot", slot_docs())
    with pytest.raises(ConfigError, match="--by 'HEPSPEC': no slot record in the store has that attribute"):
        store_efficiency(store, CONFIG, by="HEPSPEC")


@pytest.mark.parametrize("case", ["split", "contradicted"])
def test_jobs_are_in_the_sets_of_the_slots_they_held(store: Any, case: str) -> None:
    """The store places a job as :func:`~probes.pipeline.analytics.job_nodes` does: by the
    slot records of its nodes (``hosts``, else ``host``), its own value only where they show
    none, a job on nodes of two sets split between them; whole range and per day."""
    slots, jobs = slot_docs(), job_docs(True, *EXTRA[case])
    store.send("slot", slots)
    store.send("job", jobs)
    table = store_efficiency(store, CONFIG, by="cpu_model")
    assert table["set"].tolist() == ["fast", "slow", "(all)"]
    assert (table["jobs"].tolist(), table["job_core_s"].tolist(), table["used_core_s"].tolist()) == EXPECTED[case]
    in_memory = efficiency_report(pd.DataFrame(slots), pd.DataFrame(jobs), CONFIG, by="cpu_model")
    pd.testing.assert_frame_equal(table, in_memory)
    daily = store_efficiency(store, CONFIG, by="cpu_model", period="day")
    assert daily["period"].unique().tolist() == ["2026-01-01", "2026-01-02"]
    for day, frame in daily.groupby("period"):
        that_day = [pd.DataFrame([d for d in docs if d["timestamp"].startswith(day)]) for docs in (slots, jobs)]
        in_memory = efficiency_report(*that_day, CONFIG, by="cpu_model")
        pd.testing.assert_frame_equal(frame.drop(columns="period").reset_index(drop=True), in_memory)
