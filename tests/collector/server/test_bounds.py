"""What one request, one connection or one probe may cost the collector (issue 24, items 4 and
6), against a real collector process: a body's memory and its reply are bounded, deadlines
close idle, slow-header and slow-body connections, a cap on connections keeps room for probes,
a probe has at most so many requests under way, and a client that leaves mid-body is one line
at INFO. Each case is one that cost the collector without bound before these limits (the
figures are in the docstrings)."""

from __future__ import annotations

import re
import resource
import select
import socket
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from collector.sinks.http import CollectorSink

from .conftest import Collector, free_port, record
from .test_ingest import post, stored

MIB = 2**20
LIMIT = 8 * MIB  # the records body limit of the memory tests' collector (the default)


def collector(tmp_path_factory: pytest.TempPathFactory, name: str, **settings: Any) -> Collector:
    c = Collector(tmp_path_factory.mktemp(name), free_port(), {"p1": "token-one", "p2": "token-two"},
                  {"flush_every_s": 0.2, **settings})  # fmt: skip
    return c.start()


@pytest.fixture(scope="module")
def roomy(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Gratia's body limit (64 MiB) and the records' (8 MiB), as by default."""
    c = collector(tmp_path_factory, "roomy", max_body_size="64 MiB", max_records_body_size="8 MiB",
                  max_records_per_request=5000)  # fmt: skip
    yield c
    c.stop()


@pytest.fixture(scope="module")
def strict(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Deadlines of a second or three, two requests a probe."""
    c = collector(tmp_path_factory, "strict", max_body_size="4 MiB", idle_timeout_s=1, header_timeout_s=1,
                  body_timeout_s=3, max_requests_per_probe=2)  # fmt: skip
    yield c
    c.stop()


# Memory and replies


def peak_growth_kib(c: Collector, send: Any) -> tuple[Any, int]:
    """What ``send()`` returned, and how far the collector's resident memory rose above where
    it was (its high-water mark reset first: /proc/PID/clear_refs)."""
    assert c.process is not None
    status = Path(f"/proc/{c.process.pid}/status")
    Path(f"/proc/{c.process.pid}/clear_refs").write_text("5")

    def kib(field: str) -> int:
        line = next(x for x in status.read_text().splitlines() if x.startswith(field))
        return int(line.split()[1])

    before = kib("VmRSS")
    result = send()
    return result, kib("VmHWM") - before


def zeros(size: int) -> bytes:
    """A JSON array of zeros, ``size`` bytes long: a million records refused a MiB (issue 24)."""
    return b"[" + b"0," * ((size - 3) // 2) + b"0]"


def test_a_2_mib_body_of_zeros_gets_a_small_reply_and_costs_little_memory(roomy: Collector) -> None:
    """Before: 400, a reply of 82.8 MB (every one of the 1,048,576 refusals with its reason)
    after 11 s, and the collector's memory up by 717 MB at its peak."""
    reply, growth = peak_growth_kib(roomy, lambda: post(roomy, zeros(2 * MIB)))
    assert reply.status_code == 413 and len(reply.content) < 200, reply.content[:200]
    assert reply.json()["error"] == (
        "the batch holds 1048575 records, over the limit of 5000 a request; send smaller batches"
    )
    assert growth < 80 * 1024, f"{growth} KiB"
    assert httpx.get(f"{roomy.url}/healthz").status_code == 200


@pytest.mark.parametrize(
    ("item", "bound"),
    [(b"0", 20), (b'{"a":{}}', 40)],  # a list of pointers; the costliest JSON to parse found (see body.py)
)
def test_a_body_at_the_limit_costs_a_bounded_multiple_of_it(roomy: Collector, item: bytes, bound: int) -> None:
    """Before, 8 MiB of zeros cost gigabytes (4 million refusals); at 60 MiB the collector passed
    14.9 GB and stopped answering /healthz."""
    body = b"[" + b",".join([item] * ((LIMIT - 2) // (len(item) + 1))) + b"]"
    assert LIMIT - len(item) - 1 <= len(body) <= LIMIT
    reply, growth = peak_growth_kib(roomy, lambda: post(roomy, body))
    assert reply.status_code == 413 and len(reply.content) < 200
    assert "over the limit of 5000 a request" in reply.json()["error"]
    assert growth < bound * LIMIT // 1024, f"{growth} KiB for {len(body)} bytes"
    assert httpx.get(f"{roomy.url}/healthz", timeout=5).status_code == 200


def test_a_body_over_the_limit_is_refused_before_it_is_read(roomy: Collector) -> None:
    body = zeros(60 * MIB)  # what took the collector past 14.9 GB
    reply, growth = peak_growth_kib(roomy, lambda: post(roomy, body))
    assert reply.status_code == 413
    assert reply.json()["error"] == f"the body is {len(body)} bytes, over the limit of {LIMIT}; send smaller batches"
    assert growth < 16 * 1024, f"{growth} KiB"
    assert httpx.get(f"{roomy.url}/healthz", timeout=5).status_code == 200


def test_every_refused_record_is_listed_and_the_reply_stays_small(roomy: Collector) -> None:
    """A batch at the record limit, half refused: each refused one is listed (the first ten with
    their reasons), so a probe knows exactly which are durable; before, a reply of 200 KB."""
    items: list[Any] = [record(i, "p1") if i % 2 == 0 else i for i in range(5000)]
    reply = post(roomy, orjson.dumps(items))
    assert reply.status_code == 400 and len(reply.content) < 48 * 1024, len(reply.content)
    body = reply.json()
    assert (body["accepted"], body["refused"], len(body["rejected"])) == (2500, 2500, 2500)
    assert [r["index"] for r in body["rejected"]] == list(range(1, 5000, 2))
    assert body["rejected"][0] == {"index": 1, "id": None, "reason": "expected a JSON object (a record), got 1"}
    assert all(set(r) == {"index", "id", "reason"} for r in body["rejected"][:10])
    assert all(set(r) == {"index"} for r in body["rejected"][10:])
    assert "2500 of 5000 records refused (the first, record 1: expected a JSON object" in body["error"]


def test_the_probe_knows_each_record_refused_and_splits_a_batch_over_the_record_limit(
    roomy: Collector, tmp_path: Path
) -> None:
    token = tmp_path / "p1.token"
    token.write_text("token-one\n")
    docs = [record(f"s{i}", "p1", cpus="many" if i % 3 == 0 else 1.0) for i in range(300)]
    with CollectorSink(f"collector+{roomy.url}", token_file=token) as sink:
        sent = sink.send("job", docs)
        assert sent.acked == [d["id"] for i, d in enumerate(docs) if i % 3]
        assert list(sent.rejected) == [d["id"] for i, d in enumerate(docs) if i % 3 == 0]
        reasons = list(sent.rejected.values())
        assert all(r.startswith("refused by the collector: field 'cpus': expected a double") for r in reasons[:10])
        assert all(r.startswith("refused by the collector, one of 100 records refused") for r in reasons[10:])
        assert "the first's: field 'cpus': expected a double" in reasons[-1]
        many = [record(f"m{i}", "p1") for i in range(6000)]  # over the 5000 a request: 413, sent in halves
        assert sink.send("job", many).acked == [d["id"] for d in many]
    ids = stored_ids(roomy, "p1", {d["id"] for d in many})
    assert not {d["id"] for i, d in enumerate(docs) if i % 3 == 0} & ids


def test_ndjson_is_read_a_line_at_a_time_and_counted(roomy: Collector) -> None:
    ndjson = {"Content-Type": "application/x-ndjson"}
    blank = b"\n" * (4 * MIB) + orjson.dumps(record("nd", "p1")) + b"\n" + b" \n" * 1000
    reply, growth = peak_growth_kib(roomy, lambda: post(roomy, blank, **ndjson))
    assert (reply.status_code, reply.json()) == (202, {"accepted": 1, "rejected": []})
    assert growth < 40 * 1024, f"{growth} KiB"  # not a list of four million empty lines
    lines = b"\n".join([b"0"] * 5001)
    reply = post(roomy, lines, **ndjson)
    assert reply.status_code == 413 and "more than 5000 records" in reply.json()["error"]


def stored_ids(c: Collector, probe: str, expect: set[str]) -> set[str]:
    """The source ids of ``probe``'s stored records, once ``expect`` are all among them."""
    deadline = time.monotonic() + 30
    while not expect <= (ids := {d["source_id"] for d in stored(c) if d["probe"] == probe}):
        assert time.monotonic() < deadline, f"{len(expect - ids)} of {len(expect)} not stored"
        time.sleep(0.2)
    return ids


# Connections


def connect(c: Collector, data: bytes = b"") -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", c.port), timeout=10)
    if data:
        sock.sendall(data)
    return sock


def closed_after(sock: socket.socket, within_s: float, dribble: bytes = b"") -> float | None:
    """Seconds until the collector closed ``sock`` (whatever it sent before), None if it did
    not within ``within_s``; sends ``dribble`` every quarter second meanwhile."""
    start = time.monotonic()
    try:
        while time.monotonic() - start < within_s:
            if select.select([sock], [], [], 0.25)[0] and not sock.recv(65536):
                return time.monotonic() - start
            if dribble:
                sock.sendall(dribble)
    except OSError:  # reset, or a broken pipe while dribbling
        return time.monotonic() - start
    finally:
        sock.close()
    return None


def metric(c: Collector, name: str) -> float:
    for line in httpx.get(f"{c.url}/metrics").text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    return 0.0


def test_idle_slow_header_and_slow_body_connections_are_closed_at_their_deadlines(strict: Collector) -> None:
    """Before, each was held for as long as its client liked (an hour as well as a second)."""
    owed = b"HTTP/1.1\r\nHost: x\r\nContent-Length: 9000\r\n\r\n"
    auth = b"Host: x\r\nAuthorization: Bearer token-one"  # a probe's body, read as it comes
    held = {
        "idle": (connect(strict), b""),
        "slow header": (connect(strict, b"POST /v1/records HTTP/1.1\r\nHost: x\r\nContent-"), b""),
        "slow body": (connect(strict, b"POST /v1/records " + owed.replace(b"Host: x", auth) + b"["), b"0"),
        "idle after a reply": (connect(strict, b"GET /stats HTTP/1.1\r\nHost: x\r\n\r\n"), b""),
    }
    with ThreadPoolExecutor(len(held)) as pool:
        futures = {name: pool.submit(closed_after, sock, 12, dribble) for name, (sock, dribble) in held.items()}
        after = {name: f.result() for name, f in futures.items()}
    deadlines = {"idle": 1, "slow header": 1, "slow body": 3, "idle after a reply": 1}
    for name, deadline in deadlines.items():
        took = after[name]
        assert took is not None and deadline - 0.3 < took < deadline + 4, (name, after)
    closed = {reason: metric(strict, f'fairacct_collector_connections_closed_total{{reason="{reason}"}}')
              for reason in ("idle_timeout", "header_timeout", "body_timeout")}  # fmt: skip
    assert closed["idle_timeout"] >= 2 and closed["header_timeout"] >= 1 and closed["body_timeout"] >= 1, closed


def test_a_request_refused_from_its_headers_is_closed_at_once(strict: Collector) -> None:
    """Answered while its body is owed (401: no token), a request's connection is closed once the
    reply is written, its body unread (issue 54); before, the rest of the body was read and
    dropped for 5 s more (a stranger's) or body_timeout_s (a probe's)."""
    before = metric(strict, 'fairacct_collector_connections_closed_total{reason="answered_before_body"}')
    sock = connect(strict, b"POST /v1/records HTTP/1.1\r\nHost: x\r\nContent-Length: 9000\r\n\r\n[")
    reply = sock.recv(65536)
    took = closed_after(sock, 12, b"0")  # the body, dribbled on: never read
    assert reply.startswith(b"HTTP/1.1 401 ") and b"\r\nconnection: close\r\n" in reply.lower(), reply
    assert took is not None and took < 1, took
    after = metric(strict, 'fairacct_collector_connections_closed_total{reason="answered_before_body"}')
    assert after - before == 1


def test_a_huge_header_is_answered_431(strict: Collector) -> None:
    sock = connect(strict, b"GET /stats HTTP/1.1\r\nX-Pad: " + b"p" * 100_000 + b"\r\n")
    sock.settimeout(5)
    reply = b""
    while chunk := sock.recv(65536):
        reply += chunk
    sock.close()
    assert reply.startswith(b"HTTP/1.1 431 ") and reply.endswith(b"request headers are too large\n")
    assert metric(strict, 'fairacct_collector_connections_closed_total{reason="headers_too_large"}') >= 1


def test_a_client_gone_mid_body_is_one_line_at_info(strict: Collector) -> None:
    """Before: an ERROR 'internal error' with a traceback of ClientDisconnect, counted as a bug."""
    head = b"POST /v1/records HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer token-one\r\nContent-Length: 1000\r\n\r\n"
    gone = connect(strict, head + b"[{")
    time.sleep(0.3)
    gone.close()
    slow = connect(strict, head.replace(b"token-one", b"token-two") + b"[")
    assert closed_after(slow, 10, b" ") is not None  # closed at body_timeout_s
    deadline = time.monotonic() + 10
    while "the collector closed the connection (body_timeout)" not in strict.log:
        assert time.monotonic() < deadline, strict.log[-2000:]
        time.sleep(0.1)
    lines = [x for x in strict.log.splitlines() if "bytes of the body" in x]
    gone_line = re.compile(
        r".* INFO POST /v1/records from 127\.0\.0\.1:\d+: the client closed the connection after \d of 1000 "
        r"bytes of the body; nothing was stored"
    )
    assert any(gone_line.fullmatch(x) for x in lines), lines
    assert any(" INFO " in x and "the collector closed the connection (body_timeout) after " in x for x in lines)
    assert "Traceback" not in strict.log and "internal error" not in strict.log
    assert 'reason="disconnected"' in httpx.get(f"{strict.url}/metrics").text


def test_a_probe_has_two_requests_under_way_at_most_and_another_probes_all_land_once(strict: Collector) -> None:
    """p2 holds two requests (slow bodies): its third is answered 429, while p1, two batches at
    a time, gets every one of its 600 records stored once. Before: no limit (p2 could hold as
    many requests, and as many bodies in memory, as it liked)."""
    head = b"POST /v1/records HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer token-two\r\nContent-Length: 100\r\n\r\n["
    holding = [connect(strict, head), connect(strict, head)]
    deadline = time.monotonic() + 2.5  # once both are reading their bodies, p2 has two requests under way
    while (third := post(strict, orjson.dumps([record("third", "p2")]), "p2")).status_code != 429:
        assert time.monotonic() < deadline, third.text
        time.sleep(0.1)
    assert third.status_code == 429 and third.headers["Retry-After"] == "10"
    assert "probe 'p2' has 2 requests under way, the most one probe may have" in third.json()["error"]

    def send(part: int) -> list[int]:
        return [post(strict, orjson.dumps([record(f"c{part}-{b}-{i}", "p1") for i in range(20)])).status_code
                for b in range(15)]  # fmt: skip

    with ThreadPoolExecutor(2) as pool:
        codes = [c for part in pool.map(send, range(2)) for c in part]
    assert codes == [202] * 30
    for sock in holding:
        assert closed_after(sock, 10) is not None  # at body_timeout_s: p2's requests are over
    assert post(strict, orjson.dumps([record("later", "p2")]), "p2").status_code == 202
    sent = {f"p1-job-c{p}-{b}-{i}" for p in range(2) for b in range(15) for i in range(20)}
    assert stored_ids(strict, "p1", sent)
    mine = [d["source_id"] for d in stored(strict) if d["probe"] == "p1" and d["source_id"] in sent]
    assert len(mine) == len(sent)  # each once


def test_idle_connections_by_the_hundred_do_not_keep_a_probe_out(tmp_path_factory: pytest.TempPathFactory) -> None:
    """The collector may open 64 files: before, 100 idle connections took them all, and a
    probe's request was refused (the event loop could accept nothing more). Now the cap (16)
    closes the longest idle for each new connection, and connections refused before their body
    give way as well (issue 35); only probes' requests under way, all 16, refuse a new one
    until a deadline frees them."""
    c = collector(tmp_path_factory, "capped", max_connections=16, body_timeout_s=2, max_requests_per_probe=8)
    try:
        assert c.process is not None
        resource.prlimit(c.process.pid, resource.RLIMIT_NOFILE, (64, 64))
        idle = [connect(c) for _ in range(100)]
        reply = post(c, orjson.dumps([record("capped", "p1")]))
        assert reply.status_code == 202
        assert metric(c, "fairacct_collector_connections") <= 16
        assert metric(c, 'fairacct_collector_connections_closed_total{reason="evicted"}') >= 80
        for sock in idle:
            sock.close()
        unread = b"POST /v1/records HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n["  # 401, body still owed
        refused = [connect(c, unread) for _ in range(16)]
        time.sleep(0.5)
        assert post(c, orjson.dumps([record("past-refused", "p1")])).status_code == 202
        for sock in refused:
            sock.close()
        head = b"POST /v1/records HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer token-%s\r\nContent-Length: 100\r\n\r\n["
        busy = [connect(c, head % token) for token in (b"one", b"two") for _ in range(8)]
        time.sleep(0.5)
        assert closed_after(connect(c), 1) is not None  # refused at once: none could give way
        with pytest.raises(httpx.HTTPError):
            httpx.get(f"{c.url}/healthz", timeout=1)
        for sock in busy:
            assert closed_after(sock, 10) is not None  # body_timeout_s
        assert httpx.get(f"{c.url}/healthz", timeout=5).status_code == 200
        assert metric(c, 'fairacct_collector_connections_closed_total{reason="refused"}') >= 2
    finally:
        c.stop()
