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

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from collector.errors import NotFoundError
from collector.release import release
from collector.server.committer import GroupCommitter
from collector.server.connections import Connections
from collector.server.flusher import Flusher
from collector.server.gratia_rmi import GRATIA
from collector.server.health import health_document, outbox_gauges, reachable
from collector.server.ingest import Endpoint, Ingest
from collector.server.metrics import ConnectionGauges, ServerMetrics, StoreGauges, SummaryGauges
from collector.server.openapi import openapi_document
from collector.server.replies import Style, answer, bounded_path
from collector.server.sources import SourceBudgets
from collector.server.summarizer import NIGHTLY_S, Schedule, Summarizer
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
    flusher = _flusher(settings, sink_factory or store_sink_factory(settings), committer, metrics, gate)
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

    async def healthz(request: Request) -> Response:
        doc, code = health_document(settings, committer, flusher, summarizer, time.time())
        return JSONResponse(doc, status_code=code)

    async def metrics_text(request: Request) -> Response:
        held = None
        if connections is not None:
            held = ConnectionGauges(connections.open, dict(connections.closed), connections.anonymous, anonymous.in_all)
        summarizer.revive()
        done = summarizer.state
        summaries = SummaryGauges(summarizer.alive and done.crashed is None, done.runs, done.failures, done.crashes,
                                  done.restarts, done.deferred, done.deleted)  # fmt: skip
        store = StoreGauges(reachable(flusher.state), flusher.state.templates_checked)
        text = metrics.render(outbox_gauges(committer, flusher), held, summaries, store)
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

    lifespan = _lifespan(settings, ingest, committer, flusher, summarizer)
    app = Starlette(routes=routes, lifespan=lifespan)
    app.router.default = not_found
    app.router.redirect_slashes = False  # a 307 for /v1/records/ would be an answer no one counts
    return app


def _flusher(
    settings: CollectorSettings,
    sink_factory: Callable[[], Sink],
    committer: GroupCommitter,
    metrics: ServerMetrics,
    gate: TemplateGate | None,
) -> Flusher:
    """The flusher of the settings' outbox to the store ``sink_factory`` opens, beside ``committer``."""
    return Flusher(
        settings.outbox_path,
        sink_factory,
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


def _lifespan(
    settings: CollectorSettings, ingest: Ingest, committer: GroupCommitter, flusher: Flusher, summarizer: Summarizer
) -> Callable[[Starlette], contextlib.AbstractAsyncContextManager[None]]:
    """The application's lifespan: the committer, the flusher and the summarizer started, and
    stopped in that order reversed (the ingest's pools between), on shutdown."""

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

    return lifespan


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
