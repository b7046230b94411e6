"""The collector service's settings (:mod:`collector.server`), described once.

:class:`CollectorSettings` is every setting an operator gives the service, each with its type,
default, constraint and help: the ``[collector]`` section of fairacct's TOML file is this model
(the probe's configuration validates the file with it), and the service runs with it. Its store
is its own section, ``[collector.store]`` (:class:`CollectorStoreSettings`: a URL and the
credentials by reference, as the probe's ``[store]``, whose keys are :class:`SinkSettings`'s
too). Sizes are read as operators write them ("64 MiB"). Tests and embedders build it with
:meth:`CollectorSettings.of`, where a value out of bounds is a
:class:`~collector.errors.ConfigError` that names the setting. A setting added here is a key of
the file and a setting of the service at once; the bounds no operator sets are class constants.
This module imports pydantic, not the service (Starlette, uvicorn): every command reads it.

Nothing here is secret: tokens stay in their files, and the store's credentials are named by
file or environment variable, never held by value.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Any, ClassVar, Self

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    Strict,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import ErrorDetails

from collector.addresses import IPAddress, Network, network_of
from collector.errors import ConfigError
from collector.sinks.registry import STORES, Opening, check_url
from collector.units import parse_size

__all__ = ["CollectorSettings", "CollectorStoreSettings", "GratiaSender", "ProbeScope", "SinkSettings"]

MIB = 1024**2

_LaxPath = Annotated[Path, Strict(False)]  # a string becomes a Path


def _bytes(value: Any) -> Any:
    """A size in bytes, as operators write it ("64 MiB"; a number is bytes)."""
    return parse_size(value, 1) if isinstance(value, (int, float, str)) else value


_Bytes = Annotated[float, BeforeValidator(_bytes)]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class SinkSettings(_Section):
    """A store records are written to, and how to reach it: the keys the probe's ``[store]`` and
    the collector's ``[collector.store]`` share (each adds its own ``url``)."""

    url: str = Field("sqlite:///fairacct.sqlite", description="Where records go.")
    index_prefix: str = Field("fairacct", description="Elasticsearch indices are <index_prefix>-<kind>-YYYY.MM.")
    api_key_file: str = Field("", description="File holding an Elasticsearch API key (never put the key itself here).")
    api_key_env: str = Field("", description="Environment variable holding an Elasticsearch API key.")
    username: str = Field("", description="User for basic auth (with password_file or password_env).")
    password_file: str = Field("", description="File holding the basic-auth password.")
    password_env: str = Field("", description="Environment variable holding the basic-auth password.")
    ca_file: str = Field("", description="CA bundle to verify the store's certificate (https).")
    install_templates: bool = Field(
        False,
        description="Install fairacct's index templates when they are missing or outdated (checked at the first "
        "flush and after every reconnect). Off by default: templates change a shared cluster's schema and need "
        "its manage_index_templates privilege, so the store's operator runs `fairacct mappings install`; "
        "records wait in the outbox meanwhile.",
    )

    @field_validator("url")
    @classmethod
    def _a_store_there_is_a_sink_for(cls, value: str) -> str:
        try:
            check_url(value)
        except ConfigError as exc:
            raise ValueError(str(exc).removeprefix("store.url: ")) from None
        return value


class CollectorStoreSettings(SinkSettings):
    """The collector's store, the ``[collector.store]`` section: where its flusher sends records."""

    url: str = Field(
        "sqlite:///fairacct.sqlite",
        description="sqlite:///PATH (embedded, PATH relative to collector.state_dir), http(s)://... "
        "(Elasticsearch) or opensearch+http(s)://... (OpenSearch); never another collector.",
    )
    # a Gratia collector as this store names no sender of its own: the Gratia sink's defaults, as before the registry
    gratia_probe_name: ClassVar[str] = ""
    gratia_site: ClassVar[str] = ""
    gratia_bundle_size: ClassVar[int] = 100

    @field_validator("url")
    @classmethod
    def _not_another_collector(cls, value: str) -> str:
        if value.startswith(STORES["collector"].prefixes):
            raise ValueError(f"the collector needs a store of its own, got another collector: {value!r}")
        return value


class ProbeScope(_Section):
    """What one probe (its token) may report for: an entry of ``collector.probes``."""

    probe: str = Field(min_length=1, description="The probe's name (its token file's name).")
    sites: list[str] = Field(default_factory=list, description="Sites its records may name ('site').")
    pools: list[str] = Field(default_factory=list, description="Pools its records may name ('pool').")


def _network(value: Any) -> Any:
    """A network as operators write it: a CIDR ("192.0.2.0/24", "2001:db8::/48") or one address,
    an IPv4-mapped one read as IPv4 (:mod:`collector.addresses`)."""
    if not isinstance(value, str):
        return value
    try:
        return network_of(value)
    except ValueError as exc:
        raise ValueError(
            f'expected an address or a network (CIDR, e.g. "192.0.2.0/24"), got {value!r}: {exc}'
        ) from None


def _no_bare_name(value: Any) -> Any:
    """The list's old form, a bare name, says nothing of where the sender may send from: a
    ConfigError that shows the new form (issue 35), rather than records taken from anywhere."""
    if isinstance(value, str):
        raise ValueError(
            f"a Gratia sender is named with the networks it sends from: write "
            f'{{probe = "{value}", networks = ["192.0.2.0/24"]}} with its addresses or CIDRs, got the bare '
            f'name {value!r} (["0.0.0.0/0", "::/0"] takes it from anywhere)'
        )
    return value


class GratiaSender(_Section):
    """A Gratia probe the collector takes records from (an item of ``collector.gratia_senders``):
    its name (the form's ``from``), the networks its requests must come from, and the sites its
    records may name (their ``SiteName``).

    ``sites`` has no default: a sender listed before senders had sites is a configuration error
    that says what to write, not a sender taken for every site (the hole it closes: a listed
    sender's records counted in another site's summaries) nor one refused for all (its records
    waiting in gratia-probe's outbox while the log says why). GratiaCore writes its ProbeConfig's
    ``SiteName`` into every record, so a sender lists at least one."""

    probe: str = Field(min_length=1, description="The probe's name (its ProbeName, the form's 'from').")
    networks: list[Annotated[Network, BeforeValidator(_network)]] = Field(
        min_length=1,
        description='Addresses or CIDRs the probe sends from, e.g. ["192.0.2.0/24"]; others are refused '
        "before their body is read.",
    )
    sites: list[Annotated[str, Field(min_length=1)]] = Field(
        description='The SiteNames its records may name, e.g. ["SiteA"] (its ProbeConfig\'s SiteName); an '
        "envelope with a record for another site is refused whole (403).",
    )

    @model_validator(mode="before")
    @classmethod
    def _sites_are_named(cls, value: Any) -> Any:
        if isinstance(value, dict) and "sites" not in value:
            probe = value.get("probe", "condor:ce01.example.org")
            raise ValueError(
                "sites is missing: a Gratia sender reports only for the sites listed for it (its records' "
                f'SiteName); write {{probe = "{probe}", networks = [...], sites = ["SiteA"]}}'
            )
        return value

    @field_validator("sites")
    @classmethod
    def _at_least_one_site(cls, value: list[str]) -> list[str]:
        if not value:
            raise ValueError(
                "a Gratia sender reports for at least one site (GratiaCore writes its SiteName into every "
                "record), got none: list the sites it reports for, or remove the sender"
            )
        return value

    def allows(self, address: IPAddress) -> bool:
        """Whether ``address`` (in IPv4 form when it is IPv4-mapped: :func:`collector.addresses.ip_of`)
        is in one of the sender's networks."""
        return any(address in network for network in self.networks)


class CollectorSettings(_Section):
    """The collector service's settings, the ``[collector]`` section, with its store
    (``[collector.store]``) and the bounds no operator sets: ``max_group_records`` bounds one
    group commit (the records of several requests committed in one transaction),
    ``max_header_bytes`` a request's line and headers (over it: 431 and the connection closed)."""

    max_group_records: ClassVar[int] = 50_000
    max_header_bytes: ClassVar[int] = 64 * 1024

    listen_address: str = Field("127.0.0.1", description="Address the collector service listens on.")
    port: int = Field(8080, ge=0, le=65535, description="Port the collector service listens on (0: any free port).")
    tls_cert_file: str = Field(
        "", description="TLS certificate (PEM) to serve https itself. Empty: plain http (behind a proxy)."
    )
    tls_key_file: str = Field("", description="TLS private key (PEM) of tls_cert_file.")
    token_dir: _LaxPath = Field(
        Path("tokens"),
        description="Directory of probe tokens: one file per probe, named after the probe, holding its token.",
    )
    gratia_senders: list[Annotated[GratiaSender, BeforeValidator(_no_bare_name)]] = Field(
        default_factory=list,
        description="Gratia probes the Gratia endpoint accepts records from, each with the networks it sends "
        'from and the sites it reports for: [{probe = "condor:ce01.example.org", networks = ["192.0.2.0/24"], '
        'sites = ["SiteA"]}]; a record under another ProbeName or SiteName refuses its envelope; empty: none.',
    )
    trusted_proxies: list[Annotated[Network, BeforeValidator(_network)]] = Field(
        default_factory=list,
        description="Addresses or CIDRs of the proxies whose X-Forwarded-For the collector believes, e.g. "
        "[\"127.0.0.1\"] behind nginx on the same host; empty: a request's address is always its connection's.",
    )
    probes: list[ProbeScope] = Field(
        default_factory=list,
        description='The sites and pools each probe may report for, e.g. [{probe = "fairacct@ce01.example.org", '
        'sites = ["SiteA"], pools = ["cm.site-a.org"]}]; a record for another is refused with 403, and a probe '
        "not listed may send only records that name no site and no pool.",
    )
    max_fields_per_record: int = Field(
        256,
        ge=16,
        le=900,
        description="Fields one record may have (a probe's records have about forty, a hundred with a site's "
        "extra attributes); a record with more is refused by itself (400). At most 900: an index maps at most "
        "1000 fields.",
    )
    max_body_size: _Bytes = Field(
        64.0 * MIB,
        gt=0,
        description='Largest request body, as sent and decompressed, e.g. "64 MiB" (a number is bytes).',
    )
    max_records_body_size: _Bytes = Field(
        8.0 * MIB,
        gt=0,
        description="Largest body of POST /v1/records (a probe's batch), as sent and decompressed, e.g. "
        '"8 MiB"; the smaller of this and max_body_size holds.',
    )
    max_records_per_request: int = Field(
        5000,
        ge=1,
        description="Records one POST /v1/records may hold (a probe sends 2000 at most); over it: 413, "
        "and the probe sends the batch again in halves.",
    )
    max_requests_per_probe: int = Field(
        8, ge=1, description="Requests of one probe (its token) under way at once; over it: 429."
    )
    max_connections_per_probe: int = Field(
        8,
        ge=1,
        description="Connections of one probe (its token) open at once; a new one beyond closes the probe's own "
        "that has waited longest without a request under way, or is answered 429 when each has one under way.",
    )
    max_connections: int = Field(
        1000,
        ge=1,
        description="Connections open at once (keep it above max_anonymous_connections plus the tokens times "
        "max_connections_per_probe); a new one beyond closes one without a probe's token, or the one that has "
        "waited longest without a request under way, or is closed itself when every one has a request under way.",
    )
    max_anonymous_connections: int = Field(
        100,
        ge=1,
        description="Connections without a probe's token (Gratia senders, strangers, TLS handshakes) open at "
        "once, within max_connections; a new connection beyond closes one of them (first one answered before its "
        "body, then the oldest of the address holding the most), so they never keep a probe out.",
    )
    anonymous_memory_per_source: _Bytes = Field(
        128.0 * MIB,
        gt=0,
        description="Bytes of bodies (as sent and decompressed) that requests without a token from one address "
        "(IPv6: one /64) may hold at once; beyond, 503 with Retry-After.",
    )
    anonymous_memory: _Bytes = Field(
        512.0 * MIB,
        gt=0,
        description="Bytes of bodies (as sent and decompressed) that requests without a token may hold at once, "
        "from all addresses; beyond, 503 with Retry-After.",
    )
    handshake_timeout_s: float = Field(
        10.0,
        gt=0,
        description="Seconds a TLS handshake may take, from the connection's accept (TLS served by the "
        "collector: tls_cert_file).",
    )
    idle_timeout_s: float = Field(
        75.0, gt=0, description="Seconds a connection may wait for a request (new, or after a reply) before it closes."
    )
    header_timeout_s: float = Field(
        10.0, gt=0, description="Seconds a request's line and headers may take from its first byte."
    )
    body_timeout_s: float = Field(
        60.0, gt=0, description="Seconds a request's body may take from the end of its headers."
    )
    max_outbox_depth: int = Field(
        2_000_000, ge=1, description="Records waiting in the collector's outbox over which requests get 503."
    )
    backpressure_depth: int = Field(
        200_000,
        ge=1,
        description="Records waiting in the collector's outbox over which, while the store is taking records "
        "more slowly than the probes send them, a probe holding its share of them or more (this depth shared by "
        "the probes holding records) gets 429 with Retry-After before its body is read (the probes keep their "
        "batches and send them again later); while the store takes none (an outage), the outbox holds up to "
        "max_outbox_depth.",
    )
    outbox_keep_free_mib: float = Field(
        64.0,
        ge=0,
        description="Free space (MiB) the collector's outbox file keeps once a backlog is sent, for the next "
        "commits to reuse; the rest is given back to the file system.",
    )
    outbox_reserve_mib: float = Field(
        64.0,
        ge=0,
        description="Free space (MiB) the collector keeps on its outbox's file system for the flusher, to write "
        "down what the store took and give space back: while less is free (less the outbox's WAL) than this and "
        "one request's body, requests get 503 with Retry-After before their body is read.",
    )
    state_dir: _LaxPath = Field(
        Path("collector"),
        description="Directory of the collector's outbox (and of a sqlite:/// store with a relative path).",
    )
    flush_every_s: float = Field(
        5.0, gt=0, description="Seconds between flushes of the outbox to the store when it is idle."
    )
    flush_batch_size: int = Field(2000, ge=1, description="Records per batch sent to the store, at most.")
    flush_batch_bytes: _Bytes = Field(
        16.0 * MIB,
        ge=1,
        description='Bytes of records per batch sent to the store, at most, e.g. "16 MiB" (a record larger goes '
        "alone); each bulk request to Elasticsearch is cut to it as well. Keep it well under the store's largest "
        "request (Elasticsearch's http.max_content_length, 100 MB by default; 10 MiB on small Amazon OpenSearch "
        "instances): a bulk the store refuses as too large (413) is sent in halves, and a record refused alone is "
        "set aside as a dead letter.",
    )
    store_stale_s: float = Field(
        900.0, gt=0, description="/healthz answers 503 when records have waited this long without the store taking any."
    )
    summaries_recent_days: int = Field(
        7,
        ge=0,
        description="The collector re-summarizes this many last days (today included) in its store every "
        "summaries_every_s; 0: never (GRACC: 7 days every 15 minutes).",
    )
    summaries_every_s: float = Field(
        900.0, gt=0, description="Seconds between re-summaries of the last summaries_recent_days days."
    )
    summaries_nightly_days: int = Field(
        365,
        ge=0,
        description="Once a day the collector re-summarizes this many last days, for very late records; 0: never.",
    )
    summaries_lease_s: float = Field(
        300.0,
        gt=0,
        description="Seconds a summary run holds the store's summaries lease unless it renews it (it does at every "
        "step): collectors on one store summarize one at a time, and one that died holding it holds the others "
        "up this long.",
    )
    store: CollectorStoreSettings = Field(
        default_factory=CollectorStoreSettings, description="The collector's store ([collector.store])."
    )

    @field_validator("probes")
    @classmethod
    def _each_probe_once(cls, value: list[ProbeScope]) -> list[ProbeScope]:
        names = [p.probe for p in value]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"each probe is listed once in probes, got {', '.join(map(repr, twice))} more than once")
        return value

    @model_validator(mode="after")
    def _tls_pair(self) -> Self:
        if bool(self.tls_cert_file) != bool(self.tls_key_file):
            raise ValueError("give both tls_cert_file and tls_key_file, or neither")
        return self

    @classmethod
    def of(cls, **settings: Any) -> CollectorSettings:
        """The settings given (tests, embedders); a bad value is a ConfigError naming the setting.
        (Not so when the configuration file is validated: the probe's configuration words those
        errors with the file and the key's path.)"""
        try:
            return cls.model_validate(settings)
        except ValidationError as exc:
            raise ConfigError("; ".join(_problem(e) for e in exc.errors(include_url=False))) from None

    @property
    def outbox_path(self) -> Path:
        return self.state_dir / "outbox.sqlite"

    @property
    def outbox_reserve_bytes(self) -> int:
        return math.ceil(self.outbox_reserve_mib * 2**20)

    @property
    def scheme(self) -> str:
        return "https" if self.tls_cert_file else "http"

    @property
    def flush_bytes(self) -> int:
        """``flush_batch_bytes`` in whole bytes (at least one)."""
        return math.ceil(self.flush_batch_bytes)

    def store_opening(self) -> Opening:
        """How the store is opened (:func:`collector.sinks.registry.open_store`): a relative
        ``sqlite:///`` path under ``state_dir``, and for Elasticsearch or OpenSearch the bytes of
        a bulk request, ``flush_batch_bytes``."""
        return Opening(self.state_dir, bulk_bytes=self.flush_bytes)

    @property
    def max_body_bytes(self) -> int:
        """``max_body_size`` in whole bytes (at least one)."""
        return math.ceil(self.max_body_size)

    @property
    def max_records_body_bytes(self) -> int:
        """The limit of a ``/v1/records`` body in whole bytes: the smaller of ``max_records_body_size``
        and ``max_body_size``."""
        return math.ceil(min(self.max_records_body_size, self.max_body_size))


_BOUNDS = {
    "greater_than": "more than {gt:g}",
    "greater_than_equal": "at least {ge:g}",
    "less_than_equal": "at most {le:g}",
}


def _problem(error: ErrorDetails) -> str:
    """One setting's problem: ``collector port: expected at most 65535, got 70000``."""
    key = " " + ".".join(map(str, error["loc"])) if error["loc"] else ""
    if error["type"] == "value_error":
        return f"collector{key}: {error.get('ctx', {}).get('error', error['msg'])}"
    if error["type"] in _BOUNDS:
        what = "expected " + _BOUNDS[error["type"]].format(**error.get("ctx", {}))
    else:
        what = error["msg"][:1].lower() + error["msg"][1:]  # pydantic's: "input should be a valid integer"
    return f"collector{key}: {what}, got {error['input']!r}"
