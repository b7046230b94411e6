"""The flusher never stops while the collector runs: a round that fails for a reason that is not
the store's (a bug in a sink, a value nobody expected) costs that round, is counted and shown
on /healthz as 'degraded', and the next round starts with a new connection and delivers."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from collector.outbox import Outbox
from collector.server.app import _degraded
from collector.server.flusher import Flusher
from collector.server.metrics import ServerMetrics
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
    assert _degraded(flusher.state) == []
    flusher.state.crashed = "OverflowError: Python int too large to convert to SQLite INTEGER"
    flusher.state.dead_letters = {"job": 2}
    assert _degraded(flusher.state) == [
        "2 record(s) set aside: the store refused them for good (dead letters in the outbox)",
        "the last flush round failed unexpectedly (1 so far): OverflowError: Python int too large to convert to "
        "SQLite INTEGER",
    ]
