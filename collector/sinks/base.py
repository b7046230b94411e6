"""What every sink is: the :class:`Sink` protocol and what it says of a batch (:class:`SendResult`).

A sink takes a batch of records of one kind (as the outbox keeps them, encoded once:
``send_encoded``; or as documents, ``send``) and says, per document, what became of it:
stored (``acked``), worth another try later (``retry``: an outage, 429, 5xx), or refused for
good (``rejected``: a mapping conflict, a malformed document). The outbox deletes only what
was acknowledged and moves rejected documents to its dead-letter table. Of what it stored, a
store that can tell says which ids it did not hold before (``created``) and which it held
already and replaced (``existed``: a backfill reading jobs again); a sink that cannot (the
fairacct collector, Gratia: they acknowledge before any store has the records) says neither.

The protocol is everything the probe, the collector and the command line ask of a store, so
no caller needs to know which store it has: writing (``send``), reading back (``count``,
``query``), sums computed in the store (``aggregate``: SQL ``GROUP BY`` in the embedded store,
composite aggregations in Elasticsearch/OpenSearch; no records come back to Python to be
summed, with ``index_aggregation`` for the shapes asked for often), deleting what a rewrite left
stale (``delete_stale``: summaries of groups that no
longer exist), the index templates (``check_templates``, ``install_templates``), which a store
without templates answers trivially, whether it can be reached at all (``ping``: ``config
check --connect``), and a lease in the store (``take_lease``, ``release_lease``), so that of the
several writers one store may have (collectors behind a load balancer), one at a time does
what must not be done twice at once: the daily summaries.

A store keeps one document per record id, and of two copies of an id the one of the higher
version (:data:`collector.records.VERSION`, carried beside the record): a copy of a lower
version is acknowledged without replacing the stored one (``superseded``), and a copy without a
version replaces whatever is stored.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from collector.encoded import Encoded
from collector.records import received_version

__all__ = ["Aggregation", "Lease", "PeriodUnit", "SendResult", "Sink", "TemplateCheck", "Total", "next_token"]

PeriodUnit = Literal["day", "month"]
"""What :attr:`Aggregation.period` groups a record's ``timestamp`` by."""


@dataclass
class SendResult:
    """What a sink did with each document of a batch, by id. ``created`` and ``existed`` are
    of the ``acked`` ids: those the store did not hold before this send, and those it held
    already (the same record read again, or a corrected one); an acked id in neither is one
    the sink cannot tell of. ``superseded``: acked ids of which the store holds a copy of a
    higher version (see the module docstring), kept instead of the one sent."""

    acked: list[str] = field(default_factory=list)
    retry: dict[str, str] = field(default_factory=dict)  # id -> error, transient
    rejected: dict[str, str] = field(default_factory=dict)  # id -> error, permanent
    created: list[str] = field(default_factory=list)
    existed: list[str] = field(default_factory=list)
    superseded: list[str] = field(default_factory=list)
    left_out: Counter[str] = field(default_factory=Counter)  # reason -> acked ids deliberately not sent
    # why the destination refuses the batch's kind as a whole for now (a collector of an older release
    # that does not know it yet): its records wait alone, the other kinds are sent on; "" for none
    kind_refused: str = ""


@dataclass(frozen=True)
class TemplateCheck:
    """Which kinds' index templates are missing from the store, and which differ (kind ->
    what differs) from ``mappings/``. A store without templates is always ``ok``."""

    missing: list[str] = field(default_factory=list)
    differ: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.missing and not self.differ


@dataclass(frozen=True)
class Lease:
    """A lease ``name`` in a store, as :meth:`Sink.take_lease` found or left it: ``holder`` has it
    until ``expires`` (UNIX seconds, by the holder's clock). ``token`` grows with every grant,
    whoever the holder, and stays the same while one holder renews it: what a holder writes
    under it carries it as its version, so that a holder whose lease ran out (a process paused
    longer than the lease) never replaces or deletes what a later holder wrote."""

    name: str
    holder: str
    token: int
    expires: float

    def held_by(self, holder: str, now: float) -> bool:
        """Whether ``holder`` has this lease at ``now``."""
        return self.holder == holder and now < self.expires


def next_token(previous: int | None, now: float) -> int:
    """The token of a new grant of a lease at ``now``: its microsecond, or one above the last
    token when a clock behind the last holder's gives less, so that tokens only grow."""
    return max(received_version(now), (previous or 0) + 1)


@dataclass(frozen=True)
class Total:
    """One sum of an :class:`Aggregation`: ``scale`` x the sum over records of the product of
    ``fields`` (at most two; none: the number of records, an int, unscaled), over the records whose boolean field
    ``where`` is true when it is given. A missing field counts as ``missing`` (0 unless given,
    and given only for a sum of one field: GRACC counts a record without ``Njobs`` as one job),
    so a sum over records that lack a field is 0, in every store.

    ``op`` ``"min"`` or ``"max"`` makes it the least or greatest value of one field instead
    (unscaled; None over records that all lack it): APEL's earliest and latest end times.

    ``whole``: each record's value of the one field counts in whole units, its fraction dropped
    (towards zero), as an Elasticsearch ``long`` field indexes a number: GRACC's raw index holds
    ``WallDuration`` so, and its summaries sum whole seconds. The embedded store drops the
    fraction in its query; Elasticsearch, by the field's ``long`` mapping (mappings/gratia.json)."""

    name: str
    fields: tuple[str, ...] = ()
    scale: float = 1.0
    where: str | None = None
    missing: float = 0.0
    op: Literal["sum", "min", "max"] = "sum"
    whole: bool = False

    def __post_init__(self) -> None:
        if self.whole and (len(self.fields) != 1 or self.op != "sum"):
            raise ValueError(f"total {self.name!r}: whole units are of a sum of one field")
        if self.op != "sum" and (len(self.fields) != 1 or self.where or self.missing or self.scale != 1.0):
            raise ValueError(f"total {self.name!r}: a {self.op} is of one field, unscaled, without where or missing")
        if len(self.fields) > 2:
            raise ValueError(f"total {self.name!r}: a product of at most two fields, got {list(self.fields)}")
        if self.missing and len(self.fields) != 1:
            raise ValueError(f"total {self.name!r}: a value for a missing field needs a sum of one field")


@dataclass(frozen=True)
class Aggregation:
    """Sums of records of one ``kind`` grouped by ``period`` of the record's ``timestamp``
    (``day``: 'YYYY-MM-DD', ``month``: 'YYYY-MM', None: the whole range) and the fields of
    ``group_by``; ``since``/``until`` are ISO-8601 UTC bounds on ``timestamp`` (since inclusive,
    until exclusive); only the records that have every field of ``requires`` count, and
    only those whose numeric fields lie in ``ranges``: ``(field, low, high)`` keeps a record
    with ``low <= field < high`` (None: unbounded on that side; a record without the field is
    left out)."""

    kind: str
    group_by: tuple[str, ...]
    totals: tuple[Total, ...]
    period: PeriodUnit | None = "day"
    since: str | None = None
    until: str | None = None
    requires: tuple[str, ...] = ()
    ranges: tuple[tuple[str, float | None, float | None], ...] = ()


class Sink(Protocol):
    """A store of records (the embedded SQLite store, Elasticsearch/OpenSearch, ...)."""

    def send(self, kind: str, docs: Sequence[Mapping[str, Any]]) -> SendResult:
        """Store documents of one kind (each with ``id`` and ``timestamp``)."""

    def send_encoded(self, kind: str, records: Encoded) -> SendResult:
        """Store records of one kind as they were encoded (the outbox's way), their bytes as they
        are: what the sink needs of a record travels beside it (its id, ``timestamp``, the
        fields of :func:`collector.records.carried_fields`)."""

    def count(self, kind: str) -> int:
        """How many documents of ``kind`` are stored."""

    def query(
        self, kind: str, *, since: str | None = None, until: str | None = None, limit: int | None = None
    ) -> list[dict[str, Any]]:
        """Documents of ``kind``, oldest first; ``since``/``until`` are ISO-8601 UTC bounds on
        ``timestamp`` (since inclusive, until exclusive)."""

    def aggregate(self, query: Aggregation) -> list[dict[str, Any]]:
        """One row per group of ``query``, computed in the store: ``period`` (unless None), the
        ``group_by`` fields (None where a record lacks one) and every total by its name."""

    def index_aggregation(self, query: Aggregation) -> None:
        """Make aggregations of this shape fast when they are asked for often (the embedded
        store: a covering index; a store that indexes every field: nothing)."""

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
        """Delete the documents of ``kind`` with ``since`` <= ``timestamp`` < ``until`` (ISO-8601
        UTC) whose ``field`` is ``value`` and whose id is not in ``keep``, and, when ``version``
        is given, whose version is lower (or none): a document written meanwhile by a newer
        writer stays. How many went."""

    def take_lease(self, name: str, holder: str, ttl_s: float, *, now: float) -> Lease:
        """The lease ``name`` for ``holder`` until ``now + ttl_s`` if it is free, ran out or is
        ``holder``'s already (then renewed, its token kept; otherwise a new token, above every
        earlier one); else the lease as another holds it (compare :attr:`Lease.holder`).
        Taken atomically: of two writers asking at once, one gets it."""

    def release_lease(self, lease: Lease) -> None:
        """Let ``lease`` go, if its holder still has it (its token stays for the next grant)."""

    def check_templates(self) -> TemplateCheck:
        """Which kinds' index templates are missing or outdated (nothing, for a store without)."""

    def install_templates(self) -> list[str]:
        """Install (or update) the index template of every kind; the names installed."""

    def ping(self) -> str:
        """Reach the store as a write would, storing nothing (the embedded store: its write lock;
        Elasticsearch: who the cluster is, with the credentials; a collector: ``/healthz`` and the
        token): what answered, in a few words. A :class:`~collector.errors.SinkError` saying why
        it cannot be reached otherwise."""

    def close(self) -> None: ...
