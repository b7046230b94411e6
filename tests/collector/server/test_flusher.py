"""The flusher never stops while the collector runs: a round that fails for a reason that is not
the store's (a bug in a sink, a value nobody expected) costs that round, is counted and shown
on /healthz as 'degraded', and the next round starts with a new connection and delivers."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from collector.errors import SinkError
from collector.outbox import Outbox
from collector.server.flusher import Flusher
from collector.server.health import flush_degraded, iso
from collector.server.metrics import ServerMetrics
from collector.sinks.base import SendResult
from collector.sinks.sqlite import EmbeddedStore


class _BrokenOnce(EmbeddedStore):
    """The embedded store, whose first connection's sends raise what no sink should."""

    opened = 0

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        type(self).opened += 1
        self.broken = type(self).opened == 1

    def send_encoded(self, kind: str, records: Any) -> Any:
        if self.broken:
            raise OverflowError("Python int too large to convert to SQLite INTEGER")
        return super().send_encoded(kind, records)


def test_a_round_that_fails_unexpectedly_costs_that_round_alone(tmp_path: Path) -> None:
    docs = [{"id": f"r{i}", "kind": "job", "timestamp": "2026-11-21T14:00:00Z", "cpus": 1.0} for i in range(5)]
    with Outbox(tmp_path / "outbox.sqlite") as outbox:
        outbox.commit({"job": docs}, {})
    store = tmp_path / "store.sqlite"
    flusher = Flusher(
        tmp_path / "outbox.sqlite",
        lambda: _BrokenOnce(store),
        every_s=0.05,
        batch_size=100,
        metrics=ServerMetrics(ingest=("records",)),
        on_depth=lambda depth, mark, taking: None,
        depth_mark=lambda: 0,
    )
    flusher.start()
    try:
        deadline = time.monotonic() + 20
        while flusher.state.depth or flusher.state.last_flush is None or flusher.state.crashes == 0:
            assert flusher.alive and time.monotonic() < deadline, flusher.state
            time.sleep(0.02)
    finally:
        flusher.stop()
    assert flusher.state.crashes == 1 and flusher.state.crashed is None  # the next round succeeded
    with EmbeddedStore(store) as check:
        assert check.count("job") == 5
    assert flush_degraded(flusher.state) == []
    flusher.state.crashed = "OverflowError: Python int too large to convert to SQLite INTEGER"
    flusher.state.dead_letters = {"job": 2}
    assert flush_degraded(flusher.state) == [
        "2 record(s) set aside: the store refused them for good (dead letters in the outbox)",
        "the last flush round failed unexpectedly (1 so far): OverflowError: Python int too large to convert to "
        "SQLite INTEGER",
    ]


class _Refusing(EmbeddedStore):
    """The embedded store, refusing every record for good, as a store refuses one too large alone."""

    def send_encoded(self, kind: str, records: Any) -> Any:
        return SendResult(rejected=dict.fromkeys(records.ids, f"{kind} document: too large for the store"))


class _Down(EmbeddedStore):
    """The embedded store, failing every batch as a store that cannot be reached does."""

    def send_encoded(self, kind: str, records: Any) -> Any:
        raise SinkError("the store is down")


def _run(tmp_path: Path, sink: type[EmbeddedStore], until: Any) -> Flusher:
    docs = [{"id": f"r{i}", "kind": "job", "timestamp": "2026-11-21T14:00:00Z", "cpus": 1.0} for i in range(5)]
    with Outbox(tmp_path / "outbox.sqlite") as outbox:
        outbox.commit({"job": docs}, {})
    flusher = Flusher(
        tmp_path / "outbox.sqlite", lambda: sink(tmp_path / "store.sqlite"), every_s=0.05, batch_size=100,
        metrics=ServerMetrics(ingest=("records",)), on_depth=lambda depth, mark, taking: None, depth_mark=lambda: 0,
        clock=lambda: 1795300000.0,
    )  # fmt: skip
    flusher.start()
    try:
        deadline = time.monotonic() + 20
        while not until(flusher.state):
            assert flusher.alive and time.monotonic() < deadline, flusher.state
            time.sleep(0.02)
    finally:
        flusher.stop()
    return flusher


def test_records_set_aside_are_said_with_the_newest_reason_and_are_not_a_stuck_delivery(tmp_path: Path) -> None:
    state = _run(tmp_path, _Refusing, lambda s: s.dead_letters and s.last_flush is not None).state
    assert state.dead_letters == {"job": 5} and state.stuck_rounds == 0 and state.depth == 0
    assert state.last_dead_letter is not None
    assert state.last_dead_letter["error"] == "job document: too large for the store"
    (said,) = flush_degraded(state)
    assert said == (
        "5 record(s) set aside: the store refused them for good (dead letters in the outbox); the last, job "
        f"{state.last_dead_letter['id']} at {iso(state.last_dead_letter['failed_at'])}: job document: too large for "
        "the store"
    )


def test_rounds_that_store_nothing_make_delivery_stuck(tmp_path: Path) -> None:
    state = _run(tmp_path, _Down, lambda s: s.stuck_rounds >= 3).state
    assert state.stuck_since == 1795300000.0 and state.depth == 5
    (said,) = flush_degraded(state)
    assert said == (
        f"delivery stuck: the store took none of the 5 record(s) waiting in {state.stuck_rounds} flush rounds in a "
        "row, since 2026-11-21T22:26:40Z: job: the store is down"
    )
