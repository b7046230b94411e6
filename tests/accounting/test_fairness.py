"""Demand against allocation, Jain's index and starvation on hand-built tables (seed 002)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from probes.accounting.fairness import (
    FAIRNESS_COLUMNS,
    bucket_shares,
    fairness_by_bucket,
    jain_index,
    starvation_intervals,
    starvation_summary,
)

# Two users, buckets of 60 s. Snapshots at 0 and 30 s (bucket 0), 60 (bucket 60), 120 and 180:
#   t=0, 30 : a holds 4 cores, b waits for 2 and holds nothing         -> b starved
#   t=60    : a holds 2, b holds 2 and still waits for 2                -> b served half
#   t=120   : a holds 4, b waits for 2                                  -> b starved
#   t=180   : a holds 3 (two jobs of 1 and 2 cores), b waits for 2      -> b starved
ALLOCATIONS = pd.DataFrame(
    {
        "observed_at": [0, 30, 60, 60, 120, 180, 180],
        "user": ["a", "a", "a", "b", "a", "a", "a"],
        "cpus": [4, 4, 2, 2, 4, 1, 2],
    }
)
DEMAND = pd.DataFrame({"observed_at": [0, 30, 60, 120, 180], "user": ["b"] * 5, "cpus": [2.0] * 5})


def shares(fraction: float = 0.0) -> pd.DataFrame:
    return bucket_shares(ALLOCATIONS, DEMAND, bucket_s=60, fraction=fraction)


def test_bucket_means_over_the_snapshots_of_the_bucket() -> None:
    s = shares()
    assert list(s.columns) == list(FAIRNESS_COLUMNS)
    first = s[s["bucket_start"] == 0].set_index("name")
    # bucket 0 has two snapshots: a's 4 + 4 cores over 2 snapshots is 4 cores on average
    assert first["snapshots"].tolist() == [2, 2]
    assert first.loc["a", "allocation_cpus"] == 4 and first.loc["b", "demand_cpus"] == 2
    assert first.loc["a", "served"] == 1.0 and first.loc["b", "served"] == 0.0
    assert first.loc["a", "share_cpus"] == 2.0  # 4 cores delivered / 2 active users
    mid = s[s["bucket_start"] == 60].set_index("name")
    assert mid.loc["b", "served"] == 0.5  # 2 held / (2 held + 2 waiting)
    assert s.set_index(["bucket_start", "name"])["starved"].to_dict() == {
        (0.0, "a"): False, (0.0, "b"): True, (60.0, "a"): False, (60.0, "b"): False,
        (120.0, "a"): False, (120.0, "b"): True, (180.0, "a"): False, (180.0, "b"): True,
    }  # fmt: skip


def test_a_fraction_of_the_share_counts_as_starved() -> None:
    # at t=60 b holds 2 = the equal share: starved only when the threshold reaches the whole share
    assert not shares(0.99).set_index(["bucket_start", "name"]).loc[(60.0, "b"), "starved"]
    assert shares(1.0).set_index(["bucket_start", "name"]).loc[(60.0, "b"), "starved"]


def test_nobody_is_starved_when_nobody_is_served() -> None:
    idle_only = bucket_shares(ALLOCATIONS.iloc[:0], DEMAND, bucket_s=60)
    assert not idle_only["starved"].any()


def test_jain_index_by_hand() -> None:
    assert jain_index([1, 1, 1, 1]) == 1.0
    assert jain_index([1, 0, 0, 0]) == 0.25  # one takes everything: 1/n
    assert jain_index([1, 0.5]) == pytest.approx(1.5**2 / (2 * 1.25))  # 0.9
    assert np.isnan(jain_index([])) and np.isnan(jain_index([0, 0]))


def test_fairness_by_bucket() -> None:
    f = fairness_by_bucket(shares()).set_index("bucket_start")
    assert f.loc[0.0, "jain_served"] == 0.5  # served (1, 0)
    assert f.loc[0.0, "jain_allocation"] == 0.5  # allocations (4, 0)
    assert f.loc[60.0, "jain_served"] == pytest.approx(0.9)  # served (1, 0.5)
    assert f.loc[60.0, "jain_allocation"] == 1.0  # allocations (2, 2)
    assert f["starved"].tolist() == [1, 0, 1, 1]
    assert f["credentials"].tolist() == [2, 2, 2, 2]
    # the per-bucket index agrees with the plain function
    assert f.loc[60.0, "jain_served"] == pytest.approx(jain_index([1.0, 0.5]))


def test_starvation_intervals_and_counts() -> None:
    runs = starvation_intervals(shares(), bucket_s=60)
    assert runs[["name", "start", "end", "duration_s", "buckets"]].values.tolist() == [
        ["b", 0.0, 60.0, 60.0, 1],
        ["b", 120.0, 240.0, 120.0, 2],
    ]
    summary = starvation_summary(runs)
    assert summary.values.tolist() == [["b", 2, 180.0, 120.0]]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"bucket_s": 0}, "bucket_s must be a number of seconds greater than 0"),
        ({"bucket_s": 60, "fraction": 2}, "fraction of the equal share must be between 0 and 1"),
    ],
)
def test_bad_arguments(kwargs: dict[str, float], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        bucket_shares(ALLOCATIONS, DEMAND, **kwargs)  # type: ignore[arg-type]


def test_missing_columns_name_the_table() -> None:
    with pytest.raises(ValueError, match=r"demand table is missing columns \['cpus'\]"):
        bucket_shares(ALLOCATIONS, DEMAND.drop(columns=["cpus"]), bucket_s=60)
