"""One probe cycle: read the sources, do the accounting, and hand the records to the outbox.

``read_sources`` is the cycle's input from files, ``read_live`` from a live pool (through
:class:`~probes.sources.live.LivePool`); ``cycle_records`` turns
the tables into documents (slot records carry their true overhead, allocation records their
bills, job records the job); ``run_once`` commits them with the history checkpoints in one
outbox transaction, then flushes the outbox to the sink. A crash anywhere leaves either the
old checkpoints or the records waiting in the outbox, and record ids make re-sending harmless.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from collector.outbox import FlushResult, Outbox
from collector.records import iso_utc, table_docs
from collector.sinks import Sink
from collector import faults
from collector.errors import ConfigError, SourceError
from probes.config import ProbeConfig
from probes.overhead import overhead_report, snapshot_bills
from probes.sources.classad import ReadReport
from probes.sources.history import read_history
from probes.sources.live import LivePool
from probes.sources.queue import read_idle, running_job_ids
from probes.sources.status import Snapshot, read_status

__all__ = ["CycleResult", "check_sources", "cycle_records", "history_key", "iso_utc", "new_jobs", "read_live", "read_sources", "run_once"]


@dataclass
class CycleResult:
    """The tables a cycle read, what reading them found, and what became of the records."""

    snapshot: Snapshot | None = None
    idle: pd.DataFrame | None = None
    jobs: pd.DataFrame | None = None
    reports: dict[str, ReadReport] = field(default_factory=dict)
    checkpoints: dict[str, Any] = field(default_factory=dict)
    failures: dict[str, str] = field(default_factory=dict)  # source -> why it was skipped (live schedds)
    enqueued: dict[str, int] = field(default_factory=dict)
    flushed: FlushResult | None = None


def read_sources(
    config: ProbeConfig, *, strict: bool | None = None, checkpoints: Mapping[str, Any] | None = None
) -> CycleResult:
    """Read every source the configuration names; history only past its checkpoint."""
    strict = config.sources.strict if strict is None else strict
    result = CycleResult()
    src = config.sources
    if src.status_files:
        result.snapshot, result.reports["status"] = read_status(src.status_files, config, strict=strict)
    if src.idle_files:
        running = running_job_ids(result.snapshot.allocations) if result.snapshot is not None else None
        result.idle, result.reports["idle"] = read_idle(src.idle_files, running=running, strict=strict)
    if src.history:
        frames, report = [], ReadReport()
        for path in src.history:
            jobs, rep = read_history([path], config, strict=strict)
            report.merge(rep)
            key = history_key(path)
            fresh, mark = new_jobs(jobs, (checkpoints or {}).get(key))
            frames.append(fresh)
            result.checkpoints[key] = mark
        result.jobs = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
        result.reports["history"] = report
    return result


def check_sources(config: ProbeConfig) -> None:
    """Live sources and files are exclusive: say so rather than silently ignore the files."""
    src = config.sources
    files = [k for k in ("status_files", "idle_files", "history") if getattr(src, k)]
    if src.live and files:
        raise ConfigError(
            f"sources.live = true reads the pool itself, but sources.{files[0]} names files too; "
            "remove the files (or their options) or set sources.live = false"
        )


def read_live(
    config: ProbeConfig,
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


def history_key(path: str | os.PathLike[str]) -> str:
    """The outbox checkpoint name of a history file or directory."""
    return f"history:{os.path.abspath(path)}"


def new_jobs(jobs: pd.DataFrame, checkpoint: Mapping[str, Any] | None) -> tuple[pd.DataFrame, dict[str, Any]]:
    """The jobs past a history checkpoint, and the checkpoint after them.

    A checkpoint is the latest completion time seen and the ids of the jobs that completed at
    exactly that second, so that a job finishing in the same second as the last one read is
    neither skipped nor counted twice.
    """
    end = pd.to_numeric(jobs["end"], errors="coerce").fillna(0).to_numpy(dtype=np.float64)
    if checkpoint:
        last, seen = float(checkpoint["end"]), set(checkpoint["ids"])
        keep = (end > last) | ((end == last) & ~jobs["job_id"].isin(seen).to_numpy())
        jobs, end = jobs[keep].reset_index(drop=True), end[keep]
    else:
        last, seen = -1.0, set()
    if len(jobs) and end.max() >= last:
        top = float(end.max())
        ids = set(jobs.loc[end == top, "job_id"].dropna()) | (seen if top == last else set())
        return jobs, {"end": top, "ids": sorted(ids)}
    return jobs, dict(checkpoint) if checkpoint else {"end": last, "ids": []}


def cycle_records(result: CycleResult, config: ProbeConfig, *, probe: str) -> dict[str, list[dict[str, Any]]]:
    """The cycle's documents, by kind."""
    records: dict[str, list[dict[str, Any]]] = {}
    if result.snapshot is not None and len(result.snapshot.slots):
        report = overhead_report(result.snapshot, config, result.idle)
        slots = report.slots.drop(columns=["fits_idle"]) if result.idle is None else report.slots
        records["slot"] = table_docs("slot", slots, probe=probe)
        _, bills = snapshot_bills(result.snapshot, config)
        if len(bills):
            records["allocation"] = table_docs("allocation", bills, probe=probe)
    if result.jobs is not None and len(result.jobs):
        records["job"] = table_docs("job", result.jobs, probe=probe)
    return records


def run_once(
    config: ProbeConfig,
    outbox: Outbox,
    sink: Sink,
    *,
    probe: str,
    strict: bool | None = None,
    pool: LivePool | None = None,
) -> CycleResult:
    """Read, account, commit to the outbox (records and checkpoints together), flush.

    With ``sources.live``, the pool is read through ``pool`` (a :class:`LivePool` of the
    configuration by default)."""
    check_sources(config)
    if config.sources.live:
        result = read_live(config, pool or LivePool(config), now=time.time(), checkpoint=outbox.checkpoint)
    else:
        checkpoints = {history_key(p): outbox.checkpoint(history_key(p)) for p in config.sources.history}
        result = read_sources(config, strict=strict, checkpoints=checkpoints)
    records = cycle_records(result, config, probe=probe)
    faults.point("before-commit")
    outbox.commit(records, result.checkpoints)
    result.enqueued = {kind: len(docs) for kind, docs in records.items()}
    faults.point("after-commit")
    result.flushed = outbox.flush(sink)
    faults.point("after-flush")
    return result
