"""Overhead histograms and glidein phases (seed 003, section 3.1)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

from probes.accounting import overhead_histogram, slot_phase, true_overhead

from .tables import GIB, UNITS, slots_table

CPU = {"partition": "cpu", "total_cpus": 8, "total_memory": 16 * GIB}
GPU = {"partition": "gpu", "total_cpus": 16, "total_memory": 32 * GIB, "total_gpus": 4}


def pool() -> pd.DataFrame:
    """Six slot observations; overhead in the comments."""
    rows = [
        # cpu, 3 cores + 7 GiB free -> 3 CU; 1800 s -> 1.5 CU-h
        {
            **CPU,
            "site": "A",
            "unallocated_cpus": 3,
            "unallocated_memory": 7 * GIB,
            "interval_s": 1800,
            "observed_at": 1000,
            "n_dynamic": 2,
            "glidein_to_retire": np.nan,
        },
        # cpu, 3 cores + 4 GiB -> 2 CU; 3600 s -> 2 CU-h
        {
            **CPU,
            "site": "A",
            "unallocated_cpus": 3,
            "unallocated_memory": 4 * GIB,
            "interval_s": 3600,
            "observed_at": 1599,
            "n_dynamic": 1,
            "glidein_to_retire": 1500,
        },
        # cpu, 3 cores + 1 GiB -> 0 CU
        {
            **CPU,
            "site": "B",
            "unallocated_cpus": 3,
            "unallocated_memory": 1 * GIB,
            "interval_s": 3600,
            "observed_at": 1600,
            "n_dynamic": 3,
            "glidein_to_retire": 1700,
        },
        # cpu, empty: 8 cores + 16 GiB -> 8 CU; 900 s -> 2 CU-h
        {
            **CPU,
            "site": "B",
            "unallocated_cpus": 8,
            "unallocated_memory": 16 * GIB,
            "interval_s": 900,
            "observed_at": 2000,
            "n_dynamic": 0,
            "glidein_to_retire": 1000,
        },
        # gpu, 3 GPUs free -> 3 CU; 1200 s -> 1 CU-h
        {
            **GPU,
            "site": "A",
            "unallocated_cpus": 5,
            "unallocated_gpus": 3,
            "interval_s": 1200,
            "observed_at": 1000,
            "n_dynamic": 4,
            "glidein_to_retire": np.nan,
        },
        # no partition: counted, overhead unknown
        {
            **CPU,
            "partition": None,
            "site": "A",
            "unallocated_cpus": 8,
            "unallocated_memory": 16 * GIB,
            "interval_s": 3600,
            "observed_at": 1000,
            "n_dynamic": 0,
            "glidein_to_retire": np.nan,
        },
    ]
    return true_overhead(slots_table(rows), UNITS)


def records(frame: pd.DataFrame) -> list[tuple[Any, ...]]:
    """Rows as tuples, with <NA>/NaN as None so that they compare."""
    return [tuple(None if pd.isna(v) else v for v in row) for row in frame.itertuples(index=False, name=None)]


def test_by_partition() -> None:
    hist = overhead_histogram(pool())
    assert list(hist.columns) == ["partition", "overhead_cu", "slots", "cu_hours"]
    assert records(hist) == [
        ("cpu", 0, 1, 0.0),
        ("cpu", 2, 1, 2.0),
        ("cpu", 3, 1, 1.5),
        ("cpu", 8, 1, 2.0),
        ("gpu", 3, 1, 1.0),
        (None, None, 1, None),  # the unmatched slot: counted, its CU-hours unknown
    ]
    assert hist["slots"].dtype == np.int64
    assert str(hist["overhead_cu"].dtype) == "Int64"


def test_same_overhead_is_one_bar() -> None:
    slots = pool()
    # two more cpu observations with 3 CU (1.5 + 0.5 + 3 = 5 CU-hours in the bar)
    extra = slots.iloc[[0, 0]].assign(interval_s=[600.0, 3600.0])
    extra = true_overhead(extra.drop(columns=["overhead_cu"]), UNITS)
    hist = overhead_histogram(pd.concat([slots, extra], ignore_index=True))
    bar = hist[(hist["partition"] == "cpu") & (hist["overhead_cu"] == 3)]
    assert bar["slots"].tolist() == [3]
    assert bar["cu_hours"].tolist() == [pytest.approx(1.5 + 0.5 + 3.0)]


def test_by_site_and_time_bucket() -> None:
    hist = overhead_histogram(pool(), by=("partition", "site"), bucket_s=600)
    # observed_at 1000 and 1599 -> bucket 600 and 1200; 1600 -> 1200; 2000 -> 1800
    assert list(hist.columns) == ["partition", "site", "bucket_start", "overhead_cu", "slots", "cu_hours"]
    assert records(hist) == [
        ("cpu", "A", 600, 3, 1, 1.5),
        ("cpu", "A", 1200, 2, 1, 2.0),
        ("cpu", "B", 1200, 0, 1, 0.0),
        ("cpu", "B", 1800, 8, 1, 2.0),
        ("gpu", "A", 600, 3, 1, 1.0),
        (None, "A", 600, None, 1, None),
    ]


def test_bare_string_key() -> None:
    hist = overhead_histogram(pool(), by="site")
    # site A: 3 CU (1.5), 2 CU (2.0), 3 CU gpu (1.0), unmatched; site B: 0 CU, 8 CU
    assert records(hist) == [
        ("A", 2, 1, 2.0),
        ("A", 3, 2, 2.5),
        ("A", None, 1, None),
        ("B", 0, 1, 0.0),
        ("B", 8, 1, 2.0),
    ]


def test_slot_phase() -> None:
    # 0: jobs, no GLIDEIN_ToRetire -> active; 1: ToRetire 1500 <= 1599 -> retiring;
    # 2: ToRetire 1700 > 1600 -> active; 3: no jobs -> empty (even though retiring);
    # 4: active; 5: empty
    phases = slot_phase(pool())
    assert phases.tolist() == ["active", "retiring", "active", "empty", "active", "empty"]
    assert phases.name == "phase"


def test_slot_phase_boundary_is_inclusive() -> None:
    slots = pd.DataFrame(
        {"n_dynamic": [1, 1], "glidein_to_retire": [100.0, 100.5], "observed_at": [100.0, 100.0]},
        index=[7, 9],
    )
    phases = slot_phase(slots)
    assert phases.tolist() == ["retiring", "active"]
    assert phases.index.tolist() == [7, 9]


def test_phase_is_computed_when_asked_for() -> None:
    hist = overhead_histogram(pool(), by=("phase",))
    assert records(hist) == [
        ("active", 0, 1, 0.0),
        ("active", 3, 2, 2.5),
        ("empty", 8, 1, 2.0),
        ("empty", None, 1, None),
        ("retiring", 2, 1, 2.0),
    ]


def test_phase_column_is_used_when_present() -> None:
    slots = pool().assign(phase="draining")
    hist = overhead_histogram(slots, by=("phase",))
    assert set(hist["phase"]) == {"draining"}
    assert hist["slots"].sum() == 6


def test_histogram_of_nothing() -> None:
    empty = pool().iloc[0:0]
    hist = overhead_histogram(empty, by=("partition", "site"), bucket_s=60)
    assert len(hist) == 0
    assert list(hist.columns) == ["partition", "site", "bucket_start", "overhead_cu", "slots", "cu_hours"]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"bucket_s": 0}, r"bucket_s must be a positive integer of seconds, got 0"),
        ({"bucket_s": 60.0}, r"bucket_s must be a positive integer of seconds, got 60.0"),
        ({"by": ("site", "site")}, r"histogram keys must be distinct"),
        ({"by": ("overhead_cu",)}, r"histogram keys \['overhead_cu'\] are output columns"),
        ({"by": ("queue",)}, r"^slots table is missing columns \['queue'\]$"),
    ],
)
def test_bad_arguments(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        overhead_histogram(pool(), **kwargs)


def test_missing_columns_are_named() -> None:
    with pytest.raises(ValueError, match=r"^slots table is missing columns \['observed_at'\]$"):
        overhead_histogram(pool().drop(columns=["observed_at"]), bucket_s=60)
    with pytest.raises(ValueError, match=r"missing columns \['n_dynamic'\]"):
        slot_phase(pool().drop(columns=["n_dynamic"]))
