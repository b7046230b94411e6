"""Summary runs of several writers on one store (issue 54, point 11), in both stores: a run
holds the store's lease, so a second run at once is put off (BusyError) instead of deleting, as
stale, the groups the first had not seen, or writing its older sums over the first's; and a run
that outlived its lease neither replaces nor deletes what the next holder wrote.

The other writer acts between the run's read of the store and its write (:class:`Meanwhile`),
the moment two collectors' runs met in: 30 groups and 1,000 jobs were missing from the daily
summaries until a later run."""

from __future__ import annotations

from collections.abc import Callable
from datetime import date
from typing import Any

import pytest

from collector.errors import BusyError
from collector.sinks.base import Aggregation, Sink
from collector.summaries import summarize

DAY = date(2026, 11, 30)


def job(i: int, user: str) -> dict[str, Any]:
    return {
        "id": f"job-{i}", "kind": "job", "schema_version": 1, "probe": "p", "timestamp": "2026-11-30T12:00:00Z",
        "job_id": f"job-{i}", "end": 1796040000, "user": user, "group": "cms", "project": "CMS", "site": "FNAL",
        "pool": "pool", "cpus": 1.0, "walltime_s": 3600.0, "memory": 2048.0, "gpus": 0.0,
    }  # fmt: skip


class Meanwhile:
    """``sink``, but once its first aggregation of job records has answered, ``then()`` runs:
    another writer acting between a summary run's read and its write."""

    def __init__(self, sink: Sink, then: Callable[[], None]) -> None:
        self.sink, self.then = sink, then
        self.done = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self.sink, name)

    def aggregate(self, query: Aggregation) -> list[dict[str, Any]]:
        rows = self.sink.aggregate(query)
        if query.kind == "job" and not self.done:
            self.done = True
            self.then()
        return rows


def jobs_by_user(store: Sink) -> dict[str, int]:
    return {d["user"]: d["n_jobs"] for d in store.query("summary", limit=1000) if d["record_kind"] == "job"}


def test_a_second_run_at_once_waits_its_turn(empty_store: Sink) -> None:
    store = empty_store
    store.send("job", [job(1, "alice"), job(2, "alice")])
    second: list[BaseException] = []

    def the_other_collector() -> None:  # records arrive, and the other collector's run is due
        store.send("job", [job(3, "bob"), job(4, "alice")])
        try:
            summarize(store, DAY, DAY, probe="b", kinds=["job"])
        except BusyError as exc:
            second.append(exc)

    first = summarize(Meanwhile(store, the_other_collector), DAY, DAY, probe="a", kinds=["job"])
    [busy] = second
    assert "a (pid " in str(busy) and "is making the daily summaries of this store" in str(busy)
    assert first.deleted == {"job": 0} and jobs_by_user(store) == {"alice": 2}  # what the first read
    second_run = summarize(store, DAY, DAY, probe="b", kinds=["job"])  # its turn: after the first
    assert second_run.token > first.token and jobs_by_user(store) == {"alice": 3, "bob": 1}


def _paused_past_the_lease(
    store: Sink, *, third: str | None
) -> tuple[Sink, list[float], list[Any], Callable[[], None]]:
    """Two jobs of alice stored, a clock, and what happens while the first run is paused: the
    clock moves 10 minutes, two jobs arrive, a second run (of "b") summarizes them, and a third
    holder, if named, takes the lease."""
    store.send("job", [job(1, "alice"), job(2, "alice")])
    now = [1_796_040_000.0]
    later: list[Any] = []

    def paused() -> None:
        now[0] += 600
        store.send("job", [job(3, "bob"), job(4, "alice")])
        later.append(summarize(store, DAY, DAY, probe="b", kinds=["job"], lease_s=60, clock=lambda: now[0]))
        if third is not None:
            store.take_lease("summaries", third, 60, now=now[0])

    return store, now, later, paused


def test_a_run_that_outlived_its_lease_leaves_what_the_next_holder_wrote(empty_store: Sink) -> None:
    """The first run is paused past its lease (the clock moves 10 minutes) between its read and
    its write; the second takes the lease and summarizes the records arrived meanwhile, and a
    third starts its run. The first then writes its older sums and deletes what it did not see:
    neither touches the second's; it finds its lease the third's at its next step, and stops."""
    store, now, later, paused = _paused_past_the_lease(empty_store, third="c")
    with pytest.raises(BusyError, match=r"^.*: c is making the daily summaries of this store \(its lease runs until "):
        summarize(Meanwhile(store, paused), DAY, DAY, probe="a", kinds=["job"], lease_s=60, clock=lambda: now[0])
    assert later[0].records == {"job": 2} and jobs_by_user(store) == {"alice": 3, "bob": 1}  # the later run's, whole


def test_a_run_that_outlived_its_lease_goes_on_under_a_new_token_once_it_is_free(empty_store: Sink) -> None:
    """As above, without a third run: the lease is free again at the first run's next step, so it
    goes on under a new token, above the second's (what it reads from then on is newer), its
    stale write and delete of the day it read before having touched nothing of the second's."""
    store, now, later, paused = _paused_past_the_lease(empty_store, third=None)
    first = summarize(Meanwhile(store, paused), DAY, DAY, probe="a", kinds=["job"], lease_s=60, clock=lambda: now[0])
    assert first.token > later[0].token and first.deleted == {"job": 0}
    assert jobs_by_user(store) == {"alice": 3, "bob": 1}
