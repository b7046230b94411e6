"""A full outbox disk, against the collector as a process (issue 54, point 5): its state
directory on a real tmpfs of 8 MiB that the test fills, its store beside the test.

Before: with the store back, the flusher could not write down what the store took ('database
or disk is full') and sent its first batch again for ever; probes got 503 while nothing drained;
after a restart the outbox could not be opened ('flusher stopped', depth 0). Now the collector
keeps a reserve on that file system, says a full disk on /healthz and /metrics, refuses records
with 503 and Retry-After while it is full, sends nothing twice while it cannot write, and goes
on by itself once there is room: every record answered 202 is stored, once.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import orjson

from collector.sinks.sqlite import EmbeddedStore

from ...fullfs import fill, small_file_system
from .conftest import Collector, record

JSON = {"Content-Type": "application/json"}
FULL_REPLY = {"error": "the collector's outbox has no room on its disk right now; nothing was stored, retry later"}


def post(c: Collector, docs: list[dict[str, Any]]) -> httpx.Response:
    return httpx.post(f"{c.url}/v1/records", content=orjson.dumps(docs), headers=JSON | c.auth("p1"), timeout=60)


def health(c: Collector) -> tuple[int, dict[str, Any]]:
    reply = httpx.get(f"{c.url}/healthz", timeout=30)
    return reply.status_code, reply.json()


def until(what: Callable[[], Any], timeout_s: float = 30) -> Any:
    """``what()`` once it is true (its last value when the time is up)."""
    deadline = time.monotonic() + timeout_s
    while not (got := what()) and time.monotonic() < deadline:
        time.sleep(0.1)
    return got


def test_a_full_outbox_disk_refuses_records_loses_none_and_resumes_by_itself(
    start_collector: Any, tmp_path: Path
) -> None:
    store = tmp_path / "store.sqlite"
    with small_file_system(tmp_path / "outbox-fs", "8m") as fs:
        # no summaries: the flusher is the store's only writer, so that a write to it is a batch sent
        c = start_collector(
            store=f"sqlite:///{store}", state_dir=str(fs), max_records_body_size="512 KiB", outbox_reserve_mib=1.0,
            outbox_keep_free_mib=0.5, summaries_recent_days=0, summaries_nightly_days=0,
        )  # fmt: skip
        try:
            _exercise(c, fs, store)
        finally:
            if c.process is not None:
                c.stop()  # before the file system is unmounted


def _exercise(c: Collector, fs: Path, store: Path) -> None:
    assert post(c, [record("first", "p1")]).status_code == 202
    assert until(lambda: store.exists() and EmbeddedStore(store).count("job") == 1)

    # The store is down (another process holds its write lock) while records come: the outbox
    # takes them until what is free, less its WAL, nears its reserve, then refuses before the body.
    held = sqlite3.connect(store, isolation_level=None, timeout=20)
    held.execute("BEGIN IMMEDIATE")
    acked: list[str] = []
    for n in range(40):
        batch = [record(f"fill-{n}-{i}", "p1", Padding="x" * 2000) for i in range(100)]
        reply = post(c, batch)
        if reply.status_code != 202:
            break
        acked += [f"p1-job-fill-{n}-{i}" for i in range(100)]
    assert (reply.status_code, reply.json(), reply.headers["Retry-After"]) == (503, FULL_REPLY, "10")
    assert 300 <= len(acked) <= 2000, len(acked)  # refused early: the disk itself is not full yet
    code, doc = health(c)
    assert code == 503 and doc["status"].startswith("outbox disk full: "), doc
    assert "free on the outbox's file system, of which its WAL may need" in doc["status"]
    assert doc["outbox"]["disk_full"] is True and doc["outbox"]["depth"] == len(acked)
    metrics = httpx.get(f"{c.url}/metrics").text
    assert "\nfairacct_collector_outbox_disk_full 1\n" in metrics
    assert 'fairacct_collector_request_errors_total{endpoint="records",reason="disk_full"} 1' in metrics

    # Something else takes the rest of the disk; then the store comes back. The flusher sends a
    # batch, cannot delete it from the outbox, keeps it in memory and sends nothing more.
    ballast = fill(fs)
    held.execute("ROLLBACK")
    held.close()
    _, doc = until(lambda: (got := health(c))[1]["outbox"]["unrecorded"] and got)
    taken = doc["outbox"]["unrecorded"]
    assert taken > 0 and doc["outbox"]["depth"] == len(acked), doc
    assert f"the flusher cannot write to the outbox: {taken} record(s) the store took wait" in doc["status"]
    assert "\nfairacct_collector_outbox_unrecorded " in httpx.get(f"{c.url}/metrics").text
    watch = sqlite3.connect(store, isolation_level=None)
    try:
        changes = watch.execute("PRAGMA data_version").fetchone()[0]
        time.sleep(2.5)  # a dozen of the flusher's 0.2 s rounds: before, each sent the batch again
        assert watch.execute("PRAGMA data_version").fetchone()[0] == changes, "the store was written to again"
    finally:
        watch.close()
    assert EmbeddedStore(store).count("job") == 1 + taken

    # Restarted on the full disk, it opens the outbox, says its true depth, and its flusher runs.
    c.stop()
    c.start()
    code, doc = health(c)
    assert code == 503 and doc["status"].startswith("outbox disk full: ") and "flusher stopped" not in doc["status"]
    assert doc["outbox"]["depth"] == len(acked), doc
    assert until(lambda: health(c)[1]["outbox"]["unrecorded"])  # it took a batch again: one batch at most

    # Room again: it goes on by itself, and every record answered 202 is in the store, once.
    ballast.unlink()
    code, doc = until(lambda: (got := health(c))[0] == 200 and got)
    assert doc["status"] == "ok" and doc["outbox"]["disk_full"] is False, doc
    assert until(lambda: health(c)[1]["outbox"]["depth"] == 0)
    ids = [d["source_id"] for d in EmbeddedStore(store).query("job", limit=10_000)]
    assert sorted(ids) == sorted(["p1-job-first", *acked])
    assert post(c, [record("after", "p1")]).status_code == 202
    assert until(lambda: EmbeddedStore(store).count("job") == len(acked) + 2)
    assert "\nfairacct_collector_outbox_disk_full 0\n" in httpx.get(f"{c.url}/metrics").text
    assert "room again on the outbox's file system: what the store took is written down" in c.log


def test_a_full_outbox_disk_and_a_store_that_is_down_are_both_said_and_the_disk_wins(
    start_collector: Any, tmp_path: Path
) -> None:
    """Both at once (issue 54, points 5 and 6): /healthz answers 503 and names the disk (a load
    balancer must send the probes elsewhere), and says the store's outage too, in ``degraded`` and
    its fields, as /metrics does; once both are mended the records that waited are sent."""
    from collector.sinks.elasticsearch import ElasticsearchSink

    from ..conftest import start_server, stop_server
    from .test_store_outage_at_start import Front

    front = Front(503)
    server = None
    try:
        with small_file_system(tmp_path / "outbox-fs", "8m") as fs:
            c = start_collector(
                store=front.url, store_settings={"install_templates": True}, state_dir=str(fs),
                max_records_body_size="512 KiB", outbox_reserve_mib=1.0, outbox_keep_free_mib=0.5,
                summaries_recent_days=0, summaries_nightly_days=0,
            )  # fmt: skip
            try:
                assert post(c, [record(i, "p1") for i in range(3)]).status_code == 202
                code, doc = until(lambda: (got := health(c))[1]["store_reachable"] is False and got)
                assert code == 200 and doc["status"] == "degraded", doc  # the store alone: records are taken
                ballast = fill(fs)
                code, doc = health(c)
                assert code == 503 and doc["status"].startswith("outbox disk full: "), doc
                assert doc["degraded"][0].startswith("the store is unreachable (elasticsearch "), doc
                assert doc["outbox"]["disk_full"] is True and doc["outbox"]["depth"] == 3
                assert (doc["store_reachable"], doc["templates_checked"]) == (False, False)
                assert post(c, [record("refused", "p1")]).status_code == 503
                metrics = httpx.get(f"{c.url}/metrics").text
                assert "\nfairacct_collector_outbox_disk_full 1\n" in metrics
                assert "\nfairacct_collector_store_reachable 0\n" in metrics
                assert "\nfairacct_collector_store_templates_checked 0\n" in metrics

                ballast.unlink()
                server = start_server()
                front.target = server.url
                code, doc = until(
                    lambda: (got := health(c))[1]["status"] == "ok" and got[1]["outbox"]["depth"] == 0 and got
                )
                assert code == 200 and doc["status"] == "ok" and doc["outbox"]["depth"] == 0, doc
                assert (doc["store_reachable"], doc["templates_checked"], doc["outbox"]["disk_full"]) == (
                    True, True, False
                ), doc  # fmt: skip
                with ElasticsearchSink(server.url) as es:
                    assert es.count("job") == 3
            finally:
                if c.process is not None:
                    c.stop()  # before the file system is unmounted
    finally:
        front.target = None
        front.close()
        if server is not None:
            stop_server(server)
