"""The books' math on hand-computed tables (the store's side: tests/pipeline/test_audit.py)."""

from __future__ import annotations

import pandas as pd
import pytest

from collector.books import gaps, held_core_seconds, job_core_seconds, observed_segments
from probes.accounting.audit import node_books
from probes.accounting.canonical import CanonicalUnit

CPU = {"cpu": CanonicalUnit("cpu", {"cpus": 1.0, "memory": 2048.0})}


def snapshots(*pairs: tuple[float, float], pool: str = "p") -> pd.DataFrame:
    return pd.DataFrame(
        [{"pool": pool, "observed_at": t, "interval_s": d} for t, d in pairs],
        columns=["pool", "observed_at", "interval_s"],
    )


def test_snapshots_stand_for_the_interval_before_them_and_the_rest_is_a_gap() -> None:
    # 100 stands for (40, 100], 160 for (100, 160], 400 (after an outage) for (340, 400]
    snaps = snapshots((100, 60), (160, 60), (400, 60))
    assert observed_segments(snaps, 50, 380).values.tolist() == [[50, 160], [340, 380]]
    found = gaps(snaps, 0, 500)
    assert found.values.tolist() == [["p", 0, 40, 40], ["p", 160, 340, 180], ["p", 400, 500, 100]]
    # under a second between two snapshots (Elasticsearch keeps whole seconds) is no gap
    assert gaps(snapshots((100, 60), (160.0, 59.5)), 40, 160).empty
    assert gaps(snapshots(), 0, 10).values.tolist() == [[None, 0, 10, 10]]


def test_records_across_an_edge_count_their_part_inside_the_window() -> None:
    bulk = pd.DataFrame([{"pool": "p", "submitter": "a", "site": None, "core_s": 2 * 60 + 2 * 60}])  # 100, 160
    edges = pd.DataFrame(
        [
            {"pool": "p", "submitter": "a", "site": None, "observed_at": 100, "interval_s": 60, "cpus": 2},
            {"pool": "p", "submitter": "a", "site": None, "observed_at": 220, "interval_s": 60, "cpus": 2},
        ]
    )
    # window [70, 200): the record at 100 holds (70, 100] of its (40, 100]; 220 holds (160, 200)
    held = held_core_seconds(bulk, edges, 70, 200)
    assert held.values.tolist() == [["p", "a", None, 2 * 30 + 2 * 60 + 2 * 40]]


def test_jobs_are_clipped_to_the_segment_from_their_sums() -> None:
    def rows(jobs: list[tuple[float, float, float]]) -> pd.DataFrame:
        return pd.DataFrame(
            [{"submitter": "a", "site": "S", "jobs": len(jobs), "cores": sum(c for c, _, _ in jobs),
              "cores_start": sum(c * s for c, s, _ in jobs), "cores_end": sum(c * e for c, _, e in jobs)}]
        )  # fmt: skip

    # segment [100, 200): (2 cores, 120-150) inside, (1, 50-130) before it, (3, 180-260) after, (1, 0-300) over it
    used = job_core_seconds(
        [
            (rows([(2, 120, 150)]), 100, 200, False, False),
            (rows([(1, 50, 130)]), 100, 200, True, False),
            (rows([(3, 180, 260)]), 100, 200, False, True),
            (rows([(1, 0, 300)]), 100, 200, True, True),
        ]
    )
    assert used[["submitter", "site", "used_core_s", "jobs", "cores"]].values.tolist() == [
        ["a", "S", 2 * 30 + 1 * 30 + 3 * 20 + 1 * 100, 4, 7]
    ]


def test_a_node_balances_when_allocations_and_unallocated_make_its_total() -> None:
    hours = 0.5
    slots = pd.DataFrame(
        [
            {"pool": "p", "site": "S", "name": name, "partition": partition, "snapshots": 3, "hours": hours,
             "overhead_cu_hours": 2 * hours if partition else None,
             "total_cpus_hours": 8 * hours, "unallocated_cpus_hours": 5 * hours,
             "total_memory_hours": 16384 * hours, "unallocated_memory_hours": 8192 * hours,
             "total_disk_hours": 0.0, "unallocated_disk_hours": 0.0, "total_gpus_hours": 0.0,
             "unallocated_gpus_hours": 0.0}
            for name, partition in (("n1", "cpu"), ("n2", "cpu"), ("n3", None))
        ]
    )  # fmt: skip
    held = {"allocated_cpus_hours": 3 * hours, "allocated_memory_hours": 8192 * hours}
    allocations = pd.DataFrame(
        [
            {"pool": "p", "parent": "n1", **held, "allocated_disk_hours": 0.0, "allocated_gpus_hours": 0.0},
            {"pool": "p", "parent": "n2", **held, "allocated_cpus_hours": 4 * hours, "allocated_disk_hours": 0.0,
             "allocated_gpus_hours": 0.0},  # a core more than the startd left allocated
            {"pool": "p", "parent": "n3", **held, "allocated_disk_hours": 0.0, "allocated_gpus_hours": 0.0},
            {"pool": "p", "parent": "gone", **held, "allocated_disk_hours": 0.0, "allocated_gpus_hours": 0.0},
        ]
    )  # fmt: skip
    books = node_books(slots, allocations, CPU).set_index("name")
    # n1: 8 CU offered (8 cores, 16 GiB); 4 CU of memory held (8 GiB / 2 GiB) > 3 of cores: 4 CU allocated
    assert books.loc["n1", "offered_cu_hours"] == pytest.approx(8 * hours)
    assert books.loc["n1", "allocated_cu_hours"] == pytest.approx(4 * hours)
    assert books.loc["n1", "balanced"] and books.loc["n1", "difference_cu_hours"] == 0
    assert not books.loc["n2", "balanced"] and books.loc["n2", "difference_cu_hours"] == pytest.approx(1 * hours)
    # no partition: no canonical units, the books kept in cores
    assert pd.isna(books.loc["n3", "offered_cu_hours"]) and books.loc["n3", "balanced"]
    assert books.loc["gone", "orphan"] and not books.loc["gone", "balanced"]
