"""One INFO line per request in the collector's log (issue 25 item 8), its fields bounded."""

from __future__ import annotations

import re
import time

import httpx

from collector.server.replies import ACCESS_PATH_CHARS, _bounded

from .conftest import Collector, record


def test_each_request_is_one_access_line(shared_collector: Collector) -> None:
    c = shared_collector
    before = c.log
    ok = httpx.post(f"{c.url}/v1/records", json=[record("access-1", "p1")], headers=c.auth("p1"))
    assert ok.status_code == 202
    denied = httpx.post(f"{c.url}/v1/records", json=[record("access-2", "p1")], headers={"Authorization": "Bearer x"})
    assert denied.status_code == 401
    assert httpx.get(f"{c.url}/healthz").status_code in (200, 503)
    deadline = time.monotonic() + 10
    while c.log.count("fairacct.collector.access") - before.count("fairacct.collector.access") < 3:
        assert time.monotonic() < deadline, c.log[len(before) :]
        time.sleep(0.05)
    lines = [line for line in c.log[len(before) :].splitlines() if "fairacct.collector.access" in line]
    assert re.search(r" INFO 127\.0\.0\.1 POST /v1/records 202 \d+ [\d.]+ ms$", lines[0]), lines
    assert re.search(r" INFO 127\.0\.0\.1 POST /v1/records 401 \d+ [\d.]+ ms unauthorized$", lines[1]), lines
    assert re.search(r" INFO 127\.0\.0\.1 GET /healthz (200|503) \d+ [\d.]+ ms", lines[2]), lines
    assert "Bearer" not in "".join(lines) and "token-one" not in "".join(lines)


def test_a_path_is_shown_printable_and_bounded() -> None:
    assert _bounded("/v1/records") == "/v1/records"
    assert _bounded("/a b\u00e9") == "/a%20b\\xe9"
    long = _bounded("/" + "x" * 10_000)
    assert len(long) == ACCESS_PATH_CHARS + 3 and long.endswith("...")
