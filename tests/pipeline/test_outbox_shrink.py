"""A probe's outbox gives a drained backlog's space back (issue 25 item 9): 23 MB after 30,000
jobs sent stayed 23 MB, under the 64 MiB the collector keeps, and an outbox made before pages
were freed kept its size for good."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from collector.outbox import PROBE_SHRINK_KEEP_BYTES, Outbox
from collector.sinks.sqlite import EmbeddedStore
from probes.config import parse_config
from probes.pipeline.lane import Delivery, RecordLane

JOBS = 30_000
PAD = "x" * 700  # about a job record's size


def _backlog(outbox: Outbox) -> None:
    docs = [{"id": f"j{i}", "timestamp": "2026-11-21T14:00:00Z", "pad": PAD} for i in range(JOBS)]
    for start in range(0, JOBS, 2000):
        outbox.commit({"job": docs[start : start + 2000]}, {"history:x": start})


def _deliver(tmp_path: Path, outbox: Outbox, store: EmbeddedStore) -> Delivery:
    """The probe's delivery of ``outbox`` to ``store``, through its lane."""
    lane = RecordLane(parse_config({"probe": {"state_dir": str(tmp_path)}}))
    with lane.holding(store):
        return lane.deliver(outbox)


def _size(path: Path) -> int:
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return path.stat().st_size


def test_a_drained_probe_outbox_shrinks(tmp_path: Path) -> None:
    path = tmp_path / "outbox.sqlite"
    with Outbox(path) as outbox, EmbeddedStore(tmp_path / "store.sqlite") as store:
        _backlog(outbox)
        grown = _size(path)
        assert grown > 20 << 20
        delivery = _deliver(tmp_path, outbox, store)
        assert delivery.flushed is not None and delivery.flushed.sent["job"] == JOBS
        assert store.count("job") == JOBS
    assert _size(path) <= PROBE_SHRINK_KEEP_BYTES + (2 << 20)  # the free pages kept, the schema, a few pages


def test_an_outbox_made_before_pages_were_freed_is_converted_once_drained(tmp_path: Path) -> None:
    path = tmp_path / "outbox.sqlite"
    with sqlite3.connect(path) as db:  # as an older fairacct made it: SQLite's default, no auto_vacuum
        db.execute("PRAGMA page_size=65536")
        db.execute("CREATE TABLE old_marker (x)")
    with Outbox(path) as outbox, EmbeddedStore(tmp_path / "store.sqlite") as store:
        assert outbox._db.execute("PRAGMA auto_vacuum").fetchone()[0] == 0
        _backlog(outbox)
        grown = _size(path)
        _deliver(tmp_path, outbox, store)
        assert outbox._db.execute("PRAGMA auto_vacuum").fetchone()[0] == 2  # converted by the drained flush
        assert outbox.checkpoint("history:x") == JOBS - 2000  # checkpoints kept through the VACUUM
    assert _size(path) < grown // 4
