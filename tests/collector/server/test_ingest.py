"""POST /v1/records against the collector as a process: every status, gzip and NDJSON, records
refused one by one, and what /healthz, /metrics, /stats and /openapi.json show."""

from __future__ import annotations

import gzip
import re
import signal
import time
from typing import Any

import httpx
import orjson
import pytest

from collector.sinks.elasticsearch import ElasticsearchSink
from collector.sinks.sqlite import EmbeddedStore

from ..conftest import start_server, stop_server
from .conftest import Collector, record

JSON = {"Content-Type": "application/json"}


def post(c: Collector, body: bytes, probe: str | None = "p1", **headers: str) -> httpx.Response:
    auth = c.auth(probe) if probe else {}
    return httpx.post(f"{c.url}/v1/records", content=body, headers=JSON | auth | headers, timeout=30)


def stored(c: Collector, kind: str = "job", expect: int | None = None) -> list[dict[str, Any]]:
    """The store's records of a kind, once the flusher has delivered ``expect`` of them."""
    deadline = time.monotonic() + 20
    while True:
        path = c.root / "collector" / "store.sqlite"
        docs = EmbeddedStore(path).query(kind) if path.exists() else []
        if expect is None or len(docs) >= expect or time.monotonic() > deadline:
            return docs
        time.sleep(0.1)


def drained(c: Collector) -> None:
    """Wait until the collector's outbox is empty (the flusher delivered everything)."""
    deadline = time.monotonic() + 20
    while httpx.get(f"{c.url}/healthz").json()["outbox"]["depth"] and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(0.3)  # the depth is counted after the round that stored the records


def test_a_batch_is_durable_before_202_and_reaches_the_store(shared_collector: Collector) -> None:
    c = shared_collector
    docs = [record(i, "p1") for i in range(500)]
    reply = post(c, orjson.dumps(docs))
    assert (reply.status_code, reply.json()) == (202, {"accepted": 500, "rejected": []})
    # gzip and NDJSON are the same batch; re-sent records are stored once
    reply = post(c, gzip.compress(orjson.dumps(docs)), **{"Content-Encoding": "gzip"})
    assert reply.status_code == 202
    ndjson = b"\n".join(orjson.dumps(d) for d in docs[:10]) + b"\n\n"
    reply = post(c, gzip.compress(ndjson), **{"Content-Type": "application/x-ndjson", "Content-Encoding": "gzip"})
    assert reply.json() == {"accepted": 10, "rejected": []}
    assert len(stored(c, expect=500)) == 500
    health = httpx.get(f"{c.url}/healthz").json()
    assert health["status"] == "ok" and health["last_store_success"]


def test_records_are_refused_one_by_one_with_their_index_and_reason(shared_collector: Collector) -> None:
    c = shared_collector
    docs: list[Any] = [record(f"r{i}", "p1") for i in range(6)]
    docs[1] = dict(docs[1], kind="jobs")
    docs[3] = dict(docs[3], timestamp="yesterday")
    docs[4] = "not a record"
    docs[5] = dict(docs[5], schema_version="1")  # a newer one (2) is refused whole: test_rolling_upgrade.py
    reply = post(c, orjson.dumps(docs))
    body = reply.json()
    assert reply.status_code == 400 and body["accepted"] == 2
    assert [(r["index"], r["id"]) for r in body["rejected"]] == [
        (1, "p1-job-r1"),
        (3, "p1-job-r3"),
        (4, None),
        (5, "p1-job-r5"),
    ]
    reasons = [r["reason"] for r in body["rejected"]]
    assert reasons[0] == (
        "'kind' must be one of slot, allocation, job, fairshare, fairness, gap, priority, got 'jobs' (summaries are "
        "made by the collector, Gratia records come from Gratia probes to /gratia-servlets/rmi)"
    )
    assert reasons[1] == (
        "'timestamp' must be an ISO-8601 UTC time like '2026-11-21T14:00:00Z', got 'yesterday' (not an ISO-8601 time)"
    )
    assert reasons[2] == "expected a JSON object (a record), got 'not a record'"
    assert reasons[3] == "'schema_version' must be 0 or 1 (this collector's), got '1'"
    drained(c)
    ids = {d["source_id"] for d in stored(c)}  # stored under p1's ids, its own ids kept
    assert {"p1-job-r0", "p1-job-r2"} <= ids and not {"p1-job-r1", "p1-job-r3", "p1-job-r5"} & ids
    # NDJSON: a line that is not JSON is one refused record, counted among the non-empty lines
    lines = b"\n".join([orjson.dumps(record("r7", "p1")), b"", b"{oops", orjson.dumps(record("r8", "p1"))])
    reply = post(c, lines, **{"Content-Type": "application/x-ndjson"})
    assert reply.status_code == 400 and reply.json()["accepted"] == 2
    assert [(r["index"], r["reason"][:8]) for r in reply.json()["rejected"]] == [(1, "not JSON")]


@pytest.mark.parametrize(
    ("probe", "headers", "body", "status", "message"),
    [
        (None, {}, b"[]", 401, "no bearer token: send 'Authorization: Bearer <token>' with your probe's token"),
        (None, {"Authorization": "Bearer token-on"}, b"[]", 401, "the bearer token is not one this collector knows"),
        (None, {"Authorization": "Basic dG9rZW4tb25l"}, b"[]", 401, "no bearer token"),
        ("p1", {}, orjson.dumps([record(1, "p2")]), 403,
         "record 0 is in the name of probe 'p2', but the token is 'p1''s; a probe may send only its own records"),
        ("p1", {}, b"{", 400, "the body is not JSON (unexpected end of data"),
        ("p1", {}, b'{"id": 1}', 400,
         "expected a JSON array of records (or NDJSON with Content-Type application/x-ndjson), got a JSON object"),
        ("p1", {"Content-Encoding": "gzip"}, b"not gzip", 400, "the body is not valid gzip"),
        ("p1", {"Content-Encoding": "gzip"}, gzip.compress(b"[]", mtime=0)[:-6], 400, "the gzip body is truncated"),
        ("p1", {"Content-Encoding": "br"}, b"[]", 415, "Content-Encoding must be gzip or identity, got 'br'"),
        ("p1", {"Content-Type": "text/csv"}, b"[]", 415,
         "Content-Type must be application/json (an array) or application/x-ndjson, got 'text/csv'"),
        ("p1", {}, b"[" + b" " * 270_000 + b"]", 413,
         "the body is 270002 bytes, over the limit of 262144; send smaller batches"),
        ("p1", {"Content-Encoding": "gzip"}, gzip.compress(b"[" + b" " * 10_000_000 + b"]", mtime=0), 413,
         "the body decompresses to over the limit of 262144 bytes"),
    ],
)  # fmt: skip
def test_requests_refused_whole_store_nothing(
    shared_collector: Collector, probe: str | None, headers: dict[str, str], body: bytes, status: int, message: str
) -> None:
    c = shared_collector
    reply = post(c, body, probe, **headers)
    assert reply.status_code == status, reply.text
    assert reply.json()["error"].startswith(message) and "accepted" not in reply.json()
    if status == 401:
        assert reply.headers["WWW-Authenticate"] == 'Bearer realm="fairacct"'
    assert "token-one" not in c.log and "token-two" not in c.log


def test_a_full_outbox_answers_503_and_keeps_nothing(start_collector: Any) -> None:
    # the store (Elasticsearch) goes away: records pile up in the outbox until its limit
    server = start_server()
    try:
        url = server.url
        with ElasticsearchSink.from_url(url) as sink:
            sink.install_templates()
        # backpressure_depth too: a store that takes nothing is an outage (503), not a slow store (429)
        c = start_collector(store=url, max_outbox_depth=50, backpressure_depth=10, store_stale_s=1)
    finally:
        stop_server(server)
    assert post(c, orjson.dumps([record(i, "p1") for i in range(40)])).status_code == 202
    reply = post(c, orjson.dumps([record(i, "p1") for i in range(40, 60)]))
    assert reply.status_code == 503 and reply.headers["Retry-After"] == "10"
    assert re.fullmatch(  # 40, or more while the flusher's count and a commit overlap
        r"the collector's outbox holds (40|80) records and may hold 50: the store is not keeping up; retry later",
        reply.json()["error"],
    )
    time.sleep(1.5)
    health = httpx.get(f"{c.url}/healthz")
    assert health.status_code == 503 and health.json()["status"] == "store stale"
    assert health.json()["outbox"]["depth"] >= 40
    c.stop(signal.SIGKILL)  # the flusher is waiting out the store's retries


def test_metrics_stats_and_openapi(start_collector: Any) -> None:
    c = start_collector()
    post(c, orjson.dumps([record(i, "p1") for i in range(3)] + [{"id": "x"}]))
    post(c, b"[]", None)
    post(c, orjson.dumps([record(1, "p2")]), "p2")
    assert httpx.get(f"{c.url}/stats").json() == {"Records": 5, "RecordErrors": 1, "Requests": 3, "RequestErrors": 2}
    text = httpx.get(f"{c.url}/metrics").text
    for line in (
        'fairacct_collector_records_total{endpoint="records",probe="p1"} 3',
        'fairacct_collector_records_total{endpoint="records",probe="p2"} 1',
        'fairacct_collector_record_errors_total{endpoint="records",probe="p1"} 1',
        'fairacct_collector_requests_total{endpoint="records",code="401"} 1',
        'fairacct_collector_request_errors_total{endpoint="records",reason="unauthorized"} 1',
        'fairacct_collector_request_errors_total{endpoint="records",reason="records_refused"} 1',
        'fairacct_collector_request_duration_seconds_count{endpoint="records"} 3',
        "# TYPE fairacct_collector_flush_duration_seconds histogram",
        "# TYPE fairacct_collector_outbox_depth gauge",
    ):
        assert line in text, line
    assert "token-one" not in c.log and "token-two" not in c.log
    document = httpx.get(f"{c.url}/openapi.json").json()
    assert document["openapi"] == "3.1.0" and set(document["paths"]) == {
        "/v1/records",
        "/gratia-servlets/rmi",
        "/healthz",
        "/metrics",
        "/stats",
        "/openapi.json",
    }


def test_tokens_are_read_again_without_a_restart(start_collector: Any) -> None:
    c = start_collector()
    (c.root / "tokens" / "p3").write_text("token-three")
    (c.root / "tokens" / "p1").unlink()
    time.sleep(2.5)
    assert post(c, orjson.dumps([record(1, "p3")]), None, Authorization="Bearer token-three").status_code == 202
    assert post(c, b"[]", "p1").status_code == 401


def test_the_process_refuses_a_bad_start(tmp_path: Any) -> None:
    import subprocess

    from .conftest import FAIRACCT

    config = tmp_path / "c.toml"
    config.write_text(f'[collector]\ntoken_dir = "{tmp_path}/none"\n')
    proc = subprocess.run(
        [FAIRACCT, "collector", "serve", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().endswith(f"collector token_dir: {tmp_path}/none: no such directory")
    config.write_text('[store]\nurl = "collector+http://127.0.0.1:1"\n')
    proc = subprocess.run(
        [FAIRACCT, "collector", "serve", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2 and "the collector needs a store of its own" in proc.stderr
