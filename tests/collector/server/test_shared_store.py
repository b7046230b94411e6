"""Two collector processes on one store (issue 54, point 11), as config/example.toml says a site
may run them behind a load balancer: the embedded store (one file on their one host) and
Elasticsearch (osmem-server). A record corrected through one collector is not undone by the
older copy the other flushes later, and the two collectors' summary runs take turns instead of
deleting, as stale, the groups the other found, or writing older sums over the other's."""

from __future__ import annotations

import signal
import threading
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from collector.records import owned_id
from collector.sinks.base import Sink
from collector.sinks.elasticsearch import ElasticsearchSink
from collector.sinks.sqlite import EmbeddedStore
from collector.summaries.run import LEASE

from .conftest import Collector, record


@pytest.fixture(params=["sqlite", "osmem"])
def shared_store(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The URL of one store for two collectors: an embedded store file of their host, or an
    osmem clone with the templates installed."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'shared.sqlite'}"
    url: str = request.getfixturevalue("osmem_url")
    with ElasticsearchSink(url) as es:
        es.install_templates()
    return url


def opened(url: str) -> Sink:
    return (
        EmbeddedStore(url.removeprefix("sqlite:///"), create=False)
        if url.startswith("sqlite")
        else ElasticsearchSink(url)
    )


def healthz(c: Collector) -> dict[str, Any]:
    answer: dict[str, Any] = httpx.get(f"{c.url}/healthz", timeout=10).json()
    return answer


def post(c: Collector, docs: list[dict[str, Any]]) -> None:
    reply = httpx.post(f"{c.url}/v1/records", json=docs, headers=c.auth("p1"), timeout=30)
    assert reply.status_code == 202, reply.text


def drained(*collectors: Collector, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    for c in collectors:
        while (health := healthz(c))["outbox"]["depth"] or health["last_flush"] is None:
            assert time.monotonic() < deadline, c.log
            time.sleep(0.1)


QUIET = {"summaries_recent_days": 0, "summaries_nightly_days": 0}


def test_a_correction_through_one_collector_is_not_undone_by_the_older_copy_of_the_other(
    start_collector: Any, shared_store: str
) -> None:
    """Collector a takes 40 jobs and is killed before it flushes them (its flusher waits 30 s);
    the probe sends them corrected (twice the cores, half moved to December) through b, which
    stores them; a, started again, flushes its older copies: the store keeps the corrections,
    each job once, and a's /metrics counts its copies as superseded."""
    a = start_collector("a", store=shared_store, flush_every_s=30, **QUIET)
    b = start_collector("b", store=shared_store, **QUIET)
    drained(a)  # its first round is done: the next is 30 s away
    first = [record(i, "p1", cpus=1.0, timestamp="2026-11-30T23:00:00Z") for i in range(40)]
    post(a, first)
    assert a.stop(signal.SIGKILL) == -signal.SIGKILL  # its copies wait in its outbox
    corrected = [dict(d, cpus=2.0, timestamp="2026-12-01T01:00:00Z" if i % 2 else d["timestamp"])
                 for i, d in enumerate(first)]  # fmt: skip
    post(b, corrected)
    drained(b)
    a.start()  # its first round flushes the older copies
    drained(a)
    metrics = httpx.get(f"{a.url}/metrics", timeout=10).text
    assert 'fairacct_collector_records_stored_total{kind="job"} 40' in metrics
    assert 'fairacct_collector_records_superseded_total{kind="job"} 40' in metrics  # acknowledged, not written
    with opened(shared_store) as store:
        docs = store.query("job")
        assert store.count("job") == 40
    assert all(d["id"] == owned_id("p1", d["source_id"]) for d in docs)
    assert {d["source_id"]: (d["cpus"], d["timestamp"]) for d in docs} == {
        d["id"]: (2.0, d["timestamp"]) for d in corrected
    }


def day_iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@pytest.mark.slow
def test_two_collectors_summarizing_one_store_never_lose_a_group(start_collector: Any, shared_store: str) -> None:
    """Both collectors re-summarize the last 4 days ten times a second while jobs over the last 3
    arrive through both, 20 at a time for about 12 s, each batch of a user of its own: new groups
    all along, as when a run read the store before the other's. Watched all along, no summary
    group the store had is ever gone and no group's count of jobs ever falls; once the jobs stop,
    the summaries count each job once; a run finding the lease another's is put off (/healthz:
    ``deferred``; a third writer holds it for a second mid-way, so that both meet it)."""
    cadence = {"summaries_recent_days": 4, "summaries_every_s": 0.1, "summaries_nightly_days": 0}
    a = start_collector("a", store=shared_store, **cadence)
    b = start_collector("b", store=shared_store, **cadence)
    now = time.time()
    jobs = [
        record(i, "p1", user=f"u{i // 20}", end=now - 3600 - (i % 3) * 86400, walltime_s=600.0,
               timestamp=day_iso(now - 3600 - (i % 3) * 86400))
        for i in range(1200)
    ]  # fmt: skip
    seen: dict[tuple[str, str], int] = {}
    lost: list[str] = []
    sending = threading.Event()
    sending.set()

    def watch() -> None:
        with opened(shared_store) as store:  # a reader of its own, as a dashboard
            while sending.is_set():
                groups = {(d["day_iso"][:10], d["user"]): d["n_jobs"] for d in store.query("summary", limit=10_000)
                          if d["record_kind"] == "job"}  # fmt: skip
                for key, n in seen.items():
                    if groups.get(key, 0) < n:
                        lost.append(f"{key}: {n} jobs, then {groups.get(key, 'no summary')}")
                seen.update(groups)
                time.sleep(0.05)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        for start in range(0, len(jobs), 20):
            post(a if start % 40 else b, jobs[start : start + 20])
            if start == 600:  # a third writer (fairacct summarize) holds the lease for a second: both put off
                with opened(shared_store) as store:
                    lease = store.take_lease(LEASE, "summarize", 1.0, now=time.time())
                    while not lease.held_by("summarize", time.time()):  # a run holds it: taken once it let go
                        time.sleep(0.01)
                        lease = store.take_lease(LEASE, "summarize", 1.0, now=time.time())
            time.sleep(0.2)
        drained(a, b)
        expected = Counter((d["timestamp"][:10], d["user"]) for d in jobs)
        deadline = time.monotonic() + 60
        while {k: v for k, v in dict(seen).items() if v} != dict(expected):
            assert time.monotonic() < deadline, f"summaries {len(seen)} groups, expected {len(expected)}"
            time.sleep(0.2)
    finally:
        sending.clear()
        watcher.join()
    assert lost == []
    turns = [healthz(c)["summaries"] for c in (a, b)]
    assert all(t["last_run"] and t["deferred"] > 0 for t in turns), turns
    assert all(t["failures"] == 0 and t["crashes"] == 0 for t in turns), turns
