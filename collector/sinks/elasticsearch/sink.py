"""The Elasticsearch / OpenSearch sink: monthly indices, bulk writes by id, per-item results.

A document of kind K whose ``timestamp`` falls in month M goes to the index
``<prefix>-K-YYYY.MM``: the record's own time, never the time it arrived, so a late record
lands beside its peers and a month can be dropped whole. A batch is sent as ``_bulk`` requests
of *index* operations with ``_id`` = the record id, each preceded by one lookup of its ids in
the kind's other months, and of *delete* operations for the copies of those ids another month
holds (:mod:`~collector.sinks.elasticsearch.copies`): sending the same fact twice keeps one
document, a corrected fact replaces the old one wherever it was, and a copy of a lower version
than the stored one (:data:`collector.records.VERSION`) is acknowledged without replacing it.
The requests are cut by count and by bytes, retried while their failure may pass and halved
when the store finds one too large (413): :mod:`~collector.sinks.elasticsearch.bulk`. What no
retry can mend (authentication, TLS, a request the server cannot read) raises
:class:`ElasticsearchError`; nothing of that request is acknowledged, so the outbox keeps it.

Two flavours behind one small interface (:class:`Client`): the official ``elasticsearch``
client for ``http(s)://`` URLs and ``opensearch-py``, imported only then, for
``opensearch+http(s)://`` URLs. Index templates are the JSON files of ``mappings/``, one per
kind. Secrets (an API key, a password) are read from a file or from an environment variable
named in the parameters, never taken as literals, never logged, and masked in ``repr``. Leases
(:mod:`~collector.sinks.elasticsearch.lease`) are documents of ``<prefix>-lease``.
"""

from __future__ import annotations

import json
import os
import random
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import urlsplit, urlunsplit

from collector.encoded import Encoded
from collector.errors import ConfigError, ElasticsearchError
from collector.records import VERSION
from collector.sinks.base import Aggregation, Lease, SendResult, TemplateCheck
from collector.sinks.elasticsearch import lease, stale
from collector.sinks.elasticsearch.auth import read_auth
from collector.sinks.elasticsearch.bulk import BULK_BYTES, Bulks
from collector.sinks.elasticsearch.composite import composite_body, page_rows
from collector.sinks.elasticsearch.copies import LOOKUP_IDS, Copy, Pending, Plan, copies_of, lookup_body, plan
from collector.sinks.elasticsearch.migration import behind, move_index
from collector.sinks.elasticsearch.templates import (
    INDEX_PREFIX,
    KIND_NAME,
    check_installed,
    field_types_of,
    load_templates,
    monthly_index,
)
from collector.sinks.elasticsearch.transport import FLAVOURS, Client, ElasticsearchClient, OpenSearchClient
from collector.sinks.registry import Opening

__all__ = ["ElasticsearchSettings", "ElasticsearchSink", "StoredDocument"]

_JITTER = random.Random()
"""The backoff's jitter: a generator of its own, not the global one a test's Hypothesis watches."""


@dataclass(frozen=True)
class StoredDocument:
    """A document as the server holds it: its index, its id and its source."""

    index: str
    id: str
    source: dict[str, Any]


class ElasticsearchSettings(Protocol):
    """The settings an Elasticsearch or OpenSearch store is opened with (``[store]``'s keys)."""

    @property
    def url(self) -> str: ...
    @property
    def index_prefix(self) -> str: ...
    @property
    def api_key_file(self) -> str: ...
    @property
    def api_key_env(self) -> str: ...
    @property
    def username(self) -> str: ...
    @property
    def password_file(self) -> str: ...
    @property
    def password_env(self) -> str: ...
    @property
    def ca_file(self) -> str: ...


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

    Sending: ``batch_size`` documents and ``bulk_bytes`` bytes per bulk request at most (a
    413 lowers the bytes: :mod:`~collector.sinks.elasticsearch.bulk`); a failure that may pass is tried
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
        bulk_bytes: int = BULK_BYTES,
        max_retries: int = 5,
        backoff_s: float = 0.5,
        backoff_max_s: float = 30.0,
        mappings: str | os.PathLike[str] | None = None,
        sleep: Callable[[float], None] = time.sleep,
        jitter: Callable[[], float] = _JITTER.random,
    ) -> None:
        parts = urlsplit(url)
        if parts.scheme not in FLAVOURS or not parts.hostname:
            shown = url if not (parts.username or parts.password) else "the store URL"
            raise ConfigError(f"expected http(s)://HOST:PORT or opensearch+http(s)://HOST:PORT, got {shown!r}")
        if parts.username or parts.password:
            bare = urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))
            raise ConfigError(
                f"{bare}: credentials in the URL are not accepted; give username with password_file or "
                "password_env, or api_key_file or api_key_env"
            )
        if not isinstance(prefix, str) or not INDEX_PREFIX.fullmatch(prefix):
            raise ConfigError(
                f"prefix must be lowercase letters, digits, '-' or '_' (part of an index name), got {prefix!r}"
            )
        _check_number("timeout_s", timeout_s, minimum=0.0, exclusive=True)
        _check_number("batch_size", batch_size, minimum=1, integer=True)
        _check_number("bulk_bytes", bulk_bytes, minimum=1, integer=True)
        _check_number("max_retries", max_retries, minimum=0, integer=True)
        _check_number("backoff_s", backoff_s, minimum=0.0)
        _check_number("backoff_max_s", backoff_max_s, minimum=backoff_s)

        self.url = url
        self.flavour = FLAVOURS[parts.scheme]
        self.prefix = prefix
        self._mappings = mappings
        self._sleep = sleep
        self.requests = 0  # aggregation requests made, for the benchmarks
        self._where = f"{self.flavour} {url}"
        https = parts.scheme.endswith("https")
        self._auth = read_auth(
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
        flavour = OpenSearchClient if self.flavour == "opensearch" else ElasticsearchClient
        self._client: Client = flavour(
            client_url, self._where, self._auth, verify_certs=verify_certs, timeout_s=timeout_s
        )
        self.bulks = Bulks(
            self._client, self._where, batch_size, bulk_bytes, max_retries, float(backoff_s), float(backoff_max_s),
            sleep, jitter, self._plans,
        )  # fmt: skip

    @classmethod
    def from_settings(cls, settings: ElasticsearchSettings, opening: Opening) -> ElasticsearchSink:
        """The sink of a store's settings (:func:`collector.sinks.registry.open_store`): the keys
        set, each as the constructor names it (secrets by reference), and the opening's request
        timeout (seconds) and bulk size (bytes) when given."""
        keys = {
            "index_prefix": "prefix", "api_key_file": "api_key_file", "api_key_env": "api_key_env",
            "username": "username", "password_file": "password_file", "password_env": "password_env",
            "ca_file": "ca_certs_file",
        }  # fmt: skip
        options: dict[str, Any] = {ours: getattr(settings, key) for key, ours in keys.items() if getattr(settings, key)}
        if opening.timeout_s is not None:
            options["timeout_s"] = opening.timeout_s
        if opening.bulk_bytes is not None:
            options["bulk_bytes"] = opening.bulk_bytes
        return cls(settings.url, **options)

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

        Documents that are not JSON (NaN, objects) are rejected without a request; the others
        are encoded and sent as :meth:`send_encoded` sends records.
        """
        ids: list[str] = []
        stamps: list[Any] = []
        sources: list[bytes] = []
        refused: dict[str, str] = {}
        for position, doc in enumerate(docs):
            id_ = _string_id(kind, position, doc.get("id"))
            try:
                source = json.dumps(doc, allow_nan=False, separators=(",", ":"), default=_plain).encode()
            except (TypeError, ValueError) as exc:
                refused[id_] = f"{kind} document {id_}: {exc}"
                if id_ in ids:  # of several copies, the last counts
                    keep = [k for k, i in enumerate(ids) if i != id_]
                    ids, stamps, sources = [ids[k] for k in keep], [stamps[k] for k in keep], [sources[k] for k in keep]
                continue
            refused.pop(id_, None)
            ids.append(id_)
            stamps.append(doc.get("timestamp"))
            sources.append(source)
        result = self.send_encoded(kind, Encoded(tuple(ids), tuple(sources), {"timestamp": tuple(stamps)}))
        result.rejected.update(refused)
        return result

    def send_encoded(self, kind: str, records: Encoded) -> SendResult:
        """Store records of one kind, their JSON as it is, each under the index of its carried
        ``timestamp`` and with its carried version; say what became of each.

        Records without a usable ``timestamp`` are rejected without a request. Of several
        records with the same id, the last counts. A failure that no retry can mend
        (authentication, TLS) raises :class:`ElasticsearchError`; bulk requests of this call
        that went before it may have been stored, and sending them again is harmless.
        """
        self._check_kind(kind)
        result = SendResult()
        pending: dict[str, Pending] = {}
        for position, (id_, stamp, version, source) in enumerate(
            zip(records.ids, records.column("timestamp"), records.column(VERSION), records.docs, strict=True)
        ):
            _string_id(kind, position, id_)
            pending.pop(id_, None)
            result.rejected.pop(id_, None)
            try:
                index = monthly_index(self.prefix, kind, stamp)
            except (TypeError, ValueError) as exc:
                result.rejected[id_] = f"{kind} document {id_}: {exc}"
                continue
            pending[id_] = Pending(index, source, version if type(version) is int else None)
        self.bulks.write(kind, pending, result)
        return result

    def _plans(self, kind: str, pending: Mapping[str, Pending]) -> dict[str, Plan]:
        """What to write for each record, from one lookup of their ids in other months per :data:`LOOKUP_IDS`."""
        pattern = self._pattern(kind)
        ids = list(pending)
        found: dict[str, list[Copy]] = {}
        for start in range(0, len(ids), LOOKUP_IDS):
            part = {i: pending[i] for i in ids[start : start + LOOKUP_IDS]}
            answer = self._client.request(
                "POST", f"/{pattern}/_search?ignore_unavailable=true&allow_no_indices=true", lookup_body(part),
                what=f"looking up {len(part)} {kind} ids in every month",
            )  # fmt: skip
            found |= copies_of(answer)
        return {i: plan(i, record, found.get(i, ())) for i, record in pending.items()}

    # -- templates ------------------------------------------------------------------------------

    def ping(self) -> str:
        """Ask the cluster who it is, with this sink's credentials (``GET /``): its name, flavour
        and version; :class:`ElasticsearchError` when it does not answer or refuses them (401).
        A 403 says the credentials were accepted, without the ``monitor`` privilege that ``GET /``
        needs and a writer need not have: that is an answer."""
        try:
            info = self._client.request("GET", "/", None, what="asking the cluster who it is")
        except ElasticsearchError as exc:
            if exc.status != 403:
                raise
            return "the credentials accepted (GET / is not theirs to ask: 403)"
        version = info.get("version") if isinstance(info, Mapping) else None
        version = version if isinstance(version, Mapping) else {}
        name = info.get("cluster_name", "?") if isinstance(info, Mapping) else "?"
        return f"cluster {name} ({version.get('distribution', 'elasticsearch')} {version.get('number', '?')})"

    def install_templates(self) -> list[str]:
        """Put the index template of every kind (idempotent: a template is replaced by its
        current version); return their names."""
        names = []
        for kind, template in load_templates(self.prefix, self._mappings).items():
            name = f"{self.prefix}-{kind}"
            self._client.request("PUT", f"/_index_template/{name}", template, what=f"installing index template {name}")
            names.append(name)
        return names

    def upgrade_indices(self) -> list[str]:
        """Bring every monthly index whose mapping is behind its kind's template up to it (new
        index, reindex, counts compared, alias swapped: :mod:`~collector.sinks.elasticsearch.migration`);
        a line per index saying what was done. Install the templates first. Raises
        ElasticsearchError when a move fails (the indices moved before it stay moved; the one
        that failed is as it was, or has a new index beside it that the next run fills again)."""
        done = []
        for kind, template in load_templates(self.prefix, self._mappings).items():
            pattern = f"{self.prefix}-{kind}-*"
            mappings = self._client.request(
                "GET", f"/{pattern}/_mapping", None, what=f"reading the mappings of {pattern}"
            )
            for move in behind(mappings or {}, self.prefix, kind, template["version"]):
                done.append(move_index(self._client, self._where, move, self._sleep))
        return done

    def check_templates(self) -> TemplateCheck:
        """Which kinds' templates are missing on the server or differ from ``mappings/``."""
        return check_installed(self._client, load_templates(self.prefix, self._mappings), self.prefix)

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

    def aggregate(self, query: Aggregation) -> list[dict[str, Any]]:
        """The sums of ``query`` by a composite aggregation, paged (see
        :mod:`collector.sinks.elasticsearch.composite`); the server sums, nothing but the
        buckets comes back. ``requests`` counts the requests made, for the benchmarks."""
        pattern = self._pattern(query.kind)
        self._client.request("POST", f"/{pattern}/_refresh", None, what=f"refreshing {pattern}")
        self.requests += 1
        rows: list[dict[str, Any]] = []
        after: dict[str, Any] | None = None
        while True:
            body = composite_body(query, after)
            answer = self._client.request(
                "POST", f"/{pattern}/_search?ignore_unavailable=true&allow_no_indices=true", body,
                what=f"summing {query.kind} documents by {', '.join(query.group_by) or 'period'}",
            )  # fmt: skip
            self.requests += 1
            page, after = page_rows(query, answer)
            rows += page
            if after is None:
                return rows

    def index_aggregation(self, query: Aggregation) -> None:
        """Nothing to do: every field of the templates is indexed and has doc values."""

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
        """The stale documents found a page at a time over every month of ``kind`` and deleted
        in bulk, each guarded by ``version`` (see :meth:`Sink.delete_stale` and
        :mod:`~collector.sinks.elasticsearch.stale`); ``keep`` goes as an ``ids`` query, so it
        must stay under the server's ``index.max_terms_count`` (65,536: a month of summaries of
        a big pool)."""
        query = {"bool": {"filter": [{"range": {"timestamp": {"gte": since, "lt": until}}}, {"term": {field: value}}]}}
        return stale.delete_stale(self._client, self._pattern(kind), self._where, query, keep, version)

    def take_lease(self, name: str, holder: str, ttl_s: float, *, now: float) -> Lease:
        """See :meth:`Sink.take_lease` (:mod:`~collector.sinks.elasticsearch.lease`)."""
        return lease.take_lease(self._client, self.prefix, name, holder, ttl_s, now)

    def release_lease(self, held: Lease) -> None:
        """See :meth:`Sink.release_lease`."""
        lease.release_lease(self._client, self.prefix, held)

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
        return {index: field_types_of(body.get("mappings", {})) for index, body in answer.items()}

    def _check_kind(self, kind: str) -> None:
        if not isinstance(kind, str) or not KIND_NAME.fullmatch(kind):
            raise ValueError(f"record kind must be a lowercase word, got {kind!r}")


def _string_id(kind: str, position: int, id_: object) -> str:
    if not isinstance(id_, str) or not id_:
        raise ValueError(f"{kind} document {position} has no string 'id', got {id_!r}")
    return id_


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
