"""Canonical units and true overhead (seed 003, sections 3 and 4)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from probes.accounting import RESOURCES, CanonicalUnit, true_overhead

from .tables import CPU_UNIT, GIB, GPU_UNIT, UNITS, condor25_slots, slots_table

# Seed 003 Figure 2 uses "1 CPU core and 2 GB of memory"; the node is 8 cores / 16 GiB here
# (the billing examples need 16 GB, see test_billing.py), so the totals never decide.
NODE = {"total_cpus": 8.0, "total_memory": 16 * GIB}


@pytest.mark.parametrize(
    ("free_cpus", "free_memory_gib", "expected_cu"),
    [
        # "either all CPU cores or all memory of a node is allocated" -> 0
        (0, 9, 0),  # min(floor(0/1), floor(9/2)=4) = 0
        (4, 0, 0),  # min(floor(4/1)=4, floor(0/2)) = 0
        # "3 CPU cores and 1 GB" -> 0: min(3, floor(1/2)=0) = 0, leftovers under a threshold
        (3, 1, 0),
        # "3 CPU cores and 4 GB" -> 2: min(3, floor(4/2)=2) = 2, "we stop once all the memory
        # is allocated"
        (3, 4, 2),
        # "3 CPU cores and 7 GB" -> 3: min(3, floor(7/2)=3) = 3, "we stop when all the CPU
        # cores are in use"
        (3, 7, 3),
    ],
)
def test_seed_003_figure_2(free_cpus: int, free_memory_gib: int, expected_cu: int) -> None:
    slots = slots_table([{**NODE, "unallocated_cpus": free_cpus, "unallocated_memory": free_memory_gib * GIB}])
    out = true_overhead(slots, UNITS)
    assert out["overhead_cu"].tolist() == [expected_cu]
    # The overhead amounts are whole canonical units: k cores and k * 2048 MiB.
    assert out["overhead_cpus"].tolist() == [expected_cu * 1.0]
    assert out["overhead_memory"].tolist() == [expected_cu * 2048.0]
    assert out["overhead_disk"].tolist() == [0.0]
    assert out["overhead_gpus"].tolist() == [0.0]
    assert out["overhead_cu_hours"].tolist() == [float(expected_cu)]  # interval 3600 s


def test_cu_hours_scale_with_the_interval() -> None:
    # 3 cores + 7 GiB free -> 3 CU; observed for 600 s -> 3 * 600 / 3600 = 0.5 CU-hours
    slots = slots_table([{**NODE, "unallocated_cpus": 3, "unallocated_memory": 7 * GIB, "interval_s": 600}])
    assert true_overhead(slots, UNITS)["overhead_cu_hours"].tolist() == [0.5]


def test_gpu_unit_counts_gpus_only() -> None:
    # {1 GPU}: 5 cores, 0 MiB, 3 GPUs free -> floor(3/1) = 3; cores and memory take no part.
    slots = slots_table(
        [
            {
                "partition": "gpu",
                "total_cpus": 16,
                "total_memory": 32 * GIB,
                "total_gpus": 4,
                "unallocated_cpus": 5,
                "unallocated_memory": 0,
                "unallocated_gpus": 3,
            }
        ]
    )
    out = true_overhead(slots, UNITS)
    assert out["overhead_cu"].tolist() == [3]
    assert out[["overhead_cpus", "overhead_memory", "overhead_gpus"]].iloc[0].tolist() == [
        0.0,
        0.0,
        3.0,
    ]


def test_condor25_pool_numbers() -> None:
    """The two partitionable slots of the real HTCondor 25.0.13 pool (fixtures README)."""
    slots = condor25_slots()
    out = true_overhead(slots, UNITS)
    # CPU node under {1 core, 2 GiB}: min(floor(0/1), floor(22528/2048)=11) = 0
    # GPU node under {1 GPU}: floor(3/1) = 3, although no memory is left to use them
    assert out["overhead_cu"].tolist() == [0, 3]
    assert out["overhead_memory"].tolist() == [0.0, 0.0]
    assert out["overhead_gpus"].tolist() == [0.0, 3.0]


@pytest.mark.parametrize(
    ("thresholds", "unallocated", "expected_cu"),
    [
        # 4096 / 2048 is exactly 2 and must stay 2
        ({"memory": 2048}, {"memory": 4096.0}, 2),
        # 0.3 / 0.1 == 2.9999999999999996 in floating point; it means 3
        ({"cpus": 0.1}, {"cpus": 0.3}, 3),
        # a memory total summed from floats that lands a hair under 3 units still means 3
        ({"memory": 0.7}, {"memory": 0.1 + 0.2 + 0.3 + 0.4 + 0.4 + 0.7}, 3),
        # but a real shortfall is not rounded up: 6143.9 MiB is 2 units of 2048, not 3
        ({"memory": 2048}, {"memory": 6143.9}, 2),
        ({"memory": 2048}, {"memory": 2047.999}, 0),
        # disk in KiB: 50 GiB free under a 10 GiB threshold -> 5
        ({"disk": 10 * 1024 * 1024}, {"disk": 50.0 * 1024 * 1024}, 5),
        # a negative unallocated amount (over-committed node) is clipped to 0
        ({"cpus": 1}, {"cpus": -2.0}, 0),
    ],
)
def test_floor_is_exact_on_floats(
    thresholds: dict[str, float], unallocated: dict[str, float], expected_cu: int
) -> None:
    units = {"p": CanonicalUnit("p", thresholds)}
    slots = slots_table([{"partition": "p", **{f"unallocated_{r}": v for r, v in unallocated.items()}}])
    assert true_overhead(slots, units)["overhead_cu"].tolist() == [expected_cu]


def test_unmatched_slots_have_no_overhead_value() -> None:
    slots = slots_table(
        [
            {**NODE, "unallocated_cpus": 3, "unallocated_memory": 7 * GIB},
            {**NODE, "partition": None, "unallocated_cpus": 3, "unallocated_memory": 7 * GIB},
            {**NODE, "partition": np.nan, "unallocated_cpus": 8, "unallocated_memory": 16 * GIB},
        ]
    )
    out = true_overhead(slots, UNITS)
    assert out["overhead_cu"].iloc[0] == 3
    assert out["overhead_cu"].isna().tolist() == [False, True, True]
    assert str(out["overhead_cu"].dtype) == "Int64"
    assert out["unmatched"].tolist() == [False, True, True]
    assert out["unmatched"].dtype == bool
    for r in RESOURCES:
        assert out[f"overhead_{r}"].isna().tolist() == [False, True, True]
    assert out["overhead_cu_hours"].isna().tolist() == [False, True, True]


def test_unknown_amount_of_a_defining_resource_gives_unknown_overhead() -> None:
    slots = slots_table(
        [
            # memory takes part in the cpu definition: unknown memory -> unknown overhead
            {**NODE, "unallocated_cpus": 3, "unallocated_memory": np.nan},
            # GPUs do not: an unknown GPU count changes nothing
            {**NODE, "unallocated_cpus": 3, "unallocated_memory": 7 * GIB, "unallocated_gpus": np.nan},
        ]
    )
    out = true_overhead(slots, UNITS)
    assert out["overhead_cu"].isna().tolist() == [True, False]
    assert out["overhead_cu"].iloc[1] == 3
    assert out["unmatched"].tolist() == [False, False]


def test_input_is_not_modified_and_columns_are_kept() -> None:
    slots = slots_table([{**NODE, "unallocated_cpus": 3, "unallocated_memory": 7 * GIB}])
    slots["site"] = "Purdue"
    before = slots.copy()
    out = true_overhead(slots, UNITS)
    pd.testing.assert_frame_equal(slots, before)
    assert out is not slots
    assert out["site"].tolist() == ["Purdue"]
    assert list(out.columns[: len(slots.columns)]) == list(slots.columns)
    assert set(out.columns) - set(slots.columns) == {
        "overhead_cu",
        "unmatched",
        "overhead_cpus",
        "overhead_memory",
        "overhead_disk",
        "overhead_gpus",
        "overhead_cu_hours",
    }


def test_empty_table() -> None:
    out = true_overhead(slots_table([]).reindex(columns=slots_table([{}]).columns), UNITS)
    assert len(out) == 0
    assert "overhead_cu" in out.columns


def test_missing_columns_are_named() -> None:
    slots = slots_table([{}]).drop(columns=["total_gpus"])
    with pytest.raises(ValueError, match=r"^slots table is missing columns \['total_gpus'\]$"):
        true_overhead(slots, UNITS)
    slots = slots_table([{}]).drop(columns=["partition", "interval_s"])
    with pytest.raises(ValueError, match=r"missing columns \['partition', 'interval_s'\]"):
        true_overhead(slots, UNITS)


def test_partition_without_definition_is_an_error() -> None:
    slots = slots_table([{"partition": "highmem"}])
    with pytest.raises(ValueError, match=r"partitions \['highmem'\] that have no canonical unit"):
        true_overhead(slots, UNITS)


@pytest.mark.parametrize(
    ("partition", "thresholds", "error", "match"),
    [
        ("cpu", {"cores": 1}, ValueError, r"unknown resources \['cores'\]"),
        ("cpu", {"cpus": -1}, ValueError, r"cpus threshold of partition 'cpu' must be a finite number >= 0"),
        ("cpu", {"cpus": math.nan}, ValueError, r"must be a finite number >= 0"),
        ("cpu", {"cpus": math.inf}, ValueError, r"must be a finite number >= 0"),
        ("cpu", {"cpus": 0, "memory": 0}, ValueError, r"needs at least one threshold > 0"),
        ("cpu", {}, ValueError, r"needs at least one threshold > 0"),
        ("", {"cpus": 1}, ValueError, r"partition must be a non-empty string"),
        ("cpu", {"memory": "2 GiB"}, TypeError, r"memory threshold of partition 'cpu' must be a number"),
        ("cpu", {"cpus": True}, TypeError, r"must be a number, got True"),
        ("cpu", [("cpus", 1)], TypeError, r"must be a mapping"),
        (3, {"cpus": 1}, TypeError, r"partition must be a string, got 3"),
    ],
)
def test_canonical_unit_validation(partition: Any, thresholds: Any, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        CanonicalUnit(partition, thresholds)


def test_units_mapping_validation() -> None:
    slots = slots_table([{}])
    with pytest.raises(ValueError, match=r"units\['cpu'\] is the canonical unit of partition 'gpu'"):
        true_overhead(slots, {"cpu": GPU_UNIT})
    with pytest.raises(TypeError, match=r"units\['cpu'\] must be a CanonicalUnit, got dict"):
        true_overhead(slots, {"cpu": {"cpus": 1}})  # type: ignore[dict-item]
    with pytest.raises(TypeError, match=r"units must be a mapping of partition name to CanonicalUnit, got list"):
        true_overhead(slots, [CPU_UNIT])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"slots table must be a pandas DataFrame, got dict"):
        true_overhead({"partition": ["cpu"]}, UNITS)  # type: ignore[arg-type]


def test_canonical_unit_is_a_frozen_value() -> None:
    thresholds = {"cpus": 1, "memory": 2048, "gpus": 0}
    unit = CanonicalUnit("cpu", thresholds)
    thresholds["cpus"] = 99  # the caller's dict changing later must not change the unit
    assert unit.threshold("cpus") == 1.0
    assert unit.threshold("gpus") == 0.0
    assert unit.threshold("disk") == 0.0
    assert unit.resources == ("cpus", "memory")  # gpus: 0 takes no part
    assert unit == CPU_UNIT
    assert hash(unit) == hash(CPU_UNIT)
    with pytest.raises(AttributeError):
        unit.partition = "gpu"  # type: ignore[misc]
    with pytest.raises(TypeError):
        unit.thresholds["cpus"] = 2  # type: ignore[index]
    with pytest.raises(ValueError, match="unknown resource 'cores'"):
        unit.threshold("cores")


# --- properties on random nodes -------------------------------------------------------------

thresholds_strategy = st.fixed_dictionaries(
    {},
    optional={
        "cpus": st.sampled_from([0.5, 1.0, 2.0, 4.0]),
        "memory": st.sampled_from([1000.0, 2048.0, 3000.5, 4096.0]),
        "disk": st.sampled_from([1024.0**2, 10.0 * 1024**2]),
        "gpus": st.sampled_from([1.0, 2.0]),
    },
).filter(lambda d: any(v > 0 for v in d.values()))

amount = st.floats(min_value=0, max_value=1e7, allow_nan=False, allow_infinity=False)
free_strategy = st.fixed_dictionaries({r: amount for r in RESOURCES})


@settings(max_examples=300, deadline=None, database=None)
@given(thresholds=thresholds_strategy, frees=st.lists(free_strategy, min_size=1, max_size=20))
def test_overhead_is_the_largest_whole_number_of_units_that_fits(
    thresholds: dict[str, float], frees: list[dict[str, float]]
) -> None:
    units = {"p": CanonicalUnit("p", thresholds)}
    slots = slots_table([{"partition": "p", **{f"unallocated_{r}": f[r] for r in RESOURCES}} for f in frees])
    out = true_overhead(slots, units)
    cu = out["overhead_cu"].to_numpy(dtype=np.float64)
    assert (cu >= 0).all()
    assert (cu == np.floor(cu)).all()
    defining = [r for r in RESOURCES if thresholds.get(r, 0) > 0]
    tol = 1e-8
    for r in defining:
        free = out[f"unallocated_{r}"].to_numpy()
        # never more than the unallocated amount allows in any defining resource
        assert (cu * thresholds[r] <= free * (1 + tol) + tol).all()
        assert np.allclose(out[f"overhead_{r}"], cu * thresholds[r])
    # one canonical unit more would not fit in at least one resource
    one_more_fails = np.zeros(len(out), dtype=bool)
    for r in defining:
        free = out[f"unallocated_{r}"].to_numpy()
        one_more_fails |= (cu + 1) * thresholds[r] > free * (1 - tol) - tol
    assert one_more_fails.all()
    for r in set(RESOURCES) - set(defining):
        assert (out[f"overhead_{r}"] == 0).all()
