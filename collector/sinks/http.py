"""The probe's side of the collector service: a sink that sends records to a fairacct collector.

Store URL ``collector+https://HOST[:PORT][/PREFIX]`` (``collector+http://`` for loopback and
tests) with ``token_file``, the file holding this probe's bearer token. A batch is POSTed to
``/v1/records`` as a gzip-compressed JSON array, and the reply decides each record's fate
(see :mod:`collector.server.v1_records`):

* 202: every record is durable at the collector: all acknowledged;
* 400 with ``accepted``: the records listed in ``rejected`` are refused for good (the outbox
  moves them to its dead letters), every other one is acknowledged; the collector lists every
  refused record but gives the reasons of the first few only (the others get the first's);
* 400 with ``accepted`` where a record is refused because the collector is of an older release
  (the wording of such a collector: a ``schema_version`` it does not take yet, or a kind it
  does not know): that record is kept (``retry``), not a dead letter;
* 409 (``schema_too_new``): the collector is of an older release than this probe: nothing is
  acknowledged, the outbox keeps the batch (:class:`SinkError`, one line that says so) until
  the collector is upgraded (collector first, then probes: the upgrading guide, docs/upgrading.md);
* 413: the batch is split in halves, each sent again (a single record over the limit is
  refused for good); the body is over the collector's size limit, or the batch holds more
  records than a request may;
* anything else (401, 403, a 400 without ``accepted``, 415, 429, 5xx, no answer):
  :class:`SinkError`: nothing is acknowledged, the outbox keeps the batch and the flusher
  tries again later. A wrong token is a configuration error that only the site can mend; it
  must not cost records.
"""

from __future__ import annotations

import gzip
import os
import re
import ssl
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, Self
from urllib.parse import urlunsplit

import httpx
import orjson

from collector.encoded import Encoded
from collector.errors import ConfigError, SinkError
from collector.records import PROBE_KINDS, encode_docs
from collector.release import RELEASE_HEADER, release
from collector.sinks.base import Aggregation, Lease, SendResult, TemplateCheck
from collector.sinks.registry import Opening, endpoint
from collector.sinks.tls import tls_reason

__all__ = [
    "TIMEOUT_S",
    "CollectorSink",
    "CollectorSinkSettings",
    "WriteOnlySink",
    "loose_token",
    "older_collector",
    "tls_context",
]

_SCHEMES = {"collector+http": "http", "collector+https": "https"}

TIMEOUT_S = 60.0
"""Seconds one request to a collector (fairacct's or Gratia's) may take, unless told otherwise."""

# How a collector of an earlier release words the refusal of a record it is too old for (909f578
# and today's collector: collector/server/judge.py). Such a record is kept, never a dead letter.
_OLD_SCHEMA = re.compile(r"'schema_version' must be ([0-9 or]+) \(this collector's\), got (\d+)")
_OLD_KINDS = re.compile(r"'kind' must be one of [^;]*?, got '(\w+)'")
_KEPT = "upgrade the collector (collector first, then probes); the records stay in the outbox until then"
_REPLY_BYTES = 64 * 1024
"""What :meth:`WriteOnlySink._ask` reads of a reply at most, unless told."""


class WriteOnlySink:
    """What a sink that only sends over HTTP (to a fairacct collector, to a Gratia collector) does
    not do, said once: the records are read, summed and templated by the service it sends to.
    A subclass sets ``_client`` and the three reasons, and sends in :meth:`send_encoded`."""

    _client: httpx.Client
    _no_templates: str  # why install_templates is not its to do
    _not_read: str  # why count and query are not
    _not_summed: str  # why aggregate and delete_stale are not

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def check_templates(self) -> TemplateCheck:
        """The service sent to keeps its own templates: nothing for a probe to check."""
        return TemplateCheck()

    def install_templates(self) -> list[str]:
        raise ConfigError(f"{self}: {self._no_templates}")

    def count(self, kind: str) -> int:
        raise SinkError(f"{self}: {self._not_read}")

    def query(
        self, kind: str, *, since: str | None = None, until: str | None = None, limit: int | None = None
    ) -> list[dict[str, Any]]:
        raise SinkError(f"{self}: {self._not_read}")

    def aggregate(self, query: Aggregation) -> list[dict[str, Any]]:
        raise SinkError(f"{self}: {self._not_summed}")

    def index_aggregation(self, query: Aggregation) -> None:
        """Nothing to do: the service sent to is not read through this sink."""

    def delete_stale(
        self,
        kind: str,
        since: str,
        until: str,
        *,
        field: str,
        value: str,
        keep: Collection[str],
        version: int | None = None,
    ) -> int:
        raise SinkError(f"{self}: {self._not_summed}")

    def take_lease(self, name: str, holder: str, ttl_s: float, *, now: float) -> Lease:
        raise SinkError(f"{self}: {self._not_summed}")

    def release_lease(self, lease: Lease) -> None:
        raise SinkError(f"{self}: {self._not_summed}")

    def send(self, kind: str, docs: Sequence[Mapping[str, Any]]) -> SendResult:
        """Send documents of one kind; say what became of each (see the module docstring)."""
        return self.send_encoded(kind, encode_docs(kind, docs))

    def send_encoded(self, kind: str, records: Encoded) -> SendResult:
        raise NotImplementedError

    def _ask(
        self,
        method: str,
        url: str,
        what: str,
        content: bytes | None = None,
        *,
        headers: Mapping[str, str] | None = None,
        limit: int = _REPLY_BYTES,
    ) -> tuple[int, str]:
        """One request: the status and the reply's first ``limit`` bytes (a proxy's page may be
        large); :class:`SinkError` naming ``what`` did not answer. ``content`` is JSON unless
        ``headers`` say otherwise."""
        if headers is None:
            headers = {"Content-Type": "application/json"} if content is not None else {}
        try:
            with self._client.stream(method, url, content=content, headers=headers) as reply:
                body = b""
                for chunk in reply.iter_bytes():
                    body += chunk
                    if len(body) >= limit:
                        break
                return reply.status_code, body[:limit].decode("utf-8", "replace")
        except httpx.HTTPError as exc:
            why = tls_reason(exc) or f"{type(exc).__name__}: {exc}"
            raise SinkError(f"{url}: no answer from {what} ({why})") from exc


class CollectorSinkSettings(Protocol):
    """The settings a collector store is opened with (``[store]``'s keys): its URL, this probe's
    token file and the CA bundle that verifies the collector (empty: the system's)."""

    @property
    def url(self) -> str: ...
    @property
    def token_file(self) -> str: ...
    @property
    def ca_file(self) -> str: ...


class CollectorSink(WriteOnlySink):
    """Records to a fairacct collector (see the module docstring).

    ``ca_file`` verifies the collector's certificate for https (default: the system's CAs);
    ``timeout_s`` bounds one request; ``transport`` replaces httpx's (tests).
    """

    def __init__(
        self,
        url: str,
        *,
        token_file: str | os.PathLike[str],
        ca_file: str | os.PathLike[str] | None = None,
        timeout_s: float = TIMEOUT_S,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        parts = endpoint(url, "collector")
        self.url = url
        self.endpoint = urlunsplit(
            (_SCHEMES[parts.scheme], parts.netloc, parts.path.rstrip("/") + "/v1/records", "", "")
        )
        self.token_file = Path(token_file) if token_file else None
        token = _read_token(self.token_file)
        self._client = httpx.Client(
            # the release, so that a collector can count records and probes by it (a rollout followed in /metrics)
            headers={
                "Authorization": f"Bearer {token}",
                "User-Agent": f"fairacct-probe/{release()}",
                RELEASE_HEADER: release(),
            },
            timeout=timeout_s,
            verify=tls_context(ca_file),
            transport=transport,
        )

    @classmethod
    def from_settings(cls, settings: CollectorSinkSettings, opening: Opening) -> CollectorSink:
        """The sink of a store's settings (:func:`collector.sinks.registry.open_store`), with the
        opening's request timeout (seconds) when given."""
        timeout_s = TIMEOUT_S if opening.timeout_s is None else opening.timeout_s
        return cls(settings.url, token_file=settings.token_file, ca_file=settings.ca_file or None, timeout_s=timeout_s)

    @classmethod
    def from_url(cls, url: str, **options: Any) -> CollectorSink:
        """The sink of a store URL; ``options`` as the constructor takes them (what
        :func:`collector.sinks.open_sink` passes as ``auth``)."""
        return cls(url, **options)

    _no_templates = "the collector's operator installs the index templates of its store, not a probe"
    _not_read = "records are read from the collector's store, not through the collector"
    _not_summed = "summaries are computed by the collector service in its store, not through the collector"

    def __repr__(self) -> str:
        return f"CollectorSink({self.url!r}, token_file={str(self.token_file)!r})"

    def send_encoded(self, kind: str, records: Encoded) -> SendResult:
        """Send records of one kind, their JSON as it is, joined into one array; say what became
        of each (see the module docstring)."""
        result = SendResult()
        if records:
            self._send(records, result)
        return result

    def ping(self) -> str:
        """``GET /healthz`` (the collector takes records and delivers them), then an empty batch
        to ``/v1/records`` (the collector takes this probe's token; nothing is stored)."""
        base = self.endpoint.removesuffix("/v1/records")
        status, text = self._ask("GET", f"{base}/healthz", "the collector")
        said = _json_text(text).get("status", text.strip()[:200])
        if status != 200:
            raise SinkError(f"{base}/healthz answered {status}: {said}")
        status, text = self._ask("POST", self.endpoint, "the collector", b"[]")
        if status in (401, 403):
            why = _json_text(text).get("error", text.strip()[:200])
            raise SinkError(
                f"{self.endpoint}: the collector refused this probe's token ({status}: {why}); check store.token_file "
                f"({self.token_file}) against the collector's token for this probe"
            )
        if status in (404, 405):
            raise SinkError(f"{self.endpoint}: nothing answers /v1/records here ({status}): store.url is wrong")
        return f"/healthz {said}, token accepted"

    def _send(self, docs: Encoded, result: SendResult) -> None:
        body = gzip.compress(docs.json_array(), compresslevel=1)
        headers = {"Content-Type": "application/json", "Content-Encoding": "gzip"}
        try:
            reply = self._client.post(self.endpoint, content=body, headers=headers)
        except httpx.HTTPError as exc:
            why = tls_reason(exc) or f"{type(exc).__name__}: {exc}"
            raise SinkError(f"{self.endpoint}: no answer from the collector ({why})") from exc
        status = reply.status_code
        if status == 202:
            result.acked.extend(docs.ids)
            return
        if status == 413 and len(docs) > 1:
            half = len(docs) // 2
            self._send(docs.pick(range(half)), result)
            self._send(docs.pick(range(half, len(docs))), result)
            return
        if status == 413:
            result.rejected[docs.ids[0]] = f"{self.endpoint}: the record alone is over the collector's size limit"
            return
        answer = _json(reply)
        refused = answer.get("rejected") if status == 400 and "accepted" in answer else None
        if isinstance(refused, list):
            reasons: dict[int, str | None] = {}
            for item in refused:
                if isinstance(item, Mapping) and isinstance(item.get("index"), int) and 0 <= item["index"] < len(docs):
                    reason = item.get("reason")
                    reasons[item["index"]] = None if reason is None else str(reason)
            first = next((r for r in reasons.values() if r is not None), "no reason given")
            for index, id_ in enumerate(docs.ids):
                if index not in reasons:
                    result.acked.append(id_)
                elif older := older_collector(reasons[index] or first):  # listed alone: the first's reason
                    result.retry[id_] = result.kind_refused = f"{self.endpoint}: {older}"
                elif (reason := reasons[index]) is not None:
                    result.rejected[id_] = f"refused by the collector: {reason}"
                else:  # listed by its index alone: the collector gives the reasons of the first few
                    result.rejected[id_] = (
                        f"refused by the collector, one of {len(reasons)} records refused in its batch (the "
                        f"collector gives the reasons of the first few only; the first's: {first})"
                    )
            return
        why = answer.get("error") or reply.text[:200]
        hint = ""
        if status in (404, 405):
            hint = (
                "; store.url is wrong: nothing at this path answers /v1/records (a collector's URL is its root, "
                "or the prefix a proxy serves it under)"
            )
        if status == 409:
            raise SinkError(f"{self.endpoint}: the collector is of an older release than this probe: {why}; {_KEPT}")
        if status == 401:
            hint = f"; check store.token_file ({self.token_file}) against the collector's token for this probe"
        raise SinkError(f"{self.endpoint}: the collector answered {status}: {why}{hint}")


def older_collector(reason: str) -> str | None:
    """What a collector's refusal ``reason`` says when it is a collector of an earlier release
    refusing a record this probe's release writes (a newer ``schema_version``, a kind it does
    not know yet), in one line; None for any other reason (the record's own fault)."""
    if (m := _OLD_SCHEMA.search(reason)) and int(m[2]) > max(int(v) for v in m[1].split() if v.isdigit()):
        return f"the collector is of an older release: it takes schema_version {m[1]}, this record is {m[2]}; {_KEPT}"
    if (m := _OLD_KINDS.search(reason)) and m[1] in PROBE_KINDS:
        return f"the collector is of an older release: it does not know {m[1]!r} records yet; {_KEPT}"
    return None


def tls_context(ca_file: str | os.PathLike[str] | None) -> ssl.SSLContext:
    """Certificates are checked against ``ca_file``, or the system's CAs."""
    try:
        return ssl.create_default_context(cafile=str(ca_file) if ca_file else None)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"store.ca_file: {ca_file}: cannot be read as a CA bundle ({exc})") from None


def loose_token(path: Path) -> str | None:
    """What is wrong with a token file other users can read (None when only its owner can).

    A warning, not a refusal: the token is already exposed, and refusing would stop a site's
    accounting after an upgrade for a mode its configuration management set; the fix is the
    operator's (``chmod 600``, and a new token if others could log in)."""
    try:
        mode = path.stat().st_mode
    except OSError:  # a missing or unreadable file is _read_token's error
        return None
    if mode & 0o077 == 0:
        return None
    return (
        f"store.token_file: {path} is mode {mode & 0o777:04o}, readable by other users of this host: "
        "chmod 600 it, owned by the user the probe runs as (and ask the collector for a new token if others "
        "could read it)"
    )


def _read_token(path: Path | None) -> str:
    if path is None:
        raise ConfigError("store.token_file: a collector store needs the file holding this probe's token")
    try:
        token = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        raise ConfigError(f"store.token_file: {path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"store.token_file: {path}: cannot be read ({exc})") from None
    if not token or any(c.isspace() for c in token):
        raise ConfigError(
            f"store.token_file: {path}: expected one token (no spaces), got {'nothing' if not token else 'spaces'}"
        )
    return token


def _json(reply: httpx.Response) -> dict[str, Any]:
    return _json_text(reply.content)


def _json_text(content: str | bytes) -> dict[str, Any]:
    try:
        value = orjson.loads(content)
    except orjson.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}
