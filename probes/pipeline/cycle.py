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
returns a :class:`~probes.pipeline.lane.Batch`: records and the checkpoints to commit with them,
in one outbox transaction through the :class:`~probes.pipeline.lane.RecordLane` (what reads the
checkpoints it changes, the fairshare ledger, is computed there, from the checkpoints as the
transaction sees them), which then delivers the outbox to the store.

A :class:`ProbeCycle` holds what lives from one job to the next (the sources, the latest
snapshot whose machines price the jobs, the lane with its templates' state, the priority sync's
bindings) and its configuration's jobs (:attr:`ProbeCycle.jobs`, :class:`~probes.pipeline.jobs.Job`):

=====================  ======================================  ======================================
job                    every (the service)                     runs
=====================  ======================================  ======================================
``snapshot``           ``pool.interval_s``                     :meth:`~ProbeCycle.snapshot` (slot sources)
``history``            ``probe.history_every_s``               :meth:`~ProbeCycle.history` (job sources)
``fairshare``          ``fairshare.interval_s``                :meth:`~ProbeCycle.fairshare`
``priority``           ``priority.every_s``                    the priority sync (``priority.sync``)
``flush``              ``probe.flush_every_s``                 the delivery (:meth:`RecordLane.deliver`)
``summaries``          ``summaries.every_s``                   the last ``summaries.recent_days`` days
``summaries_nightly``  a day                                   the last ``summaries.nightly_days`` days
=====================  ======================================  ======================================

(the summaries only when their days are not 0 and the store is not a fairacct collector, which
summarizes its own, nor a Gratia collector: GRACC sums what it is sent). ``probe once`` is
:meth:`~ProbeCycle.once`: each job once, in that order, each its own transaction as in the
service, the summaries only once nothing waits in the outbox; the service
(:mod:`probes.service.scheduler`) only schedules them and reports health. A crash anywhere
leaves either the old checkpoints or the records waiting in the outbox, and record ids make
re-sending harmless; a store that cannot be reached costs only the sending.

A record kind added to the probe is made in one step here (and its documents in
:mod:`probes.pipeline.records`); both ways of running the probe then write it.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import numpy as np
import pandas as pd

from collector.encoded import Encoded
from collector.errors import FairacctError
from collector.outbox import Outbox, OutboxStatus
from collector.records import iso_utc
from collector.sinks import Sink
from probes.accounting.ledger import ledger_count
from probes.config import ProbeConfig
from probes.pipeline.fairness_buckets import add_snapshot, bucket_shares
from probes.pipeline.gaps import node_gaps
from probes.pipeline.jobs import Job, PrioritySync, Synced, summaries
from probes.pipeline.lane import Batch, Delivery, RecordLane
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
from probes.pipeline.verdict import judge
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
    from probes.sources.negotiator import NegotiatorLike

__all__ = [
    "AFTER_DELIVERY",
    "Cycle",
    "HistoryStep",
    "ProbeCycle",
    "Ran",
    "SnapshotStep",
    "fairshare_step",
    "history_step",
    "pool_machines",
    "snapshot_step",
]

StepT = TypeVar("StepT")


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


AFTER_DELIVERY = ("summaries", "summaries_nightly")
"""The jobs ``probe once`` runs after its delivery: they read the store, which should hold the cycle's records."""


@dataclass(frozen=True)
class Cycle:
    """What one ``probe once`` read (both parts in one ``reading``), the snapshot and history
    steps made of it, the records its jobs committed, by kind, and what its other jobs (the
    priority sync, the summaries) did: ``done``, a line each, ``failed``, the error of each that
    failed, ``skipped``, why each was not run."""

    reading: Reading
    snapshot: SnapshotStep
    history: HistoryStep
    enqueued: dict[str, int]
    done: dict[str, str] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)


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
    """The probe's cycle over one configuration: its jobs (:attr:`jobs`), each read, accounted
    and committed through the :class:`~probes.pipeline.lane.RecordLane` (``lane``), for ``probe
    once`` (:meth:`once`) and the service alike.

    ``probe`` names the records' sender; ``pool`` is the live pool to read (by default one
    built from the configuration when ``sources.live`` is set); ``strict`` overrides
    ``sources.strict`` for files; ``negotiator``, the negotiator's client of the priority sync
    (by default one through the bindings, made at its first run). The jobs may run in several
    threads, each with its own :class:`~collector.outbox.Outbox`: the lane's commits hold one
    lock, as the fairshare ledger is read and written in them. :meth:`close` ends what the jobs
    keep open (the priority sync's bindings).
    """

    def __init__(
        self,
        config: ProbeConfig,
        *,
        probe: str,
        pool: LivePool | None = None,
        strict: bool | None = None,
        negotiator: NegotiatorLike | None = None,
        lane: RecordLane | None = None,
    ) -> None:
        self.config = config
        self.probe = probe
        self.sources = Sources(config, pool=pool, strict=strict)
        self.latest: Snapshot | None = None
        """The latest snapshot read (a replay's too: the pool's machines are what they are),
        whose machines price the jobs; None before the first."""
        self.lane = lane if lane is not None else RecordLane(config)
        self._priority = PrioritySync(config, self.lane, probe=probe, negotiator=negotiator)
        self.jobs = self._jobs()
        """The configuration's jobs, by name, in the order ``probe once`` runs them."""

    def __repr__(self) -> str:
        return f"ProbeCycle(probe={self.probe!r}, {self.sources!r}, jobs={list(self.jobs)})"

    def _jobs(self) -> dict[str, Job]:
        config = self.config
        jobs = [
            Job("snapshot", config.pool.interval_s, lambda o, now: self.snapshot(o, now=now)),
            Job("history", config.probe.history_every_s, lambda o, now: self.history(o, now=now)),
            Job("fairshare", config.fairshare.interval_s, lambda o, now: self.fairshare(o, now=now)),
            Job("priority", config.priority.every_s, self._priority.run),
            Job("flush", config.probe.flush_every_s, lambda o, now: self.lane.deliver(o)),
        ]
        for name, days, every in (
            ("summaries", config.summaries.recent_days, config.summaries.every_s),
            ("summaries_nightly", config.summaries.nightly_days, 86400.0),
        ):
            jobs.append(Job(name, every, _summaries_run(self.lane, days, self.probe)))
        summed = config.store.kind not in ("collector", "gratia")  # a collector sums its store, GRACC its own
        configured = {
            "snapshot": self.sources.slots,
            "history": self.sources.jobs,
            "priority": config.priority.sync,
            "summaries": bool(config.summaries.recent_days) and summed,
            "summaries_nightly": bool(config.summaries.nightly_days) and summed,
        }
        return {job.name: job for job in jobs if configured.get(job.name, True)}

    def snapshot(self, outbox: Outbox, *, now: float) -> Ran[SnapshotStep]:
        """Read the slots and the idle demand (a live pool's observed at ``now``), account the
        snapshot and commit its records with its time (:func:`snapshot_step`)."""
        reading = self.sources.snapshot(now=now)
        step = snapshot_step(reading, outbox.checkpoint, self.config, probe=self.probe)
        if reading.snapshot is not None:
            self.latest = reading.snapshot
        return Ran(reading, step, self.lane.commit(outbox, [step.batch]), outbox.status())

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
            part = Ran(reading, step, self.lane.commit(outbox, [step.batch]), outbox.status())
            ran = part if ran is None else _joined_runs(ran, part)  # of the parts before, their counts
        assert ran is not None, "history_pieces yields at least one part"
        return ran

    def fairshare(self, outbox: Outbox, *, now: float) -> Ran[Batch]:
        """Commit the ``fairshare`` records of every window closed by ``now`` (:func:`fairshare_step`)."""
        step = fairshare_step(self.config, probe=self.probe, now=now)
        return Ran(Reading(), step, self.lane.commit(outbox, [step]), outbox.status())

    def once(self, outbox: Outbox, sink: Sink, *, now: float | None = None) -> tuple[Cycle, Delivery]:
        """``probe once``: the snapshot, history and fairshare jobs in that order (each the
        service's job, its own transaction), the priority sync when configured, the delivery to
        ``sink``, then the summaries when configured and nothing waits in the outbox. ``now``
        (UNIX seconds, default the clock) is when the cycle runs: a live snapshot's observation,
        the ledger's and the fairshare windows' present. A failure of the priority sync or of the
        summaries costs only that job, as in the service (``Cycle.failed``)."""
        now = time.time() if now is None else now
        with self.lane.holding(sink):
            snapshot = self.snapshot(outbox, now=now)
            history = self.history(outbox, now=now)
            rolled = self.fairshare(outbox, now=now)
            counts = [snapshot.enqueued, history.enqueued, rolled.enqueued]
            done: dict[str, str] = {}
            failed: dict[str, str] = {}
            skipped: dict[str, str] = {}
            if "priority" in self.jobs:
                try:
                    synced: Synced = self.jobs["priority"].run(outbox, now)
                except FairacctError as exc:
                    failed["priority"] = str(exc)
                else:
                    counts.append(synced.committed.counts())
                    done["priority"] = f"set {len(synced.result.applied)} submitter(s)"
            delivery = self.lane.deliver(outbox)
            waiting = judge(delivery).queued
            for name in (n for n in AFTER_DELIVERY if n in self.jobs):
                if waiting:
                    skipped[name] = "records wait in the outbox: the store would not count them"
                    continue
                try:
                    ran = self.jobs[name].run(outbox, now)
                except FairacctError as exc:
                    failed[name] = str(exc)
                else:
                    done[name] = f"{ran.done.total} summaries of {ran.first} .. {ran.last}"
        enqueued: dict[str, int] = {}
        for part in counts:
            for kind, n in part.items():
                enqueued[kind] = enqueued.get(kind, 0) + n
        cycle = Cycle(snapshot.read | history.read, snapshot.step, history.step, enqueued, done, failed, skipped)
        return cycle, delivery

    def close(self) -> None:
        """End what the jobs keep open: the priority sync's bindings."""
        self._priority.close()


def _summaries_run(lane: RecordLane, days: int, probe: str) -> Callable[[Outbox, float], Any]:
    """A summaries job's run: the last ``days`` days (it commits nothing to the outbox)."""

    def run(outbox: Outbox, now: float) -> Any:
        return summaries(lane, days, now=now, probe=probe)

    return run
