"""The collector service: a Starlette application (ASGI, served by uvicorn).

Routes: ``POST /v1/records`` (fairacct records, :mod:`collector.server.v1_records`),
``POST /gratia-servlets/rmi`` (Gratia probes, :mod:`collector.server.gratia_rmi`), ``GET /healthz``, ``GET /metrics``
(Prometheus), ``GET /stats`` (GRACC's counters) and ``GET /openapi.json``. The lifespan starts
the outbox's writer thread (group commit, :mod:`collector.server.committer`) and the flusher
(:mod:`collector.server.flusher`) and the summarizer (:mod:`collector.server.summarizer`: the
store's daily summaries re-made on a cadence), and stops them, in that order reversed, on shutdown.
Neither needs the store to answer for the collector to start: the flusher checks its index
templates before it sends anything, and the summarizer waits for that check
(:mod:`collector.sinks.gate`); /healthz and /metrics say meanwhile that it has not passed.

Why Starlette and not FastAPI: the service's cost is per record, not per request. Validating
a batch with a pydantic model per record (what FastAPI's request models do) costs, on top of
the parse, about as much CPU again as everything else a record needs (parsing with orjson,
checking by hand the few fields the collector relies on, committing to the SQLite outbox): at
the collector's throughput target on one core (bench_collector.py) that alone would take the
whole core. The figures are in the benchmarks' README, in the source tree.
FastAPI's other gift, the OpenAPI document, is kept by hand here (:mod:`~collector.server.openapi`)
and held to the handlers by the fuzzing test. Starlette gives the routing, requests and
responses, and the lifespan, with nothing per record.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import signal
import socket
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from collector.errors import NotFoundError
from collector.release import release
from collector.server.committer import GroupCommitter
from collector.server.connections import Connections
from collector.server.flusher import STUCK_ROUNDS, Flusher, FlushState
from collector.server.gratia_rmi import GRATIA
from collector.server.ingest import Endpoint, Ingest
from collector.server.metrics import ConnectionGauges, OutboxGauges, ServerMetrics, StoreGauges, SummaryGauges
from collector.server.openapi import openapi_document
from collector.server.replies import Style, answer, bounded_path
from collector.server.room import Room
from collector.server.sources import SourceBudgets
from collector.server.summarizer import NIGHTLY_S, Schedule, Summarizer, SummaryState
from collector.server.tokens import TokenRing
from collector.server.v1_records import RECORDS
from collector.settings import CollectorSettings
from collector.sinks import Sink, open_store
from collector.sinks.gate import TemplateGate

__all__ = ["create_app", "store_gate", "store_sink_factory"]

_log = logging.getLogger("fairacct.collector")


def store_sink_factory(settings: CollectorSettings) -> Callable[[], Sink]:
    """Opens the sink of the settings' store URL (relative sqlite paths under the state dir)."""
    return lambda: open_store(settings.store, settings.store_opening())


def store_gate(settings: CollectorSettings) -> TemplateGate:
    """The gate of the collector's store: its templates checked (installed where
    ``store.install_templates`` allows) and the indices behind them moved, before records go in."""
    return TemplateGate(settings.store.url, install=settings.store.install_templates, migrate=True)


def create_app(
    settings: CollectorSettings,
    sink_factory: Callable[[], Sink] | None = None,
    *,
    endpoints: Sequence[Endpoint] = (RECORDS, GRATIA),
    connections: Connections | None = None,
    gate: TemplateGate | None = None,
) -> Starlette:
    """The collector's ASGI application.

    ``sink_factory`` opens the store the flusher writes to (default: the settings' store URL);
    it is called in the flusher's thread. ``endpoints`` are the ingest routes; ``connections``,
    those the server keeps (:mod:`collector.server.connections`), counted in /metrics; ``gate``,
    the store's (:func:`store_gate`; one checked at start is not checked again). The token
    directory is read now (ConfigError if it cannot be); the outbox is opened when the
    application starts (StoreError then).
    """
    metrics = ServerMetrics(ingest=tuple(e.name for e in endpoints))
    committer = GroupCommitter(
        settings.outbox_path,
        max_depth=settings.max_outbox_depth,
        max_records=settings.max_group_records,
        backpressure_depth=settings.backpressure_depth,
        reserve_bytes=settings.outbox_reserve_bytes,
        request_bytes=settings.max_records_body_bytes,
    )
    anonymous = SourceBudgets(math.ceil(settings.anonymous_memory_per_source), math.ceil(settings.anonymous_memory))
    ingest = Ingest(settings, TokenRing(settings.token_dir), committer, metrics, anonymous)
    flusher = Flusher(
        settings.outbox_path,
        sink_factory or store_sink_factory(settings),
        every_s=settings.flush_every_s,
        batch_size=settings.flush_batch_size,
        batch_bytes=settings.flush_bytes,
        metrics=metrics,
        on_depth=committer.set_depth,
        depth_mark=lambda: committer.admitted,
        writer=committer.write,
        keep_free_bytes=int(settings.outbox_keep_free_mib * 2**20),
        short_of_room=lambda: not committer.room().fits(committer.request_bytes),
        shrink_step_bytes=max(settings.outbox_reserve_bytes // 2, 2**20),
        gate=gate or store_gate(settings),
    )
    summarizer = Summarizer(
        sink_factory or store_sink_factory(settings),
        (
            Schedule("recent", settings.summaries_recent_days, settings.summaries_every_s),
            Schedule("nightly", settings.summaries_nightly_days, NIGHTLY_S),
        ),
        probe=f"collector@{socket.gethostname()}",
        ready=lambda: flusher.gate.checked,  # no summary into an index before its template is right
        lease_s=settings.summaries_lease_s,
    )
    document = openapi_document(settings, release(), ingest=tuple(e.path for e in endpoints))

    def gauges() -> OutboxGauges:
        state = flusher.state
        room = committer.room()
        full = _outbox_failing(committer, state, room, time.time())
        return OutboxGauges(
            committer.depth, state.oldest, state.dead_letters, state.last_store_success, committer.commits,
            room.free, bool(full and full.startswith(_FULL)), state.unrecorded, state.stuck_rounds,
        )  # fmt: skip

    async def healthz(request: Request) -> Response:
        now = time.time()
        state = flusher.state
        since = state.last_store_success or state.started
        stale = committer.depth > 0 and now - since > settings.store_stale_s
        revived = summarizer.revive()
        room = committer.room()
        outbox_failing = _outbox_failing(committer, state, room, now)
        failing = [
            *(["flusher stopped"] if not flusher.alive else []),
            *([outbox_failing] if outbox_failing else []),
            *(["summarizer stopped (started again)"] if revived else []),
            *([f"summarizer failing: {summarizer.state.crashed}"] if summarizer.state.crashed else []),
            *(["store stale"] if stale else []),
        ]
        status = "; ".join(failing) or "ok"
        degraded = _store_degraded(state) + _degraded(state) + _summaries_degraded(summarizer.state)
        # A full outbox disk wins over a store that is down or unchecked: requests get 503 then, and
        # the load balancer must hear it (status and 503), while a store's outage alone is a 200 (the
        # records are taken and wait). Both are said all the same: the status names the disk, and
        # "degraded" keeps the store's line, "disk_full" and "store_reachable" are both set.
        if status == "ok" and degraded:
            status = "degraded"  # taking and delivering records, and something to look at: 200 all the same
        doc = {
            "status": status,
            "degraded": degraded,
            "outbox": {
                "depth": committer.depth,
                "oldest": _iso(state.oldest),
                "dead_letters": sum(state.dead_letters.values()),
                "disk_full": bool(outbox_failing and outbox_failing.startswith(_FULL)),
                "free_bytes": room.free,
                "unrecorded": state.unrecorded,
                "last_dead_letter": _dead_letter(state.last_dead_letter),
            },
            "delivery": {
                "stuck": _stuck(state),
                "stuck_rounds": state.stuck_rounds,
                "stuck_since": _iso(state.stuck_since),
            },
            "last_flush": _iso(state.last_flush),
            "last_store_success": _iso(state.last_store_success),
            "last_error": state.last_error,
            "store": settings.store.url,
            "store_reachable": _reachable(state),
            "templates_checked": state.templates_checked,
            "store_stale_s": settings.store_stale_s,
            "summaries": {
                "last_run": {name: _iso(at) for name, at in summarizer.state.last_run.items()},
                "failures": summarizer.state.failures,
                "last_error": summarizer.state.last_error,
                "crashes": summarizer.state.crashes,
                "crashed": summarizer.state.crashed,
                "restarts": summarizer.state.restarts,
                "waiting_for_store": summarizer.state.waiting,
                "deferred": summarizer.state.deferred,
                "busy": summarizer.state.busy,
                "deleted": summarizer.state.deleted,
            },
        }
        return JSONResponse(doc, status_code=200 if status in ("ok", "degraded") else 503)

    async def metrics_text(request: Request) -> Response:
        held = None
        if connections is not None:
            held = ConnectionGauges(connections.open, dict(connections.closed), connections.anonymous, anonymous.in_all)
        summarizer.revive()
        done = summarizer.state
        summaries = SummaryGauges(summarizer.alive and done.crashed is None, done.runs, done.failures, done.crashes,
                                  done.restarts, done.deferred, done.deleted)  # fmt: skip
        store = StoreGauges(_reachable(flusher.state), flusher.state.templates_checked)
        text = metrics.render(gauges(), held, summaries, store)
        return PlainTextResponse(text, media_type="text/plain; version=0.0.4; charset=utf-8")

    async def stats(request: Request) -> Response:
        return JSONResponse(metrics.stats())

    async def openapi(request: Request) -> Response:
        return JSONResponse(document)

    def bind(endpoint: Endpoint) -> Callable[[Request], Awaitable[Response]]:
        async def handler(request: Request) -> Response:
            return await endpoint.handler(request, ingest)

        return answer(endpoint.name, endpoint.style, handler, metrics, ("POST",))

    # each handler an ASGI app of its own (_Answered): Route then takes every method, and a wrong
    # one is answered (405) by answer(), logged and counted, not by Starlette
    routes = [Route(e.path, _Answered(bind(e))) for e in endpoints] + [
        Route(path, _Answered(answer(name, Style.JSON, fn, metrics, ("GET", "HEAD"))))
        for path, name, fn in (
            ("/healthz", "healthz", healthz),
            ("/metrics", "metrics", metrics_text),
            ("/stats", "stats", stats),
            ("/openapi.json", "openapi", openapi),
        )
    ]
    paths = ", ".join(route.path for route in routes)

    async def no_such_path(request: Request) -> Response:
        raise NotFoundError(f"no such path {bounded_path(request.url.path)}; this collector answers {paths}")

    # every path no route has (a probe's wrong store.url): counted under the endpoint ``unknown``
    # (its path is in the access line, never a metric label)
    not_found = _Answered(answer("unknown", Style.JSON, no_such_path, metrics))

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        loop = asyncio.get_running_loop()
        if threading.current_thread() is threading.main_thread():  # where signals are delivered
            loop.add_signal_handler(signal.SIGHUP, _said_not_to_reload)
        await asyncio.to_thread(committer.start)
        flusher.start()
        summarizer.start()
        _log.info(
            "collector ready: outbox %s, store %s, %d probe token(s)", settings.outbox_path, settings.store.url,
            len(ingest.tokens.probes),
        )  # fmt: skip
        try:
            yield
        finally:
            await asyncio.to_thread(summarizer.stop)
            await asyncio.to_thread(ingest.cpu.shutdown)  # uvicorn answered what was under way: nothing waits
            await asyncio.to_thread(ingest.judges.shutdown)
            await asyncio.to_thread(ingest.inflating.shutdown)
            await asyncio.to_thread(flusher.stop)  # its last settle goes through the committer
            await asyncio.to_thread(committer.stop)
            _log.info("collector stopped")

    app = Starlette(routes=routes, lifespan=lifespan)
    app.router.default = not_found
    app.router.redirect_slashes = False  # a 307 for /v1/records/ would be an answer no one counts
    return app


def _said_not_to_reload() -> None:
    """SIGHUP (``systemctl reload``), called on the event loop (never inside a signal handler, where
    a log line could land in the middle of another): the listener, the outbox and the store are
    built from the configuration at start."""
    _log.warning(
        "SIGHUP: the configuration is not reloaded while the collector runs (the token directory is re-read "
        "as it changes); restart it to apply a change (systemctl restart fairacct-collector)"
    )


class _Answered:
    """A handler of :func:`~collector.server.replies.answer` as an ASGI application: as such
    Starlette's Route passes it every method and the router's default every path."""

    def __init__(self, handler: Callable[[Request], Awaitable[Response]]) -> None:
        self.handler = handler

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":  # a websocket: closed, as Starlette's own default does
            await send({"type": "websocket.close"})
            return
        response = await self.handler(Request(scope, receive))
        await response(scope, receive, send)


def _reachable(state: FlushState) -> bool | None:
    """Whether the store answered as a store the last time the flusher asked (a refusal is an
    answer); None while that is not known (before the first check, or between a failed round and
    the next check)."""
    if state.templates_checked or state.store_refuses:
        return True
    return False if state.store_problem is not None else None


def _store_degraded(state: FlushState) -> list[str]:
    """The store's templates could not be checked: records are taken and wait (200 all the same:
    a collector out of its load balancer during a store's outage would take nothing at all)."""
    if state.store_problem is None:
        return []
    if state.store_refuses:
        return [f"the store refuses: {state.store_problem}; records are taken and wait in the outbox until it is fixed"]
    return [
        f"the store is unreachable ({state.store_problem}): its index templates are unchecked; records are taken "
        "and wait in the outbox until it answers"
    ]


def _degraded(state: FlushState) -> list[str]:
    """What a running collector's operator should look at, though records are taken: records
    set aside (the store refused them for good), delivery stuck (the store took none of the
    records waiting in :data:`~collector.server.flusher.STUCK_ROUNDS` rounds in a row), flush
    rounds that failed unexpectedly."""
    out = []
    if dead := sum(state.dead_letters.values()):
        said = f"{dead} record(s) set aside: the store refused them for good (dead letters in the outbox)"
        if (last := state.last_dead_letter) is not None:
            said += f"; the last, {last['kind']} {last['id']} at {_iso(last['failed_at'])}: {last['error']}"
        out.append(said)
    if _stuck(state):
        out.append(
            f"delivery stuck: the store took none of the {state.depth} record(s) waiting in {state.stuck_rounds} "
            f"flush rounds in a row, since {_iso(state.stuck_since)}: {state.last_error}"
        )
    if state.crashed:
        out.append(f"the last flush round failed unexpectedly ({state.crashes} so far): {state.crashed}")
    return out


def _stuck(state: FlushState) -> bool:
    return state.stuck_rounds >= STUCK_ROUNDS and state.depth > 0


def _dead_letter(letter: dict[str, Any] | None) -> dict[str, Any] | None:
    """The newest dead letter as /healthz shows it (its time in RFC 3339)."""
    return None if letter is None else {**letter, "failed_at": _iso(letter["failed_at"])}


OUTBOX_FAILURE_HOLD_S = 300.0
"""How long /healthz reports a failed outbox commit when no commit came after it (seconds):
long enough for probes' retries to come and tell again, short enough that a collector whose
disk was freed while no request came is not kept out of its load balancer for ever."""


_FULL = "outbox disk full: "


def _outbox_failing(committer: GroupCommitter, state: FlushState, room: Room, now: float) -> str | None:
    """Why requests would get 503 from the outbox now, or records wait that it cannot write
    down, as /healthz says it; None when neither. A full file system (``outbox disk full: ...``)
    is said while there is no room for a request's body (the reserve kept), while the flusher
    cannot write to the outbox, or after a commit that found no room until one succeeds or room
    was freed since (within :data:`OUTBOX_FAILURE_HOLD_S`); any other failed commit
    (``outbox failing: ...``) until one succeeds, within that hold."""
    full = []
    if not room.fits(committer.request_bytes):
        full.append(f"{room.says(committer.request_bytes)}; requests get 503 until there is room")
    if state.disk_full is not None:
        waiting = f"{state.unrecorded} record(s) the store took wait to be written down, " if state.unrecorded else ""
        why = f"the flusher cannot write to the outbox: {waiting}nothing is sent until it can"
        full.append(f"{why} ({state.disk_full})")
    if full:
        return _FULL + "; ".join(full)
    failing = committer.failing
    if failing is None or now - failing[1] >= OUTBOX_FAILURE_HOLD_S:
        return None
    if committer.full_at_free is None:
        return f"outbox failing: the last commit failed, every request gets 503 until one succeeds ({failing[0]})"
    if room.free is None or room.free <= committer.full_at_free:  # no room freed since (a quota, a size limit)
        return f"{_FULL}the last commit found no room, every request gets 503 until one succeeds ({failing[0]})"
    return None


def _summaries_degraded(state: SummaryState) -> list[str]:
    """Summary runs the store failed (the summaries are late; records are taken all the same)."""
    return [f"the last summary run failed ({state.failures} so far): {state.last_error}"] if state.last_error else []


def _iso(seconds: float | None) -> str | None:
    return None if seconds is None else datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
