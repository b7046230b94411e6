"""The probe's cycle, written once: :class:`ProbeCycle`, which ``probe once`` runs whole and the
service (``probe run``) runs job by job on its cadences.

=====================  ===========================================================================
step                   what it makes
=====================  ===========================================================================
:func:`snapshot_step`  a snapshot's ``slot`` and ``allocation`` records (its true overhead and
                       bills), its ``fairness`` records, timed by the last snapshot accounted,
                       and the ``gap`` records of the nodes it did not bill
                       (:mod:`probes.pipeline.gaps`)
:func:`history_step`   the ``job`` records of the jobs read, priced against the pool's machines
                       (their penalty and CPU-only usage), and their fairshare usage for the ledger
:func:`fairshare_step` the ``fairshare`` records of every window that closed since the last roll
=====================  ===========================================================================

Each step takes a :class:`~probes.pipeline.reading.Reading` (or only the checkpoints) and
returns a :class:`Batch`: records and the checkpoints to commit with them. :func:`commit` puts
batches in one outbox transaction; what reads the checkpoints it changes (the fairshare
ledger) is computed there, from the checkpoints as the transaction sees them. :func:`deliver`
then sends the outbox to the store and says what became of it (:class:`Delivery`).

A :class:`ProbeCycle` holds what lives from one job to the next (the sources, the latest
snapshot whose machines price the jobs, whether the store's templates were checked) and runs
each job as read, step, commit: :meth:`~ProbeCycle.snapshot`, :meth:`~ProbeCycle.history`,
:meth:`~ProbeCycle.fairshare`, then :meth:`~ProbeCycle.deliver`. ``probe once`` is
:meth:`~ProbeCycle.once`: the same jobs in that order, each its own transaction as in the
service; the service (:mod:`probes.service.scheduler`) only schedules them, holds the state
directory, and reports health. A crash anywhere leaves either the old checkpoints or the
records waiting in the outbox, and record ids make re-sending harmless; a store that cannot be
reached costs only the sending.

A record kind added to the probe is made in one step here (and its documents in
:mod:`probes.pipeline.records`); both ways of running the probe then write it.
"""

from __future__ import annotations

import math
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import numpy as np
import pandas as pd

from collector import faults
from collector.encoded import Encoded
from collector.errors import SinkError
from collector.outbox import PROBE_SHRINK_KEEP_BYTES, FlushResult, Outbox, OutboxStatus, Unrecorded
from collector.records import iso_utc
from collector.sinks import Sink, open_store
from collector.sinks.gate import TemplateGate
from probes.accounting.ledger import ledger_count
from probes.config import ProbeConfig
from probes.config.store import UPSTREAM, UPSTREAM_JOBS
from probes.pipeline.fairness_buckets import add_snapshot, bucket_shares
from probes.pipeline.gaps import node_gaps
from probes.pipeline.overhead import OverheadReport, overhead_report
from probes.pipeline.reading import Checkpoint, Reading, Sources, joined
from probes.pipeline.records import (
    Records,
    fairness_docs,
    fairshare_docs,
    gap_docs,
    job_docs,
    snapshot_docs,
    with_penalty_usage,
)
from probes.pipeline.usage import fairshare_usage, priced_usage, slot_machines
from probes.sources.checkpoints import (
    COUNTED_KEY,
    FAIRNESS_KEY,
    LEDGER_KEY,
    NODES_KEY,
    ROLLED_KEY,
    SNAPSHOT_KEY,
    fairshare_windows,
    snapshot_interval,
)
from probes.sources.status import Snapshot

if TYPE_CHECKING:  # the bindings and the scanner: only a live pool's commands import them
    from probes.sources.live import LivePool

__all__ = [
    "Batch",
    "Cycle",
    "Delivery",
    "HistoryStep",
    "ProbeCycle",
    "Ran",
    "SnapshotStep",
    "commit",
    "deliver",
    "fairshare_step",
    "history_step",
    "pool_machines",
    "snapshot_step",
]

StepT = TypeVar("StepT")


Derived = Callable[[Checkpoint], tuple[Records, dict[str, Any]]]
"""Records and checkpoints made from the checkpoints as the commit's transaction sees them."""


@dataclass(frozen=True)
class Batch:
    """Records and the checkpoints committed with them, in one outbox transaction.

    ``derive``, when set, makes more at commit time from the checkpoints as they stand in the
    transaction (earlier batches of the same commit included): the fairshare ledger, which a
    step cannot compute ahead without losing another thread's update."""

    records: Records = field(default_factory=dict)
    checkpoints: dict[str, Any] = field(default_factory=dict)
    derive: Derived | None = None

    def counts(self) -> dict[str, int]:
        """Records by kind."""
        return {kind: len(docs) for kind, docs in self.records.items()}


@dataclass(frozen=True)
class SnapshotStep:
    """A snapshot accounted: its ``batch``, the ``snapshot`` as accounted (standing for
    ``interval_s`` seconds, after ``unobserved_s`` that no snapshot observed), its
    ``overhead`` (true overhead and bills) and its ``gaps`` (the rows of its ``gap`` records:
    :mod:`probes.pipeline.gaps`). A snapshot observed at or before the last one
    accounted is a replay: ``replayed`` says so, and it makes no records."""

    batch: Batch
    snapshot: Snapshot | None = None
    overhead: OverheadReport | None = None
    interval_s: float | None = None
    unobserved_s: float = 0.0
    replayed: str | None = None
    gaps: pd.DataFrame | None = None


@dataclass(frozen=True)
class HistoryStep:
    """The jobs read, as recorded (with ``penalty_usage`` and ``cpu_only_usage`` where they
    were priced), and their ``batch``."""

    batch: Batch
    jobs: pd.DataFrame | None = None


@dataclass(frozen=True)
class Cycle:
    """What one ``probe once`` read (both parts in one ``reading``), the snapshot and history
    steps made of it, and the records its jobs committed, by kind."""

    reading: Reading
    snapshot: SnapshotStep
    history: HistoryStep
    enqueued: dict[str, int]


@dataclass(frozen=True)
class Delivery:
    """What became of the outbox's records: what the store took, retried or refused
    (``flushed``; None when nothing was sent), why records were left unsent (``unsent``), the
    index templates installed first (``installed``) and the outbox after it (``status``)."""

    status: OutboxStatus
    flushed: FlushResult | None = None
    unsent: str | None = None
    installed: tuple[str, ...] = ()
    upstream: FlushResult | None = None
    """What ``[upstream]``'s Gratia collector took of its lane; None without one."""


def snapshot_step(reading: Reading, checkpoint: Checkpoint, config: ProbeConfig, *, probe: str) -> SnapshotStep:
    """Account the reading's snapshot: it stands for the time since the last snapshot accounted
    (``checkpoint(SNAPSHOT_KEY)``), so that a record's content depends on the snapshots alone,
    not on when the probe ran (see :func:`~probes.sources.checkpoints.snapshot_interval`: never
    longer than ``pool.interval_s``, the rest is unobserved). The nodes it does not bill (missing
    since the last snapshot, unheard, or not observed at all) are its ``gap`` records, against
    the nodes remembered in ``checkpoint(NODES_KEY)`` (:func:`~probes.pipeline.gaps.node_gaps`).
    With the idle demand known, the ``fairness`` records of its bucket too.

    A reading's tables say ``interval_s = pool.interval_s``, the cadence, which is what a
    snapshot accounted on its own stands for (``overhead``, ``bill``); in the cycle the time a
    snapshot stands for is measured from the checkpoint, and replaces it here (the reading is
    left as it was)."""
    snapshot = reading.snapshot
    if snapshot is None or not len(snapshot.slots):
        return SnapshotStep(Batch(), snapshot)
    observed = float(pd.to_numeric(snapshot.slots["observed_at"]).max())
    last = checkpoint(SNAPSHOT_KEY)
    pool = config.pool
    timed = snapshot_interval(last, observed, interval_s=pool.interval_s)
    if timed is None:
        at, before = iso_utc([observed, float(last["at"])])
        why = (
            f"the snapshot observed at {at} is not after the last one accounted ({before}): accounted already, skipped"
        )
        return SnapshotStep(Batch(), snapshot, replayed=why)
    interval, unobserved = timed
    snapshot = replace(
        snapshot,
        slots=snapshot.slots.assign(interval_s=interval),
        allocations=snapshot.allocations.assign(interval_s=interval),
    )
    # everything computed first, then encoded once: a record's way down goes one way
    overhead = overhead_report(snapshot, config, reading.idle)
    gaps, nodes = node_gaps(
        snapshot, checkpoint(NODES_KEY), pool=pool.name, observed_at=observed, interval_s=interval,
        horizon_s=pool.max_interval_s,
    )  # fmt: skip
    marks: dict[str, Any] = {SNAPSHOT_KEY: {"at": observed}, NODES_KEY: nodes}
    fairness = None
    if reading.idle is not None:
        bucket = add_snapshot(
            checkpoint(FAIRNESS_KEY), snapshot.allocations, reading.idle, observed_at=observed,
            bucket_s=config.fairness.bucket_s,
        )  # fmt: skip
        fairness, marks[FAIRNESS_KEY] = bucket_shares(bucket, config), bucket
    records = snapshot_docs(overhead, idle_known=reading.idle is not None, probe=probe) | gap_docs(gaps, probe=probe)
    if fairness is not None:
        records |= fairness_docs(*fairness, pool=pool.name, probe=probe)
    return SnapshotStep(Batch(records, marks), snapshot, overhead, interval, unobserved, gaps=gaps)


def pool_machines(snapshot: Snapshot | None, config: ProbeConfig) -> pd.DataFrame | None:
    """The pool's machine classes in a snapshot (its slots' speed, cost and class attributes),
    to price jobs against; None without slots."""
    if snapshot is None or not len(snapshot.slots):
        return None
    return slot_machines(snapshot.slots, snapshot.ads, config)


def history_step(
    reading: Reading, snapshot: Snapshot | None, config: ProbeConfig, *, probe: str, now: float
) -> HistoryStep:
    """The ``job`` records of the reading's jobs, priced against the machines of the pool's
    latest ``snapshot`` (None: no slots, the records carry no penalty usage), committed with
    the history checkpoints; the jobs' fairshare usage under ``fairshare.metric`` is counted
    into the ledger (each job once, by id) at commit, as of ``now``."""
    jobs = reading.jobs
    if jobs is None or not len(jobs):
        return HistoryStep(Batch(checkpoints=dict(reading.checkpoints)), jobs)
    machines = pool_machines(snapshot, config)
    counted, usage = fairshare_usage(jobs, machines, config)
    jobs = with_penalty_usage(jobs, counted)  # the records carry what the metric priced
    if "penalty_usage" not in jobs.columns:
        jobs = priced_usage(jobs, machines, config)  # a metric that does not price (cores, walltime)

    def ledger(checkpoint: Checkpoint) -> tuple[Records, dict[str, Any]]:
        return {}, _ledger_marks(checkpoint, counted, usage, config, now=now)

    return HistoryStep(Batch(job_docs(jobs, probe=probe), dict(reading.checkpoints), ledger), jobs)


def _ledger_marks(
    checkpoint: Checkpoint, jobs: pd.DataFrame, usage: np.ndarray, config: ProbeConfig, *, now: float
) -> dict[str, Any]:
    """The fairshare ledger's checkpoints with ``jobs`` counted (each job once, by id)."""
    cfg = config.fairshare
    windows = fairshare_windows(checkpoint, cfg.interval_s, now=now)
    rows, counted = ledger_count(
        windows.get(LEDGER_KEY, checkpoint(LEDGER_KEY)) or [], checkpoint(COUNTED_KEY) or {}, jobs, usage,
        now=now, interval_s=cfg.interval_s, depth=cfg.depth,
    )  # fmt: skip
    return windows | {LEDGER_KEY: rows, COUNTED_KEY: counted}


def fairshare_step(config: ProbeConfig, *, probe: str, now: float) -> Batch:
    """The ``fairshare`` records of every window that closed by ``now`` since the last roll
    (each window's credentials, from the ledger), and the ledger without the windows that no
    longer count. Windows are multiples of ``fairshare.interval_s`` since the epoch, UTC; the
    first roll only marks the window before the current one, as nothing was counted before it."""
    cfg = config.fairshare
    width, depth = cfg.interval_s, cfg.depth
    current = math.floor(now / width) * width

    def roll(checkpoint: Checkpoint) -> tuple[Records, dict[str, Any]]:
        rewindowed = fairshare_windows(checkpoint, width, now=now)
        mark = rewindowed.get(ROLLED_KEY, checkpoint(ROLLED_KEY))
        if mark is None:
            return {}, rewindowed | {ROLLED_KEY: {"window_start": current - width}}
        first = max(float(mark["window_start"]) + width, current - depth * width)
        windows = [first + k * width for k in range(max(0, round((current - first) / width)))]
        if not windows:
            return {}, rewindowed
        rows = rewindowed.get(LEDGER_KEY, checkpoint(LEDGER_KEY)) or []
        docs = Encoded.join(fairshare_docs(rows, w, config, probe=probe) for w in windows)
        kept = [r for r in rows if float(r[0]) >= current - (depth - 1) * width]
        marks = {ROLLED_KEY: {"window_start": windows[-1]}, LEDGER_KEY: kept}
        return ({"fairshare": docs} if docs else {}), rewindowed | marks

    return Batch(derive=roll)


def commit(outbox: Outbox, batches: Sequence[Batch], *, upstream: bool = False) -> Batch:
    """Commit ``batches`` in one outbox transaction, in order; what each derives sees the
    checkpoints of the batches before it. Returns what was committed, as one batch. A caller
    that commits from several threads holds one lock around this (the ledger is read and
    written here). ``upstream``: the job records wait in :data:`UPSTREAM_JOBS` too, for
    ``[upstream]``, in the same transaction."""
    records: Records = {}
    marks: dict[str, Any] = {}

    def checkpoint(key: str) -> Any:
        return marks[key] if key in marks else outbox.checkpoint(key)

    for batch in batches:
        derived: tuple[Records, dict[str, Any]] = batch.derive(checkpoint) if batch.derive else ({}, {})
        for part in (batch.records, derived[0]):
            for kind, docs in part.items():
                records[kind] = records[kind] + docs if kind in records else docs
        marks |= batch.checkpoints | derived[1]
    faults.point("before-commit")
    lanes = {UPSTREAM_JOBS: records["job"]} if upstream and len(records.get("job", ())) else {}
    outbox.commit(records | lanes, marks)
    faults.point("after-commit")
    return Batch(records, marks)


def deliver(
    outbox: Outbox,
    sink: Sink,
    *,
    check: Callable[[Sink], list[str]] | None = None,
    upstream: Sink | None = None,
    unrecorded: Unrecorded | None = None,
) -> Delivery:
    """Send the outbox to ``sink``: the one delivery of ``probe once`` and of the service's
    flushes; the :data:`UPSTREAM` lane to ``upstream`` first, whatever the store does.
    ``check(sink)`` runs first (the index templates; it returns those it installed):
    a :class:`SinkError` from it leaves the records queued, and ``unsent`` says why. A drained
    outbox gives its pages back to the file system. ``unrecorded``: where what a store took
    waits while the outbox cannot write it down (a full state directory), so that the next
    delivery writes it down rather than send it again (:mod:`collector.flushing`)."""
    lane = None if upstream is None else outbox.flush(upstream, lane=UPSTREAM, unrecorded=unrecorded)
    try:
        installed = tuple(check(sink)) if check is not None else ()
    except SinkError as exc:
        return Delivery(outbox.status(), unsent=str(exc), upstream=lane)
    flushed = outbox.flush(sink, unrecorded=unrecorded)
    faults.point("after-flush")
    status = outbox.status()
    if not status.depth:
        outbox.shrink(keep_free_bytes=PROBE_SHRINK_KEEP_BYTES)  # a drained backlog's pages back
    return Delivery(status, flushed, flushed.errors[0] if flushed.errors else None, installed, lane)


@dataclass(frozen=True)
class Ran(Generic[StepT]):
    """One job of the cycle, run: what it ``read`` (empty for a job that reads nothing), its
    ``step``, what it ``committed`` (records by kind and checkpoints, in one transaction) and
    the outbox after it (``status``)."""

    read: Reading
    step: StepT
    committed: Batch
    status: OutboxStatus
    counts: Mapping[str, int] | None = None
    """Records committed by kind when the job committed in parts (``committed``: its last)."""

    @property
    def enqueued(self) -> dict[str, int]:
        """Records committed, by kind."""
        if self.counts is not None:
            return dict(self.counts)
        return self.committed.counts()


def _joined_runs(first: Ran[HistoryStep], then: Ran[HistoryStep]) -> Ran[HistoryStep]:
    """Two parts of one history job as one: ``then``'s tables and records, both's counts."""
    counts = Counter(first.enqueued)
    counts.update(then.enqueued)
    return Ran(joined([first.read, then.read]), then.step, then.committed, then.status, dict(counts))


class ProbeCycle:
    """The probe's cycle over one configuration: each job read, accounted and committed, and
    the delivery, for ``probe once`` (:meth:`once`) and the service alike.

    ``probe`` names the records' sender; ``pool`` is the live pool to read (by default one
    built from the configuration when ``sources.live`` is set); ``strict`` overrides
    ``sources.strict`` for files. The jobs may run in several threads, each with its own
    :class:`~collector.outbox.Outbox`: commits hold one lock, as the fairshare ledger is read
    and written in them.
    """

    def __init__(
        self, config: ProbeConfig, *, probe: str, pool: LivePool | None = None, strict: bool | None = None
    ) -> None:
        self.config = config
        self.probe = probe
        self.sources = Sources(config, pool=pool, strict=strict)
        self.latest: Snapshot | None = None
        """The latest snapshot read (a replay's too: the pool's machines are what they are),
        whose machines price the jobs; None before the first."""
        self._commits = threading.Lock()
        self._templates = TemplateGate(config.store.url, install=config.store.install_templates)
        self._unrecorded = Unrecorded()  # what a store took that a full state directory kept from being written down

    def __repr__(self) -> str:
        return f"ProbeCycle(probe={self.probe!r}, {self.sources!r})"

    def snapshot(self, outbox: Outbox, *, now: float) -> Ran[SnapshotStep]:
        """Read the slots and the idle demand (a live pool's observed at ``now``), account the
        snapshot and commit its records with its time (:func:`snapshot_step`)."""
        reading = self.sources.snapshot(now=now)
        step = snapshot_step(reading, outbox.checkpoint, self.config, probe=self.probe)
        if reading.snapshot is not None:
            self.latest = reading.snapshot
        return Ran(reading, step, self.commit(outbox, [step.batch]), outbox.status())

    def history(self, outbox: Outbox, *, now: float) -> Ran[HistoryStep]:
        """Read the jobs past every checkpoint, price them against the latest snapshot's
        machines, and commit their records with the checkpoints and the ledger as of ``now``
        (:func:`history_step`): a part at a time where the history is read in parts (a
        schedd's history files, ``pool.history_piece`` jobs each), so a backlog is never held
        whole, and a pass cut short resumes after its last part. The result holds the last
        part's jobs and records, and the counts of all (``read.jobs_read``, ``counts``)."""
        ran: Ran[HistoryStep] | None = None
        for reading in self.sources.history_pieces(outbox.checkpoint):
            step = history_step(reading, self.latest, self.config, probe=self.probe, now=now)
            part = Ran(reading, step, self.commit(outbox, [step.batch]), outbox.status())
            ran = part if ran is None else _joined_runs(ran, part)  # of the parts before, their counts
        assert ran is not None, "history_pieces yields at least one part"
        return ran

    def fairshare(self, outbox: Outbox, *, now: float) -> Ran[Batch]:
        """Commit the ``fairshare`` records of every window closed by ``now`` (:func:`fairshare_step`)."""
        step = fairshare_step(self.config, probe=self.probe, now=now)
        return Ran(Reading(), step, self.commit(outbox, [step]), outbox.status())

    def commit(self, outbox: Outbox, batches: Sequence[Batch]) -> Batch:
        """:func:`commit` under the cycle's lock (job records for ``[upstream]`` too, when set)."""
        with self._commits:
            return commit(outbox, batches, upstream=bool(self.config.upstream.url))

    def deliver(self, outbox: Outbox, sink: Sink) -> Delivery:
        """:func:`deliver`, checking the store's index templates first on the first delivery
        and on the first after the store failed (it may come back empty: :class:`TemplateGate`);
        they are installed where ``store.install_templates`` allows, else the records wait."""
        gate = self._templates
        check = None if gate.checked else (lambda s: list(gate.ensure(s).installed))
        up = self.config.upstream
        upstream = open_store(up, self.config.opening()) if up.url else None
        try:
            delivery = deliver(outbox, sink, check=check, upstream=upstream, unrecorded=self._unrecorded)
        except SinkError:
            gate.forget()
            raise
        finally:
            if upstream is not None:
                upstream.close()
        if delivery.flushed is not None:  # else the templates' check failed, and the gate says so
            gate.settle(errors=bool(delivery.flushed.errors), waiting=sum(delivery.status.depth.values()))
        return delivery

    def once(self, outbox: Outbox, sink: Sink, *, now: float | None = None) -> tuple[Cycle, Delivery]:
        """``probe once``: the snapshot, history and fairshare jobs in that order (each the
        service's job, its own transaction), then the delivery. ``now`` (UNIX seconds, default
        the clock) is when the cycle runs: a live snapshot's observation, the ledger's and the
        fairshare windows' present."""
        now = time.time() if now is None else now
        snapshot = self.snapshot(outbox, now=now)
        history = self.history(outbox, now=now)
        rolled = self.fairshare(outbox, now=now)
        enqueued: dict[str, int] = {}
        for ran in (snapshot, history, rolled):
            for kind, n in ran.enqueued.items():
                enqueued[kind] = enqueued.get(kind, 0) + n
        cycle = Cycle(snapshot.read | history.read, snapshot.step, history.step, enqueued)
        return cycle, self.deliver(outbox, sink)
