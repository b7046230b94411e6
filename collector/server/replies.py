"""Errors become replies here, and only here.

Handlers raise; :func:`answer` wraps each endpoint, turns what it raised into the reply, and
counts the request (status, reason, latency) in the metrics. The mapping is one table:

=========================  ======  =====================  =================================  ==============================
raised                     status  reason (metric label)  JSON body (``/v1/records``)        text body (Gratia's, GRACC's)
=========================  ======  =====================  =================================  ==============================
SenderNotAllowedError      400     sender_not_allowed     ``{"error": MESSAGE}``             ``Error handling request: MESSAGE``
BadRequestError            400     bad_request            ``{"error": MESSAGE}``             ``Error handling request: MESSAGE``
RecordError                400     bad_record             ``{"error": MESSAGE}``             ``Error processing record: MESSAGE``
UnauthorizedError          401     unauthorized           the message (+ ``WWW-Authenticate: Bearer``)
ForbiddenError             403     forbidden              ``{"error": MESSAGE}``             ``Error handling request: MESSAGE``
SchemaTooNewError          409     schema_too_new         ``{"error": MESSAGE}``             ``Error handling request: MESSAGE``
TooLargeError              413     too_large              ``{"error": MESSAGE}``             ``Error: java.lang.IllegalStateException: Post too large``
UnsupportedMediaError      415     unsupported_media      ``{"error": MESSAGE}``             ``Error handling request: MESSAGE``
NotFoundError              404     not_found              ``{"error": MESSAGE}``             (none: a path no route has)
MethodNotAllowedError      405     method_not_allowed     ``{"error": MESSAGE}`` (+ ``Allow``) ``Error handling request: MESSAGE``
SlowDownError              429     backpressure           the message (+ ``Retry-After``)    ``Service unavailable right now``
TooManyRequestsError       429     too_many_requests      the message (+ ``Retry-After``)    ``Service unavailable right now``
OverloadedError            503     overloaded             the message (+ ``Retry-After``)    ``Service unavailable right now``
DiskFullError              503     disk_full              "... no room on its disk ..."      ``Service unavailable right now``
StoreError                 503     store_unavailable      "cannot make records durable ..."  ``Service unavailable right now``
DisconnectedError          499     disconnected           none is heard (one INFO line)      none is heard
anything else (a bug)      500     internal               "internal error" (logged)          ``Internal server error``
=========================  ======  =====================  =================================  ==============================

Two reply styles: JSON endpoints (``/v1/records``) answer ``{"error": MESSAGE}``; text
endpoints (Gratia's ``/gratia-servlets/rmi``) answer with GRACC's collector's texts as
text/plain (collector/gratia/wire.py), which gratia-probe reads: only exactly ``OK`` lets it
delete its records, and :data:`~collector.gratia.wire.POST_TOO_LARGE` makes it send smaller
bundles. A store failure's details, and a 503's reason, go to the log, not to the sender.
A client gone before its body was whole (499, nginx's "client closed request") is one line at
INFO: a fact about the network, not an error of the collector's.
"""  # noqa: E501 - the table of replies is wider than a line

from __future__ import annotations

import enum
import logging
import time
from collections.abc import Awaitable, Callable

from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response

from collector.errors import (
    BadRequestError,
    DisconnectedError,
    DiskFullError,
    ForbiddenError,
    MethodNotAllowedError,
    NotFoundError,
    OverloadedError,
    RecordError,
    SchemaTooNewError,
    SenderNotAllowedError,
    SlowDownError,
    StoreError,
    TooLargeError,
    TooManyRequestsError,
    UnauthorizedError,
    UnsupportedMediaError,
)
from collector.gratia.wire import INTERNAL_ERROR, POST_TOO_LARGE, UNAVAILABLE, record_error_reply, request_error_reply
from collector.server.metrics import ServerMetrics

__all__ = ["RETRY_AFTER_S", "Style", "answer", "bounded_path", "error_reply"]

_log = logging.getLogger("fairacct.collector")
_access = logging.getLogger("fairacct.collector.access")
"""One INFO line per request answered (``logging.getLogger("fairacct.collector.access")
.setLevel(logging.WARNING)`` turns it off); its fields are bounded (:data:`ACCESS_PATH_CHARS`),
so a client cannot make a line long."""

ACCESS_PATH_CHARS = 120
"""Characters of a request's path an access line keeps (the rest is cut, marked with ...)."""

RETRY_AFTER_S = 10

_REPLIES: tuple[tuple[type[Exception], int, str], ...] = (
    (SenderNotAllowedError, 400, "sender_not_allowed"),  # before BadRequestError, its base
    (BadRequestError, 400, "bad_request"),
    (RecordError, 400, "bad_record"),
    (UnauthorizedError, 401, "unauthorized"),
    (ForbiddenError, 403, "forbidden"),
    (NotFoundError, 404, "not_found"),
    (SchemaTooNewError, 409, "schema_too_new"),
    (MethodNotAllowedError, 405, "method_not_allowed"),
    (TooLargeError, 413, "too_large"),
    (UnsupportedMediaError, 415, "unsupported_media"),
    (SlowDownError, 429, "backpressure"),  # before TooManyRequestsError, its base
    (TooManyRequestsError, 429, "too_many_requests"),
    (OverloadedError, 503, "overloaded"),
    (DiskFullError, 503, "disk_full"),  # before StoreError, its base
    (StoreError, 503, "store_unavailable"),
    (DisconnectedError, 499, "disconnected"),
)
_STORE_MESSAGE = "the collector cannot make records durable right now; retry later"
_FULL_MESSAGE = "the collector's outbox has no room on its disk right now; nothing was stored, retry later"


class Style(enum.Enum):
    """How an endpoint's errors are written: JSON ``{"error": ...}``, or GRACC's texts."""

    JSON = "json"
    TEXT = "text"


def error_reply(exc: Exception, style: Style, where: str = "") -> tuple[Response, str]:
    """The reply to ``exc`` and the reason to count it under (see the module docstring)."""
    status, reason = next(((s, r) for kind, s, r in _REPLIES if isinstance(exc, kind)), (500, "internal"))
    if status == 500:
        _log.error("%s: internal error", where or "request", exc_info=exc)
        message = "internal error"
    elif isinstance(exc, DiskFullError):  # said once by the committer, on /healthz and in the access line
        _log.debug("%s: 503: %s", where or "request", exc)
        message = _FULL_MESSAGE
    elif isinstance(exc, StoreError):
        _log.error("%s: 503: %s", where or "request", exc)
        message = _STORE_MESSAGE
    else:
        message = str(exc)
    if status == 499:
        _log.info("%s: %s; nothing was stored", where or "request", message)
    headers = {}
    if status == 401:
        headers["WWW-Authenticate"] = 'Bearer realm="fairacct"'
    if isinstance(exc, MethodNotAllowedError):
        headers["Allow"] = ", ".join(exc.allowed)
    if status in (429, 503):
        headers["Retry-After"] = str(RETRY_AFTER_S)
    if style is Style.TEXT:
        if status in (413, 429, 503) and not isinstance(exc, StoreError):  # GRACC's text does not say why
            _log.warning("%s: %d: %s", where or "request", status, message)
        return PlainTextResponse(_gracc_text(exc, status, message), status, headers=headers), reason
    return JSONResponse({"error": message}, status, headers=headers), reason


def _gracc_text(exc: Exception, status: int, message: str) -> str:
    """The body GRACC's collector gives for the same error (see the module docstring)."""
    if status == 500:
        return INTERNAL_ERROR
    if status in (429, 503):
        return UNAVAILABLE
    if status == 413:
        return POST_TOO_LARGE
    if isinstance(exc, RecordError):
        return record_error_reply(message)
    return request_error_reply(message)


Handler = Callable[[Request], Awaitable[Response]]


def answer(
    endpoint: str, style: Style, handler: Handler, metrics: ServerMetrics, methods: tuple[str, ...] = ()
) -> Handler:
    """``handler`` as a Starlette endpoint whose errors are replies and whose requests are counted.

    A request whose method is not one of ``methods`` (when given) is answered 405 here, so it
    is logged and counted as every other (Starlette's own 405 is neither). A reply the handler
    gives itself with a status of 400 or more (records refused one by one) is counted under the
    reason ``records_refused``.
    """

    async def run(request: Request) -> Response:
        start = time.perf_counter()
        reason: str | None = None
        try:
            if methods and request.method not in methods:
                path, method = bounded_path(request.url.path), bounded_path(request.method)
                raise MethodNotAllowedError(f"{path} takes {' or '.join(methods)}, not {method}", methods)
            response = await handler(request)
        except Exception as exc:  # noqa: BLE001  every error becomes a reply here, and nowhere else
            client = f" from {request.client.host}:{request.client.port}" if request.client else ""
            response, reason = error_reply(exc, style, f"{request.method} {request.url.path}{client}")
        if reason is None and response.status_code >= 400:
            reason = "records_refused"
        seconds = time.perf_counter() - start
        metrics.request(endpoint, response.status_code, seconds, reason)
        if _access.isEnabledFor(logging.INFO):
            _access.info(
                "%s %s %s %d %s %.1f ms%s", request.client.host if request.client else "-",
                bounded_path(request.method), bounded_path(request.url.path), response.status_code,
                response.headers.get("content-length", "-"), seconds * 1000, f" {reason}" if reason else "",
            )  # fmt: skip
        return response

    run.__name__ = f"{endpoint}_endpoint"
    return run


def bounded_path(path: str) -> str:
    """A path as an access line shows it: printable, at most :data:`ACCESS_PATH_CHARS` characters."""
    shown = path.encode("ascii", "backslashreplace").decode("ascii").replace(" ", "%20")
    return shown if len(shown) <= ACCESS_PATH_CHARS else shown[:ACCESS_PATH_CHARS] + "..."
