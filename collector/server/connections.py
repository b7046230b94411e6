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
gone (:class:`~collector.errors.DisconnectedError`, one line at INFO). At most
``max_connections`` are open: a new connection beyond closes the one that has waited longest
without a request under way (idle, or still sending headers: what idle and slow clients hold,
never a request being answered), and when every connection has a request under way the new
one is closed at once. Closes are counted by reason (:attr:`Connections.closed`, in
``/metrics``) and logged at DEBUG: a flood of them must not flood the log.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, ClassVar

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from collector.settings import CollectorSettings

__all__ = ["CLOSED_BY", "Connections", "guarded_protocol"]

# The key of a request's ASGI scope that says why the collector closed its connection, if it did
# (the application then tells the client's leaving from the collector's deadline).
CLOSED_BY = "fairacct.closed_by"

_log = logging.getLogger("fairacct.collector")

_HEADERS_TOO_LARGE = (
    b"HTTP/1.1 431 Request Header Fields Too Large\r\n"
    b"content-type: text/plain; charset=utf-8\r\ncontent-length: 30\r\nconnection: close\r\n\r\n"
    b"request headers are too large\n"
)


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
    idle_timeout_s: float
    header_timeout_s: float
    body_timeout_s: float
    max_header_bytes: int
    closed: Counter[str] = field(default_factory=Counter)
    _open: set[_GuardedProtocol] = field(default_factory=set, repr=False)
    # Connections without a request under way, the longest waiting first (dicts keep their order).
    _waiting: dict[_GuardedProtocol, None] = field(default_factory=dict, repr=False)

    @classmethod
    def of(cls, settings: CollectorSettings) -> Connections:
        return cls(
            settings.max_connections,
            settings.idle_timeout_s,
            settings.header_timeout_s,
            settings.body_timeout_s,
            settings.max_header_bytes,
        )

    @property
    def open(self) -> int:
        """Connections open now (those refused at the cap not counted)."""
        return len(self._open)

    def _admit(self, connection: _GuardedProtocol) -> bool:
        """Count ``connection`` in, closing the longest waiting one at the cap; False when it
        must be refused (at the cap, every connection has a request under way)."""
        if len(self._open) >= self.max_connections:
            oldest = next(iter(self._waiting), None)
            if oldest is None:
                return False
            oldest._close("evicted")
        self._open.add(connection)
        return True


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

    # The connection
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if not self.guard._admit(self):
            self._close("refused")
            return
        self._enter(_Phase.IDLE)

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel()
        self.guard._open.discard(self)
        self.guard._waiting.pop(self, None)
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._phase in (_Phase.IDLE, _Phase.HEADERS):
            self._head += len(data)
        super().data_received(data)
        if (
            self._phase in (_Phase.IDLE, _Phase.HEADERS)
            and self._head > self.guard.max_header_bytes
            and not self.transport.is_closing()
        ):
            self.transport.write(_HEADERS_TOO_LARGE)
            self._close("headers_too_large")

    def pause_writing(self) -> None:
        super().pause_writing()
        if self._phase is _Phase.APP:  # a reply the client does not read: it has the body's time
            self._arm(self.guard.body_timeout_s, "reply_timeout")

    def resume_writing(self) -> None:
        super().resume_writing()
        if self._phase is _Phase.APP:
            self._cancel()

    # The parser's callbacks, and uvicorn's when a reply is sent
    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._enter(_Phase.HEADERS)

    def on_headers_complete(self) -> None:
        super().on_headers_complete()
        self._head = 0
        self._enter(_Phase.BODY)

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._enter(_Phase.APP)

    def on_response_complete(self) -> None:
        queued = bool(self.pipeline)  # a pipelined request uvicorn starts now: still under way
        super().on_response_complete()
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
        self.guard._waiting.pop(self, None)
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
