"""A collector starts while its store is down (issue 54, point 6): ``fairacct collector serve``
against an Elasticsearch URL where nothing listens, or where a server answers every request
503, starts all the same and answers 202 (the records durable in its outbox); /healthz and
/metrics say that the store is unreachable and its templates unchecked. Once osmem-server (a
real HTTP server) answers there, the flusher checks the templates (installs them with
``install_templates``), moves the indices an older template made, and sends what waited;
nothing goes into an index before its template is right, summaries included. A store that
answers and refuses (credentials, templates missing that may not be installed) stops the start.
"""

from __future__ import annotations

import contextlib
import http.server
import json
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from osmem_server import OsmemServer

from collector.sinks.elasticsearch import ElasticsearchSink
from tests.htcondor_pool import refusing_port

from ..conftest import start_server, stop_server
from ..sinks.test_index_migration import job, stored, written_the_old_way
from .conftest import Collector, free_port, record


class Front:
    """An HTTP server on 127.0.0.1 standing for the store: while :attr:`target` is None it answers
    every request ``status`` (Elasticsearch's body for it); once set, it forwards each request
    to that URL (an osmem-server) and its answer back."""

    def __init__(self, status: int = 503) -> None:
        self.status = status
        self.target: str | None = None
        self.asked = 0
        self.client = httpx.Client(timeout=30)
        front = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _answer(self) -> None:
                front.asked += 1
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if front.target is None:
                    reason = {503: "the cluster is recovering", 401: "unable to authenticate user [fairacct]"}
                    kind = "security_exception" if front.status == 401 else "unavailable_shards_exception"
                    error = {"type": kind, "reason": reason.get(front.status, "refused")}
                    self._reply(front.status, {"content-type": "application/json"}, json.dumps(
                        {"error": {**error, "root_cause": [error]}, "status": front.status}).encode())  # fmt: skip
                    return
                sent = {k: v for k, v in self.headers.items() if k.lower() in ("content-type", "accept")}
                answer = front.client.request(self.command, front.target + self.path, content=body, headers=sent)
                kept = {k: v for k, v in answer.headers.items() if k.lower() not in _HOP}
                self._reply(answer.status_code, kept, answer.content)

            def _reply(self, status: int, headers: dict[str, str], body: bytes) -> None:
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                self._answer()

            def do_PUT(self) -> None:
                self._answer()

            def do_POST(self) -> None:
                self._answer()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.client.close()


_HOP = {"content-length", "transfer-encoding", "connection", "keep-alive"}


@pytest.fixture
def front() -> Iterator[Front]:
    f = Front()
    yield f
    f.close()


def until(what: Callable[[], bool], c: Collector, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not what():
        assert time.monotonic() < deadline, c.log
        time.sleep(0.1)


def health(c: Collector) -> dict[str, Any]:
    reply = httpx.get(f"{c.url}/healthz")
    assert reply.status_code == 200, reply.text  # degraded, never 503: a load balancer keeps it
    doc: dict[str, Any] = reply.json()
    return doc


def gauges(c: Collector) -> dict[str, float]:
    text = httpx.get(f"{c.url}/metrics").text
    return {m[1]: float(m[2]) for m in re.finditer(r"^fairacct_collector_(store_\w+) (\S+)$", text, re.M)}


def indices(url: str) -> list[str]:
    listed = httpx.get(f"{url}/_cat/indices?format=json").json()
    return sorted(i["index"] for i in listed if i["index"].startswith("fairacct-"))


def summarized(url: str) -> list[int]:
    """The jobs each summary of job records in the store counts."""
    with ElasticsearchSink(url) as es:
        return [s["n_jobs"] for s in es.query("summary") if s["record_kind"] == "job"] if indices(url) else []


def post(c: Collector, docs: list[dict[str, Any]]) -> None:
    reply = httpx.post(f"{c.url}/v1/records", json=docs, headers=c.auth("p1"))
    assert (reply.status_code, reply.json()) == (202, {"accepted": len(docs), "rejected": []}), reply.text


@pytest.mark.parametrize(
    ("outage", "install"), [("refused", True), ("refused", False), ("503", True), ("503", False), ("hangs", True)]
)
def test_the_collector_starts_while_its_store_is_down_and_sends_once_it_answers(
    start_collector: Any, front: Front, outage: str, install: bool
) -> None:
    hung = socket.create_server(("127.0.0.1", 0)) if outage == "hangs" else None  # takes connections, never answers
    refusing = contextlib.ExitStack()  # a port merely free now may be another test's server's by the time it is used
    if hung is not None:
        store = f"http://127.0.0.1:{hung.getsockname()[1]}"
    else:
        store = front.url if outage == "503" else f"http://127.0.0.1:{refusing.enter_context(refusing_port())}"
    c = start_collector(store=store, store_settings={"install_templates": install},
                        summaries_recent_days=2, summaries_nightly_days=0, summaries_every_s=1)  # fmt: skip
    assert "the collector starts all the same" in c.log
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    post(c, [record(i, "p1", timestamp=now) for i in range(3)])

    until(lambda: health(c)["status"] == "degraded", c)
    doc = health(c)
    assert doc["outbox"]["depth"] == 3 and (doc["store_reachable"], doc["templates_checked"]) == (False, False)
    assert doc["degraded"][0].startswith("the store is unreachable (elasticsearch ")
    assert "its index templates are unchecked" in doc["degraded"][0]
    why = {"refused": "Connection error", "503": "503 unavailable_shards_exception", "hangs": "timed out"}[outage]
    assert why in doc["last_error"] and why in doc["degraded"][0]
    assert doc["summaries"]["waiting_for_store"] and doc["summaries"]["failures"] == 0
    assert gauges(c) == {"store_reachable": 0.0, "store_templates_checked": 0.0}
    if outage == "503":
        assert front.asked >= 2  # asked at start, then by the flusher

    server: OsmemServer | None = None
    try:
        if outage == "503":
            server = start_server()
            front.target = server.url  # the store answers now, at the collector's URL, and is empty
            url = server.url
        else:
            if hung is not None:
                hung.close()  # the connections waiting on it are reset
            refusing.close()  # the port given up the moment the store takes it
            server = start_server(store.removeprefix("http://"))
            url = store
        if not install:  # answers, and the templates are not there: nothing goes in, said loudly
            until(lambda: health(c)["store_reachable"] is True, c)
            doc = health(c)
            assert (
                doc["degraded"][0].startswith("the store refuses: ")
                and "index templates missing for " in (doc["degraded"][0])
            )
            assert "run `fairacct mappings install` first" in doc["degraded"][0]
            assert gauges(c) == {"store_reachable": 1.0, "store_templates_checked": 0.0}
            time.sleep(1.0)  # five flush rounds, a summarizer's look every second
            assert indices(url) == [] and health(c)["outbox"]["depth"] == 3
            assert "ERROR flush: " in c.log
            with ElasticsearchSink(url) as es:
                es.install_templates()  # what `fairacct mappings install` does
        until(lambda: health(c)["outbox"]["depth"] == 0, c)
        until(lambda: summarized(url) == [3], c)  # once the templates were there, and the records
        doc = health(c)
        assert (doc["status"], doc["store_reachable"], doc["templates_checked"]) == ("ok", True, True)
        assert gauges(c) == {"store_reachable": 1.0, "store_templates_checked": 1.0}
        with ElasticsearchSink(url) as es:
            assert es.count("job") == 3 and es.check_templates().ok
            types = es.field_types("job")
            assert types and all(t["user"] == "keyword" and t["end"] == "long" for t in types.values())
            assert all(t["n_jobs"] == "long" for t in es.field_types("summary").values())
        assert ("installed index templates fairacct-" in c.log) is install
        assert "the store answers and its index templates are right; sending what waited" in c.log
    finally:
        refusing.close()
        if hung is not None:
            hung.close()
        if server is not None:
            front.target = None
            stop_server(server)


def test_the_indices_an_older_template_made_are_moved_once_the_store_answers(
    start_collector: Any, front: Front
) -> None:
    """The move the collector makes at start when the store answers (test_index_migration) is
    made by the flusher when the store answered 503 at start: before any record is sent."""
    server = start_server()
    try:
        written_the_old_way(server.url)  # 30 jobs in October, 20 in November, under the previous template
        before = stored(server.url)
        c = start_collector(store=front.url, store_settings={"install_templates": True})
        new = [{**job(i, "11"), "probe": "p1"} for i in (50, 51)]
        post(c, new)
        assert health(c)["outbox"]["depth"] == 2 and "store migrated" not in c.log
        front.target = server.url
        until(lambda: health(c)["outbox"]["depth"] == 0, c)
        lines = re.findall(r"fairacct\.store WARNING store migrated: (.*)", c.log)
        assert [line.split(":")[0] for line in lines] == ["fairacct-job-2026.10", "fairacct-job-2026.11"]
        assert c.log.index("store migrated: fairacct-job-2026.11") < c.log.index("sending what waited")
        after = stored(server.url)
        assert len(after) == 52 and {k: v for k, v in after.items() if k in before} == before
        aliases = httpx.get(f"{server.url}/_alias/fairacct-job-*").json()
        assert sorted(aliases) == ["fairacct-job-2026.10-v6", "fairacct-job-2026.11-v6"]  # the new ones went there
    finally:
        front.target = None
        stop_server(server)


@pytest.mark.parametrize(
    ("refusal", "said"),
    [
        ("401", r"elasticsearch {url}: reading index template fairacct-\w+ failed: 401 security_exception: unable "),
        ("no templates", r"{url}: index templates missing for .*: run `fairacct mappings install` first"),
    ],
)
def test_a_store_that_answers_and_refuses_stops_the_start(tmp_path: Any, refusal: str, said: str) -> None:
    front = Front(401)
    server = start_server() if refusal == "no templates" else None
    try:
        url = server.url if server is not None else front.url
        c = Collector(tmp_path, free_port(), {"p1": "token-one"}, {"flush_every_s": 0.2}, url)
        with pytest.raises(AssertionError, match="the collector exited with 1") as failed:
            c.start()
        message = str(failed.value)
        assert re.search("fairacct: " + said.format(url=re.escape(url)), message), message
        assert "the store answered and refused, which no wait mends: the collector does not start" in message
        assert "collector listening" not in message
    finally:
        front.close()
        if server is not None:
            stop_server(server)
