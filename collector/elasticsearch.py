"""The Elasticsearch / OpenSearch sink: monthly indices, bulk writes by id, per-item results.

A document of kind K whose ``timestamp`` falls in month M goes to the index
``<prefix>-K-YYYY.MM``: the record's own time, never the time it arrived, so a late record
lands beside its peers and a month can be dropped whole. A batch is one ``_bulk`` request of
*index* operations with ``_id`` = the record id, so sending the same fact twice keeps one
document and a corrected fact replaces the old one. Every item's result is read: 2xx is
acknowledged, 408/429/5xx is worth another try, any other 4xx (a mapping conflict) is
rejected for good with the server's reason.

Failures of a whole request that may pass (connection refused or reset, timeouts, 408, 429,
5xx) are retried with bounded, jittered exponential backoff; after the budget the documents
are reported in ``retry`` (the outbox keeps them), never raised away or dropped. Any other
failure of a whole request (authentication, TLS, a request the server cannot read) raises
:class:`ElasticsearchError`; nothing of that request is acknowledged, so the outbox keeps it.

Two flavours behind one small interface (:class:`_Client`): the official ``elasticsearch``
client for ``http(s)://`` URLs and ``opensearch-py``, imported only then, for
``opensearch+http(s)://`` URLs. Index templates are the JSON files of ``mappings/``, one per
kind. Secrets (an API key, a password) are read from a file or from an environment variable
named in the parameters, never taken as literals, never logged, and masked in ``repr``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import random
import re
import ssl
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit, urlunsplit

from elastic_transport import ApiError, HttpHeaders, TlsError, TransportError, Urllib3HttpNode
from elastic_transport import ConnectionError as TransportConnectionError
from elastic_transport.client_utils import DEFAULT, DefaultType

from collector.errors import ConfigError, ElasticsearchError
from collector.records import KINDS
from collector.sinks import SendResult

if TYPE_CHECKING:
    from elastic_transport._node import NodeApiResponse

__all__ = ["ElasticsearchSink", "StoredDocument", "TemplateCheck", "load_templates", "monthly_index"]

_log = logging.getLogger(__name__)

MAPPINGS = Path(__file__).resolve().parent.parent / "mappings"

_FLAVOURS = {
    "http": "elasticsearch",
    "https": "elasticsearch",
    "opensearch+http": "opensearch",
    "opensearch+https": "opensearch",
}
# An index name part: lowercase, and none of the characters index names or patterns reserve.
_PREFIX = re.compile(r"[a-z0-9][a-z0-9_-]{0,99}")
_KIND = re.compile(r"[a-z][a-z_]{0,30}")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_TRANSIENT_STATUS = frozenset({408, 429})
_DIGEST_KEY = "fairacct_digest"


def monthly_index(prefix: str, kind: str, timestamp: object) -> str:
    """The index of a record: ``<prefix>-<kind>-YYYY.MM`` by its own ISO-8601 ``timestamp``."""
    if not isinstance(timestamp, str) or not timestamp:
        raise ValueError(f"expected an ISO-8601 UTC 'timestamp' like '2026-11-21T14:00:00Z', got {timestamp!r}")
    try:
        moment = datetime.fromisoformat(timestamp)
    except ValueError:
        raise ValueError(
            f"expected an ISO-8601 UTC 'timestamp' like '2026-11-21T14:00:00Z', got {timestamp!r}"
        ) from None
    if moment.tzinfo is None:  # a record's time without a zone is UTC by the schema
        moment = moment.replace(tzinfo=UTC)
    return f"{prefix}-{kind}-{moment.astimezone(UTC):%Y.%m}"


def load_templates(
    prefix: str = "fairacct", directory: str | os.PathLike[str] | None = None
) -> dict[str, dict[str, Any]]:
    """The index template of every kind, from ``<directory>/<kind>.json`` (default ``mappings/``).

    The files are written for the prefix ``fairacct``; another prefix gets the patterns
    ``<prefix>-<kind>-*``. ``_meta.fairacct_digest`` fingerprints each template as installed,
    so :meth:`ElasticsearchSink.check_templates` can tell an outdated one.
    """
    folder = Path(directory) if directory is not None else MAPPINGS
    templates = {}
    for kind in KINDS:
        path = folder / f"{kind}.json"
        try:
            template = json.loads(path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise ConfigError(f"{path}: cannot read the {kind} index template ({exc.strerror})") from exc
        except ValueError as exc:
            raise ConfigError(f"{path}: the {kind} index template is not JSON ({exc})") from exc
        if not isinstance(template, dict) or not isinstance(template.get("template"), dict):
            raise ConfigError(f"{path}: expected a composable index template with a 'template' object")
        template["index_patterns"] = [f"{prefix}-{kind}-*"]
        meta = {k: v for k, v in dict(template.get("_meta") or {}).items() if k != _DIGEST_KEY}
        template["_meta"] = meta
        digest = hashlib.sha256(json.dumps(template, sort_keys=True).encode()).hexdigest()[:16]
        template["_meta"] = {**meta, _DIGEST_KEY: digest}
        templates[kind] = template
    return templates


@dataclass(frozen=True)
class TemplateCheck:
    """Which kinds' index templates are missing from the server, and which differ (kind ->
    what differs) from ``mappings/``."""

    missing: list[str] = field(default_factory=list)
    differ: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.missing and not self.differ


@dataclass(frozen=True)
class StoredDocument:
    """A document as the server holds it: its index, its id and its source."""

    index: str
    id: str
    source: dict[str, Any]


# -- secrets and authentication -------------------------------------------------------------


class _Secret:
    """A secret that never prints: ``repr`` and ``str`` show ``***``."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "'***'"

    __str__ = __repr__


@dataclass(frozen=True)
class _Auth:
    api_key: _Secret | None = None
    username: str | None = None
    password: _Secret | None = None
    ca_certs: str | None = None
    description: str = "none"


def _read_secret(what: str, path: str | os.PathLike[str] | None, env: str | None) -> tuple[_Secret, str] | None:
    """The secret in file ``path`` or in environment variable ``env`` (at most one given), and
    where it came from; None if neither is given. Errors never quote the secret."""
    if path is not None and env is not None:
        raise ConfigError(f"give {what}_file or {what}_env, not both")
    if path is not None:
        try:
            value = Path(path).read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise ConfigError(f"{what}_file: cannot read {os.fspath(path)!r} ({exc.strerror})") from exc
        source = f"file {os.fspath(path)}"
    elif env is not None:
        if not _ENV_NAME.fullmatch(env):
            # Likely the secret itself pasted in; do not echo it.
            raise ConfigError(
                f"{what}_env must be the name of an environment variable (letters, digits, '_'), not its value"
            )
        if env not in os.environ:
            raise ConfigError(f"{what}_env: the environment variable {env} is not set")
        value = os.environ[env].strip()
        source = f"env {env}"
    else:
        return None
    if not value:
        raise ConfigError(f"{what}_{'file' if path is not None else 'env'}: the {what} in {source} is empty")
    return _Secret(value), source


def _read_auth(
    *,
    https: bool,
    api_key_file: str | os.PathLike[str] | None,
    api_key_env: str | None,
    username: str | None,
    password_file: str | os.PathLike[str] | None,
    password_env: str | None,
    ca_certs_file: str | os.PathLike[str] | None,
    ca_certs_env: str | None,
) -> _Auth:
    api_key = _read_secret("api_key", api_key_file, api_key_env)
    password = _read_secret("password", password_file, password_env)
    if api_key and (username or password):
        raise ConfigError(
            "give an API key (api_key_file or api_key_env) or basic auth (username and a password), not both"
        )
    if password and not username:
        raise ConfigError("password_file/password_env needs a username")
    if username and not password:
        raise ConfigError(f"username {username!r} needs a password: give password_file or password_env")
    if ca_certs_file is not None and ca_certs_env is not None:
        raise ConfigError("give ca_certs_file or ca_certs_env, not both")
    ca_certs = None
    if ca_certs_env is not None:
        if not _ENV_NAME.fullmatch(ca_certs_env):
            raise ConfigError(f"ca_certs_env must be the name of an environment variable, got {ca_certs_env!r}")
        if ca_certs_env not in os.environ:
            raise ConfigError(
                f"ca_certs_env: the environment variable {ca_certs_env} (the path of a CA bundle) is not set"
            )
        ca_certs = os.environ[ca_certs_env]
    elif ca_certs_file is not None:
        ca_certs = os.fspath(ca_certs_file)
    if ca_certs is not None:
        if not https:
            raise ConfigError("a CA bundle (ca_certs_file or ca_certs_env) is for https:// URLs only")
        if not Path(ca_certs).is_file():
            raise ConfigError(f"ca_certs: the CA bundle {ca_certs!r} is not a file")

    parts = []
    if api_key:
        parts.append(f"api_key=*** ({api_key[1]})")
    if username and password:
        parts.append(f"basic username={username!r} password=*** ({password[1]})")
    if ca_certs:
        parts.append(f"ca_certs={ca_certs}")
    return _Auth(
        api_key=api_key[0] if api_key else None,
        username=username,
        password=password[0] if password else None,
        ca_certs=ca_certs,
        description="; ".join(parts) or "none",
    )


# -- the two flavours ---------------------------------------------------------------------------


def _tls_options(url: str, verify_certs: bool, auth: _Auth) -> dict[str, Any]:
    """The client options for TLS, the same in both flavours: none over plain HTTP."""
    if not url.startswith("https://"):
        return {}
    options: dict[str, Any] = {"verify_certs": verify_certs}
    if auth.ca_certs is not None:
        options["ca_certs"] = auth.ca_certs
    return options


class _Client(Protocol):
    """One HTTP request to the cluster, decoded; failures raise :class:`ElasticsearchError`
    whose message starts with ``where`` and names ``what`` was being done."""

    def request(
        self, method: str, path: str, body: str | Mapping[str, Any] | None, *, what: str, ndjson: bool = False
    ) -> Any: ...

    def close(self) -> None: ...


def _transient(status: int) -> bool:
    """Whether a request answered with ``status`` may pass if sent again."""
    return status in _TRANSIENT_STATUS or status >= 500


def _error_text(error: object) -> str:
    """``type: reason (caused by type: reason)`` from an Elasticsearch error object."""
    if not isinstance(error, Mapping):
        return str(error)
    text = f"{error.get('type', 'error')}: {error.get('reason', '')}".rstrip(": ")
    cause = error.get("caused_by")
    if isinstance(cause, Mapping) and cause.get("reason"):
        text += f" (caused by {cause.get('type', 'error')}: {cause['reason']})"
    return text


def _body_reason(body: object, default: str) -> str:
    error = body.get("error") if isinstance(body, Mapping) else None
    return _error_text(error) if error else default


# Elasticsearch 8/9 clients ask for application/vnd.elasticsearch+json; compatible-with=N, which
# OpenSearch-compatible servers refuse with 406. Elasticsearch (7.x and later) takes the plain
# types as its own current version, so nothing is lost against the real thing.
_COMPAT_MIMETYPE = re.compile(r"application/vnd\.elasticsearch\+([\w.-]+)(?:\s*;\s*compatible-with=\d+)?")


class _PlainJsonNode(Urllib3HttpNode):
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


class _ElasticsearchClient:
    """The official client: ``http(s)://`` URLs."""

    def __init__(self, url: str, where: str, auth: _Auth, *, verify_certs: bool, timeout_s: float) -> None:
        from elasticsearch import Elasticsearch

        self._where = where
        options: dict[str, Any] = {}
        if auth.api_key is not None:
            options["api_key"] = auth.api_key.reveal()
        if auth.username is not None and auth.password is not None:
            options["basic_auth"] = (auth.username, auth.password.reveal())
        options.update(_tls_options(url, verify_certs, auth))
        # No retries in the client: the sink retries whole bulks itself, with its own budget.
        try:
            self._es = Elasticsearch(
                url,
                node_class=_PlainJsonNode,
                request_timeout=timeout_s,
                max_retries=0,
                retry_on_timeout=False,
                retry_on_status=(),
                **options,
            )
        except (ValueError, OSError, ssl.SSLError) as exc:
            raise ConfigError(f"{where}: cannot set up the Elasticsearch client ({exc})") from exc

    def request(
        self, method: str, path: str, body: str | Mapping[str, Any] | None, *, what: str, ndjson: bool = False
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
                reason = f"{status} {_body_reason(exc.body, str(exc.message))}"
            raise ElasticsearchError(
                f"{self._where}: {what} failed: {reason}", status=status, transient=_transient(status)
            ) from exc
        except TransportError as exc:
            transient = isinstance(exc, TransportConnectionError) and not isinstance(exc, TlsError)
            raise ElasticsearchError(f"{self._where}: {what} failed: {exc}", transient=transient) from exc

    @staticmethod
    def caught() -> tuple[type[Exception], ...]:
        """The roots of every exception the client raises on a request (a test checks)."""
        return (ApiError, TransportError)

    def close(self) -> None:
        self._es.close()


class _OpenSearchClient:
    """opensearch-py, imported only for ``opensearch+http(s)://`` URLs."""

    def __init__(self, url: str, where: str, auth: _Auth, *, verify_certs: bool, timeout_s: float) -> None:
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
        options.update(_tls_options(url, verify_certs, auth))
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
        self, method: str, path: str, body: str | Mapping[str, Any] | None, *, what: str, ndjson: bool = False
    ) -> Any:
        headers = {"content-type": "application/x-ndjson"} if ndjson else None
        errors = self._errors
        try:
            return self._os.transport.perform_request(method, path, body=body, headers=headers)
        except errors.ConnectionError as exc:  # no HTTP answer: refused, reset, timed out, TLS
            transient = not isinstance(exc, errors.SSLError)
            raise ElasticsearchError(f"{self._where}: {what} failed: {exc}", transient=transient) from exc
        except errors.TransportError as exc:
            status = exc.status_code if isinstance(exc.status_code, int) else None
            reason = f"{status} {_body_reason(exc.info, str(exc.error))}"
            transient = status is not None and _transient(status)
            raise ElasticsearchError(
                f"{self._where}: {what} failed: {reason}", status=status, transient=transient
            ) from exc
        except errors.OpenSearchException as exc:  # SerializationError: an answer we cannot read
            raise ElasticsearchError(f"{self._where}: {what} failed: {exc}") from exc

    def close(self) -> None:
        self._os.close()


# -- the sink -----------------------------------------------------------------------------------


class ElasticsearchSink:
    """Records in Elasticsearch or OpenSearch (see the module docstring).

    ``url``: ``http(s)://HOST:PORT`` (the ``elasticsearch`` client) or
    ``opensearch+http(s)://HOST:PORT`` (``opensearch-py``), without credentials.
    ``prefix``: indices are ``<prefix>-<kind>-YYYY.MM``, templates ``<prefix>-<kind>``.

    Authentication, each secret from a file or from the environment variable it names:
    ``api_key_file`` / ``api_key_env`` (an encoded Elasticsearch API key), or ``username`` with
    ``password_file`` / ``password_env`` (basic auth). ``ca_certs_file`` (a path) or
    ``ca_certs_env`` (a variable holding the path) name a CA bundle for ``https``;
    ``verify_certs`` turns verification off, for test clusters only.

    Sending: ``batch_size`` documents per bulk request; a failure that may pass is tried
    ``max_retries`` more times after ``backoff_s``, doubling up to ``backoff_max_s``, each delay
    scaled by ``0.5 + 0.5 * jitter()`` (``jitter`` returns [0, 1)); ``sleep`` waits. Both are
    parameters so tests need not wait. ``timeout_s`` bounds one request.
    """

    def __init__(
        self,
        url: str,
        *,
        prefix: str = "fairacct",
        api_key_file: str | os.PathLike[str] | None = None,
        api_key_env: str | None = None,
        username: str | None = None,
        password_file: str | os.PathLike[str] | None = None,
        password_env: str | None = None,
        ca_certs_file: str | os.PathLike[str] | None = None,
        ca_certs_env: str | None = None,
        verify_certs: bool = True,
        timeout_s: float = 30.0,
        batch_size: int = 1000,
        max_retries: int = 5,
        backoff_s: float = 0.5,
        backoff_max_s: float = 30.0,
        mappings: str | os.PathLike[str] | None = None,
        sleep: Callable[[float], None] = time.sleep,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        parts = urlsplit(url)
        if parts.scheme not in _FLAVOURS or not parts.hostname:
            shown = url if not (parts.username or parts.password) else "the store URL"
            raise ConfigError(f"expected http(s)://HOST:PORT or opensearch+http(s)://HOST:PORT, got {shown!r}")
        if parts.username or parts.password:
            bare = urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))
            raise ConfigError(
                f"{bare}: credentials in the URL are not accepted; give username with password_file or "
                "password_env, or api_key_file or api_key_env"
            )
        if not isinstance(prefix, str) or not _PREFIX.fullmatch(prefix):
            raise ConfigError(
                f"prefix must be lowercase letters, digits, '-' or '_' (part of an index name), got {prefix!r}"
            )
        _check_number("timeout_s", timeout_s, minimum=0.0, exclusive=True)
        _check_number("batch_size", batch_size, minimum=1, integer=True)
        _check_number("max_retries", max_retries, minimum=0, integer=True)
        _check_number("backoff_s", backoff_s, minimum=0.0)
        _check_number("backoff_max_s", backoff_max_s, minimum=backoff_s)

        self.url = url
        self.flavour = _FLAVOURS[parts.scheme]
        self.prefix = prefix
        self.batch_size = batch_size
        self.max_retries = max_retries
        self.backoff_s = float(backoff_s)
        self.backoff_max_s = float(backoff_max_s)
        self._mappings = mappings
        self._sleep = sleep
        self._jitter = jitter
        self._where = f"{self.flavour} {url}"
        https = parts.scheme.endswith("https")
        self._auth = _read_auth(
            https=https,
            api_key_file=api_key_file,
            api_key_env=api_key_env,
            username=username,
            password_file=password_file,
            password_env=password_env,
            ca_certs_file=ca_certs_file,
            ca_certs_env=ca_certs_env,
        )
        client_url = url.removeprefix("opensearch+")
        flavour = _OpenSearchClient if self.flavour == "opensearch" else _ElasticsearchClient
        self._client: _Client = flavour(
            client_url, self._where, self._auth, verify_certs=verify_certs, timeout_s=timeout_s
        )

    @classmethod
    def from_url(cls, url: str, **options: Any) -> ElasticsearchSink:
        """The sink of a store URL; ``options`` are the constructor's keyword arguments (what
        :func:`collector.sinks.open_sink` passes as ``auth``)."""
        return cls(url, **options)

    def __repr__(self) -> str:
        auth = self._auth.description  # secrets show as ***
        return f"ElasticsearchSink({self.url!r}, flavour={self.flavour!r}, prefix={self.prefix!r}, auth={auth!r})"

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> ElasticsearchSink:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- writing --------------------------------------------------------------------------------

    def send(self, kind: str, docs: Sequence[Mapping[str, Any]]) -> SendResult:
        """Store documents of one kind (each with ``id`` and ``timestamp``); say what became of each.

        Documents without a usable ``timestamp`` or that are not JSON (NaN, objects) are rejected
        without a request. Of several documents with the same id, the last counts. A failure
        that no retry can mend (authentication, TLS) raises :class:`ElasticsearchError`; bulk
        requests of this call that went before it may have been stored, and sending them again
        is harmless.
        """
        self._check_kind(kind)
        result = SendResult()
        lines: dict[str, str] = {}  # id -> action and source lines, in order
        for position, doc in enumerate(docs):
            id_ = doc.get("id")
            if not isinstance(id_, str) or not id_:
                raise ValueError(f"{kind} document {position} has no string 'id', got {id_!r}")
            lines.pop(id_, None)
            result.rejected.pop(id_, None)
            try:
                index = monthly_index(self.prefix, kind, doc.get("timestamp"))
                source = json.dumps(doc, allow_nan=False, separators=(",", ":"), default=_plain)
            except (TypeError, ValueError) as exc:
                result.rejected[id_] = f"{kind} document {id_}: {exc}"
                continue
            action = json.dumps({"index": {"_index": index, "_id": id_}}, separators=(",", ":"))
            lines[id_] = f"{action}\n{source}\n"
        ids = list(lines)
        for start in range(0, len(ids), self.batch_size):
            self._bulk(kind, {i: lines[i] for i in ids[start : start + self.batch_size]}, result)
        return result

    def _bulk(self, kind: str, pending: dict[str, str], result: SendResult) -> None:
        """One bulk request of ``pending`` (id -> lines), retrying what may pass."""
        errors: dict[str, str] = {}
        for attempt in range(self.max_retries + 1):
            if attempt:
                delay = self._delay(attempt)
                _log.warning(
                    "%s: %d %s documents not stored yet (%s); retry %d of %d in %.3g s",
                    self._where, len(pending), kind, next(iter(errors.values())), attempt, self.max_retries, delay,
                )  # fmt: skip
                self._sleep(delay)
            what = f"bulk write of {len(pending)} {kind} documents"
            try:
                response = self._client.request("POST", "/_bulk", "".join(pending.values()), what=what, ndjson=True)
            except ElasticsearchError as exc:
                if not exc.transient:
                    raise
                errors = dict.fromkeys(pending, str(exc))
                continue
            errors = self._read_items(kind, response, list(pending), result)
            pending = {i: pending[i] for i in errors}
            if not pending:
                return
        result.retry.update(errors)

    def _read_items(self, kind: str, response: Any, ids: list[str], result: SendResult) -> dict[str, str]:
        """Sort a bulk response's items into ``result``; return the transient errors by id."""
        items = response.get("items") if isinstance(response, Mapping) else None
        if not isinstance(items, list) or len(items) != len(ids):
            got = len(items) if isinstance(items, list) else "no"
            return dict.fromkeys(ids, f"{self._where}: bulk response has {got} items for {len(ids)} {kind} documents")
        transient = {}
        for id_, item in zip(ids, items, strict=True):  # lengths checked above
            outcome: Any = next(iter(item.values()), {}) if isinstance(item, Mapping) else {}
            status = outcome.get("status") if isinstance(outcome, Mapping) else None
            if not isinstance(status, int):
                transient[id_] = f"{self._where}: no status for this document in the bulk response"
            elif 200 <= status < 300:
                result.acked.append(id_)
            elif _transient(status):
                transient[id_] = f"{status} {_error_text(outcome.get('error'))}"
            else:
                result.rejected[id_] = _error_text(outcome.get("error"))
        return transient

    def _delay(self, attempt: int) -> float:
        """Seconds before retry ``attempt`` (1, 2, ...): exponential, capped, jittered."""
        base = min(self.backoff_max_s, self.backoff_s * 2 ** (attempt - 1))
        return float(base * (0.5 + 0.5 * self._jitter()))

    # -- templates ------------------------------------------------------------------------------

    def install_templates(self) -> list[str]:
        """Put the index template of every kind (idempotent: a template is replaced by its
        current version); return their names."""
        names = []
        for kind, template in load_templates(self.prefix, self._mappings).items():
            name = f"{self.prefix}-{kind}"
            self._client.request("PUT", f"/_index_template/{name}", template, what=f"installing index template {name}")
            names.append(name)
        return names

    def check_templates(self) -> TemplateCheck:
        """Which kinds' templates are missing on the server or differ from ``mappings/``."""
        missing: list[str] = []
        differ: dict[str, str] = {}
        for kind, expected in load_templates(self.prefix, self._mappings).items():
            name = f"{self.prefix}-{kind}"
            try:
                answer = self._client.request(
                    "GET", f"/_index_template/{name}", None, what=f"reading index template {name}"
                )
            except ElasticsearchError as exc:
                if exc.status == 404:
                    missing.append(kind)
                    continue
                raise
            found = [t.get("index_template", {}) for t in answer.get("index_templates", []) if t.get("name") == name]
            if not found:
                missing.append(kind)
                continue
            difference = _template_difference(found[0], expected)
            if difference:
                differ[kind] = difference
        return TemplateCheck(missing, differ)

    # -- reading (for reports, checks and tests) -------------------------------------------------

    def _pattern(self, kind: str) -> str:
        self._check_kind(kind)
        return f"{self.prefix}-{kind}-*"

    def _search(self, kind: str, body: Mapping[str, Any], what: str) -> Any:
        """A search over every month of ``kind``, after a refresh so it sees every write."""
        pattern = self._pattern(kind)
        self._client.request("POST", f"/{pattern}/_refresh", None, what=f"refreshing {pattern}")
        return self._client.request("POST", f"/{pattern}/_search", body, what=what)

    def count(self, kind: str) -> int:
        """How many documents of ``kind`` are stored, over every month."""
        answer = self._search(kind, {"size": 0, "track_total_hits": True}, f"counting {kind} documents")
        return int(answer["hits"]["total"]["value"])

    def search_counts(
        self, kind: str, field: str, *, interval: float | None = None, size: int = 1000
    ) -> dict[Any, int]:
        """Documents of ``kind`` per value of ``field`` (a terms aggregation), or per bucket of
        width ``interval`` (a histogram; keys are the buckets' lower bounds), non-empty only."""
        agg: dict[str, Any]
        if interval is None:
            agg = {"terms": {"field": field, "size": size}}
        else:
            agg = {"histogram": {"field": field, "interval": interval, "min_doc_count": 1}}
        answer = self._search(kind, {"size": 0, "aggs": {"counts": agg}}, f"aggregating {kind} documents by {field}")
        return {b["key"]: int(b["doc_count"]) for b in answer["aggregations"]["counts"]["buckets"]}

    def query(
        self, kind: str, *, since: str | None = None, until: str | None = None, limit: int | None = None
    ) -> list[dict[str, Any]]:
        """Documents of ``kind``, oldest first, as the embedded store's ``query`` gives them:
        ``since``/``until`` are ISO-8601 UTC bounds on ``timestamp`` (since inclusive, until
        exclusive); at most ``limit`` (10,000 when not given: use a scroll for more)."""
        bounds = {k: v for k, v in (("gte", since), ("lt", until)) if v is not None}
        body: dict[str, Any] = {
            "query": {"range": {"timestamp": bounds}} if bounds else {"match_all": {}},
            "sort": [{"timestamp": "asc"}, {"id": "asc"}],
            "size": 10_000 if limit is None else limit,
        }
        answer = self._search(kind, body, f"reading {kind} documents")
        return [h["_source"] for h in answer["hits"]["hits"]]

    def fetch(self, kind: str, ids: Sequence[str]) -> dict[str, StoredDocument]:
        """The stored documents of ``kind`` with these ids (absent ids are left out)."""
        if not ids:
            return {}
        body = {"query": {"ids": {"values": list(ids)}}, "size": len(ids)}
        answer = self._search(kind, body, f"fetching {len(ids)} {kind} documents")
        hits = answer["hits"]["hits"]
        return {h["_id"]: StoredDocument(h["_index"], h["_id"], h["_source"]) for h in hits}

    def field_types(self, kind: str) -> dict[str, dict[str, str]]:
        """Index -> field -> mapped type, for every index of ``kind``."""
        pattern = self._pattern(kind)
        answer = self._client.request("GET", f"/{pattern}/_mapping", None, what=f"reading the mappings of {pattern}")
        return {index: _field_types(body.get("mappings", {})) for index, body in answer.items()}

    def _check_kind(self, kind: str) -> None:
        if not isinstance(kind, str) or not _KIND.fullmatch(kind):
            raise ValueError(f"record kind must be a lowercase word, got {kind!r}")


def _field_types(mappings: Mapping[str, Any]) -> dict[str, str]:
    return {name: str(spec.get("type", "object")) for name, spec in mappings.get("properties", {}).items()}


def _template_difference(installed: Mapping[str, Any], expected: Mapping[str, Any]) -> str:
    """What differs between an installed template and the expected one ('' if nothing that
    matters: the fingerprint, the patterns and the field types)."""
    found = []
    digest = dict(installed.get("_meta") or {}).get(_DIGEST_KEY)
    if digest != expected["_meta"][_DIGEST_KEY]:
        found.append("installed from another version of mappings/")
    if sorted(installed.get("index_patterns", [])) != sorted(expected["index_patterns"]):
        found.append(f"index patterns {installed.get('index_patterns')}, expected {expected['index_patterns']}")
    have = _field_types(installed.get("template", {}).get("mappings", {}))
    for name, want in _field_types(expected["template"]["mappings"]).items():
        if have.get(name) != want:
            found.append(f"field {name} is {have.get(name, 'not mapped')}, expected {want}")
    return "; ".join(found)


def _plain(value: object) -> object:
    """numpy scalars as Python ones, for JSON."""
    item = getattr(value, "item", None)
    if callable(item):
        return item()
    raise TypeError(f"{type(value).__name__} {value!r} is not JSON")


def _check_number(name: str, value: object, *, minimum: float, integer: bool = False, exclusive: bool = False) -> None:
    """A ConfigError naming ``name`` unless ``value`` is a number (a whole one if ``integer``)
    at least (or, if ``exclusive``, above) ``minimum``."""
    number = isinstance(value, int if integer else (int, float)) and not isinstance(value, bool)
    if number and isinstance(value, (int, float)) and (value > minimum or (value == minimum and not exclusive)):
        return
    bound = f"> {minimum}" if exclusive else f">= {minimum}"
    raise ConfigError(f"{name} must be a {'whole ' if integer else ''}number {bound}, got {value!r}")
