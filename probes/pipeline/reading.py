"""What a probe cycle reads, from files or from a live pool: one immutable :class:`Reading`.

A cycle reads two parts, each its own :class:`Reading`: the pool's *snapshot* (slots and
allocations, with the idle demand of its schedds) and the *history* (the jobs every schedd or
history file finished past its checkpoint). :class:`Sources` reads either part from what the
configuration names, files or (``sources.live``) the pool itself through
:class:`~probes.sources.live.LivePool`; ``probe once`` reads both, the service reads each on
its own cadence, and both hand the readings to the steps of :mod:`probes.pipeline.cycle`.
Commands that only read (``slots``, ``bill``, ``overhead``, ``penalty``, ``fairshare`` ...)
use :func:`read_sources`, and ``jobs`` streams the history with :func:`iter_jobs`.

This is the one reading of a pool's inputs: every table any command or the probe gets of the
slots, the idle demand or the history is read here, with the configuration's credentials
attributes, site mapping and machine class attributes (``config.slot_reading`` and
``config.job_reading``), the user-vo-map (:func:`with_vos`) and the same report of malformed
ads for the quarantine; so the same inputs name the same submitters, users, groups, projects
and sites whichever command reads them.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pandas as pd

from collector.errors import ConfigError
from probes.accounting.fairshare import PRICED_METRICS
from probes.config import ProbeConfig
from probes.errors import SourceError
from probes.sources.checkpoints import history_key, new_jobs
from probes.sources.condor_ap import resolve_vos
from probes.sources.duplicate_jobs import JobsSeen
from probes.sources.frames import stack
from probes.sources.handoff import load_handoff, mark_sent
from probes.sources.history import JOB_COLUMNS, iter_history, read_history
from probes.sources.job_identity import adopt_job_identities, named_after_slots
from probes.sources.negotiator_groups import with_negotiator_groups
from probes.sources.queue import read_idle, running_job_ids
from probes.sources.report import ReadReport, ReadTally
from probes.sources.status import Snapshot, read_status
from probes.sources.user_vo_map import fill_projects, read_user_vos

if TYPE_CHECKING:  # the bindings and the scanner are imported by the commands that read a live pool
    from probes.sources.live import CollectorFactory, LivePool, ScheddFactory

__all__ = [
    "FILE_SOURCES",
    "Checkpoint",
    "Reading",
    "Sources",
    "check_sources",
    "iter_jobs",
    "iter_live_history",
    "joined",
    "live_pool",
    "read_live_snapshot",
    "read_sources",
    "with_vos",
]

log = logging.getLogger("fairacct.reading")

NOT_BILLED = "GlobalJobId: its schedd lists the job as {}, its claim is not billed"
"""The status report's reason for a claim whose job is not running (idle or held)."""

FILE_SOURCES = ("status_files", "idle_files", "history")
"""The file sources of ``[sources]``, by key."""

Checkpoint = Callable[[str], Any]
"""``checkpoint(key)``: the committed value of an outbox checkpoint (None when there is none)."""


@dataclass(frozen=True)
class Reading:
    """The tables one read gave and what reading them found.

    ``snapshot``: slots and allocations (None: not read); ``idle``: the idle demand by
    autocluster (None: unknown); ``jobs``: the jobs past their checkpoints (None: not read);
    ``reports``: per source (``status``, ``idle``, ``history``), the ads read and the malformed
    ones; ``checkpoints``: the history checkpoints once these jobs are committed;
    ``failures``: source -> why it was left out (a live schedd that did not answer);
    ``jobs_read``: the jobs read in all when a history pass was committed in parts and ``jobs``
    holds only its last (None: ``len(jobs)``).
    """

    snapshot: Snapshot | None = None
    idle: pd.DataFrame | None = None
    jobs: pd.DataFrame | None = None
    reports: Mapping[str, ReadReport] = field(default_factory=dict)
    checkpoints: Mapping[str, Any] = field(default_factory=dict)
    failures: Mapping[str, str] = field(default_factory=dict)
    jobs_read: int | None = None

    @property
    def job_count(self) -> int | None:
        """The jobs read (None: the history was not read)."""
        if self.jobs_read is not None:
            return self.jobs_read
        return None if self.jobs is None else len(self.jobs)

    def __or__(self, other: Reading) -> Reading:
        """Two parts of a cycle as one reading: ``other``'s tables where it read them."""
        jobs_from = self if other.jobs is None else other
        return Reading(
            snapshot=self.snapshot if other.snapshot is None else other.snapshot,
            idle=self.idle if other.idle is None else other.idle,
            jobs=jobs_from.jobs,
            reports={**self.reports, **other.reports},
            checkpoints={**self.checkpoints, **other.checkpoints},
            failures={**self.failures, **other.failures},
            jobs_read=jobs_from.jobs_read,
        )


def read_sources(
    config: ProbeConfig,
    *,
    strict: bool | None = None,
    checkpoints: Mapping[str, Any] | None = None,
    only: Collection[str] = FILE_SOURCES,
) -> Reading:
    """Read the file sources the configuration names (of them, those in ``only``); history
    only past its checkpoint (``checkpoints``: by :func:`~probes.sources.checkpoints.history_key`)."""
    strict = config.sources.strict if strict is None else strict
    src = config.sources
    snapshot: Snapshot | None = None
    idle: pd.DataFrame | None = None
    jobs: pd.DataFrame | None = None
    reports: dict[str, ReadReport] = {}
    marks: dict[str, Any] = {}
    if src.status_files and "status_files" in only:
        # with the machine class attributes: the probe prices jobs against these slots as a live pool's
        slots = config.slot_reading(with_class_attributes=True)
        snapshot, reports["status"] = read_status(src.status_files, slots, strict=strict)
    if src.idle_files and "idle_files" in only:
        running = running_job_ids(snapshot.allocations) if snapshot is not None else None
        idle, reports["idle"] = read_idle(src.idle_files, config.job_reading(), running=running, strict=strict)
    if src.history and "history" in only:
        frames, tally, seen = [], ReadTally(), JobsSeen()  # each job once, whichever inputs hold it
        for path in src.history:
            read, rep = read_history([path], config.job_reading(), strict=strict, seen=seen)
            tally.merge(rep)
            key = history_key(path)
            fresh, marks[key] = new_jobs(read, (checkpoints or {}).get(key))
            frames.append(fresh)
        jobs = stack(frames, JOB_COLUMNS) if len(frames) > 1 else frames[0]
        reports["history"] = tally.report()
    return with_vos(Reading(snapshot=snapshot, idle=idle, jobs=jobs, reports=reports, checkpoints=marks), config)


def with_vos(reading: Reading, config: ProbeConfig) -> Reading:
    """``reading`` with the projects a user-vo-map gives (``credentials.user_vo_map``) where
    its jobs, bills and idle demand have none; the file is read each time, so an edit counts
    at once."""
    if reading.jobs is None and reading.snapshot is None and reading.idle is None:
        return reading
    user_vos = _user_vos(config)
    vos = {account: spelled for account, (_, spelled) in user_vos.items()}
    snapshot = reading.snapshot
    if snapshot is not None and vos:
        snapshot = dataclasses.replace(snapshot, allocations=fill_projects(snapshot.allocations, vos))
    jobs = None if reading.jobs is None else _with_vos(reading.jobs, user_vos, config)
    idle = reading.idle if reading.idle is None or not vos else fill_projects(reading.idle, vos)
    return dataclasses.replace(reading, snapshot=snapshot, jobs=jobs, idle=idle)


def _user_vos(config: ProbeConfig) -> dict[str, tuple[str, str]]:
    return read_user_vos(config.credentials.user_vo_map) if config.credentials.user_vo_map else {}


def _with_vos(jobs: pd.DataFrame, user_vos: dict[str, tuple[str, str]], config: ProbeConfig) -> pd.DataFrame:
    """Jobs with their projects from the user-vo-map, the VOs condor-ap would report, and the
    jobs condor-ap sent before the switch to fairacct (:mod:`probes.sources.handoff`) marked."""
    vos = {account: spelled for account, (_, spelled) in user_vos.items()}
    jobs = resolve_vos(fill_projects(jobs, vos), user_vos, unix_groups=config.credentials.vo_from_unix_group)
    return mark_sent(jobs, load_handoff(config.probe.state_dir))


def iter_jobs(config: ProbeConfig, tally: ReadTally, *, strict: bool | None = None) -> Iterator[pd.DataFrame]:
    """The configured history as :func:`read_sources` reads it, a few chunks at a time
    (:func:`~probes.sources.history.iter_history`: a caller that writes each part out never
    holds the table), each part with its projects from the user-vo-map; what was found besides
    the values is added to ``tally``, whose report is :func:`read_sources`' once the parts are
    exhausted."""
    strict = config.sources.strict if strict is None else strict
    user_vos = _user_vos(config)
    for part in iter_history(config.sources.history, config.job_reading(), tally, strict=strict):
        yield _with_vos(part, user_vos, config)


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
    from probes.sources.live import LivePool

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


def read_live_snapshot(pool: LivePool, *, now: float) -> Reading:
    """A live pool's slot snapshot, observed at ``now``, with the idle demand of its schedds.

    A pool whose collectors all fail raises :class:`SourceError`; when the schedds cannot be
    located the idle demand is unknown (``failures["collector"]`` says why), and a schedd that
    fails is left out and listed in ``failures``.

    Each bill is named after its job (:func:`~probes.sources.job_identity.adopt_job_identities`,
    whatever the job's status, so its last bill is named as the others), and its group is the
    one the negotiator charges its submitter to (:mod:`probes.sources.negotiator_groups`; as
    declared when the collector holds no negotiator's groups). A claim whose job its schedd
    lists as idle or held is not billed: the status report counts it (:data:`NOT_BILLED`)."""
    snapshot, status = pool.snapshot(now=now)
    try:
        schedds, failures = pool.schedds()
    except SourceError as exc:
        return Reading(snapshot=snapshot, reports={"status": status}, failures={"collector": str(exc)})
    if not schedds:
        groups, _ = pool.negotiator_groups()
        snapshot = dataclasses.replace(snapshot, allocations=with_negotiator_groups(snapshot.allocations, groups))
        return Reading(snapshot=snapshot, reports={"status": status}, failures=failures)
    idle = pool.idle(schedds)
    # bills named after their jobs' own ads: right without STARTD_JOB_ATTRS on the execute nodes,
    # and the same for a job's last bill, after its schedd stopped listing it as running
    answered = [(name, ad) for name, ad in schedds if f"schedd:{name}" not in idle.failures]  # a hung one: once
    claimed = set(snapshot.allocations["job_id"].dropna()) if "job_id" in snapshot.allocations else set()
    jobs, unnamed = pool.job_identities(answered, claimed, now=now)
    allocations, not_running = adopt_job_identities(snapshot.allocations, jobs)
    if len(not_running):
        held = not_running[["job_id", "job_status"]].itertuples(index=False)
        log.info(
            "%d claim(s) of jobs their schedd lists as idle or held, not billed: %s",
            len(not_running), ", ".join(f"{j} ({s})" for j, s in held),
        )  # fmt: skip
        status = status | ReadReport(rejects=dict(not_running["job_status"].map(NOT_BILLED.format).value_counts()))
    groups, unknown = pool.negotiator_groups()
    snapshot = dataclasses.replace(snapshot, allocations=with_negotiator_groups(allocations, groups))
    # a bill under its slot's names is said, per schedd, with why (a schedd that failed, late or not at all)
    failures = failures | named_after_slots(claimed, jobs, {**failures, **idle.failures, **unnamed})
    if groups is None:
        log.info("the negotiator's groups are unknown, groups as the jobs declare them: %s", unknown)
    return Reading(
        snapshot=snapshot,
        idle=None if idle.idle is None else with_negotiator_groups(idle.idle, groups),
        reports={"status": status, "idle": idle.report},
        failures=failures | idle.failures,
    )


def iter_live_history(pool: LivePool, checkpoint: Checkpoint) -> Iterator[Reading]:
    """The jobs of every schedd of a live pool past its checkpoint (``checkpoint(key)``: the
    committed value), in parts, each to be committed (with its checkpoints) before the next is
    read: a backlog longer than ``pool.history_piece`` jobs is never held whole (see
    :meth:`~probes.sources.live.LivePool.history_pieces`). At least one part. A pool whose
    collectors all fail raises :class:`SourceError`; a schedd that fails is left out and listed
    in ``failures``, and its checkpoint stays where it was."""
    schedds, failures = pool.schedds()
    groups: frozenset[str] | None = None
    asked = False
    for read in pool.history_pieces(schedds, checkpoint):
        if not asked and len(read.jobs):  # the negotiator once a pass, and only for jobs
            asked = True
            groups, unknown = pool.negotiator_groups()
            if unknown:
                log.info("the negotiator's groups are unknown, groups as the jobs declare them: %s", unknown)
        yield Reading(
            jobs=with_negotiator_groups(read.jobs, groups),
            reports={"history": read.report},
            checkpoints=read.checkpoints,
            failures=failures | read.failures,
        )
        failures = {}
    if failures or not schedds:
        yield Reading(jobs=stack([], JOB_COLUMNS), reports={"history": ReadReport()}, failures=failures)


def joined(parts: Sequence[Reading]) -> Reading:
    """The parts of one history pass, committed one by one, as one reading: the last part's jobs
    (the pass never holds them all) and the count of all (``jobs_read``), the reports combined
    source by source, the checkpoints and failures of every part (a later one's last)."""
    if len(parts) == 1:
        return parts[0]
    reports: dict[str, ReadReport] = {}
    for part in parts:
        for name, report in part.reports.items():
            reports[name] = reports[name] | report if name in reports else report
    return Reading(
        jobs=parts[-1].jobs,
        reports=reports,
        checkpoints={k: v for p in parts for k, v in p.checkpoints.items()},
        failures={k: v for p in parts for k, v in p.failures.items()},
        jobs_read=sum(p.job_count or 0 for p in parts),
    )


class Sources:
    """The sources a configuration names, read part by part: files, or the live pool
    (``sources.live``; ``pool``, or one built from the configuration).

    ``strict`` overrides ``sources.strict`` for the files. A priced fairshare metric
    (``mrpe``, ``dedicated_pes``) prices jobs against the pool's machines, so sources that read
    jobs must read slots too: refused here, before anything is read.
    """

    def __init__(self, config: ProbeConfig, *, pool: LivePool | None = None, strict: bool | None = None) -> None:
        check_sources(config)
        src = config.sources
        self.config = config
        self.strict = strict
        self.pool = pool if pool is not None or not src.live else live_pool(config)
        self.slots = self.pool is not None or bool(src.status_files)
        """A snapshot can be read."""
        self.jobs = self.pool is not None or bool(src.history)
        """A history can be read."""
        metric = config.fairshare.metric
        if metric in PRICED_METRICS and self.jobs and not self.slots:
            raise ConfigError(
                f"fairshare.metric {metric!r} prices jobs against the pool's machines: sources that read "
                "jobs need slots too (sources.status_files or sources.live)"
            )

    def __repr__(self) -> str:
        return f"Sources(live={self.pool is not None}, slots={self.slots}, jobs={self.jobs})"

    def snapshot(self, *, now: float) -> Reading:
        """The slots and allocations with the idle demand (a live pool's observed at ``now``);
        of files, those named (none: nothing read)."""
        if self.pool is not None:
            return with_vos(read_live_snapshot(self.pool, now=now), self.config)
        return read_sources(self.config, strict=self.strict, only=("status_files", "idle_files"))

    def history_pieces(self, checkpoint: Checkpoint) -> Iterator[Reading]:
        """The jobs past their checkpoints (``checkpoint(key)``: the committed value), in parts,
        each to be committed before the next is read (a live schedd's backlog a piece at a
        time: :func:`iter_live_history`); of files, those named, in one part (none: nothing
        read)."""
        if self.pool is not None:
            for part in iter_live_history(self.pool, checkpoint):
                yield with_vos(part, self.config)
            return
        marks = {key: checkpoint(key) for key in map(history_key, self.config.sources.history)}
        yield read_sources(self.config, strict=self.strict, checkpoints=marks, only=("history",))
