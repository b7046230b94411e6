"""The parts LivePool is composed of: the pure projections and constraints, the pools of
replicas, and the facade's knobs reaching the part they tune. The reads themselves are
tests/sources/test_live.py's (fake daemons) and the live-pool tests' (a real HTCondor)."""

from __future__ import annotations

from typing import Any

import pytest

import probes.sources.live as live
from collector.errors import ConfigError
from probes.config import PoolSettings
from probes.sources.live import LivePool
from probes.sources.live.calls import replica_groups
from probes.sources.live.projections import conjunction, unique_names


def test_names_are_kept_once_whatever_their_case_in_their_first_spelling() -> None:
    assert unique_names(["Name", "", "name", "Cpus", "NAME", "cpus", "Memory"]) == ["Name", "Cpus", "Memory"]


@pytest.mark.parametrize(
    ("parts", "constraint"),
    [
        ((), "true"),
        (("", "  "), "true"),
        (("JobStatus == 1",), "JobStatus == 1"),
        (("JobStatus == 1", ' Owner == "a" '), '(JobStatus == 1) && (Owner == "a")'),
    ],
)
def test_a_conjunction_leaves_empty_parts_out(parts: tuple[str, ...], constraint: str) -> None:
    assert conjunction(*parts) == constraint


def test_collector_entries_are_pools_of_replicas() -> None:
    assert replica_groups([]) == [[None]]  # COLLECTOR_HOST
    assert replica_groups(["cm1:9618, cm2:9618", "cm3:9618"]) == [["cm1:9618", "cm2:9618"], ["cm3:9618"]]
    with pytest.raises(ConfigError, match=r"pool.collectors: expected host:port entries, got an empty one \(' , '\)"):
        replica_groups(["cm1:9618", " , "])


def _unused(*_: Any) -> Any:
    raise AssertionError("no daemon is asked in these tests")


def test_the_facade_knobs_tune_its_parts() -> None:
    pool = LivePool(
        PoolSettings(collectors=["cm1:9618, cm2:9618"]),
        slot_expressions=["MY.HEPSPEC"],
        collector_factory=_unused,
        schedd_factory=_unused,
    )
    assert pool.bindings is None and pool.groups == [["cm1:9618", "cm2:9618"]]
    pool.slot_chunk = 3
    pool.progress_every_s = 0.5

    def seen(source: str, ads: list[Any]) -> None: ...

    def progress(schedd: str, n: int) -> None: ...

    pool.on_slot_ads = seen
    pool.on_progress = progress
    assert (pool.slot_stream.chunk, pool.slot_stream.on_ads) == (3, seen)
    assert (pool.history_pass.progress_every_s, pool.history_pass.on_progress) == (0.5, progress)
    assert pool.slot_expressions == ("MY.HEPSPEC",) and pool.slot_attributes == ()
    # one set of learned attributes and one count of abandoned calls, shared by every part
    assert pool.learned is pool.calls.learned and pool.abandoned == 0
    assert pool.slot_stream.calls is pool.calls is pool.schedd_queries.calls is pool.history_pass.calls
    assert repr(pool) == "LivePool(collectors=['cm1:9618, cm2:9618'], token=none)"


def test_the_names_imported_from_the_live_module_stay_importable() -> None:
    for name in [
        "END_TIME", "REQUEST_INPUTS", "CollectorFactory", "CollectorLike", "HistoryRead", "IdleRead", "LivePool",
        "ScheddFactory", "ScheddLike", "checkpoint_key", "history_constraint", "history_projection",
        "history_since", "idle_projection", "slot_projection",
    ]:  # fmt: skip
        assert name in live.__all__ and getattr(live, name) is not None


def test_the_parts_of_a_history_hold_every_job_once_as_the_schedd_evaluates_them() -> None:
    """``history_part_constraint`` evaluated by classad2 (as the schedd does) puts each job in
    exactly one part of ``m``, the part ``job_part`` says; part ``r`` of ``m`` is parts ``r``
    and ``r + m`` of ``2 m``; and the two marks are answered whatever the job constraint."""
    import classad2

    from probes.sources.live.projections import history_part_constraint, job_part

    mark = {"tail": ["vm#7.0#100", "vm#6.0#90"]}
    jobs = [(c, p) for c in (1, 2, 3, 17, 1000, 123456789) for p in (0, 1, 2, 63, 64, 1000)]

    def answered(constraint: str, cluster: int, proc: int, owner: str = "alice") -> bool:
        ad = classad2.ClassAd({"ClusterId": cluster, "ProcId": proc, "Owner": owner,
                               "GlobalJobId": f"vm#{cluster}.{proc}#100"})  # fmt: skip
        return classad2.ExprTree(constraint).eval(ad) is True  # undefined (a Value) is not an answer

    for m in (1, 2, 8, 64):
        for cluster, proc in jobs:
            parts = [
                r for r in range(m) if answered(history_part_constraint("", None, (r, m), "vm#9.9#1"), cluster, proc)
            ]
            assert parts == [job_part(f"vm#{cluster}.{proc}#100", m)], (cluster, proc, m)
            halves = [
                r for r in range(2 * m) if answered(history_part_constraint("", None, (r, 2 * m), "x"), cluster, proc)
            ]
            assert halves[0] % m == parts[0]
    owner_is_bob = 'Owner == "bob"'
    assert not answered(history_part_constraint(owner_is_bob, mark, (0, 1), "vm#9.0#100"), 3, 0)
    assert answered(history_part_constraint(owner_is_bob, mark, (0, 1), "vm#9.0#100"), 3, 0, "bob")
    for marked in ((7, 0), (9, 0)):  # the checkpoint's newest job and the pass's: in every part
        assert all(
            answered(history_part_constraint(owner_is_bob, mark, (r, 4), "vm#9.0#100"), *marked) for r in range(4)
        )
    assert job_part("vm#12#100", 4) is None and job_part("odd", 4) is None
