"""Errors become replies here, and only here.

Handlers raise; :func:`answer` wraps each endpoint, turns what it raised into the reply, and
counts the request (status, reason, latency) in the metrics. The mapping is one table:

=========================  ======  =====================  ==========================================
raised                     status  reason (metric label)  body
=========================  ======  =====================  ==========================================
BadRequestError            400     bad_request            the message
UnauthorizedError          401     unauthorized           the message (+ ``WWW-Authenticate: Bearer``)
ForbiddenError             403     forbidden              the message
TooLargeError              413     too_large              the message
UnsupportedMediaError      415     unsupported_media      the message
OverloadedError            503     overloaded             the message (+ ``Retry-After``)
StoreError                 503     store_unavailable      "cannot make records durable right now"
anything else (a bug)      500     internal               "internal error" (the traceback is logged)
=========================  ======  =====================  ==========================================

Two reply styles: JSON endpoints (``/v1/records``) answer ``{"error": MESSAGE}``; text
endpoints (Gratia's ``/gratia-servlets/rmi``, whose probes read the body) answer
``Error: MESSAGE`` as text/plain, as GRACC's collector does. A store failure's details go to
the log, not to the sender.
"""

from __future__ import annotations

import enum
import logging
import time
from collections.abc import Awaitable, Callable

from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response

from collector.errors import (
    BadRequestError,
    ForbiddenError,
    OverloadedError,
    StoreError,
    TooLargeError,
    UnauthorizedError,
    UnsupportedMediaError,
)
from collector.server.metrics import ServerMetrics

__all__ = ["RETRY_AFTER_S", "Style", "answer", "error_reply"]

_log = logging.getLogger("fairacct.collector")

RETRY_AFTER_S = 10

_REPLIES: tuple[tuple[type[Exception], int, str], ...] = (
    (BadRequestError, 400, "bad_request"),
    (UnauthorizedError, 401, "unauthorized"),
    (ForbiddenError, 403, "forbidden"),
    (TooLargeError, 413, "too_large"),
    (UnsupportedMediaError, 415, "unsupported_media"),
    (OverloadedError, 503, "overloaded"),
    (StoreError, 503, "store_unavailable"),
)
_STORE_MESSAGE = "the collector cannot make records durable right now; retry later"


class Style(enum.Enum):
    """How an endpoint's errors are written: JSON ``{"error": ...}`` or text ``Error: ...``."""

    JSON = "json"
    TEXT = "text"


def error_reply(exc: Exception, style: Style, where: str = "") -> tuple[Response, str]:
    """The reply to ``exc`` and the reason to count it under (see the module docstring)."""
    for kind, status, reason in _REPLIES:
        if isinstance(exc, kind):
            break
    else:
        _log.error("%s: internal error", where or "request", exc_info=exc)
        status, reason = 500, "internal"
    if status == 500:
        message = "internal error"
    elif isinstance(exc, StoreError):
        _log.error("%s: 503: %s", where or "request", exc)
        message = _STORE_MESSAGE
    else:
        message = str(exc)
    headers = {}
    if status == 401:
        headers["WWW-Authenticate"] = 'Bearer realm="fairacct"'
    if status == 503:
        headers["Retry-After"] = str(RETRY_AFTER_S)
    if style is Style.TEXT:
        return PlainTextResponse(f"Error: {message}", status, headers=headers), reason
    return JSONResponse({"error": message}, status, headers=headers), reason


Handler = Callable[[Request], Awaitable[Response]]


def answer(endpoint: str, style: Style, handler: Handler, metrics: ServerMetrics) -> Handler:
    """``handler`` as a Starlette endpoint whose errors are replies and whose requests are counted.

    A reply the handler gives itself with a status of 400 or more (records refused one by one)
    is counted under the reason ``records_refused``.
    """

    async def run(request: Request) -> Response:
        start = time.perf_counter()
        reason: str | None = None
        try:
            response = await handler(request)
        except Exception as exc:  # noqa: BLE001  every error becomes a reply here, and nowhere else
            response, reason = error_reply(exc, style, f"{request.method} {request.url.path}")
        if reason is None and response.status_code >= 400:
            reason = "records_refused"
        metrics.request(endpoint, response.status_code, time.perf_counter() - start, reason)
        return response

    run.__name__ = f"{endpoint}_endpoint"
    return run
