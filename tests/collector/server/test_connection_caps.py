"""One token cannot lock the other probes out, and TLS handshakes count against the caps (issue
54, points 1 and 2), against a real collector process on 127.0.0.1: an attacker at 127.0.0.2
(all of 127/8 is loopback on Linux), with probe p1's token or with no TLS handshake at all,
opens connections as fast as they are closed; probe p2 at 127.0.0.1 and a monitor at
127.0.0.3 try throughout, on a connection kept alive and on fresh ones. Before, p2 got 0 of 91
tries through (p1's token) and 0 of 50 (the handshakes), /healthz 0 of 91."""

from __future__ import annotations

import resource
import select
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from .conftest import Collector, free_port, record, self_signed
from .test_bounds import closed_after
from .test_ingest import JSON

ATTACKER = "127.0.0.2"
MONITOR = "127.0.0.3"
CAP, ANONYMOUS = 48, 16  # max_connections, max_anonymous_connections of these collectors


def start(root: Path, **settings: Any) -> Iterator[Collector]:
    c = Collector(root, free_port(), {"p1": "token-one", "p2": "token-two"},
                  {"flush_every_s": 0.2, "max_connections": CAP, "max_anonymous_connections": ANONYMOUS,
                   **settings})  # fmt: skip
    c.start()
    assert c.process is not None
    # the descriptors the collector asks for at this cap (serve._enough_files), and no more: a
    # flood that is not counted runs the process out of them
    resource.prlimit(c.process.pid, resource.RLIMIT_NOFILE, (CAP + 100, CAP + 100))
    yield c
    c.stop()


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Collector]:
    yield from start(tmp_path_factory.mktemp("plain"))


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Collector]:
    where = tmp_path_factory.mktemp("tls")
    cert, key = self_signed(where)
    yield from start(where, tls_cert_file=str(cert), tls_key_file=str(key), handshake_timeout_s=2)


class Attack:
    """``opened()`` sockets from ATTACKER, ``size`` of them kept open: each one the collector
    closes is opened again, until the block ends (at most ``seconds``, ``most`` sockets)."""

    def __init__(self, c: Collector, size: int, opened: Callable[[], socket.socket], seconds: float = 60,
                 most: int = 200_000) -> None:  # fmt: skip
        self.c, self.size, self.opened, self.seconds, self.most = c, size, opened, seconds, most
        self.made = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run)

    def _run(self) -> None:
        held: list[socket.socket] = []
        deadline = time.monotonic() + self.seconds
        try:
            while not self._stop.is_set() and time.monotonic() < deadline:
                while len(held) < self.size and self.made < self.most:
                    try:
                        held.append(self.opened())
                        self.made += 1
                    except OSError:  # refused at the collector's door: try again soon
                        break
                readable = select.select(held, [], [], 0.05)[0] if held else []
                for sock in readable:
                    try:
                        gone = not sock.recv(65536)
                    except OSError:
                        gone = True
                    if gone:
                        held.remove(sock)
                        sock.close()
        finally:
            for sock in held:
                sock.close()

    def __enter__(self) -> Attack:
        self._thread.start()
        while self.made < self.size and self._thread.is_alive():  # the whole flood is there first
            time.sleep(0.05)
        time.sleep(0.5)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def metric(c: Collector, name: str) -> float:
    for line in httpx.get(f"{c.url}/metrics", verify=c.verify).text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    return 0.0


def from_attacker(c: Collector, data: bytes = b"") -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", c.port), timeout=5, source_address=(ATTACKER, 0))
    if data:
        sock.sendall(data)
    return sock


def tries(c: Collector, count: int) -> dict[str, list[int | str]]:
    """p2's batches on one connection kept alive and on fresh ones, and /healthz from MONITOR on
    fresh ones, ``count`` of each: each reply's status, or the error that took its place."""
    out: dict[str, list[int | str]] = {"p2 kept alive": [], "p2 fresh": [], "/healthz": []}

    def attempt(what: str, client: httpx.Client, body: bytes | None = None) -> None:
        try:
            if body is None:
                reply = client.get(f"{c.url}/healthz")
            else:
                reply = client.post(f"{c.url}/v1/records", content=body, headers=JSON | c.auth("p2"))
            out[what].append(reply.status_code)
        except httpx.HTTPError as exc:
            out[what].append(type(exc).__name__)

    with httpx.Client(verify=c.verify, timeout=5) as kept:
        for i in range(count):
            attempt("p2 kept alive", kept, orjson.dumps([record(f"kept-{time.monotonic_ns()}-{i}", "p2")]))
            with httpx.Client(verify=c.verify, timeout=5) as fresh:
                attempt("p2 fresh", fresh, orjson.dumps([record(f"fresh-{time.monotonic_ns()}-{i}", "p2")]))
            monitor = httpx.HTTPTransport(local_address=MONITOR, verify=c.verify)
            with httpx.Client(transport=monitor, timeout=5) as fresh:
                attempt("/healthz", fresh)
            time.sleep(0.1)
    return out


def assert_all_through(out: dict[str, list[int | str]], attack: str) -> None:
    print(f"\n{attack}: " + "; ".join(f"{k} {sum(r in (200, 202) for r in v)} of {len(v)}" for k, v in out.items()))
    assert out == {"p2 kept alive": [202] * 30, "p2 fresh": [202] * 30, "/healthz": [200] * 30}


def test_a_token_whose_requests_are_refused_before_their_body_cannot_lock_another_probe_out(plain: Collector) -> None:
    """Issue 54, point 1: p1's token on connections by the hundred announcing bodies of 100 MB
    (413) or of 1 MB that never come (8 of them p1's requests under way, the rest answered 429).
    Each answered from its headers was then kept, a probe's, for body_timeout_s to send the rest,
    never evicted: they filled max_connections. Now each is answered with Connection: close and
    closed at once, and p1 holds at most max_connections_per_probe connections."""
    c = plain
    head = "POST /v1/records HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer token-one\r\nContent-Length: {}\r\n\r\n["
    kinds = [head.format(100_000_000).encode(), head.format(1_000_000).encode()]
    made = iter(range(10**9))
    with Attack(c, 3 * CAP, lambda: from_attacker(c, kinds[next(made) % 2])) as attack:
        assert_all_through(tries(c, 30), f"p1's token on {attack.made} connections")
        assert metric(c, "fairacct_collector_connections") <= CAP
    assert attack.made > 3 * CAP  # the collector closed them, and they came back
    assert metric(c, 'fairacct_collector_connections_closed_total{reason="answered_before_body"}') >= 3 * CAP
    # both refusals were made; how many of each depends on the machine's load (at a load of 10 one
    # run answered 8 with 413)
    answered = {
        code: metric(c, f'fairacct_collector_requests_total{{endpoint="records",code="{code}"}}') for code in (413, 429)
    }
    assert min(answered.values()) >= 1 and sum(answered.values()) >= CAP, answered


def test_a_reply_before_the_body_says_close_and_closes(plain: Collector) -> None:
    """A probe's request refused from its headers (413: the body is announced at 100 MB) is
    answered with Connection: close and closed at once, its body unread; before, it was kept for
    body_timeout_s (60 s) to send the 100 MB."""
    sock = from_attacker(plain)
    sock.sendall(b"POST /v1/records HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer token-one\r\n"
                 b"Content-Type: application/json\r\nContent-Length: 100000000\r\n\r\n[")  # fmt: skip
    start = time.monotonic()
    reply = b""
    while chunk := sock.recv(65536):
        reply += chunk
    took = time.monotonic() - start
    sock.close()
    head = reply.split(b"\r\n\r\n", 1)[0].lower()
    assert reply.startswith(b"HTTP/1.1 413 ") and b"\r\nconnection: close" in head, reply
    assert took < 1.0, took


def test_a_probes_connections_beyond_its_cap_close_its_own_longest_idle(plain: Collector) -> None:
    """A token holds at most max_connections_per_probe (8) connections: p1's 12 connections, each
    with a batch answered and then idle, close p1's own oldest four."""
    c = plain
    before = metric(c, 'fairacct_collector_connections_closed_total{reason="probe_cap"}')
    socks = []
    for i in range(12):
        body = orjson.dumps([record(f"cap-{i}", "p1")])
        sock = from_attacker(c)
        sock.sendall(b"POST /v1/records HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer token-one\r\n"
                     b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))  # fmt: skip
        assert sock.recv(65536).startswith(b"HTTP/1.1 202 ")
        socks.append(sock)
    closed = [closed_after(sock, 0.5) is not None for sock in socks]
    assert closed == [True] * 4 + [False] * 8
    assert metric(c, 'fairacct_collector_connections_closed_total{reason="probe_cap"}') - before == 4


def test_handshakes_that_stall_count_against_the_caps_and_time_out(tls: Collector) -> None:
    """Issue 54, point 2: with TLS served by the collector, connections that send nothing, or half
    a ClientHello, were held 60 s and counted nowhere: by the hundred they ran the collector out of
    descriptors, and p2 got 0 of 50 tries through. Now a handshake is an anonymous connection
    (within max_anonymous_connections, the flood's own address closing its oldest) and closed
    after handshake_timeout_s."""
    c = tls
    hello = bytes.fromhex("160301020001") + b"\x00" * 20  # a TLS record of a ClientHello, cut short
    made = iter(range(10**9))
    with Attack(c, 3 * CAP, lambda: from_attacker(c, hello if next(made) % 2 else b"")) as attack:
        assert_all_through(tries(c, 30), f"{attack.made} stalled handshakes")
        assert metric(c, "fairacct_collector_connections") <= CAP
        anonymous = metric(c, "fairacct_collector_connections_anonymous")
        assert ANONYMOUS - 2 <= anonymous <= ANONYMOUS  # counted, and within the cap
    assert metric(c, 'fairacct_collector_connections_closed_total{reason="evicted"}') >= 2 * CAP
    silent = from_attacker(c)
    took = closed_after(silent, 10)
    assert took is not None and 1.7 < took < 3.5, took  # handshake_timeout_s
    assert metric(c, 'fairacct_collector_connections_closed_total{reason="handshake_timeout"}') >= 1
    plain_http = from_attacker(c, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")  # not TLS: closed at once
    took = closed_after(plain_http, 10)
    assert took is not None and took < 1, took
    assert metric(c, 'fairacct_collector_connections_closed_total{reason="handshake_failed"}') == 1
