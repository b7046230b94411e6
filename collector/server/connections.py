"""Connections: deadlines, a cap, and a bound on headers, below the application.

uvicorn holds a connection for as long as its client likes (one that sends nothing, headers
that come a byte a minute, a body that never ends: its keep-alive timeout runs only between
requests), takes headers of any size, and accepts connections until the process has no file
descriptor left, when it refuses everyone, probes included. :func:`guarded_protocol` is
uvicorn's HTTP protocol (httptools') with one deadline at a time on every connection:

=======  ==============================  ====================  =========================================
phase    begins                          deadline              ends
=======  ==============================  ====================  =========================================
idle     the connection is made, or      ``idle_timeout_s``    a request's first byte
         its last reply is sent
headers  a request's first byte          ``header_timeout_s``  the headers are whole (at most
                                                               ``max_header_bytes``: else 431, closed)
body     the headers are whole           ``body_timeout_s``    the body is whole, whether or not the
                                                               application reads it
app      the body is whole               none: the             the reply is sent; but a reply the
                                         application's (a      client stops reading must move again
                                         reply waits for the   within ``body_timeout_s``
                                         disk)
=======  ==============================  ====================  =========================================

Past its deadline a connection is closed; an application reading its body then sees the client
gone (:class:`~collector.errors.DisconnectedError`, one line at INFO). A reply given while the
body is still owed (a request refused before its body: no token, a stranger at Gratia's door, a
path that takes none) leaves a stranger's connection at most ``LINGER_S`` more to send the rest,
which is read and dropped (closing at once, with unread bytes, would reset the connection and
lose the reply); a probe's or a sender's keeps its body's deadline.

Who holds a connection (issue 35): every connection is a stranger's until the application
vouches for it (:func:`vouch`): a probe's token makes it a probe's for good, a Gratia request
from a listed network a sender's. At most ``max_connections`` are open, and of them at most
``max_anonymous`` are not probes'. A new connection beyond either cap closes one without a
probe's token, in this order: one refused before its body, the oldest stranger's of the address
that holds the most (a flood from one address closes its own), the oldest sender's, whatever
phase it is in (stalled mid-body too); when there is none, the probe's
connection that has waited longest without a request under way; when every connection is a
probe's with a request under way, the new one is closed at once. So strangers cannot keep a
probe out, whatever they send and however slowly, and cost at most ``max_anonymous``
connections of at most ``max_header_bytes`` of headers each. Closes are counted by reason
(:attr:`Connections.closed`, in ``/metrics``) and logged at DEBUG: a flood of them must not
flood the log.

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
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from collector.addresses import shown
from collector.settings import CollectorSettings

__all__ = ["CLOSED_BY", "LINGER_S", "Connections", "Trust", "guarded_protocol", "vouch"]

# The key of a request's ASGI scope that says why the collector closed its connection, if it did
# (the application then tells the client's leaving from the collector's deadline).
CLOSED_BY = "fairacct.closed_by"
# The key of a request's ASGI scope that holds its connection's :meth:`_GuardedProtocol._vouch`.
_VOUCH = "fairacct.vouch"

LINGER_S = 5.0
"""Seconds a stranger's connection may go on sending a body its reply refused."""

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


def vouch(scope: Mapping[str, Any], trust: Trust) -> None:
    """Tell the connection a request came on that it is from someone ``trust`` (nothing when the
    application runs without :class:`Connections`, in a test's own server)."""
    hook = scope.get(_VOUCH)
    if hook is not None:
        hook(trust)


class _Phase(enum.Enum):
    IDLE = "idle"
    HEADERS = "header"
    BODY = "body"
    APP = "app"


@dataclass(eq=False)
class Connections:
    """The collector's connections: their limits (see the module docstring), how many are open,
    and how many were closed, by reason (``idle_timeout``, ``header_timeout``, ``body_timeout``,
    ``reply_timeout``, ``headers_too_large``, ``evicted``: closed for a new one at the cap,
    ``refused``: a new one at the cap when none could be closed). Used on the event loop only."""

    max_connections: int
    max_anonymous: int
    idle_timeout_s: float
    header_timeout_s: float
    body_timeout_s: float
    max_header_bytes: int
    closed: Counter[str] = field(default_factory=Counter)
    _open: set[_GuardedProtocol] = field(default_factory=set, repr=False)
    # Connections without a request under way, the longest waiting first (dicts keep their order).
    _waiting: dict[_GuardedProtocol, None] = field(default_factory=dict, repr=False)
    # Connections not (yet) a probe's, the oldest first.
    _anonymous: dict[_GuardedProtocol, None] = field(default_factory=dict, repr=False)

    @classmethod
    def of(cls, settings: CollectorSettings) -> Connections:
        return cls(
            settings.max_connections,
            min(settings.max_anonymous_connections, settings.max_connections),
            settings.idle_timeout_s,
            settings.header_timeout_s,
            settings.body_timeout_s,
            settings.max_header_bytes,
        )

    @property
    def open(self) -> int:
        """Connections open now (those refused at the cap not counted)."""
        return len(self._open)

    @property
    def anonymous(self) -> int:
        """Connections open now that are not probes'."""
        return len(self._anonymous)

    def _admit(self, connection: _GuardedProtocol) -> bool:
        """Count ``connection`` in (a stranger's), closing another at a cap (see the module
        docstring); False when it must be refused (every one is a probe's, under way)."""
        if len(self._anonymous) >= self.max_anonymous or len(self._open) >= self.max_connections:
            victim = self._victim()
            if victim is None:
                return False
            victim._close("evicted")
        self._open.add(connection)
        self._anonymous[connection] = None
        return True

    def _victim(self) -> _GuardedProtocol | None:
        """The connection a new one closes (see the module docstring), None if none may be."""
        oldest: dict[str, _GuardedProtocol] = {}  # each address's oldest stranger
        held: Counter[str] = Counter()  # strangers' connections by address
        for connection in self._anonymous:  # the oldest first
            if connection._refused:
                return connection
            if connection._trust is Trust.STRANGER:
                held[connection._address] += 1
                oldest.setdefault(connection._address, connection)
        if held:  # a flood from one address closes its own (ties: the oldest's address)
            return oldest[max(held, key=held.__getitem__)]
        return next(iter(self._anonymous), None) or next(iter(self._waiting), None)


class _GuardedProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol under the :class:`Connections`' limits (made by
    :func:`guarded_protocol`). It hooks the parser's callbacks and uvicorn's response callback:
    uvicorn's own behaviour is unchanged, only deadlines and closes are added."""

    guard: ClassVar[Connections]  # (uvicorn's ``self.connections`` is its set of them)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._phase = _Phase.IDLE
        self._timer: asyncio.TimerHandle | None = None
        self._head = 0  # bytes received of the request line and headers (by whole reads)
        self._block = 0  # bytes of the request line and headers, as the parser reads them
        self._trust = Trust.STRANGER
        self._refused = False  # its request was answered while its body was owed
        self._closed = False  # by the guard (the parser's callbacks are then ignored)
        self._address = "-"  # the peer's (a proxy's, behind one)

    # The connection
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if self.client:  # an IPv4 peer of a socket on "::" is ::ffff:a.b.c.d: its requests see a.b.c.d
            self.client = (shown(self.client[0]), self.client[1])
        self._address = self.client[0] if self.client else "-"
        if not self.guard._admit(self):
            self._close("refused")
            return
        self._enter(_Phase.IDLE)

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel()
        self.guard._open.discard(self)
        self.guard._waiting.pop(self, None)
        self.guard._anonymous.pop(self, None)
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._closed:  # what comes after a close the guard made is not parsed
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

    def _vouch(self, trust: Trust) -> None:
        if trust <= self._trust or self._closed:
            return
        self._trust = trust
        if trust is Trust.PROBE:
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
        self._refused = False
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
        self._enter(_Phase.BODY)

    def on_body(self, body: bytes) -> None:
        if not self._closed:
            super().on_body(body)

    def on_message_complete(self) -> None:
        if self._closed:
            return
        super().on_message_complete()
        answered = self.cycle is not None and self.cycle.response_complete  # the rest of a refused body
        self._enter(_Phase.IDLE if answered and not self.pipeline else _Phase.APP)

    def on_response_complete(self) -> None:
        queued = bool(self.pipeline)  # a pipelined request uvicorn starts now: still under way
        super().on_response_complete()
        if self.transport.is_closing():
            return
        if self._phase is _Phase.APP and not queued:
            self._enter(_Phase.IDLE)
        elif self._phase is _Phase.HEADERS:  # the next request's headers: now it may wait
            self.guard._waiting.setdefault(self, None)
        elif self._phase is _Phase.BODY:  # answered before its body was whole: refused
            self._refused = True
            if self._trust is Trust.STRANGER:  # a probe or a sender keeps the body's deadline to send the rest
                self._arm(min(LINGER_S, self.guard.body_timeout_s), "body_timeout")

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
        self.guard._waiting.pop(self, None)
        self.guard._anonymous.pop(self, None)
        self.guard.closed[reason] += 1
        if self.cycle is not None and not self.cycle.response_complete:
            self.scope[CLOSED_BY] = reason  # type: ignore[literal-required]  # (an extension of ours)
        if _log.isEnabledFor(logging.DEBUG):
            peer = f"{self.client[0]}:{self.client[1]}" if self.client else "a client"
            _log.debug("%s: connection closed (%s, %s phase)", peer, reason, self._phase.value)
        if self.transport.get_write_buffer_size():
            self.transport.abort()  # what a client does not read is not kept for it
        else:
            self.transport.close()


def guarded_protocol(connections: Connections) -> type[asyncio.Protocol]:
    """uvicorn's HTTP protocol class (its ``Config(http=...)``) under ``connections``' limits."""
    return type("GuardedHttpToolsProtocol", (_GuardedProtocol,), {"guard": connections})
