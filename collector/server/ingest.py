"""What an ingest endpoint needs, in one object: who is sending, the body within the limits,
and the durable-commit path. Endpoints are plain functions of ``(request, ingest)``.

Every endpoint that takes records goes the same way, so each is one more :class:`Endpoint`
given to :func:`collector.server.app.create_app`; Gratia's (:mod:`collector.server.gratia_rmi`)
is, in short::

    async def gratia_rmi(request: Request, ingest: Ingest) -> Response:
        body = await ingest.body(request)               # 413 over the limit, gzip handled: body.data
        ...                                             # form -> XML -> documents; raise BadRequestError
        await ingest.make_durable("gratia", sender, [Parcel.encoded("gratia", docs)])   # 503 if not durable
        return PlainTextResponse("OK")

    Endpoint("/gratia-servlets/rmi", "gratia", Style.TEXT, gratia_rmi)

Errors raised there become ``Error: ...`` text replies through :mod:`collector.server.replies`,
with the same statuses and metrics as the JSON endpoint's.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import ParamSpec, TypeVar

from starlette.requests import Request
from starlette.responses import Response

from collector.errors import TooManyRequestsError
from collector.outbox import Parcel
from collector.server.body import Body, read_body
from collector.server.committer import GroupCommitter
from collector.server.connections import Trust, vouch
from collector.server.metrics import ServerMetrics
from collector.server.replies import Style
from collector.server.sources import Lease, SourceBudgets
from collector.server.tokens import TokenRing
from collector.settings import CollectorSettings

__all__ = ["Endpoint", "Ingest"]

_P = ParamSpec("_P")
_T = TypeVar("_T")


@dataclass(frozen=True)
class Ingest:
    """The collector's ingest path, shared by its endpoints."""

    settings: CollectorSettings
    tokens: TokenRing
    committer: GroupCommitter
    metrics: ServerMetrics
    # The memory requests without a token may hold (Gratia's: their senders carry none).
    anonymous: SourceBudgets
    # One thread for the CPU-bound part of a request (a Gratia envelope of hundreds of records
    # takes tens of milliseconds of CPU: bench_gratia.py). On the event loop it would stall
    # every other request for that long (pings, /healthz, whose load balancer may then drop the
    # instance, /v1/records, replies whose records are already durable); in this thread the loop
    # still gets the GIL every sys.getswitchinterval() (collector/server/serve.py). One thread,
    # because under the GIL more would not convert faster: it keeps envelopes first come, first
    # served, and one tree in memory at a time.
    cpu: concurrent.futures.ThreadPoolExecutor = field(
        default_factory=lambda: concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="fairacct: convert")
    )

    # Two threads for judging batches of /v1/records (parsing and checking every field: time
    # linear in the body, up to a second for a large one). Not the conversion's single thread:
    # a small batch would wait there behind every large one before it; beside another under
    # the GIL it gets its share of the CPU at every switch interval, so one heavy batch delays
    # another probe's reply by a fraction of its own time, never by all of it. Two, not more:
    # a hostile array costs up to 35 times its size while it is parsed (collector/server/body.py).
    judges: concurrent.futures.ThreadPoolExecutor = field(
        default_factory=lambda: concurrent.futures.ThreadPoolExecutor(2, thread_name_prefix="fairacct: judge")
    )

    # Two threads to inflate gzip bodies (zlib lets go of the GIL: they run beside the loop and
    # the conversion), so that one sender's bomb does not hold up another's body.
    inflating: concurrent.futures.ThreadPoolExecutor = field(
        default_factory=lambda: concurrent.futures.ThreadPoolExecutor(2, thread_name_prefix="fairacct: inflate")
    )

    # Requests under way by probe (read and written on the event loop only).
    under_way: Counter[str] = field(default_factory=Counter)

    def probe(self, request: Request) -> str:
        """The probe whose bearer token the request carries (UnauthorizedError otherwise)."""
        return self.tokens.probe_for(request.headers.get("authorization"))

    @contextlib.contextmanager
    def sender(self, request: Request) -> Iterator[str]:
        """The probe whose token the request carries (UnauthorizedError otherwise), counted as
        having this request under way until the block ends; TooManyRequestsError when it already
        has ``max_requests_per_probe`` (a probe sends one batch at a time: more at once is a
        misconfigured or hostile sender, whose bodies would hold the collector's memory), or
        ``max_connections_per_probe`` connections each with a request under way;
        SlowDownError when the store is behind and this probe holds its share of the backlog
        (:meth:`GroupCommitter.admit`), before the body is read: a refused request costs its
        headers alone."""
        probe = self.probe(request)
        # its connection is this probe's now: never closed for a stranger's; 429 past the probe's own cap
        vouch(request.scope, Trust.PROBE, probe)
        self.committer.admit(probe)
        limit = self.settings.max_requests_per_probe
        if self.under_way[probe] >= limit:
            raise TooManyRequestsError(
                f"probe {probe!r} has {limit} requests under way, the most one probe may have "
                "(collector.max_requests_per_probe); send the next once they are answered"
            )
        self.under_way[probe] += 1
        try:
            yield probe
        finally:
            self.under_way[probe] -= 1
            if not self.under_way[probe]:
                del self.under_way[probe]

    async def body(self, request: Request, limit: int | None = None, lease: Lease | None = None) -> Body:
        """The body, decompressed, within ``limit`` bytes (default ``max_body_bytes``;
        TooLargeError over it), inflated in the :attr:`inflating` threads; its bytes taken from
        ``lease`` (a request without a token: :meth:`anonymous_lease`)."""
        limit = self.settings.max_body_bytes if limit is None else limit
        return await read_body(request, limit, lease=lease, inflating=self.inflating)

    @contextlib.contextmanager
    def anonymous_lease(self, request: Request) -> Iterator[Lease]:
        """The share of the :attr:`anonymous` budgets a request without a token reads its body
        within, given back when the block ends."""
        lease = self.anonymous.lease(request.client.host if request.client else None)
        try:
            yield lease
        finally:
            lease.close()

    async def off_loop(self, fn: Callable[_P, _T], *args: _P.args, **kwargs: _P.kwargs) -> _T:
        """``fn(*args, **kwargs)`` in the :attr:`cpu` thread, awaited (its exception raised here)."""
        return await asyncio.wrap_future(self.cpu.submit(fn, *args, **kwargs))

    async def judged(self, fn: Callable[_P, _T], *args: _P.args, **kwargs: _P.kwargs) -> _T:
        """``fn(*args, **kwargs)`` in one of the :attr:`judges` threads, awaited (its exception raised here)."""
        return await asyncio.wrap_future(self.judges.submit(fn, *args, **kwargs))

    async def make_durable(self, endpoint: str, probe: str, parcels: Sequence[Parcel], *, refused: int = 0) -> int:
        """Commit ``parcels`` (records of one kind each) to the outbox and wait until they are on
        disk; count them (and ``refused`` records) for ``probe`` on ``endpoint``. Raises
        SlowDownError, OverloadedError or StoreError (nothing was stored) otherwise."""
        committed = await self.committer.commit(parcels, probe)
        self.metrics.judged(endpoint, probe, committed, refused)
        return committed


@dataclass(frozen=True)
class Endpoint:
    """A POST route that takes records: its path, its name in the metrics, its reply style."""

    path: str
    name: str
    style: Style
    handler: Callable[[Request, Ingest], Awaitable[Response]]
