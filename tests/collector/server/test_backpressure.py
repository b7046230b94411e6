"""A sustained load the collector can carry, against the collector as a process: backpressure
(429 with Retry-After, before the body is read) while the store is slower than the probes,
and an outbox that gives its space back once a backlog is sent."""

from __future__ import annotations

import re
import sqlite3
import time
from typing import Any

import httpx
import orjson

from .conftest import record
from .test_ingest import drained, post, stored


def test_a_store_slower_than_the_probes_gets_429_and_the_outbox_stays_bounded(start_collector: Any) -> None:
    # The flusher moves 10 records a batch, 20 batches a round: once its first round has
    # stored some of 3,000 records, the store is held (another process's write transaction on
    # it) and the flusher waits on it: the store was taking records, and the outbox holds more
    # than backpressure_depth.
    c = start_collector(backpressure_depth=100, flush_batch_size=10)  # 200 a round: still behind once held
    assert post(c, orjson.dumps([record(i, "p1") for i in range(3000)])).status_code == 202
    deadline = time.monotonic() + 20
    while httpx.get(f"{c.url}/healthz").json()["outbox"]["depth"] == 3000 and time.monotonic() < deadline:
        time.sleep(0.01)
    held = sqlite3.connect(c.root / "collector" / "store.sqlite", isolation_level=None, timeout=20)
    try:
        held.execute("BEGIN IMMEDIATE")
        # not JSON: a 400 once read, so a 429 says the body was never read
        reply = post(c, b"[not json", "p2")
        assert reply.status_code == 429, reply.text
        assert reply.headers["Retry-After"] == "10"
        assert re.fullmatch(
            r"the collector's outbox holds \d+ records, over its backpressure depth of 100: the store takes "
            r"records more slowly than they come; send this batch again after Retry-After",
            reply.json()["error"],
        )
        late = orjson.dumps([record(f"late-{i}", "p2") for i in range(5)])
        assert post(c, late, "p2").status_code == 429
        health = httpx.get(f"{c.url}/healthz").json()
        assert health["status"] == "ok" and health["outbox"]["depth"] <= 3000  # behind, not down
        metrics = httpx.get(f"{c.url}/metrics").text
        assert 'fairacct_collector_request_errors_total{endpoint="records",reason="backpressure"} 2' in metrics
    finally:
        held.execute("ROLLBACK")
        held.close()
    drained(c)
    docs = stored(c, expect=3000)
    assert len(docs) == 3000 and not any(d["probe"] == "p2" for d in docs)  # nothing of a 429 was stored
    # caught up: the same batch is taken
    assert post(c, late, "p2").status_code == 202
    assert len(stored(c, expect=3005)) == 3005


def test_a_drained_backlog_gives_the_outbox_file_back(start_collector: Any) -> None:
    # The store is held (another process's write transaction on it) while ~10 MB of records
    # pile up in the outbox; once it is let go, the backlog is sent and the outbox file gives
    # back all but outbox_keep_free_mib of the space it held, and its WAL stays cut back.
    c = start_collector(outbox_keep_free_mib=1.0)
    state = c.root / "collector"
    post(c, orjson.dumps([record("first", "p1")]))
    stored(c, expect=1)
    held = sqlite3.connect(state / "store.sqlite", isolation_level=None)
    try:
        held.execute("BEGIN IMMEDIATE")
        pad = "x" * 2000
        for b in range(10):
            assert post(c, orjson.dumps([record(b * 500 + i, "p1", pad=pad) for i in range(500)])).status_code == 202
        assert httpx.get(f"{c.url}/healthz").json()["outbox"]["depth"] >= 5000
    finally:
        held.execute("ROLLBACK")
        held.close()
    deadline = time.monotonic() + 20

    def given_back() -> int:  # MiB, over every drain: under load the backlog may drain in two
        return sum(
            int(n) for n in re.findall(r"outbox: (\d+) MiB given back to the file system after a backlog", c.log)
        )

    while given_back() < 9 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert 9 <= given_back() <= 11, c.log[-2000:]
    # the file is cut at the next checkpoint: the records passed through it (~10 MB), and
    # all but 1 MiB of the pages they freed went back
    while (state / "outbox.sqlite").stat().st_size >= 3 << 20 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert (state / "outbox.sqlite").stat().st_size < 3 << 20
    assert (state / "outbox.sqlite-wal").stat().st_size <= 64 << 20
    assert len(stored(c, expect=5001)) == 5001
