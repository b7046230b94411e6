"""The idle-job cross-check (seed 003, section 3.1)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import probes.accounting.fit as fit_module
from probes.accounting import RESOURCES, demand_overlap, fits_idle, true_overhead

from .tables import GIB, UNITS, condor25_slots, slots_table


def idle_table(rows: list[dict[str, Any]]) -> pd.DataFrame:
    frame = pd.DataFrame.from_records(rows)
    if "count" not in frame and not rows:
        frame["count"] = pd.Series(dtype=float)
    for r in RESOURCES:
        if f"request_{r}" not in frame:
            frame[f"request_{r}"] = np.nan
    return frame


FIGURE_2 = slots_table(
    [
        # seed 003 Figure 2 leftovers on an 8-core / 16 GiB node (overhead in CU)
        {"total_cpus": 8, "total_memory": 16 * GIB, "unallocated_cpus": 3, "unallocated_memory": 1 * GIB},  # 0
        {"total_cpus": 8, "total_memory": 16 * GIB, "unallocated_cpus": 3, "unallocated_memory": 4 * GIB},  # 2
        {"total_cpus": 8, "total_memory": 16 * GIB, "unallocated_cpus": 3, "unallocated_memory": 7 * GIB},  # 3
    ]
)


def test_seed_003_two_cu_job_waiting() -> None:
    # "should ideally only happen when there are no jobs waiting in the queues that request
    # less than 2 CPUs and 4 GB": a 2-core / 4 GiB job fits the 2 CU and 3 CU slots, not the 0 CU
    idle = idle_table([{"request_cpus": 2, "request_memory": 4 * GIB, "count": 5}])
    assert fits_idle(FIGURE_2, idle).tolist() == [False, True, True]
    # a 3-core / 5 GiB job only fits the 7 GiB slot
    idle = idle_table([{"request_cpus": 3, "request_memory": 5 * GIB, "count": 1}])
    assert fits_idle(FIGURE_2, idle).tolist() == [False, False, True]
    # a 1-core / 512 MiB job fits even the 0 CU slot (smaller than a canonical unit)
    idle = idle_table([{"request_cpus": 1, "request_memory": 512, "count": 1}])
    assert fits_idle(FIGURE_2, idle).tolist() == [True, True, True]


def test_every_resource_must_fit_and_one_request_is_enough() -> None:
    idle = idle_table(
        [
            # too many cores for all: 4 > 3
            {"request_cpus": 4, "request_memory": 1024, "count": 10},
            # needs a GPU nobody has
            {"request_cpus": 1, "request_memory": 1024, "request_gpus": 1, "count": 10},
            # fits the 4 and 7 GiB slots, but no job is idle in this autocluster
            {"request_cpus": 1, "request_memory": 3 * GIB, "count": 0},
            # needs 200 GiB of disk (KiB) when the slots report none free
            {"request_cpus": 1, "request_disk": 200 * 1024**2, "count": 1},
        ]
    )
    assert fits_idle(FIGURE_2, idle).tolist() == [False, False, False]
    # the same plus one that fits the 7 GiB slot exactly (7168 <= 7168)
    idle = pd.concat([idle, idle_table([{"request_cpus": 3, "request_memory": 7 * GIB, "count": 1}])])
    assert fits_idle(FIGURE_2, idle).tolist() == [False, False, True]


def test_equal_amounts_fit_despite_float_sums() -> None:
    slots = slots_table([{"unallocated_memory": 0.1 + 0.2}])  # 0.30000000000000004
    slots2 = slots_table([{"unallocated_memory": 0.3}])
    idle = idle_table([{"request_memory": 0.30000000000000004, "count": 1}])
    assert fits_idle(slots2, idle).tolist() == [True]
    assert fits_idle(slots, idle_table([{"request_memory": 0.3, "count": 1}])).tolist() == [True]
    # but a real excess does not fit
    assert fits_idle(slots2, idle_table([{"request_memory": 0.3001, "count": 1}])).tolist() == [False]


def test_condor25_idle_jobs() -> None:
    """The real HTCondor 25.0.13 pool of the fixtures README, from its numbers."""
    slots = condor25_slots()
    idle = idle_table(
        [
            {"request_cpus": 2, "request_memory": 4096, "request_gpus": 1, "count": 1},  # 11.4
            {"request_cpus": 8, "request_memory": 16384, "count": 1},  # 11.7
            {"request_cpus": 1, "request_memory": 40000, "count": 1},  # 11.8, fits nowhere
        ]
    )
    fits = fits_idle(slots, idle)
    # CPU node has no core free; the GPU node has GPUs and cores but 0 MiB for 11.4's 4096
    assert fits.tolist() == [False, False]
    overlap = demand_overlap(true_overhead(slots, UNITS), fits)
    # the GPU node's 3 CU over 300 s = 0.25 CU-hours, with no idle job able to use them
    assert overlap == {
        "suspicious_cu_hours": 0.0,
        "other_cu_hours": 0.25,
        "suspicious_slots": 0,
        "other_slots": 1,
        "fitting_without_overhead_slots": 0,
    }


def test_demand_overlap_splits_cu_hours() -> None:
    slots = true_overhead(FIGURE_2, UNITS)  # 0, 2, 3 CU over one hour each
    slots = pd.concat(
        [slots, true_overhead(slots_table([{"partition": None, "unallocated_cpus": 8}]), UNITS)],
        ignore_index=True,
    )
    fits = pd.Series([True, False, True, True], index=slots.index)
    # 3 CU with a fitting job: suspicious; 2 CU without: other; the 0 CU slot fits a job;
    # the unmatched slot is left out although it "fits"
    assert demand_overlap(slots, fits) == {
        "suspicious_cu_hours": 3.0,
        "other_cu_hours": 2.0,
        "suspicious_slots": 1,
        "other_slots": 1,
        "fitting_without_overhead_slots": 1,
    }


def test_nothing_idle() -> None:
    assert fits_idle(FIGURE_2, idle_table([])).tolist() == [False, False, False]
    zero = idle_table([{"request_cpus": 1, "count": 0}, {"request_cpus": 1, "count": np.nan}])
    assert fits_idle(FIGURE_2, zero).tolist() == [False, False, False]


def test_result_is_on_the_slots_index() -> None:
    slots = FIGURE_2.set_axis([10, 20, 30])
    fits = fits_idle(slots, idle_table([{"request_cpus": 3, "request_memory": 5 * GIB, "count": 1}]))
    assert fits.index.tolist() == [10, 20, 30]
    assert fits.dtype == bool
    assert fits.name == "fits_idle"


def test_errors() -> None:
    with pytest.raises(ValueError, match=r"^idle table is missing columns \['count'\]$"):
        fits_idle(FIGURE_2, idle_table([{"request_cpus": 1}]))
    with pytest.raises(ValueError, match=r"^slots table is missing columns \['unallocated_gpus'\]$"):
        fits_idle(FIGURE_2.drop(columns=["unallocated_gpus"]), idle_table([{"count": 1}]))
    slots = true_overhead(FIGURE_2, UNITS)
    with pytest.raises(ValueError, match=r"fits must be a bool Series on the slots table's index"):
        demand_overlap(slots, pd.Series([True, False, True], index=[1, 2, 3]))
    with pytest.raises(ValueError, match=r"fits has missing values"):
        demand_overlap(slots, pd.Series([True, None, True], index=slots.index))


amount = st.integers(0, 6).map(float)


@settings(max_examples=100, deadline=None, database=None)
@given(
    frees=st.lists(st.tuples(amount, amount, amount, amount), min_size=1, max_size=40),
    requests=st.lists(st.tuples(amount, amount, amount, amount, st.integers(0, 2)), min_size=1, max_size=15),
)
def test_chunked_matches_brute_force(frees: list[tuple[float, ...]], requests: list[tuple[float, ...]]) -> None:
    slots = slots_table([{f"unallocated_{r}": f[i] for i, r in enumerate(RESOURCES)} for f in frees])
    idle = idle_table([{**{f"request_{r}": q[i] for i, r in enumerate(RESOURCES)}, "count": q[4]} for q in requests])
    expected = [any(q[4] > 0 and all(q[i] <= f[i] for i in range(4)) for q in requests) for f in frees]
    assert fits_idle(slots, idle).tolist() == expected
    with pytest.MonkeyPatch.context() as m:
        m.setattr(fit_module, "_CHUNK_CELLS", 7)  # a handful of slots per chunk
        assert fits_idle(slots, idle).tolist() == expected
