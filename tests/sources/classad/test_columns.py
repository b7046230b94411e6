"""Columns filled part by part."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from probes.sources.classad.columns import ColumnBuilder


def part(start: int, n: int) -> dict[str, np.ndarray]:
    ids = np.empty(n, dtype=object)
    ids[:] = [f"job{i}" for i in range(start, start + n)]
    return {
        "id": ids,
        "cpus": np.arange(start, start + n, dtype=np.float64),
        "ran": np.arange(start, start + n) % 2 == 0,
    }


def test_parts_become_one_table_allocated_from_the_input_size() -> None:
    builder = ColumnBuilder(size=10_000)
    builder.append(part(0, 10), done=1_000)  # 10 rows a kilobyte: 100 rows in all, and a little more
    assert len(builder.columns["cpus"]) == 117
    for k in range(1, 10):
        builder.append(part(10 * k, 10), done=1_000 * (k + 1))
    assert len(builder.columns["cpus"]) == 117  # allocated once
    out = builder.result()
    assert out["cpus"].tolist() == list(range(100)) and out["id"][99] == "job99"
    assert out["ran"].dtype == bool and out["ran"].sum() == 50
    assert builder.result() == {}  # given up


def test_an_unknown_size_grows_geometrically() -> None:
    builder = ColumnBuilder()
    capacities = []
    for k in range(20):
        builder.append(part(7 * k, 7))
        capacities.append(len(builder.columns["id"]))
    assert capacities[:4] == [7, 14, 21, 28]  # each part needs more than a quarter more
    assert all(b >= a for a, b in itertools.pairwise(capacities))
    assert builder.result()["id"].tolist() == [f"job{i}" for i in range(140)]


def test_parts_must_have_the_same_columns() -> None:
    builder = ColumnBuilder()
    builder.append(part(0, 3))
    builder.append({})  # nothing to add
    with pytest.raises(ValueError, match=r"a part has columns \['cpus', 'id'\], expected \['cpus', 'id', 'ran'\]"):
        builder.append({"id": np.array(["x"], dtype=object), "cpus": np.array([1.0])})
