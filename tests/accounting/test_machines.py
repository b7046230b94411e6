"""The machine inventory: classes from slots tables, checks, pool totals, hosts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from probes.accounting import class_of_hosts, machine_classes, machines_table, pool_totals
from probes.config import parse_config
from probes.sources.status import read_status

from ..conftest import DEMO
from .tables import GIB, slots_table


def glideins(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """A slots table of p-slots named after their machines, speed and cost unknown (NaN)."""
    base = {"speed": np.nan, "node_cost": np.nan}
    out = slots_table([{**base, **r} for r in rows])
    out["machine"] = [r.get("machine", f"node{i}.site.org") for i, r in enumerate(rows)]
    out["name"] = [f"slot1@glidein_{i}@{m}" for i, m in enumerate(out["machine"])]
    return out


def test_glideins_of_the_same_shape_collapse_into_one_class() -> None:
    slots = glideins(
        [
            {"total_cpus": 8, "total_memory": 16 * GIB, "total_disk": 1_000_100},
            {"total_cpus": 8, "total_memory": 16 * GIB, "total_disk": 1_000_000},  # scratch differs by KiB
            {"total_cpus": 8, "total_memory": 16 * GIB, "total_disk": 1_000_050},
            {"total_cpus": 32, "total_memory": 128 * GIB, "total_gpus": 4, "total_disk": 9e6},
            {"total_cpus": 0, "total_memory": 0},  # no cores: nothing to price against
        ]
    )
    machines = machine_classes(slots)
    assert machines["name"].tolist() == ["c8-m16384-g0", "c32-m131072-g4"]
    assert machines["count"].tolist() == [3, 1]
    assert machines["disk"].tolist() == [1_000_000, 9e6]  # the smallest member's: fits them all
    assert machines[["node_cost", "speed"]].values.tolist() == [[1.0, 1.0], [1.0, 1.0]]  # unknown is 1.0
    assert machines["hosts"][0][:3] == ("node0.site.org", "node1.site.org", "node2.site.org")
    assert "slot1@glidein_1@node1.site.org" in machines["hosts"][0]


def test_speed_cost_and_attributes_split_classes() -> None:
    slots = glideins(
        [
            {"total_cpus": 8, "total_memory": 16 * GIB, "speed": 10.0, "site": "UCSD"},
            {"total_cpus": 8, "total_memory": 16 * GIB, "speed": 12.5, "site": "UCSD"},
            {"total_cpus": 8, "total_memory": 16 * GIB, "speed": 12.5, "site": "FNAL"},
            {"total_cpus": 8, "total_memory": 16 * GIB, "speed": 12.5, "site": "FNAL", "node_cost": 2.0},
        ]
    )
    by_speed = machine_classes(slots)
    assert by_speed["name"].tolist() == ["c8-m16384-g0-s10-k1", "c8-m16384-g0-s12.5-k1", "c8-m16384-g0-s12.5-k2"]
    assert by_speed["count"].tolist() == [1, 2, 1]
    by_site = machine_classes(slots, attributes=["site"])
    assert by_site["name"].tolist() == [
        "c8-m16384-g0-UCSD-s10-k1", "c8-m16384-g0-UCSD-s12.5-k1", "c8-m16384-g0-FNAL-s12.5-k1",
        "c8-m16384-g0-FNAL-s12.5-k2",
    ]  # fmt: skip
    assert by_site["properties"][0] == frozenset({"site=UCSD"})


def test_the_condor25_pool(condor25: Path) -> None:
    config = parse_config({"machines": {"speed_attribute": "HEPSPEC"}})
    snapshot, _ = read_status([condor25 / "status.ads"], config.slot_reading())
    machines = machine_classes(snapshot.slots)
    # two partitionable slots of 16 cores and 32768 MiB; the second has 4 GPUs (README)
    assert machines[["name", "count", "cpus", "memory", "gpus", "speed"]].values.tolist() == [
        ["c16-m32768-g0", 1, 16.0, 32768.0, 0.0, 10.5],
        ["c16-m32768-g4", 1, 16.0, 32768.0, 4.0, 15.0],
    ]
    assert pool_totals(machines)["gpus"] == 4.0


def test_the_demo_pool_collapses_36_slots_into_24_classes() -> None:
    config = parse_config({"machines": {"speed_attribute": "HEPSPEC"}})
    snapshot, _ = read_status([DEMO / "status.ads"], config.slot_reading())
    machines = machine_classes(snapshot.slots)
    assert len(snapshot.slots) == 36 and len(machines) == 24
    assert machines["count"].sum() == 36
    # cmslpc041's four static slots of 1 core are four nodes of one class
    static = machines.set_index("name").loc["c1-m2048-g0"]
    assert (static["count"], static["speed"]) == (4, 9.6)
    totals = pool_totals(machines)
    assert totals["cpus"] == snapshot.slots["total_cpus"].sum()


def test_pool_totals_of_seed_000_example_3() -> None:
    pool = machines_table(
        [
            {"name": "small", "count": 10, "cpus": 8, "memory": 16 * GIB},
            {"name": "large", "cpus": 80, "memory": 512 * GIB},
        ]
    )
    totals = pool_totals(pool)
    # "Together, the system has 160 CPUs and 672 GB of RAM"
    assert (totals["cpus"], totals["memory"] / GIB, totals["gpus"]) == (160.0, 672.0, 0.0)
    assert np.isnan(totals["disk"])  # unknown in some class: no pool-wide share of it


def test_class_of_hosts() -> None:
    pool = machines_table(
        [
            {"name": "a", "cpus": 8, "hosts": ("cpu-node1", "slot1@cpu-node1")},
            {"name": "b", "cpus": 8, "hosts": ("slot1@glidein_1@gpu-1-26.ultralight.org", "gpu-1-26.ultralight.org")},
        ]
    )
    hosts = [
        "slot1_3@cpu-node1",
        "slot1_1@glidein_1@gpu-1-26.ultralight.org",
        "gpu-1-26.ultralight.org",
        "elsewhere",
        None,
    ]
    assert class_of_hosts(pool, hosts).tolist() == [0, 1, 1, -1, -1]


@pytest.mark.parametrize(
    ("rows", "match"),
    [
        ([{"name": "a", "cpus": 0}], r"class 'a': cpus must be cores per node greater than 0, got 0.0"),
        ([{"name": "a", "cpus": 8, "count": 1.5}], r"class 'a': count must be a whole number of nodes >= 1, got 1.5"),
        ([{"name": "a", "cpus": 8, "memory": -1}], r"class 'a': memory must be 0 or more \(NaN: unknown\), got -1.0"),
        ([{"name": "a", "cpus": 8, "speed": -2}], r"class 'a': speed must be a number greater than 0, got -2.0"),
        (
            [{"name": "a", "cpus": 8}, {"name": "a", "cpus": 4}],
            r"class names must be unique, got \['a'\] more than once",
        ),
        ([{"name": "", "cpus": 8}], r"every class needs a non-empty string name"),
        ([{"cpus": 8}], r"machines table is missing columns \['name'\]"),
    ],
)
def test_machines_table_errors(rows: list[dict[str, Any]], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        machines_table(rows)


def test_machines_table_defaults() -> None:
    (row,) = machines_table([{"name": "a", "cpus": 8, "gpus": np.nan, "speed": np.nan}]).to_dict("records")
    assert (row["count"], row["gpus"], row["node_cost"], row["speed"]) == (1, 0.0, 1.0, 1.0)
    assert np.isnan(row["memory"]) and row["properties"] == frozenset() and row["hosts"] == ()
