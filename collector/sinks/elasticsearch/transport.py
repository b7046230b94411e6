"""One HTTP request to the cluster, in two flavours behind one small interface (:class:`Client`):
the official ``elasticsearch`` client for ``http(s)://`` URLs and ``opensearch-py``, imported
only then, for ``opensearch+http(s)://`` URLs. Failures become :class:`ElasticsearchError`."""

from __future__ import annotations

import re
import ssl
from collections.abc import Mapping
from http import HTTPStatus
from typing import TYPE_CHECKING, Any, Protocol

from elastic_transport import ApiError, ConnectionTimeout, HttpHeaders, TlsError, TransportError, Urllib3HttpNode
from elastic_transport import ConnectionError as TransportConnectionError
from elastic_transport.client_utils import DEFAULT, DefaultType

from collector.errors import ConfigError, ElasticsearchError
from collector.sinks.cycles import break_cycles
from collector.sinks.elasticsearch.auth import Auth, tls_options
from collector.sinks.tls import tls_reason

if TYPE_CHECKING:
    from elastic_transport._node import NodeApiResponse

__all__ = [
    "FLAVOURS",
    "Client",
    "ElasticsearchClient",
    "OpenSearchClient",
    "PlainJsonNode",
    "answer_reason",
    "body_reason",
    "error_text",
    "is_transient",
]

FLAVOURS = {
    "http": "elasticsearch",
    "https": "elasticsearch",
    "opensearch+http": "opensearch",
    "opensearch+https": "opensearch",
}
_TRANSIENT_STATUS = frozenset({408, 429})


class Client(Protocol):
    """One HTTP request to the cluster, decoded; failures raise :class:`ElasticsearchError`
    whose message starts with ``where`` and names ``what`` was being done."""

    def request(
        self, method: str, path: str, body: bytes | str | Mapping[str, Any] | None, *, what: str, ndjson: bool = False
    ) -> Any: ...

    def close(self) -> None: ...


def is_transient(status: int) -> bool:
    """Whether a request answered with ``status`` may pass if sent again."""
    return status in _TRANSIENT_STATUS or status >= 500


def error_text(error: object) -> str:
    """``type: reason (caused by type: reason)`` from an Elasticsearch error object."""
    if not isinstance(error, Mapping):
        return str(error)
    text = f"{error.get('type', 'error')}: {error.get('reason', '')}".rstrip(": ")
    cause = error.get("caused_by")
    if isinstance(cause, Mapping) and cause.get("reason"):
        text += f" (caused by {cause.get('type', 'error')}: {cause['reason']})"
    return text


def body_reason(body: object, default: str) -> str:
    error = body.get("error") if isinstance(body, Mapping) else None
    return error_text(error) if error else default


def answer_reason(status: int, body: object, message: object) -> str:
    """``STATUS reason`` of an error answer: the server's error, else the client's message, else
    the status's name (a 413 comes with an empty body, which the clients say as ``None`` or ``''``)."""
    said = "" if message is None else str(message)
    if said in ("", "None"):
        try:
            said = HTTPStatus(status).phrase
        except ValueError:
            said = "no reason given"
    return f"{status} {body_reason(body, said)}"


# Elasticsearch 8/9 clients ask for application/vnd.elasticsearch+json; compatible-with=N, which
# OpenSearch-compatible servers refuse with 406. Elasticsearch (7.x and later) takes the plain
# types as its own current version, so nothing is lost against the real thing.
_COMPAT_MIMETYPE = re.compile(r"application/vnd\.elasticsearch\+([\w.-]+)(?:\s*;\s*compatible-with=\d+)?")


class PlainJsonNode(Urllib3HttpNode):
    """A urllib3 node that sends ``application/json`` / ``application/x-ndjson`` on the wire."""

    def perform_request(
        self,
        method: str,
        target: str,
        body: bytes | None = None,
        headers: HttpHeaders | None = None,
        request_timeout: DefaultType | float | None = DEFAULT,
    ) -> NodeApiResponse:
        if headers:
            headers = headers.copy()
            for name in ("accept", "content-type"):
                value = headers.get(name)
                if value:
                    headers[name] = _COMPAT_MIMETYPE.sub(r"application/\1", value)
        return super().perform_request(method, target, body, headers, request_timeout)


class ElasticsearchClient:
    """The official client: ``http(s)://`` URLs."""

    def __init__(self, url: str, where: str, auth: Auth, *, verify_certs: bool, timeout_s: float) -> None:
        from elasticsearch import Elasticsearch

        self._where = where
        options: dict[str, Any] = {}
        if auth.api_key is not None:
            options["api_key"] = auth.api_key.reveal()
        if auth.username is not None and auth.password is not None:
            options["basic_auth"] = (auth.username, auth.password.reveal())
        options.update(tls_options(url, verify_certs, auth))
        # No retries in the client: the sink retries whole bulks itself, with its own budget.
        try:
            self._es = Elasticsearch(
                url,
                node_class=PlainJsonNode,
                request_timeout=timeout_s,
                max_retries=0,
                retry_on_timeout=False,
                retry_on_status=(),
                **options,
            )
        except (ValueError, OSError, ssl.SSLError) as exc:
            raise ConfigError(f"{where}: cannot set up the Elasticsearch client ({exc})") from exc

    def request(
        self, method: str, path: str, body: bytes | str | Mapping[str, Any] | None, *, what: str, ndjson: bool = False
    ) -> Any:
        headers = {"accept": "application/json"}
        if body is not None:
            headers["content-type"] = "application/x-ndjson" if ndjson else "application/json"
        try:
            return self._es.perform_request(method, path, headers=headers, body=body).body
        except ApiError as exc:
            status = exc.meta.status
            if 200 <= status < 300:  # UnsupportedProductError: the answer lacked X-Elastic-Product
                reason = "the server is not Elasticsearch (for OpenSearch, use an opensearch+http(s):// URL)"
            else:
                reason = answer_reason(status, exc.body, exc.message)
            raise ElasticsearchError(
                f"{self._where}: {what} failed: {reason}", status=status, transient=is_transient(status)
            ) from break_cycles(exc)
        except TransportError as exc:  # no answer: its exception holds the body in a cycle (collector.sinks.cycles)
            # a timeout is not a ConnectionError in elastic_transport; it may pass as a refused connection may
            transient = isinstance(exc, (TransportConnectionError, ConnectionTimeout)) and not isinstance(exc, TlsError)
            why = tls_reason(exc) or str(exc)
            failed = f"{self._where}: {what} failed: {why}"
            raise ElasticsearchError(failed, transient=transient) from break_cycles(exc)

    @staticmethod
    def caught() -> tuple[type[Exception], ...]:
        """The roots of every exception the client raises on a request (a test checks)."""
        return (ApiError, TransportError)

    def close(self) -> None:
        self._es.close()


class OpenSearchClient:
    """opensearch-py, imported only for ``opensearch+http(s)://`` URLs."""

    def __init__(self, url: str, where: str, auth: Auth, *, verify_certs: bool, timeout_s: float) -> None:
        try:
            import opensearchpy
        except ImportError as exc:
            raise ConfigError(
                f"{where}: opensearch+http(s):// URLs need the opensearch-py package (pip install opensearch-py)"
            ) from exc
        self._where = where
        self._errors = opensearchpy.exceptions
        options: dict[str, Any] = {}
        if auth.api_key is not None:  # OpenSearch takes API keys only behind a proxy; sent as Elasticsearch would
            options["headers"] = {"authorization": f"ApiKey {auth.api_key.reveal()}"}
        if auth.username is not None and auth.password is not None:
            options["http_auth"] = (auth.username, auth.password.reveal())
        options.update(tls_options(url, verify_certs, auth))
        try:
            self._os = opensearchpy.OpenSearch(
                hosts=[url], timeout=timeout_s, max_retries=0, retry_on_timeout=False, retry_on_status=(), **options
            )
        except (ValueError, OSError, ssl.SSLError, opensearchpy.exceptions.ImproperlyConfigured) as exc:
            raise ConfigError(f"{where}: cannot set up the OpenSearch client ({exc})") from exc

    @staticmethod
    def caught() -> tuple[type[Exception], ...]:
        """The roots of every exception opensearch-py raises on a request (a test checks)."""
        import opensearchpy

        return (opensearchpy.exceptions.OpenSearchException,)

    def request(
        self, method: str, path: str, body: bytes | str | Mapping[str, Any] | None, *, what: str, ndjson: bool = False
    ) -> Any:
        headers = {"content-type": "application/x-ndjson"} if ndjson else None
        errors = self._errors
        try:
            return self._os.transport.perform_request(method, path, body=body, headers=headers)
        except errors.ConnectionError as exc:  # no HTTP answer: refused, reset, timed out, TLS
            transient = not isinstance(exc, errors.SSLError)
            why = tls_reason(exc) or str(exc)
            failed = f"{self._where}: {what} failed: {why}"
            raise ElasticsearchError(failed, transient=transient) from break_cycles(exc)
        except errors.TransportError as exc:
            status = exc.status_code if isinstance(exc.status_code, int) else None
            if status is None:  # an error raised before any answer was read
                reason = body_reason(exc.info, str(exc.error))
            else:
                reason = answer_reason(status, exc.info, exc.error)
            transient = status is not None and is_transient(status)
            raise ElasticsearchError(
                f"{self._where}: {what} failed: {reason}", status=status, transient=transient
            ) from break_cycles(exc)
        except errors.OpenSearchException as exc:  # SerializationError: an answer we cannot read
            raise ElasticsearchError(f"{self._where}: {what} failed: {exc}") from break_cycles(exc)

    def close(self) -> None:
        self._os.close()
