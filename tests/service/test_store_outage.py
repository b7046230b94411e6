"""The probe service while its store hangs: snapshots keep their cadence, nothing is lost.

osmem-server (a real HTTP server) is stopped with SIGSTOP: it accepts connections and never
answers, so every flush waits on it for its whole timeout. The flush holds no lock and no
write transaction while it waits, so the snapshots of a 1 s cadence are committed on time;
once the store answers again, every record reaches it once. The pool is the fake at the
bindings (tests/sources/test_live.py) over a real pool's ads, so that every snapshot is a new
one (observed when the collector answered).
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from osmem_server import OsmemServer

from collector.outbox import Outbox
from collector.sinks.elasticsearch import ElasticsearchSink

from .conftest import fake_service

PAUSED_S = 8.0


def test_snapshots_keep_their_cadence_while_the_store_hangs(store: OsmemServer, tmp_path: Path, condor25: Path) -> None:
    service = fake_service(
        tmp_path / "state", condor25, store.url,
        pool={"interval_s": 1}, probe={"flush_every_s": 1, "history_every_s": 3600},
    )  # fmt: skip
    snapshots = service.metrics.jobs
    service.start()
    try:
        deadline = time.monotonic() + 60
        while "snapshot" not in snapshots or snapshots["snapshot"].last_success is None:
            assert time.monotonic() < deadline, "no snapshot within 60 s"
            time.sleep(0.1)
        before = service.metrics.records["slot"]  # two slots per snapshot of the fake pool
        os.kill(store.process.pid, signal.SIGSTOP)
        try:
            time.sleep(PAUSED_S)
            during = (service.metrics.records["slot"] - before) // 2
        finally:
            os.kill(store.process.pid, signal.SIGCONT)
        deadline = time.monotonic() + 90
        while True:  # the flush in flight gets its answer; the next ones drain the outbox
            with Outbox(tmp_path / "state/outbox.sqlite") as outbox:
                if not outbox.status().depth:
                    break
            assert time.monotonic() < deadline, "the outbox did not drain within 90 s of the store's return"
            time.sleep(0.5)
    finally:
        service.stop()

    # A snapshot that waited on the hung store would commit at most one; three of eight leaves
    # room for a loaded machine's late runs (each a gap the probe names, not one lost here).
    assert during >= 3, f"{during} snapshots committed in {PAUSED_S:g} s at a 1 s cadence"
    committed = service.metrics.records
    with ElasticsearchSink.from_url(store.url) as sink:  # each record once
        assert (sink.count("slot"), sink.count("allocation"), sink.count("job")) == (
            committed["slot"],
            committed["allocation"],
            committed["job"],
        )
