"""The collector's counters, in Prometheus' text format (0.0.4) and as GRACC's ``/stats``.

======================================================  =========  ================================
metric                                                  type       labels
======================================================  =========  ================================
``fairacct_collector_requests_total``                   counter    ``endpoint``, ``code``
``fairacct_collector_request_errors_total``             counter    ``endpoint``, ``reason``
``fairacct_collector_request_duration_seconds``         histogram  ``endpoint``
``fairacct_collector_records_total``                    counter    ``endpoint``, ``probe`` (made durable)
``fairacct_collector_record_errors_total``              counter    ``endpoint``, ``probe`` (refused)
``fairacct_collector_records_by_schema_total``          counter    ``schema_version`` (made durable; a
                                                                   fleet's probes upgraded: only the
                                                                   current one grows)
``fairacct_collector_records_by_release_total``         counter    ``release`` (made durable, by the
                                                                   sender's release: ``none`` before
                                                                   0.2.0; at most 32 releases, then
                                                                   ``other``)
``fairacct_collector_probes_by_release``                gauge      ``release`` (probes whose last batch
                                                                   named it: a rollout, probe by probe)
``fairacct_collector_probe_release``                    gauge      ``probe``, ``release`` (1: the release
                                                                   of the probe's last batch)
``fairacct_collector_records_skipped_total``            counter    ``endpoint``, ``probe``, ``type``
                                                                   (acknowledged, not stored: Gratia's
                                                                   StorageElement, ProbeDetails, ...)
``fairacct_collector_group_commits_total``              counter    (outbox transactions)
``fairacct_collector_outbox_depth``                     gauge
``fairacct_collector_outbox_oldest_age_seconds``        gauge
``fairacct_collector_outbox_dead_letters``              gauge      ``kind``
``fairacct_collector_outbox_disk_full``                 gauge      (1: no room on its file system)
``fairacct_collector_outbox_free_bytes``                gauge      (free on its file system)
``fairacct_collector_outbox_unrecorded``                gauge      (taken by the store, not yet
                                                                   written down: a full disk)
``fairacct_collector_flush_stuck_rounds``               gauge      (rounds in a row the store took
                                                                   none of the records waiting)
``fairacct_collector_records_stored_total``             counter    ``kind`` (the store acknowledged)
``fairacct_collector_records_superseded_total``         counter    ``kind`` (of those: the store kept a
                                                                   newer copy, another collector's)
``fairacct_collector_flush_duration_seconds``           histogram
``fairacct_collector_last_store_success_timestamp_seconds``  gauge
``fairacct_collector_store_reachable``                  gauge      (1: the store answered the flusher's
                                                                   last check, a refusal too; 0: it did
                                                                   not, or 5xx/429; absent: not known)
``fairacct_collector_store_templates_checked``          gauge      (1: its index templates are right and
                                                                   records are sent; 0: they wait)
``fairacct_collector_summarizer_up``                    gauge      (1: its last run did not crash
                                                                   and its thread runs)
``fairacct_collector_summary_runs_total``               counter    ``outcome`` (``ok``, ``failed``:
                                                                   the store failed, ``crashed``,
                                                                   ``deferred``: another collector
                                                                   held the store's summaries lease)
``fairacct_collector_summaries_deleted_total``          counter    (summaries of groups gone)
``fairacct_collector_summarizer_restarts_total``        counter
``fairacct_collector_connections``                      gauge      (open now)
``fairacct_collector_connections_anonymous``            gauge      (open now without a probe's token,
                                                                   TLS handshakes included)
``fairacct_collector_anonymous_body_bytes``             gauge      (held by requests without a token,
                                                                   as sent and decompressed)
``fairacct_collector_connections_closed_total``         counter    ``reason`` (by the collector: a
                                                                   deadline, a cap, a reply before
                                                                   the body; collector/server/
                                                                   connections.py)
======================================================  =========  ================================

Label values are endpoint names, status codes, reasons from the error mapping, record kinds
and probe names that hold a token or are among ``collector.gratia_senders``, and record types
from a fixed list (else ``other``): never free text from a request, so the number of series
stays bounded. ``/stats`` is GRACC's collector's: ``{"Records", "RecordErrors", "Requests",
"RequestErrors"}`` since the start; ``Records`` counts every record received (stored, refused
or skipped), ``RecordErrors`` the refused ones.
"""

from __future__ import annotations

import bisect
import functools
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

__all__ = [
    "MAX_RELEASES",
    "ConnectionGauges",
    "Histogram",
    "OutboxGauges",
    "ServerMetrics",
    "StoreGauges",
    "SummaryGauges",
]

MAX_RELEASES = 32
"""Releases counted apart by ``records_by_release_total``; a sender's release past them is ``other``."""

_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
_FLUSH_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)

Sample = tuple[str, dict[str, str], float]
_PREFIX = "fairacct_collector_"


@dataclass
class Histogram:
    """A Prometheus histogram: cumulative bucket counts, sum and count."""

    bounds: tuple[float, ...]
    counts: list[int] = field(default_factory=list)
    total: float = 0.0
    n: int = 0

    def __post_init__(self) -> None:
        self.counts = [0] * (len(self.bounds) + 1)

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.bounds, value)] += 1
        self.total += value
        self.n += 1

    def samples(self, labels: dict[str, str]) -> list[Sample]:
        out: list[Sample] = []
        running = 0
        for bound, count in zip((*self.bounds, float("inf")), self.counts, strict=True):
            running += count
            out.append(("_bucket", {**labels, "le": "+Inf" if bound == float("inf") else repr(bound)}, running))
        return [*out, ("_sum", labels, self.total), ("_count", labels, self.n)]


@dataclass(frozen=True)
class OutboxGauges:
    """What the outbox holds now, for the gauges."""

    depth: int
    oldest: float | None
    dead_letters: Mapping[str, int]
    last_store_success: float | None
    commits: int
    free_bytes: int | None = None  # on the outbox's file system (None: not known)
    disk_full: bool = False  # /healthz says "outbox disk full"
    unrecorded: int = 0  # records the store took that the outbox could not write down yet
    stuck_rounds: int = 0  # flush rounds in a row in which the store took none of the records waiting


@dataclass(frozen=True)
class ConnectionGauges:
    """The connections open now, and those the collector closed, by reason."""

    open: int
    closed: Mapping[str, int]
    anonymous: int = 0  # open without a probe's token
    anonymous_bytes: int = 0  # of bodies held by requests without a token


@dataclass(frozen=True)
class StoreGauges:
    """The store as the flusher last found it: whether it answered (None: not known yet) and
    whether its index templates were checked, so that records are sent."""

    reachable: bool | None
    templates_checked: bool


@dataclass(frozen=True)
class SummaryGauges:
    """The summarizer: whether it is well (its thread runs, its last run did not crash), and
    its runs by outcome since the start."""

    up: bool
    runs: int
    failures: int
    crashes: int
    restarts: int
    deferred: int = 0  # put off: another writer of the store held the summaries' lease
    deleted: int = 0  # summaries of groups that no longer exist, deleted


class ServerMetrics:
    """The collector's counters; safe to update from the event loop and the flusher thread."""

    def __init__(self, ingest: tuple[str, ...] = ("records",), clock: Callable[[], float] = time.time) -> None:
        """``ingest``: the endpoints that take records, which /stats counts (as GRACC's does)."""
        self._clock = clock
        self._ingest = ingest
        self._lock = threading.Lock()
        self.requests: Counter[tuple[str, int]] = Counter()
        self.request_errors: Counter[tuple[str, str]] = Counter()
        self.latency: dict[str, Histogram] = {}
        self.records: Counter[tuple[str, str]] = Counter()
        self.record_errors: Counter[tuple[str, str]] = Counter()
        self.schemas: Counter[int] = Counter()
        self.releases: Counter[str] = Counter()  # records made durable by the sender's release
        self.probe_releases: dict[str, str] = {}  # probe -> the release of its last batch
        self.skipped: Counter[tuple[str, str, str]] = Counter()
        self.stored: Counter[str] = Counter()
        self.superseded: Counter[str] = Counter()
        self.flush_latency = Histogram(_FLUSH_BUCKETS)

    def request(self, endpoint: str, code: int, seconds: float, reason: str | None = None) -> None:
        """Count one request that was answered with ``code``; ``reason`` names an error's kind."""
        with self._lock:
            self.requests[endpoint, code] += 1
            if reason is not None:
                self.request_errors[endpoint, reason] += 1
            self.latency.setdefault(endpoint, Histogram(_LATENCY_BUCKETS)).observe(seconds)

    def judged(self, endpoint: str, probe: str, accepted: int, refused: int) -> None:
        """Count the records of one request: made durable, and refused one by one."""
        with self._lock:
            if accepted:
                self.records[endpoint, probe] += accepted
            if refused:
                self.record_errors[endpoint, probe] += refused

    def schema_versions(self, versions: Mapping[int, int]) -> None:
        """Count records made durable by their ``schema_version`` (accepted ones only: bounded)."""
        with self._lock:
            self.schemas.update({v: n for v, n in versions.items() if n})

    def sender(self, probe: str, release: str, accepted: int) -> None:
        """Count one batch of ``probe`` by its release (:func:`collector.release.sender_release`):
        the probe's release now, and its ``accepted`` records. A label is never free text: past
        :data:`MAX_RELEASES` releases, a new one is counted as ``other``."""
        with self._lock:
            if release not in self.releases and len(self.releases) >= MAX_RELEASES:
                release = "other"
            self.probe_releases[probe] = release
            self.releases[release] += accepted

    def skipped_records(self, endpoint: str, probe: str, types: Mapping[str, int]) -> None:
        """Count records acknowledged without being stored (a type the collector does not keep);
        ``types`` must come from a bounded list (they are label values)."""
        with self._lock:
            for kind, n in types.items():
                self.skipped[endpoint, probe, kind] += n

    def flushed(self, seconds: float, stored: Mapping[str, int], superseded: Mapping[str, int] | None = None) -> None:
        """A flush round: how long it took, the records the store acknowledged by kind, and of
        those the ones it did not write for holding a newer copy (a later one another collector took)."""
        with self._lock:
            self.flush_latency.observe(seconds)
            self.stored.update({k: v for k, v in stored.items() if v})
            self.superseded.update({k: v for k, v in (superseded or {}).items() if v})

    def stats(self) -> dict[str, int]:
        """GRACC's collector's /stats document: the ingest endpoints' records and requests."""
        with self._lock:
            return {
                "Records": sum(self.records.values()) + sum(self.record_errors.values()) + sum(self.skipped.values()),
                "RecordErrors": sum(self.record_errors.values()),
                "Requests": sum(n for (e, _), n in self.requests.items() if e in self._ingest),
                "RequestErrors": sum(n for (e, code), n in self.requests.items() if e in self._ingest and code >= 400),
            }

    def render(
        self,
        outbox: OutboxGauges,
        connections: ConnectionGauges | None = None,
        summaries: SummaryGauges | None = None,
        store: StoreGauges | None = None,
    ) -> str:
        """Every metric in Prometheus' text format (those of connections, summaries and the store when given)."""
        now = self._clock()
        out: list[str] = []
        family = functools.partial(_family, out)
        p = _PREFIX
        with self._lock:
            family(f"{p}requests_total", "counter", "Requests answered, by endpoint and status code.",
                   [("", {"endpoint": e, "code": str(c)}, n)
                    for (e, c), n in sorted(self.requests.items())])  # fmt: skip
            family(f"{p}request_errors_total", "counter", "Requests refused, by endpoint and reason.",
                   [("", {"endpoint": e, "reason": r}, n)
                    for (e, r), n in sorted(self.request_errors.items())])  # fmt: skip
            family(f"{p}request_duration_seconds", "histogram", "Time from a request's arrival to its reply.",
                   [s for e, h in sorted(self.latency.items()) for s in h.samples({"endpoint": e})])  # fmt: skip
            family(f"{p}records_total", "counter", "Records made durable in the outbox, by endpoint and probe.",
                   [("", {"endpoint": e, "probe": q}, n) for (e, q), n in sorted(self.records.items())])  # fmt: skip
            family(f"{p}record_errors_total", "counter", "Records refused one by one, by endpoint and probe.",
                   [("", {"endpoint": e, "probe": q}, n)
                    for (e, q), n in sorted(self.record_errors.items())])  # fmt: skip
            family(f"{p}records_by_schema_total", "counter",
                   "Records made durable, by their schema_version (the previous release's or this one's).",
                   [("", {"schema_version": str(v)}, n) for v, n in sorted(self.schemas.items())])  # fmt: skip
            family(f"{p}records_by_release_total", "counter",
                   "Records made durable, by the sender's release (none: a release before 0.2.0).",
                   [("", {"release": r}, n) for r, n in sorted(self.releases.items())])  # fmt: skip
            family(f"{p}probes_by_release", "gauge", "Probes whose last batch named each release.",
                   [("", {"release": r}, n)
                    for r, n in sorted(Counter(self.probe_releases.values()).items())])  # fmt: skip
            family(f"{p}probe_release", "gauge", "The release of each probe's last batch (1).",
                   [("", {"probe": q, "release": r}, 1) for q, r in sorted(self.probe_releases.items())])  # fmt: skip
            family(f"{p}records_skipped_total", "counter",
                   "Records acknowledged and not stored (types the collector does not keep), "
                   "by endpoint, probe and type.",
                   [("", {"endpoint": e, "probe": q, "type": t}, n)
                    for (e, q, t), n in sorted(self.skipped.items())])  # fmt: skip
            family(f"{p}records_stored_total", "counter", "Records the store acknowledged, by kind.",
                   [("", {"kind": k}, n) for k, n in sorted(self.stored.items())])  # fmt: skip
            family(f"{p}records_superseded_total", "counter",
                   "Of the records the store acknowledged, those it did not write: it held a newer copy, by kind.",
                   [("", {"kind": k}, n) for k, n in sorted(self.superseded.items())])  # fmt: skip
            family(f"{p}flush_duration_seconds", "histogram", "Time of one flush of the outbox to the store.",
                   self.flush_latency.samples({}))  # fmt: skip
        _gauges(out, now, outbox, connections, summaries, store)
        return "\n".join(out) + "\n"


def _family(out: list[str], name: str, kind: str, help_: str, samples: list[Sample]) -> None:
    """One metric family in Prometheus' text format, appended to ``out``."""
    out.append(f"# HELP {name} {help_}")
    out.append(f"# TYPE {name} {kind}")
    for suffix, labels, value in samples:
        text = ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items())
        out.append(f"{name}{suffix}{{{text}}} {_number(value)}" if text else f"{name}{suffix} {_number(value)}")


def _gauges(
    out: list[str],
    now: float,
    outbox: OutboxGauges,
    connections: ConnectionGauges | None,
    summaries: SummaryGauges | None,
    store: StoreGauges | None,
) -> None:
    """The families of what the collector's parts report at ``now`` (UNIX s): the outbox's, and
    the store's, the summarizer's and the connections' where given; appended to ``out``."""
    family = functools.partial(_family, out)
    p = _PREFIX
    family(f"{p}group_commits_total", "counter",
           "Outbox transactions (each holds the records of one or more requests).",
           [("", {}, outbox.commits)])  # fmt: skip
    family(f"{p}outbox_depth", "gauge", "Records waiting in the outbox.", [("", {}, outbox.depth)])
    family(f"{p}outbox_oldest_age_seconds", "gauge", "Age of the oldest record waiting in the outbox.",
           [] if outbox.oldest is None else [("", {}, max(0.0, now - outbox.oldest))])  # fmt: skip
    family(f"{p}outbox_dead_letters", "gauge", "Records the store refused for good, by kind.",
           [("", {"kind": k}, n) for k, n in sorted(outbox.dead_letters.items())])  # fmt: skip
    family(f"{p}outbox_disk_full", "gauge",
           "1 while the outbox's file system has no room (requests get 503, or the flusher cannot write).",
           [("", {}, int(outbox.disk_full))])  # fmt: skip
    family(f"{p}outbox_free_bytes", "gauge", "Bytes free on the outbox's file system.",
           [] if outbox.free_bytes is None else [("", {}, outbox.free_bytes)])  # fmt: skip
    family(f"{p}outbox_unrecorded", "gauge",
           "Records the store took that the outbox could not write down yet (its file system is full).",
           [("", {}, outbox.unrecorded)])  # fmt: skip
    family(f"{p}flush_stuck_rounds", "gauge",
           "Flush rounds in a row, to the last, in which records waited and the store took none of them.",
           [("", {}, outbox.stuck_rounds)])  # fmt: skip
    family(f"{p}last_store_success_timestamp_seconds", "gauge",
           "UNIX time the store last took records (or the outbox was found empty).",
           [] if outbox.last_store_success is None else [("", {}, outbox.last_store_success)])  # fmt: skip
    if store is not None:
        family(f"{p}store_reachable", "gauge",
               "1 when the store answered the flusher's last check (a refusal too), 0 when it did not.",
               [] if store.reachable is None else [("", {}, int(store.reachable))])  # fmt: skip
        family(f"{p}store_templates_checked", "gauge",
               "1 when the store's index templates were checked and records are sent, 0 while they wait.",
               [("", {}, int(store.templates_checked))])  # fmt: skip
    if summaries is not None:
        family(f"{p}summarizer_up", "gauge", "1 when the summarizer's thread runs and its last run did not crash.",
               [("", {}, int(summaries.up))])  # fmt: skip
        family(f"{p}summary_runs_total", "counter",
               "Summary runs, by outcome (failed: the store failed; deferred: another collector was summarizing "
               "the store, so the run waited its turn).",
               [("", {"outcome": o}, n) for o, n in (("ok", summaries.runs), ("failed", summaries.failures),
                                                     ("crashed", summaries.crashes),
                                                     ("deferred", summaries.deferred))])  # fmt: skip
        family(f"{p}summaries_deleted_total", "counter",
               "Summaries of groups that no longer exist, deleted by this collector's runs.",
               [("", {}, summaries.deleted)])  # fmt: skip
        family(f"{p}summarizer_restarts_total", "counter", "Summarizer threads started again after one ended.",
               [("", {}, summaries.restarts)])  # fmt: skip
    if connections is not None:
        family(f"{p}connections", "gauge", "Connections open.", [("", {}, connections.open)])
        family(f"{p}connections_anonymous", "gauge", "Connections open without a probe's token.",
               [("", {}, connections.anonymous)])  # fmt: skip
        family(f"{p}anonymous_body_bytes", "gauge", "Bytes of bodies held by requests without a token.",
               [("", {}, connections.anonymous_bytes)])  # fmt: skip
        family(f"{p}connections_closed_total", "counter",
               "Connections the collector closed, by reason (a deadline, a cap on connections, a reply "
               "before the body).",
               [("", {"reason": r}, n) for r, n in sorted(connections.closed.items())])  # fmt: skip


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(value: float) -> str:
    value = float(value)
    return str(int(value)) if value.is_integer() else repr(value)
