"""The collector with an Elasticsearch store that fails (issue 54, points 3 and 4), as processes:
the collector, osmem-server, and in between :mod:`tests.collector.fake_store`, a proxy that can
reset every connection, answer every request with an error, or refuse a body over a size (413)
as Elasticsearch does over its ``http.max_content_length``.

An outage costs the collector no memory; a record too large for the store alone is set aside,
with the reason, and every other record flows, a bulk the store finds too large being halved;
/healthz says when records are set aside and when delivery is stuck.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest

from collector.sinks.elasticsearch import ElasticsearchSink

from ..conftest import fake_store
from .conftest import Collector, record

JSON = {"Content-Type": "application/json"}


@pytest.fixture
def proxied(osmem_clone: Any) -> Iterator[tuple[str, str]]:
    """osmem-server with the templates installed, behind a fake store in ``proxy`` mode: the
    proxy's URL (the collector's store) and osmem's."""
    with ElasticsearchSink(osmem_clone.url) as sink:
        sink.install_templates()
    with fake_store("proxy", upstream=osmem_clone.url) as proxy:
        yield proxy, osmem_clone.url


def switch(proxy: str, mode: str) -> None:
    assert httpx.post(f"{proxy}/_fake/mode", content=mode.encode()).status_code == 200


def post(c: Collector, docs: list[dict[str, Any]], probe: str = "p1") -> None:
    reply = httpx.post(f"{c.url}/v1/records", content=orjson.dumps(docs), headers=JSON | c.auth(probe), timeout=60)
    assert reply.status_code == 202, reply.text


def stored(url: str, expect: int, timeout_s: float = 60) -> int:
    """The job records in the store, once there are ``expect`` (or the time is up)."""
    deadline = time.monotonic() + timeout_s
    with ElasticsearchSink(url) as store:
        while (n := store.count("job")) < expect and time.monotonic() < deadline:
            time.sleep(0.2)
    return n


def health(c: Collector) -> dict[str, Any]:
    reply = httpx.get(f"{c.url}/healthz")
    doc: dict[str, Any] = reply.json()
    doc["code"] = reply.status_code
    return doc


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) / 1024 for line in status if line.startswith("VmRSS:"))


def padded(i: int | str, probe: str, fields: int) -> dict[str, Any]:
    """A job record with ``fields`` strings of 30,000 characters (a field holds at most 32,766
    bytes): about 30 KB a field."""
    return record(i, probe, **{f"pad{k}": chr(97 + k % 26) * 30_000 for k in range(fields)})


@pytest.mark.slow
def test_an_outage_costs_the_collector_no_memory(start_collector: Any, proxied: tuple[str, str]) -> None:
    # Records of 150 KB in batches of 40 (6 MB bulks), the store resetting every connection,
    # the probe sending: before, each attempt left two copies of its bulk for the cyclic
    # garbage collector, which in the collector seldom ran a full pass (issue 54: 1 KB records,
    # 225 -> 768 MB in 420 s; 7.8 MB records, 155 MB -> 4.8 GB in 150 s).
    proxy, direct = proxied
    c = start_collector(store=proxy, flush_batch_size=40)
    assert c.process is not None
    post(c, [padded(i, "p1", 5) for i in range(20)])
    assert stored(direct, 20) == 20
    switch(proxy, "reset")
    for part in range(3):  # a request's body is at most 8 MiB
        post(c, [padded(f"down-{part}-{i}", "p1", 5) for i in range(40)])
    sent = 140

    def send_for(seconds: float) -> None:
        nonlocal sent
        until = time.monotonic() + seconds
        while time.monotonic() < until:
            post(c, [padded(f"{sent}-{i}", "p1", 5) for i in range(2)])
            sent += 2
            time.sleep(2)

    send_for(15)  # the first bulks fail and are retried: the flusher's working set is there
    before = rss_mb(c.process.pid)
    send_for(40)
    after = rss_mb(c.process.pid)
    assert after - before < 150, f"{before:.0f} MB -> {after:.0f} MB over 40 s of outage"
    switch(proxy, "proxy")  # the store is back: everything waiting is delivered
    assert stored(direct, sent, timeout_s=120) == sent


def test_a_record_too_large_for_the_store_is_set_aside_and_the_rest_flows(
    start_collector: Any, proxied: tuple[str, str]
) -> None:
    # The store takes bodies of 1 MB at most. Before: the first bulk (1.5 MB of one record,
    # 2.4 MB of eight more, another probe's 200 behind them) got 413, was sent again as it was
    # every flush, nothing was stored and /healthz said ok.
    proxy, direct = proxied
    switch(proxy, "limit:1000000")
    c = start_collector(store=proxy)
    post(c, [padded("huge", "p1", 50)])
    post(c, [padded(i, "p1", 10) for i in range(8)])
    post(c, [record(i, "p2") for i in range(200)], "p2")
    assert stored(direct, 208) == 208
    deadline = time.monotonic() + 20
    while (doc := health(c))["outbox"] != {
        **doc["outbox"],
        "depth": 0,
        "dead_letters": 1,
    } and time.monotonic() < deadline:
        time.sleep(0.1)
    assert doc["code"] == 200 and doc["status"] == "degraded"
    assert doc["outbox"]["depth"] == 0 and doc["outbox"]["dead_letters"] == 1
    letter = doc["outbox"]["last_dead_letter"]
    assert letter["kind"] == "job" and re.fullmatch("[0-9a-f]{32}", letter["id"])  # the probe's, within its name
    assert letter["error"].startswith(
        f"job document {letter['id']}: too large for the store: a bulk request of it alone"
    )
    assert "413" in letter["error"]
    (said,) = doc["degraded"]
    assert said.startswith(
        f"1 record(s) set aside: the store refused them for good (dead letters in the outbox); the last, job "
        f"{letter['id']} at {letter['failed_at']}: job document"
    )
    assert "flush: {'job': 1} record(s) set aside" in c.log
    requests = httpx.get(f"{proxy}/_fake/requests").json()
    assert 413 in [r["status"] for r in requests]
    assert all(r["bytes"] <= 1_000_000 for r in requests if r["status"] == 200)
    metrics = httpx.get(f"{c.url}/metrics").text
    assert 'fairacct_collector_outbox_dead_letters{kind="job"} 1' in metrics


def test_healthz_says_when_delivery_is_stuck(start_collector: Any, proxied: tuple[str, str]) -> None:
    # The store answers every request, with 401 (a revoked API key): before, /healthz said ok
    # until store_stale_s (15 minutes) had passed.
    proxy, direct = proxied
    c = start_collector(store=proxy)
    post(c, [record("first", "p1")])  # the templates checked, the key revoked after
    assert stored(direct, 1) == 1
    switch(proxy, "status:401")
    post(c, [record(i, "p1") for i in range(10)])
    deadline = time.monotonic() + 20
    while not (doc := health(c))["delivery"]["stuck"] and time.monotonic() < deadline:
        time.sleep(0.1)
    assert doc["code"] == 200 and doc["status"] == "degraded"
    assert doc["delivery"]["stuck_rounds"] >= 3 and doc["delivery"]["stuck_since"] is not None
    (said,) = [d for d in doc["degraded"] if d.startswith("delivery")]  # the summaries fail too
    assert re.fullmatch(
        r"delivery stuck: the store took none of the 10 record\(s\) waiting in \d+ flush rounds in a row, since "
        # after a failed flush the gate checks the templates again: the refusal may be that read's
        r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ: (job: )?elasticsearch http://127\.0\.0\.1:\d+: "
        r"(bulk write of 10 job documents|reading index template fairacct-\w+) failed: 401 security_exception: "
        r"refused by the fake store",
        said,
    ), said
    stuck = re.search(r"^fairacct_collector_flush_stuck_rounds (\d+)$", httpx.get(f"{c.url}/metrics").text, re.M)
    assert stuck is not None and int(stuck[1]) >= 3
    switch(proxy, "proxy")
    assert stored(direct, 11) == 11
    deadline = time.monotonic() + 20
    while (doc := health(c))["delivery"]["stuck"] and time.monotonic() < deadline:
        time.sleep(0.1)
    assert doc["delivery"] == {"stuck": False, "stuck_rounds": 0, "stuck_since": None}
    assert not [
        d for d in doc["degraded"] if d.startswith("delivery")
    ]  # the summaries' failure stays till their next run
