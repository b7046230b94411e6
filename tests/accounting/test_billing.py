"""Proportional billing (seed 003, section 3.3)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from probes.accounting import RESOURCES, bill, true_overhead

from .tables import GIB, UNITS, allocations_table, condor25_slots, slots_table

# Seed 003's Figure 2 nodes, taken as 8 cores / 16 GiB: the third example's 10/9 needs a
# 16 GB node: billable memory = 16 - 6 (3 CU * 2 GB) = 10 GB, allocated = 16 - 7 = 9 GB.
NODE = {"name": "node", "total_cpus": 8.0, "total_memory": 16.0 * GIB}


def run(slots: pd.DataFrame, allocations: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    return bill(true_overhead(slots, UNITS), allocations, UNITS)


def node_with_jobs(jobs: list[dict[str, float]], **node: Any) -> tuple[pd.DataFrame, pd.DataFrame]:
    """One node whose unallocated amounts are its totals minus its jobs."""
    row: dict[str, Any] = {**NODE, **node}
    for r in RESOURCES:
        row[f"unallocated_{r}"] = row.get(f"total_{r}", 0.0) - sum(j.get(r, 0.0) for j in jobs)
    return slots_table([row]), allocations_table([{"parent": row["name"], **j} for j in jobs])


def test_seed_003_all_cores_used_30_percent_memory_free() -> None:
    # Two jobs hold all 8 cores and 70 % of 16384 MiB = 11468.8 MiB; 0 cores free -> 0 CU.
    nodes, bills = run(*node_with_jobs([{"cpus": 4, "memory": 6553.6}, {"cpus": 4, "memory": 4915.2}]))
    assert nodes["overhead_cu"].tolist() == [0]
    # CPU rate 8 / 8 = 100 %; memory 16384 / 11468.8 = 10 / 7 = 143 %
    assert nodes["rate_cpus"].iloc[0] == pytest.approx(1.0)
    assert nodes["rate_memory"].iloc[0] == pytest.approx(10 / 7)
    assert round(nodes["rate_memory"].iloc[0] * 100) == 143
    # bills: 6553.6 * 10/7 = 9362.29 MiB and 4915.2 * 10/7 = 7021.71 MiB; together 16384
    assert bills["billed_memory"].tolist() == pytest.approx([9362.2857142857, 7021.7142857143])
    assert bills["billed_cpus"].tolist() == pytest.approx([4.0, 4.0])


def test_seed_003_half_the_cores_idle_memory_full() -> None:
    # Two jobs of 2 cores / 8192 MiB: 4 of 8 cores free, 0 MiB free -> 0 CU.
    nodes, bills = run(*node_with_jobs([{"cpus": 2, "memory": 8192}, {"cpus": 2, "memory": 8192}]))
    assert nodes["overhead_cu"].tolist() == [0]
    # CPU 8 / 4 = 200 %, memory 16384 / 16384 = 100 %
    assert nodes["rate_cpus"].iloc[0] == pytest.approx(2.0)
    assert nodes["rate_memory"].iloc[0] == pytest.approx(1.0)
    assert bills["billed_cpus"].tolist() == pytest.approx([4.0, 4.0])
    assert bills["billed_memory"].tolist() == pytest.approx([8192.0, 8192.0])


def test_seed_003_three_cu_of_true_overhead() -> None:
    # Jobs hold 5 cores and 9 GiB: 3 cores + 7 GiB free -> min(3, floor(7/2)=3) = 3 CU.
    nodes, bills = run(*node_with_jobs([{"cpus": 3, "memory": 6 * GIB}, {"cpus": 2, "memory": 3 * GIB}]))
    assert nodes["overhead_cu"].tolist() == [3]
    # "those 3 CPU cores and 6 GBs of memory will not be considered for billing"
    assert nodes["overhead_cpus"].tolist() == [3.0]
    assert nodes["overhead_memory"].tolist() == [6.0 * GIB]
    # billable: 8 - 3 = 5 cores, 16 - 6 = 10 GiB; allocated 5 cores, 9 GiB
    assert nodes["billable_cpus"].tolist() == [5.0]
    assert nodes["billable_memory"].tolist() == [10.0 * GIB]
    assert nodes["allocated_memory"].tolist() == [9.0 * GIB]
    # "still leaves 10% of unused memory": 1 GiB of the 10 billable; CPU 5/5 = 100 %,
    # memory 10 / 9 = 111 %
    assert nodes["rate_cpus"].iloc[0] == pytest.approx(1.0)
    assert nodes["rate_memory"].iloc[0] == pytest.approx(10 / 9)
    assert round(nodes["rate_memory"].iloc[0] * 100) == 111
    # 6144 * 10/9 = 6826.67 MiB and 3072 * 10/9 = 3413.33 MiB: together 10240 = billable
    assert bills["billed_memory"].tolist() == pytest.approx([6826.6666666667, 3413.3333333333])
    assert bills["billed_memory"].sum() == pytest.approx(10 * GIB)


def test_condor25_pool_bills() -> None:
    """The real HTCondor 25.0.13 pool of the fixtures README, built by hand from its numbers."""
    slots = condor25_slots()
    allocations = allocations_table(
        [
            {"parent": "slot1@cpu-node1@vm", "cpus": 4, "memory": 2048},
            {"parent": "slot1@cpu-node1@vm", "cpus": 12, "memory": 8192},
            {"parent": "slot1@gpu-node1@vm", "cpus": 4, "memory": 2048},
            {"parent": "slot1@gpu-node1@vm", "cpus": 4, "memory": 2048},
            {"parent": "slot1@gpu-node1@vm", "cpus": 2, "memory": 4096, "gpus": 1},
            {"parent": "slot1@gpu-node1@vm", "cpus": 1, "memory": 24576},
        ]
    ).assign(interval_s=300.0)
    nodes, bills = run(slots, allocations)

    # CPU node: 0 CU; allocated 4+12 = 16 cores, 2048+8192 = 10240 MiB (32768-10240 = 22528 free)
    # GPU node: 3 CU of {1 GPU}; allocated 4+4+2+1 = 11 cores, 2048+2048+4096+24576 = 32768 MiB,
    # 1 GPU
    assert nodes["overhead_cu"].tolist() == [0, 3]
    assert nodes["allocated_cpus"].tolist() == [16.0, 11.0]
    assert nodes["allocated_memory"].tolist() == [10240.0, 32768.0]
    assert nodes["allocated_gpus"].tolist() == [0.0, 1.0]
    assert nodes["n_allocations"].tolist() == [2, 4]
    # billable: CPU node = totals; GPU node 4 - 3 = 1 GPU, all 16 cores and 32768 MiB (cores
    # and memory are outside the {1 GPU} definition, so the 5 free cores are billed)
    assert nodes["billable_gpus"].tolist() == [0.0, 1.0]
    assert nodes["billable_cpus"].tolist() == [16.0, 16.0]
    # rates: CPU node cpus 16/16 = 1, memory 32768/10240 = 3.2, gpus none held -> NaN;
    # GPU node cpus 16/11 = 1.4545, memory 32768/32768 = 1, gpus 1/1 = 1
    assert nodes["rate_cpus"].tolist() == pytest.approx([1.0, 16 / 11])
    assert nodes["rate_memory"].tolist() == pytest.approx([3.2, 1.0])
    assert np.isnan(nodes["rate_gpus"].iloc[0])
    assert nodes["rate_gpus"].iloc[1] == pytest.approx(1.0)
    assert nodes["unattributed_gpus"].tolist() == [0.0, 0.0]
    assert nodes["unattributed_cpus"].tolist() == [0.0, 0.0]

    # bills: cpus 4, 12 | 4*16/11 = 5.818, 5.818, 2*16/11 = 2.909, 16/11 = 1.455
    assert bills["billed_cpus"].tolist() == pytest.approx([4.0, 12.0, 64 / 11, 64 / 11, 32 / 11, 16 / 11])
    # memory 2048*3.2 = 6553.6, 8192*3.2 = 26214.4 | as allocated (rate 1)
    assert bills["billed_memory"].tolist() == pytest.approx([6553.6, 26214.4, 2048.0, 2048.0, 4096.0, 24576.0])
    assert bills["billed_gpus"].tolist() == [0.0, 0.0, 0.0, 0.0, 1.0, 0.0]
    # over 300 s: 64/11 cores * 300 / 3600 = 0.4848 core-hours
    assert bills["billed_cpus_hours"].tolist() == pytest.approx(
        [4 / 12, 1.0, 64 / 11 / 12, 64 / 11 / 12, 32 / 11 / 12, 16 / 11 / 12]
    )
    assert bills["billed_gpus_hours"].iloc[4] == pytest.approx(1 / 12)
    assert not bills["orphan"].any()
    # per node the bills add up to the billable amounts
    per_node = bills.groupby("parent", sort=False)[["billed_cpus", "billed_memory"]].sum()
    assert per_node["billed_cpus"].tolist() == pytest.approx([16.0, 16.0])
    assert per_node["billed_memory"].tolist() == pytest.approx([32768.0, 32768.0])


def test_resources_nobody_holds_are_unattributed() -> None:
    slots = slots_table(
        [
            # cpu partition node with 2 GPUs no job holds, and 100 GiB of disk (in KiB)
            {
                **NODE,
                "name": "a",
                "total_gpus": 2,
                "total_disk": 100 * 1024**2,
                "unallocated_gpus": 2,
                "unallocated_disk": 100 * 1024**2 - 4 * 1024**2,
            },
            # an empty node: 8 cores + 16 GiB free -> 8 CU, nothing billable but the disk
            {
                **NODE,
                "name": "b",
                "total_disk": 1000.0,
                "unallocated_cpus": 8,
                "unallocated_memory": 16 * GIB,
                "unallocated_disk": 1000.0,
            },
        ]
    )
    slots.loc[0, ["unallocated_cpus", "unallocated_memory"]] = [0.0, 0.0]
    allocations = allocations_table([{"parent": "a", "cpus": 8, "memory": 16 * GIB, "disk": 4 * 1024**2}])
    nodes, bills = run(slots, allocations)
    assert nodes["overhead_cu"].tolist() == [0, 8]
    # node a: GPUs are outside {1 core, 2 GiB}: 2 GPUs billable, nobody holds any
    assert nodes["unattributed_gpus"].tolist() == [2.0, 0.0]
    assert np.isnan(nodes["rate_gpus"]).all()
    # disk on a: 100 GiB billable shared by the one job holding 4 GiB -> rate 25, bill all
    assert nodes["rate_disk"].iloc[0] == pytest.approx(25.0)
    assert bills["billed_disk"].tolist() == pytest.approx([100 * 1024**2])
    # node b: overhead 8 cores, 16384 MiB -> billable 0; the 1000 KiB of disk is unattributed
    assert nodes["billable_cpus"].iloc[1] == 0.0
    assert nodes["billable_memory"].iloc[1] == 0.0
    assert nodes["unattributed_disk"].tolist() == [0.0, 1000.0]
    assert nodes["n_allocations"].tolist() == [1, 0]
    assert bills["billed_gpus"].tolist() == [0.0]


def test_orphans_get_no_bill_and_touch_no_node() -> None:
    slots, allocations = node_with_jobs([{"cpus": 4, "memory": 4 * GIB}])
    stray = allocations_table([{"parent": "gone", "name": "x", "cpus": 2, "memory": 1024}])
    allocations = pd.concat([allocations, stray], ignore_index=True)
    nodes, bills = run(slots, allocations)
    assert bills["orphan"].tolist() == [False, True]
    assert nodes["allocated_cpus"].tolist() == [4.0]
    assert nodes["n_allocations"].tolist() == [1]
    for r in RESOURCES:
        assert np.isnan(bills[f"billed_{r}"].iloc[1])
        assert np.isnan(bills[f"billed_{r}_hours"].iloc[1])
    # 4 cores + 12 GiB free -> 4 CU; billable 4 cores, 8 GiB; rate 1 and 2
    assert bills["billed_cpus"].iloc[0] == pytest.approx(4.0)
    assert bills["billed_memory"].iloc[0] == pytest.approx(8 * GIB)


def test_unmatched_slot_bills_its_whole_total() -> None:
    # no partition, no definition: nothing is overhead, 8 cores / 16 GiB shared by a 4/4 GiB job
    nodes, bills = run(*node_with_jobs([{"cpus": 4, "memory": 4 * GIB}], partition=None))
    assert nodes["unmatched"].tolist() == [True]
    assert nodes["overhead_cu"].isna().tolist() == [True]
    assert nodes["overhead_cpus"].tolist() == [0.0]
    assert nodes["billable_memory"].tolist() == [16.0 * GIB]
    assert bills["billed_cpus"].tolist() == pytest.approx([8.0])
    assert bills["billed_memory"].tolist() == pytest.approx([16.0 * GIB])


def test_unknown_overhead_gives_unknown_bills() -> None:
    slots, allocations = node_with_jobs([{"cpus": 4, "memory": 4 * GIB, "gpus": 0}])
    slots["unallocated_memory"] = np.nan
    nodes, bills = run(slots, allocations)
    assert np.isnan(nodes["billable_cpus"].iloc[0])
    assert np.isnan(bills["billed_cpus"].iloc[0])
    assert bills["billed_gpus"].tolist() == [0.0]  # holds no GPU, owes none


def test_several_snapshots_with_keys() -> None:
    snap = [{**NODE, "name": "n", "unallocated_cpus": 4, "unallocated_memory": 12 * GIB}]
    slots = true_overhead(
        pd.concat(
            [slots_table(snap).assign(observed_at=100.0), slots_table(snap).assign(observed_at=400.0)],
            ignore_index=True,
        ),
        UNITS,
    )
    allocations = allocations_table(
        [
            {"parent": "n", "cpus": 4, "memory": 4 * GIB, "observed_at": 100.0},
            {"parent": "n", "cpus": 2, "memory": 2 * GIB, "observed_at": 400.0},
            {"parent": "n", "cpus": 2, "memory": 2 * GIB, "observed_at": 400.0},
        ]
    )
    with pytest.raises(ValueError, match=r"1 repeated slot keys \['name'\]"):
        bill(slots, allocations, UNITS)
    nodes, bills = bill(slots, allocations, UNITS, keys=("observed_at",))
    assert nodes["allocated_cpus"].tolist() == [4.0, 4.0]
    assert nodes["observed_at"].tolist() == [100.0, 400.0]
    # 4 CU of overhead: billable 4 cores and 8 GiB over 4 cores / 4 GiB allocated
    assert bills["billed_memory"].tolist() == pytest.approx([8 * GIB, 4 * GIB, 4 * GIB])


def test_inputs_are_not_modified_and_bills_keep_allocation_columns() -> None:
    slots, allocations = node_with_jobs([{"cpus": 4, "memory": 4 * GIB}])
    allocations["project"] = "ATLAS"
    slots = true_overhead(slots, UNITS)
    slots_before, allocations_before = slots.copy(), allocations.copy()
    nodes, bills = bill(slots, allocations, UNITS)
    pd.testing.assert_frame_equal(slots, slots_before)
    pd.testing.assert_frame_equal(allocations, allocations_before)
    assert bills["project"].tolist() == ["ATLAS"]
    assert list(bills.columns[: len(allocations.columns)]) == list(allocations.columns)
    assert list(nodes.columns[:6]) == ["name", "partition", "unmatched", "overhead_cu", "n_allocations", "total_cpus"]
    for r in RESOURCES:
        for prefix in ("total", "overhead", "allocated", "billable", "rate", "unattributed"):
            assert f"{prefix}_{r}" in nodes.columns
        assert f"billed_{r}" in bills.columns and f"billed_{r}_hours" in bills.columns


@pytest.mark.parametrize(
    ("drop_from", "column", "match"),
    [
        ("slots", "overhead_cu", r"^slots table is missing columns \['overhead_cu'\]$"),
        ("slots", "name", r"^slots table is missing columns \['name'\]$"),
        ("allocations", "parent", r"^allocations table is missing columns \['parent'\]$"),
        ("allocations", "gpus", r"^allocations table is missing columns \['gpus'\]$"),
        ("allocations", "interval_s", r"^allocations table is missing columns \['interval_s'\]$"),
    ],
)
def test_missing_columns_are_named(drop_from: str, column: str, match: str) -> None:
    slots, allocations = node_with_jobs([{"cpus": 1, "memory": 1024}])
    slots = true_overhead(slots, UNITS)
    if drop_from == "slots":
        slots = slots.drop(columns=[column])
    else:
        allocations = allocations.drop(columns=[column])
    with pytest.raises(ValueError, match=match):
        bill(slots, allocations, UNITS)


def test_negative_allocation_is_an_error() -> None:
    slots, allocations = node_with_jobs([{"cpus": 1, "memory": -1}])
    with pytest.raises(ValueError, match=r"negative resource amounts \(e.g. dynamic slots \['slot1_0'\]\)"):
        run(slots, allocations)


# --- conservation on random nodes ------------------------------------------------------------

job = st.fixed_dictionaries(
    {
        "cpus": st.integers(0, 8),
        "memory": st.floats(0, 20000, allow_nan=False),
        "disk": st.floats(0, 1e6, allow_nan=False),
        "gpus": st.integers(0, 2),
    }
)
node = st.fixed_dictionaries(
    {
        "partition": st.sampled_from(["cpu", "gpu", None]),
        "jobs": st.lists(job, max_size=6),
        # what is left on top of the jobs
        "spare_cpus": st.integers(0, 16),
        "spare_memory": st.floats(0, 70000, allow_nan=False),
        "spare_disk": st.floats(0, 1e7, allow_nan=False),
        "spare_gpus": st.integers(0, 4),
    }
)


@settings(max_examples=200, deadline=None, database=None)
@given(nodes=st.lists(node, min_size=1, max_size=8))
def test_bills_unattributed_and_overhead_add_up_to_the_node(nodes: list[dict[str, Any]]) -> None:
    slot_rows, alloc_rows = [], []
    for i, n in enumerate(nodes):
        row: dict[str, object] = {"name": f"n{i}", "partition": n["partition"]}
        for r in RESOURCES:
            allocated = sum(j[r] for j in n["jobs"])
            row[f"total_{r}"] = allocated + n[f"spare_{r}"]
            row[f"unallocated_{r}"] = n[f"spare_{r}"]
        slot_rows.append(row)
        alloc_rows += [{"parent": f"n{i}", **j} for j in n["jobs"]]
    slots = slots_table(slot_rows)
    allocations = (
        allocations_table(alloc_rows)
        if alloc_rows
        else allocations_table([]).reindex(columns=allocations_table([{"parent": ""}]).columns)
    )
    nodes_out, bills = run(slots, allocations)
    assert not bills["orphan"].any() if len(bills) else True
    for r in RESOURCES:
        billed = bills.groupby("parent")[f"billed_{r}"].sum().reindex(nodes_out["name"], fill_value=0)
        got = billed.to_numpy() + nodes_out[f"unattributed_{r}"] + nodes_out[f"overhead_{r}"]
        total = nodes_out[f"total_{r}"]
        assert np.allclose(got, total, rtol=1e-6, atol=1e-9), r
        # overhead never exceeds what was free, so whoever holds r pays at least what they hold
        held = nodes_out[f"allocated_{r}"] > 0
        assert (nodes_out.loc[held, f"rate_{r}"] >= 1 - 1e-9).all()


def test_seed_003_example_with_the_unit_written_as_an_operator_writes_it() -> None:
    """``memory = "2 GB"`` is HTCondor's 2 GB, 2048 MiB (as ``request_memory = 2GB`` in a job):
    the seed's third example bills memory at 111 %, not 115.7 % (1907 MiB units)."""
    from probes.config import parse_config
    from probes.pipeline.overhead import canonical_units

    config = parse_config({"partitions": [{"name": "cpu", "cpus": 1, "memory": "2 GB"}]})
    units = canonical_units(config.partitions)
    slots, allocations = node_with_jobs([{"cpus": 3, "memory": 6 * GIB}, {"cpus": 2, "memory": 3 * GIB}])
    nodes, _ = bill(true_overhead(slots, units), allocations, units)
    assert round(nodes["rate_memory"].iloc[0] * 100, 1) == 111.1
