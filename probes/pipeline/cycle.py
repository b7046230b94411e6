"""One probe cycle: read the sources, account once, and hand the records to the outbox.

``read_sources`` is the cycle's input from files, ``read_live`` from a live pool (through
:class:`~probes.sources.live.LivePool`); :func:`account` computes the snapshot's accounting
once (:mod:`probes.pipeline.overhead`), which the records (:mod:`probes.pipeline.records`) and
the command line's tables both read; ``run_once`` commits the records with the history
checkpoints and the fairshare ledger (:func:`ledger_marks`) in one outbox transaction, then
flushes the outbox to the sink. A crash anywhere leaves either the old checkpoints or the
records waiting in the outbox, and record ids make re-sending harmless. A store that cannot be
reached costs only the sending: the cycle is committed first, and waits in the outbox
(``CycleResult.unsent`` says why it was not sent).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from collector import faults
from collector.errors import ConfigError, SinkError, SourceError
from collector.outbox import FlushResult, Outbox
from collector.records import iso_utc
from collector.sinks import Sink
from probes.accounting.ledger import ledger_count
from probes.config import ProbeConfig
from probes.pipeline.fairness_buckets import snapshot_fairness
from probes.pipeline.overhead import OverheadReport, overhead_report
from probes.pipeline.records import Records, job_docs, snapshot_docs, with_penalty_usage
from probes.pipeline.usage import PRICED_METRICS, fairshare_usage, priced_usage, slot_machines
from probes.sources.checkpoints import (
    COUNTED_KEY,
    FAIRNESS_KEY,
    LEDGER_KEY,
    SNAPSHOT_KEY,
    history_key,
    new_jobs,
    snapshot_interval,
)
from probes.sources.frames import stack
from probes.sources.history import JOB_COLUMNS, read_history
from probes.sources.live import CollectorFactory, LivePool, ScheddFactory
from probes.sources.queue import read_idle, running_job_ids
from probes.sources.report import ReadReport
from probes.sources.status import Snapshot, read_status

__all__ = [
    "FILE_SOURCES",
    "CycleResult",
    "account",
    "check_sources",
    "cycle_records",
    "fairness_records",
    "ledger_marks",
    "live_pool",
    "read_live",
    "read_sources",
    "run_once",
    "time_snapshot",
]

FILE_SOURCES = ("status_files", "idle_files", "history")
"""The file sources of ``[sources]``, by key."""


@dataclass
class CycleResult:
    """The tables a cycle read, what reading them found, the snapshot's accounting (computed
    once, by :func:`account`), and what became of the records."""

    snapshot: Snapshot | None = None
    idle: pd.DataFrame | None = None
    jobs: pd.DataFrame | None = None
    reports: dict[str, ReadReport] = field(default_factory=dict)
    checkpoints: dict[str, Any] = field(default_factory=dict)
    failures: dict[str, str] = field(default_factory=dict)  # source -> why it was skipped (live schedds)
    overhead: OverheadReport | None = None
    enqueued: dict[str, int] = field(default_factory=dict)
    flushed: FlushResult | None = None
    unsent: str | None = None  # why the records were committed to the outbox and not sent
    replayed: str | None = None  # why the snapshot was not accounted (observed before the last one)
    unobserved_s: float = 0.0  # seconds before the snapshot that no snapshot observed (a gap)


def read_sources(
    config: ProbeConfig,
    *,
    strict: bool | None = None,
    checkpoints: Mapping[str, Any] | None = None,
    only: Collection[str] = FILE_SOURCES,
) -> CycleResult:
    """Read the file sources the configuration names (of them, those in ``only``); history
    only past its checkpoint."""
    strict = config.sources.strict if strict is None else strict
    result = CycleResult()
    src = config.sources
    if src.status_files and "status_files" in only:
        result.snapshot, result.reports["status"] = read_status(src.status_files, config.slot_reading(), strict=strict)
    if src.idle_files and "idle_files" in only:
        running = running_job_ids(result.snapshot.allocations) if result.snapshot is not None else None
        result.idle, result.reports["idle"] = read_idle(src.idle_files, running=running, strict=strict)
    if src.history and "history" in only:
        frames, report = [], ReadReport()
        for path in src.history:
            jobs, rep = read_history([path], config.job_reading(), strict=strict)
            report.merge(rep)
            key = history_key(path)
            fresh, mark = new_jobs(jobs, (checkpoints or {}).get(key))
            frames.append(fresh)
            result.checkpoints[key] = mark
        result.jobs = stack(frames, JOB_COLUMNS) if len(frames) > 1 else frames[0]
        result.reports["history"] = report
    return result


def check_sources(config: ProbeConfig) -> None:
    """Live sources and files are exclusive: say so rather than silently ignore the files."""
    src = config.sources
    files = [k for k in FILE_SOURCES if getattr(src, k)]
    if src.live and files:
        raise ConfigError(
            f"sources.live = true reads the pool itself, but sources.{files[0]} names files too; "
            "remove the files (or their options) or set sources.live = false"
        )


def live_pool(
    config: ProbeConfig,
    *,
    collector_factory: CollectorFactory | None = None,
    schedd_factory: ScheddFactory | None = None,
) -> LivePool:
    """The live pool of the configuration, through the htcondor2 bindings (or the factories'
    clients, for tests of what the bindings cannot be made to do)."""
    m = config.machines
    return LivePool(
        config.pool,
        config.slot_reading(),
        config.job_reading(),
        slot_expressions=(m.speed_expression, m.cost_expression),
        slot_attributes=m.class_attributes,
        collector_factory=collector_factory,
        schedd_factory=schedd_factory,
    )


def read_live(
    pool: LivePool,
    *,
    now: float,
    checkpoint: Callable[[str], Any] | None = None,
    snapshot: bool = True,
    history: bool = True,
) -> CycleResult:
    """Read a live pool: the slot snapshot (observed at ``now``) with the idle demand, and the
    history of every schedd past its checkpoint (``checkpoint(key)``: the committed value).

    A pool whose collectors all fail raises :class:`SourceError`; a schedd that fails is left
    out and listed in ``failures``, and its checkpoint stays where it was.
    """
    result = CycleResult()
    if snapshot:
        result.snapshot, result.reports["status"] = pool.snapshot(now=now)
    schedds: list[Any] = []
    try:
        schedds, result.failures = pool.schedds()
    except SourceError as exc:
        if history:
            raise
        result.failures["collector"] = str(exc)
    if snapshot and schedds:
        idle = pool.idle(schedds)
        result.idle, result.reports["idle"] = idle.idle, idle.report
        result.failures |= idle.failures
    if history:
        read = pool.history(schedds, checkpoint or (lambda key: None))
        result.jobs, result.reports["history"] = read.jobs, read.report
        result.checkpoints |= read.checkpoints
        result.failures |= read.failures
    return result


def account(result: CycleResult, config: ProbeConfig) -> OverheadReport | None:
    """The snapshot's accounting (once: kept in ``result.overhead``); None without a snapshot."""
    if result.overhead is None and result.snapshot is not None:
        result.overhead = overhead_report(result.snapshot, config, result.idle)
    return result.overhead


def cycle_records(
    result: CycleResult, config: ProbeConfig, *, probe: str, machines: pd.DataFrame | None = None
) -> Records:
    """The cycle's documents, by kind: the snapshot's slots and bills (unless it is a replay),
    the jobs read, with their penalty and CPU-only usage when the pool's ``machines`` (classes)
    are known (see :func:`~probes.pipeline.usage.priced_usage`)."""
    report = None if result.replayed else account(result, config)
    records = snapshot_docs(report, idle_known=result.idle is not None, probe=probe) if report is not None else {}
    jobs = result.jobs
    if jobs is not None and len(jobs) and machines is not None and "penalty_usage" not in jobs.columns:
        jobs = priced_usage(jobs, machines, config)  # not priced yet (the fairshare metric does not price)
    return records | job_docs(jobs, probe=probe)


def fairness_records(
    result: CycleResult, checkpoint: Callable[[str], Any], config: ProbeConfig, *, probe: str
) -> tuple[Records, dict[str, Any]]:
    """The ``fairness`` records of the snapshot's bucket and their checkpoint (see
    :mod:`probes.pipeline.fairness_buckets`), when the cycle read a snapshot with its idle
    demand and it is not a replay; ``checkpoint(key)`` reads the committed value."""
    snapshot = result.snapshot
    if result.replayed or snapshot is None or result.idle is None or not len(snapshot.slots):
        return {}, {}
    observed = float(pd.to_numeric(snapshot.slots["observed_at"]).max())
    return snapshot_fairness(
        snapshot.allocations, result.idle, checkpoint(FAIRNESS_KEY), config, observed_at=observed, probe=probe
    )


def time_snapshot(result: CycleResult, last: Mapping[str, Any] | None, config: ProbeConfig) -> dict[str, Any]:
    """Set what the cycle's snapshot stands for from the time between its observation and the
    last snapshot accounted (``last``: the :data:`SNAPSHOT_KEY` checkpoint), so that a record's
    content depends on the snapshots alone, not on when the probe ran; after a gap longer than
    ``pool.max_interval_s`` it stands for ``pool.interval_s`` and ``result.unobserved_s`` holds
    the rest (see :func:`~probes.sources.checkpoints.snapshot_interval`). Returns the checkpoints
    to commit with its records; a snapshot observed at or before ``last`` is a replay:
    ``result.replayed`` says so, its records are not made, and nothing is returned."""
    snapshot = result.snapshot
    if snapshot is None or not len(snapshot.slots):
        return {}
    observed = float(pd.to_numeric(snapshot.slots["observed_at"]).max())
    pool = config.pool
    timed = snapshot_interval(last, observed, interval_s=pool.interval_s, max_interval_s=pool.max_interval_s)
    if timed is None:
        assert last is not None
        at, before = iso_utc([observed, float(last["at"])])
        result.replayed = (
            f"the snapshot observed at {at} is not after the last one accounted ({before}): accounted already, skipped"
        )
        return {}
    interval, result.unobserved_s = timed
    snapshot.slots["interval_s"] = interval
    snapshot.allocations["interval_s"] = interval
    return {SNAPSHOT_KEY: {"at": observed}}


def ledger_marks(
    checkpoint: Callable[[str], Any], jobs: pd.DataFrame, usage: Any, config: ProbeConfig, *, now: float
) -> dict[str, Any]:
    """The fairshare ledger's checkpoints with ``jobs`` counted (each job once, by id), to commit
    with the jobs' records. ``checkpoint(key)`` reads the committed value."""
    cfg = config.fairshare
    rows, counted = ledger_count(
        checkpoint(LEDGER_KEY) or [], checkpoint(COUNTED_KEY) or {}, jobs, usage,
        now=now, interval_s=cfg.interval_s, depth=cfg.depth,
    )  # fmt: skip
    return {LEDGER_KEY: rows, COUNTED_KEY: counted}


def run_once(
    config: ProbeConfig,
    outbox: Outbox,
    sink: Sink,
    *,
    probe: str,
    strict: bool | None = None,
    pool: LivePool | None = None,
    check: Callable[[Sink], None] | None = None,
) -> CycleResult:
    """Read, account, commit to the outbox (records, checkpoints and the fairshare ledger
    together), flush.

    With ``sources.live``, the pool is read through ``pool`` (:func:`live_pool` of the
    configuration by default). ``check(sink)`` runs before the flush (the index templates): a
    :class:`SinkError` from it, like a store that does not answer, leaves the records queued,
    and ``unsent`` says why."""
    check_sources(config)
    src = config.sources
    priced = config.fairshare.metric in PRICED_METRICS
    if priced and (src.live or src.history) and not (src.live or src.status_files):
        raise ConfigError(
            f"fairshare.metric {config.fairshare.metric!r} prices jobs against the pool's machines: "
            "a cycle that reads jobs needs slots too (sources.status_files or sources.live)"
        )
    now = time.time()
    if src.live:
        result = read_live(pool or live_pool(config), now=now, checkpoint=outbox.checkpoint)
    else:
        checkpoints = {history_key(p): outbox.checkpoint(history_key(p)) for p in src.history}
        result = read_sources(config, strict=strict, checkpoints=checkpoints)
    marks = time_snapshot(result, outbox.checkpoint(SNAPSHOT_KEY), config) | result.checkpoints
    snapshot, has_jobs = result.snapshot, result.jobs is not None and len(result.jobs) > 0
    machines = None  # the pool's machine classes, to price the jobs against
    if has_jobs and snapshot is not None and (priced or len(snapshot.slots)):
        machines = slot_machines(snapshot.slots, snapshot.ads, config)
    if has_jobs and result.jobs is not None:
        jobs, usage = fairshare_usage(result.jobs, machines if priced else None, config)
        marks |= ledger_marks(outbox.checkpoint, jobs, usage, config, now=now)
        result.jobs = with_penalty_usage(result.jobs, jobs)  # the job records carry what was priced
    records = cycle_records(result, config, probe=probe, machines=machines)
    fair, fair_marks = fairness_records(result, outbox.checkpoint, config, probe=probe)
    records, marks = records | fair, marks | fair_marks
    faults.point("before-commit")
    outbox.commit(records, marks)
    result.enqueued = {kind: len(docs) for kind, docs in records.items()}
    faults.point("after-commit")
    try:
        if check is not None:
            check(sink)
    except SinkError as exc:
        result.unsent = str(exc)
        return result
    result.flushed = outbox.flush(sink)
    if result.flushed.errors:
        result.unsent = result.flushed.errors[0]
    faults.point("after-flush")
    return result
