"""One INFO line per request in the collector's log (issue 25 item 8), its fields bounded."""

from __future__ import annotations

import re
import signal
import time
from typing import Any

import httpx

from collector.server.replies import ACCESS_PATH_CHARS, bounded_path

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


def test_a_path_is_shown_printable_andbounded_path() -> None:
    assert bounded_path("/v1/records") == "/v1/records"
    assert bounded_path("/a b\u00e9") == "/a%20b\\xe9"
    long = bounded_path("/" + "x" * 10_000)
    assert len(long) == ACCESS_PATH_CHARS + 3 and long.endswith("...")


def _requests_total(c: Collector, endpoint: str, code: int) -> float:
    """The collector's own count of answers ``code`` at ``endpoint``, as /metrics gives it."""
    text = httpx.get(f"{c.url}/metrics").text
    found = re.search(
        rf'^fairacct_collector_requests_total\{{endpoint="{endpoint}",code="{code}"\}} (\S+)$', text, re.M
    )
    return float(found.group(1)) if found else 0.0


def test_a_wrong_path_or_method_is_logged_and_counted(shared_collector: Collector) -> None:
    """Issue 39, point 4: Starlette answered 404 and 405 itself, before any of the collector's
    code: no access line, nothing in requests_total. Now each is one access line and counted,
    with a body naming what the collector answers."""
    c = shared_collector
    before = c.log
    counts = (_requests_total(c, "unknown", 404), _requests_total(c, "records", 405))
    wrong = httpx.post(f"{c.url}/v2/records", json=[record("access-3", "p1")], headers=c.auth("p1"))
    assert wrong.status_code == 404
    assert wrong.json()["error"].startswith("no such path /v2/records; this collector answers /v1/records, ")
    slash = httpx.post(f"{c.url}/v1/records/", json=[record("access-4", "p1")], headers=c.auth("p1"))
    assert slash.status_code == 404  # not a 307 no one counted
    method = httpx.get(f"{c.url}/v1/records", headers=c.auth("p1"))
    assert method.status_code == 405 and method.headers["allow"] == "POST"
    assert method.json() == {"error": "/v1/records takes POST, not GET"}
    assert httpx.delete(f"{c.url}/healthz").headers["allow"] == "GET, HEAD"
    assert (_requests_total(c, "unknown", 404), _requests_total(c, "records", 405)) == (counts[0] + 2, counts[1] + 1)
    assert _requests_total(c, "healthz", 405) >= 1
    deadline = time.monotonic() + 10
    while c.log.count(" 405 ") - before.count(" 405 ") < 2:
        assert time.monotonic() < deadline, c.log[len(before) :]
        time.sleep(0.05)
    lines = [
        line
        for line in c.log[len(before) :].splitlines()
        if "fairacct.collector.access" in line and " /metrics " not in line  # those of _requests_total
    ]
    assert re.search(r" INFO 127\.0\.0\.1 POST /v2/records 404 \d+ [\d.]+ ms not_found$", lines[0]), lines
    assert re.search(r" INFO 127\.0\.0\.1 POST /v1/records/ 404 \d+ [\d.]+ ms not_found$", lines[1]), lines
    assert re.search(r" INFO 127\.0\.0\.1 GET /v1/records 405 \d+ [\d.]+ ms method_not_allowed$", lines[2]), lines
    assert re.search(r" INFO 127\.0\.0\.1 DELETE /healthz 405 \d+ [\d.]+ ms method_not_allowed$", lines[3]), lines


def test_sighup_is_said_not_to_reload_and_the_collector_goes_on(start_collector: Any) -> None:
    """Issue 39, point 7: SIGHUP killed the collector (its default; uvicorn handles only SIGTERM
    and SIGINT). Now it logs that the configuration is not reloaded, and goes on answering."""
    c = start_collector()
    assert c.process is not None
    c.process.send_signal(signal.SIGHUP)
    deadline = time.monotonic() + 10
    while "SIGHUP" not in c.log:
        assert time.monotonic() < deadline and c.process.poll() is None, c.log
        time.sleep(0.05)
    assert "fairacct.collector WARNING SIGHUP: the configuration is not reloaded while the collector runs" in c.log
    assert httpx.post(f"{c.url}/v1/records", json=[record("hup-1", "p1")], headers=c.auth("p1")).status_code == 202
    assert c.stop() in (0, -signal.SIGTERM)  # uvicorn raises SIGTERM again once it has shut down cleanly
    assert "collector stopped" in c.log


def test_a_normal_start_and_stop_log_no_error(start_collector: Any) -> None:
    """Issue 50, point 5: the collector's normal start was logged as ``uvicorn.error INFO``,
    which every grep of the log for errors found; now no line of a start and a stop says error."""
    c = start_collector()
    assert c.stop() in (0, -signal.SIGTERM)
    assert " uvicorn INFO " in c.log, c.log  # uvicorn's own lines are there, named for what they are
    assert not [line for line in c.log.splitlines() if re.search("error", line, re.I)], c.log
