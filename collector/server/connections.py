"""Connections: deadlines, caps, and a bound on headers, below the application.

uvicorn holds a connection for as long as its client likes (one that sends nothing, headers
that come a byte a minute, a body that never ends: its keep-alive timeout runs only between
requests), takes headers of any size, and accepts connections until the process has no file
descriptor left, when it refuses everyone, probes included. :func:`guarded_protocol` is
uvicorn's HTTP protocol (httptools') with one deadline at a time on every connection:

=========  ==============================  ======================  =======================================
phase      begins                          deadline                ends
=========  ==============================  ======================  =======================================
handshake  the connection is made (TLS     ``handshake_timeout_s`` the TLS handshake is done
           served by the collector)
idle       the connection is made (or its  ``idle_timeout_s``      a request's first byte
           handshake done), or its last
           reply is sent
headers    a request's first byte          ``header_timeout_s``    the headers are whole (at most
                                                                   ``max_header_bytes``: else 431, closed)
body       the headers are whole           ``body_timeout_s``      the body is whole, whether or not the
                                                                   application reads it
app        the body is whole               none: the               the reply is sent; but a reply the
                                           application's (a        client stops reading must move again
                                           reply waits for the     within ``body_timeout_s``
                                           disk)
=========  ==============================  ======================  =======================================

Past its deadline a connection is closed; an application reading its body then sees the client
gone (:class:`~collector.errors.DisconnectedError`, one line at INFO). A request answered while
its body is owed (refused from its headers: 401, 413 on its Content-Length, 429, a stranger at
Gratia's door, a path that takes none) is answered with ``Connection: close`` and closed once
the reply is written, its body unread, whoever sent it (issue 54: a token's requests answered
413 or 429 kept their connections ``body_timeout_s`` for a body no one would read, and filled
``max_connections``). A client that reads the reply when its write fails (httpx does) has it.

TLS served by the collector is begun here (:meth:`asyncio.loop.start_tls` on the accepted
connection), not by the event loop before uvicorn sees the connection: a handshake is then a
connection like any other, a stranger's from its accept, closed after
``handshake_timeout_s`` (issue 54: stalled handshakes were held 60 s and counted nowhere, and
1,200 of them ran the collector out of descriptors).

Who holds a connection (issue 35): a stranger, until the application vouches for it
(:func:`vouch`): a probe's token makes it that probe's (the next probe's, when a proxy carries
another token on it), a Gratia request from a listed network a sender's. At most
``max_connections`` are open, at most ``max_anonymous`` of them not probes', at most
``max_per_probe`` one probe's. A new connection beyond either of the first two caps closes one,
in this order: one answered before its body (closing already), the oldest stranger's of the
address that holds the most (a flood from one address closes its own), the oldest sender's,
whatever its phase (stalled mid-body or mid-handshake too); or else the probe's connection
that has waited longest without a request under way; when every one is a probe's with a
request under way, the new one is closed at once. A probe's connection beyond its own cap
closes the probe's own answered before its body, or else the one of its that has waited
longest without a request under way; when each has a request under way, the new request is
refused (429) and its connection stays a stranger's. So no one keeps a probe out, with a token
or without, and strangers cost at most ``max_anonymous`` connections of at most
``max_header_bytes`` of headers each. Closes are counted by reason (:attr:`Connections.closed`,
in ``/metrics``) and logged at DEBUG: a flood of them must not flood the log.

A peer's address is the one every request on the connection is from (its ASGI ``client``, which
uvicorn's ``X-Forwarded-For`` handling, the access log, Gratia's senders and the memory budgets
read), in one form: an IPv4 client of a collector listening on ``"::"``, which the kernel gives
as ``::ffff:a.b.c.d``, is ``a.b.c.d`` (:mod:`collector.addresses`), so that it is matched against
IPv4 ``trusted_proxies`` and networks as the IPv4 address it is (issue 54).

A request's line and headers are counted as the parser reads them, so the bound holds for the
whole header block however it arrives (before, it was counted a read at a time, and 100,000
bytes of headers in one write were taken).
"""

from __future__ import annotations

import asyncio
import enum
import logging
import ssl
from collections import Counter
from collections.abc import Coroutine, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from collector.addresses import shown
from collector.errors import TooManyRequestsError
from collector.settings import CollectorSettings

__all__ = ["CLOSED_BY", "LINGER_S", "Connections", "Trust", "guarded_protocol", "vouch"]

# The key of a request's ASGI scope that says why the collector closed its connection, if it did
# (the application then tells the client's leaving from the collector's deadline).
CLOSED_BY = "fairacct.closed_by"
# The key of a request's ASGI scope that holds its connection's :meth:`_GuardedProtocol._vouch`.
_VOUCH = "fairacct.vouch"

LINGER_S = 5.0
"""Seconds the reply of a request answered before its body has to leave (it is a few hundred
bytes: a client that does not read it is not waited for)."""

_log = logging.getLogger("fairacct.collector")

_HEADERS_TOO_LARGE = (
    b"HTTP/1.1 431 Request Header Fields Too Large\r\n"
    b"content-type: text/plain; charset=utf-8\r\ncontent-length: 30\r\nconnection: close\r\n\r\n"
    b"request headers are too large\n"
)


class Trust(enum.IntEnum):
    """Whom a connection is known to be from (it only ever rises)."""

    STRANGER = 0  # nothing shown yet, or nothing that lets it in
    SENDER = 1  # a Gratia request from one of collector.gratia_senders' networks
    PROBE = 2  # a request with a probe's token


def vouch(scope: Mapping[str, Any], trust: Trust, probe: str | None = None) -> None:
    """Tell the connection a request came on that it is from someone ``trust`` (``probe``: the
    token's probe); TooManyRequestsError when that probe's connections are at their cap, each
    with a request under way. Nothing when the application runs without :class:`Connections`,
    in a test's own server."""
    hook = scope.get(_VOUCH)
    if hook is not None:
        hook(trust, probe)


class _Phase(enum.Enum):
    HANDSHAKE = "handshake"
    IDLE = "idle"
    HEADERS = "header"
    BODY = "body"
    APP = "app"


@dataclass(eq=False)
class Connections:
    """The collector's connections: their limits (see the module docstring), how many are open,
    and how many were closed, by reason (``handshake_timeout``, ``handshake_failed``: not TLS,
    ``idle_timeout``, ``header_timeout``, ``body_timeout``, ``reply_timeout``,
    ``headers_too_large``, ``answered_before_body``, ``evicted``: closed for a new one at a cap,
    ``probe_cap``: for a newer one of the same probe, ``refused``: a new one at the cap when
    none could be closed). ``tls``: the collector serves TLS itself. Used on the event loop only."""

    max_connections: int
    max_anonymous: int
    max_per_probe: int
    handshake_timeout_s: float
    idle_timeout_s: float
    header_timeout_s: float
    body_timeout_s: float
    max_header_bytes: int
    tls: ssl.SSLContext | None = None
    closed: Counter[str] = field(default_factory=Counter)
    _open: set[_GuardedProtocol] = field(default_factory=set, repr=False)
    # Connections without a request under way, the longest waiting first (dicts keep their order).
    _waiting: dict[_GuardedProtocol, None] = field(default_factory=dict, repr=False)
    # Connections not (yet) a probe's, the oldest first.
    _anonymous: dict[_GuardedProtocol, None] = field(default_factory=dict, repr=False)
    # Connections answered before their body, closing, the oldest first.
    _refused: dict[_GuardedProtocol, None] = field(default_factory=dict, repr=False)
    # Each probe's connections, the oldest first.
    _probes: dict[str, dict[_GuardedProtocol, None]] = field(default_factory=dict, repr=False)

    @classmethod
    def of(cls, settings: CollectorSettings, tls: ssl.SSLContext | None = None) -> Connections:
        return cls(settings.max_connections, min(settings.max_anonymous_connections, settings.max_connections),
                   settings.max_connections_per_probe, settings.handshake_timeout_s, settings.idle_timeout_s,
                   settings.header_timeout_s, settings.body_timeout_s, settings.max_header_bytes, tls)  # fmt: skip

    @property
    def open(self) -> int:
        """Connections open now (those refused at the cap not counted)."""
        return len(self._open)

    @property
    def anonymous(self) -> int:
        """Connections open now that are not probes'."""
        return len(self._anonymous)

    def _admit(self, connection: _GuardedProtocol) -> bool:
        """Count ``connection`` in (a stranger's), closing others at the caps (see the module
        docstring); False when it must be refused (every one is a probe's, under way)."""
        while len(self._anonymous) >= self.max_anonymous or len(self._open) >= self.max_connections:
            victim = self._victim(anonymous=len(self._open) < self.max_connections)
            if victim is None:
                return False
            victim._close("evicted")
        self._open.add(connection)
        self._anonymous[connection] = None
        return True

    def _victim(self, *, anonymous: bool) -> _GuardedProtocol | None:
        """The connection a new one closes (see the module docstring), one without a probe's
        token when ``anonymous`` (the cap on those is reached, not the cap on all); None if none may be."""
        for connection in self._refused:  # closing already
            if not anonymous or connection in self._anonymous:
                return connection
        oldest: dict[str, _GuardedProtocol] = {}  # each address's oldest stranger
        held: Counter[str] = Counter()  # strangers' connections by address
        for connection in self._anonymous:  # the oldest first
            if connection._trust is Trust.STRANGER:
                held[connection._address] += 1
                oldest.setdefault(connection._address, connection)
        if held:  # a flood from one address closes its own (ties: the oldest's address)
            return oldest[max(held, key=held.__getitem__)]
        sender = next(iter(self._anonymous), None)
        return sender if sender is not None or anonymous else next(iter(self._waiting), None)

    def _make_room(self, probe: str) -> bool:
        """Room for one more of ``probe``'s connections, made by closing one of its own if it has
        ``max_per_probe`` (see the module docstring); False when none could be closed."""
        mine = self._probes.get(probe, {})
        if len(mine) < self.max_per_probe:
            return True
        victim = next((c for c in mine if c in self._refused), None)
        victim = victim or next((c for c in mine if c in self._waiting), None)
        if victim is None:
            return False
        victim._close("probe_cap")
        return True

    def _forget(self, connection: _GuardedProtocol) -> None:
        """``connection`` is closed: counted nowhere now."""
        self._open.discard(connection)
        self._waiting.pop(connection, None)
        self._anonymous.pop(connection, None)
        self._refused.pop(connection, None)
        self._leave_probe(connection)

    def _leave_probe(self, connection: _GuardedProtocol) -> None:
        """``connection`` is no longer counted as its probe's (closed, or another probe's now)."""
        if connection._probe is not None:
            mine = self._probes.get(connection._probe, {})
            mine.pop(connection, None)
            if not mine:
                self._probes.pop(connection._probe, None)


class _GuardedProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol under the :class:`Connections`' limits (made by
    :func:`guarded_protocol`). It hooks the parser's callbacks and uvicorn's response callback:
    uvicorn's own behaviour is unchanged, only deadlines, closes and TLS handshakes are added."""

    guard: ClassVar[Connections]  # (uvicorn's ``self.connections`` is its set of them)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._phase = _Phase.IDLE
        self._timer: asyncio.TimerHandle | None = None
        self._head = 0  # bytes received of the request line and headers (by whole reads)
        self._block = 0  # bytes of the request line and headers, as the parser reads them
        self._trust = Trust.STRANGER
        self._probe: str | None = None  # whose token its last request carried
        self._keep_alive: bool | None = None  # uvicorn's, while a request's body is owed and a reply closes
        self._stopping = False  # uvicorn's shutdown has begun
        self._closed = False  # by the guard (the parser's callbacks are then ignored)
        self._address = "-"  # the peer's (a proxy's, behind one)
        self._wire: asyncio.Transport | None = None  # the connection under its TLS, during the handshake
        self._early: list[bytes] = []  # requests' bytes that came with the end of the handshake

    # The connection
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        if self.guard.tls is None:
            self._made(transport)
            return
        peer = transport.get_extra_info("peername")
        self._address = shown(peer[0]) if peer else "-"
        self._wire = transport
        if not self.guard._admit(self):
            self._close("refused")
            return
        self._phase = _Phase.HANDSHAKE
        self._arm(self.guard.handshake_timeout_s, "handshake_timeout")  # (the loop's own, later: a backstop)
        handshake = self.loop.start_tls(
            transport, self, self.guard.tls, server_side=True, ssl_handshake_timeout=self.guard.handshake_timeout_s + 5
        )
        # Its first step now, not in a task: start_tls hands the connection to TLS in that step, and
        # a task's first would come a loop iteration later, when uvloop may have read the
        # ClientHello into this protocol already (uvloop starts reading once connection_made returns).
        self._handshake_step(handshake)

    def _handshake_step(self, handshake: Coroutine[Any, Any, asyncio.Transport | None]) -> None:
        """Runs start_tls's coroutine (it awaits one future: its handshake) to its end; then the
        connection is uvicorn's, as though accepted with TLS."""
        try:
            waiting = handshake.send(None)
        except StopIteration as done:
            self._handshaken(done.value)
        except OSError as exc:  # not TLS (ssl.SSLError), the client gone, or closed by the guard
            if isinstance(exc, ssl.SSLError) and not self._closed:
                self._close("handshake_failed")
            self.guard._forget(self)
        else:
            waiting.add_done_callback(lambda _: self._handshake_step(handshake))

    def _handshaken(self, transport: asyncio.Transport | None) -> None:
        if transport is None or self._closed or transport.is_closing():  # closed as the handshake ended
            if transport is not None:
                transport.abort()
            self.guard._forget(self)
            return
        self._wire = None
        self._made(transport)
        for data in self._early:  # (asyncio's TLS gives the first bytes before start_tls returns)
            self.data_received(data)
        self._early.clear()

    def _made(self, transport: asyncio.Transport) -> None:
        """uvicorn's connection, once it is plain or TLS: counted in (if it was not during its
        handshake), and waiting for a request."""
        super().connection_made(transport)
        if self.client:  # an IPv4 peer of a socket on "::" is ::ffff:a.b.c.d: its requests see a.b.c.d
            self.client = (shown(self.client[0]), self.client[1])
        self._address = self.client[0] if self.client else "-"
        if self not in self.guard._open and not self.guard._admit(self):
            self._close("refused")
            return
        self._enter(_Phase.IDLE)

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel()
        if self in self.guard._refused:  # closed (by uvicorn) once its reply was written
            self.guard.closed["answered_before_body"] += 1
        self.guard._forget(self)
        if self.transport is not None:  # (None: refused at the cap before its TLS handshake)
            super().connection_lost(exc)

    def shutdown(self) -> None:
        self._stopping = True
        super().shutdown()

    def data_received(self, data: bytes) -> None:
        if self._closed:  # what comes after a close the guard made is not parsed
            return
        if self._phase is _Phase.HANDSHAKE:  # before start_tls returned the connection to uvicorn
            self._early.append(data)
            return
        if self._phase in (_Phase.IDLE, _Phase.HEADERS):
            self._head += len(data)
        super().data_received(data)
        if self._phase in (_Phase.IDLE, _Phase.HEADERS) and self._head > self.guard.max_header_bytes:
            self._headers_too_large()

    def _headers_too_large(self) -> None:
        if not self._closed:
            self.transport.write(_HEADERS_TOO_LARGE)
            self._close("headers_too_large")

    def _vouch(self, trust: Trust, probe: str | None) -> None:
        if self._closed:
            return
        if trust is Trust.PROBE and probe is not None and probe != self._probe:
            if not self.guard._make_room(probe):
                raise TooManyRequestsError(
                    f"probe {probe!r} has {self.guard.max_per_probe} connections open, each with a request under "
                    "way, the most one probe may have (collector.max_connections_per_probe); send the next once "
                    "they are answered"
                )
            self.guard._leave_probe(self)  # another probe's before (a proxy's connection)
            self.guard._probes.setdefault(probe, {})[self] = None
            self._probe = probe
        self._trust = max(self._trust, trust)
        if self._trust is Trust.PROBE:
            self.guard._anonymous.pop(self, None)

    def pause_writing(self) -> None:
        super().pause_writing()
        if self._phase is _Phase.APP:  # a reply the client does not read: it has the body's time
            self._arm(self.guard.body_timeout_s, "reply_timeout")

    def resume_writing(self) -> None:
        super().resume_writing()
        if self._phase is _Phase.APP:
            self._cancel()

    # The parser's callbacks, and uvicorn's when a reply is sent; once the guard has closed the
    # connection, the parser's are ignored (the rest of a read it was given is not a request).
    def on_message_begin(self) -> None:
        if self._closed:
            return
        super().on_message_begin()
        self._block = 0
        self._enter(_Phase.HEADERS)

    def on_url(self, url: bytes) -> None:
        if self._closed:
            return
        super().on_url(url)
        self._count_head(len(url) + len(b"POST  HTTP/1.1\r\n"))

    def on_header(self, name: bytes, value: bytes) -> None:
        if self._closed:
            return
        super().on_header(name, value)
        self._count_head(len(name) + len(value) + len(b": \r\n"))

    def _count_head(self, size: int) -> None:
        self._block += size
        if self._block > self.guard.max_header_bytes:
            self._headers_too_large()

    def on_headers_complete(self) -> None:
        if self._closed:
            return
        super().on_headers_complete()
        self.scope[_VOUCH] = self._vouch  # type: ignore[literal-required]  # (an extension of ours)
        self._head = 0
        # Until its body is whole, a reply closes the connection (uvicorn writes Connection: close
        # and closes it once the reply is written): its body is not read for nothing.
        if self.cycle is not None and _announces_body(self.headers):
            self._keep_alive, self.cycle.keep_alive = self.cycle.keep_alive, False
        else:
            self._keep_alive = None
        self._enter(_Phase.BODY)

    def on_body(self, body: bytes) -> None:
        if not self._closed:
            super().on_body(body)

    def on_message_complete(self) -> None:
        if self._closed:
            return
        super().on_message_complete()
        if self._keep_alive is not None and self.cycle is not None and not self.cycle.response_started:
            self.cycle.keep_alive = self._keep_alive and not self._stopping  # the body is whole: as uvicorn had it
        self._keep_alive = None
        self._enter(_Phase.APP)

    def on_response_complete(self) -> None:
        queued = bool(self.pipeline)  # a pipelined request uvicorn starts now: still under way
        super().on_response_complete()
        if self._phase is _Phase.BODY:  # answered before its body was whole: closing, first to go at a cap
            self.guard._refused[self] = None
            self.guard._waiting.pop(self, None)
            if not self.transport.is_closing():  # (uvicorn closes it: the reply said Connection: close)
                self.transport.close()
            self._arm(min(LINGER_S, self.guard.body_timeout_s), "reply_timeout")
            return
        if self.transport.is_closing():
            return
        if self._phase is _Phase.APP and not queued:
            self._enter(_Phase.IDLE)
        elif self._phase is _Phase.HEADERS:  # the next request's headers: now it may wait
            self.guard._waiting.setdefault(self, None)

    # Deadlines
    def _enter(self, phase: _Phase) -> None:
        self._phase = phase
        limits = self.guard
        if phase is _Phase.IDLE:
            self._head = 0
            self._arm(limits.idle_timeout_s, "idle_timeout")
        elif phase is _Phase.HEADERS:
            self._arm(limits.header_timeout_s, "header_timeout")
        elif phase is _Phase.BODY:
            self._arm(limits.body_timeout_s, "body_timeout")
        else:
            self._cancel()
        under_way = self.cycle is not None and not self.cycle.response_complete
        if phase in (_Phase.IDLE, _Phase.HEADERS) and not under_way:
            limits._waiting.setdefault(self, None)  # keeps its place from when it began to wait
        else:
            limits._waiting.pop(self, None)

    def _arm(self, seconds: float, reason: str) -> None:
        self._cancel()
        self._timer = self.loop.call_later(seconds, self._close, reason)

    def _cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _close(self, reason: str) -> None:
        self._cancel()
        self._closed = True
        self.guard._forget(self)
        self.guard.closed[reason] += 1
        if self.cycle is not None and not self.cycle.response_complete:
            self.scope[CLOSED_BY] = reason  # type: ignore[literal-required]  # (an extension of ours)
        if _log.isEnabledFor(logging.DEBUG):
            peer = f"{self.client[0]}:{self.client[1]}" if self.client else self._address
            _log.debug("%s: connection closed (%s, %s phase)", peer, reason, self._phase.value)
        transport = self._wire or self.transport  # during a handshake, the connection under its TLS
        if transport.get_write_buffer_size():
            transport.abort()  # what a client does not read is not kept for it
        else:
            transport.close()


def _announces_body(headers: list[tuple[bytes, bytes]]) -> bool:
    """Whether a request's headers (names in lower case) announce a body."""
    return any(
        (name == b"content-length" and value.strip() != b"0") or name == b"transfer-encoding" for name, value in headers
    )


def guarded_protocol(connections: Connections) -> type[asyncio.Protocol]:
    """uvicorn's HTTP protocol class (its ``Config(http=...)``) under ``connections``' limits."""
    return type("GuardedHttpToolsProtocol", (_GuardedProtocol,), {"guard": connections})
