"""Live sources: a running pool read through the htcondor2 bindings.

One conversion path, two inputs: the ClassAd objects the bindings return go through
:func:`~probes.sources.classad.columns_from_classads` and then the very table builders the file
readers use (:func:`~probes.sources.status.snapshot_tables`,
:func:`~probes.sources.queue.idle_table`, :func:`~probes.sources.history.jobs_table`). What
this module adds is the network side, and it is kept to one call per query:

- **slots**: ``Collector.query(AdType.Startd, constraint, projection)`` on every configured
  pool (``pool.collectors``). An entry ``"cm1:9618, cm2:9618"`` lists the replicas of one
  pool: they are tried in order until one answers (failover). Several entries are several
  pools, all queried; a slot seen twice (same ``Name``) is kept once, the copy heard from last.
  Each answer is read as it streams in, a chunk of :data:`~probes.sources.bindings.CHUNK` ads
  converted to columns at a time, and never held whole as ClassAds: the duplicates are found
  over the columns once every collector has answered.
  A live snapshot is observed when the collector answered (the ``now`` passed in), not at the
  startd's last update, so that snapshots taken more often than startds update are distinct.
- **idle demand**: ``Collector.locateAll(DaemonType.Schedd)``, then per schedd
  ``Schedd.query("JobStatus == 1", projection)`` of the idle jobs themselves, grouped by
  autocluster. Not an autocluster query: with ``QueryOpt.AutoCluster`` a status constraint
  returns nothing on HTCondor 25, and without one it counts running jobs too.
- **history**: per schedd, one ``Schedd.history(constraint, projection, since=...)`` call per
  pass, read as it streams in (a chunk of ``pool.history_match`` jobs converted at a time). The
  schedd scans its history file backwards from its end, in the order jobs left its queue, which
  is not the order they ended; so the checkpoint is a position in that file, not a time: the
  scan stops (``since``) at the newest jobs the last pass read, and every job answered before
  them is new, however long ago it ended (:func:`probes.sources.checkpoints.new_schedd_jobs`,
  which also says what is logged when a schedd's history lost that position or does not apply
  ``since``). One scan of the file, however long the backlog: paging it by end time rescanned
  the file for every page and lost, for good, a job found past a page's boundary that ended
  later than the boundary. A checkpoint of an older probe (an end time and the ids at it) is
  read once more as it was (the scan stopping ``pool.history_lookback_s`` before it) and left
  positioned. The checkpoint is returned, never written here: it reaches the outbox in the
  transaction of the records.

Projections hold exactly what the tables and the configuration need: the attributes the table
builders read, the configured extra attributes, the attributes that the configured ClassAd
expressions (partition ``match``, speed and cost expressions) refer to, and those that
HTCondor's default ``RequestMemory``/``RequestDisk`` expressions refer to. A daemon may send a
projected attribute as an expression over attributes that were not asked for (a glidein's
``GLIDEIN_ToRetire = DaemonStartTime + 86400``): those are added to that query's projection,
the query is asked again once, and later queries ask for them from the start.

Every network call runs with a deadline (``pool.timeout_s``): a daemon that does not answer,
answers too late or answers something that is not a list of ClassAds raises one
:class:`~probes.errors.SourceError` naming it. A schedd's failure costs only that schedd's
part of a cycle (it is listed in ``failures``); a pool whose collectors all fail costs the cycle.
The bindings hold the GIL while they wait on a daemon, so they are never called in this
process: by default the clients come from :class:`~probes.sources.bindings.Bindings`, whose
every call runs in a worker process killed at the deadline. The objects standing in for the
daemons come from ``collector_factory`` and ``schedd_factory``: those clients by default, a
test's fakes otherwise.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import logging
import math
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

import classad2
import htcondor2
import numpy as np
import pandas as pd

from collector.errors import ConfigError
from probes.config import PoolSettings
from probes.errors import SourceError
from probes.sources.bindings import CHUNK, Bindings, security_context
from probes.sources.checkpoints import checkpoint_key, new_schedd_jobs
from probes.sources.classad import AdColumns, Attr, columns_from_classads
from probes.sources.credentials import identities, identity_attrs
from probes.sources.frames import stack
from probes.sources.history import JOB_COLUMNS, job_attrs, jobs_table
from probes.sources.job_identity import running_table
from probes.sources.queue import IDLE_COLUMNS, idle_table, queue_attrs
from probes.sources.report import ReadReport
from probes.sources.settings import JobReading, SlotReading
from probes.sources.status import Snapshot, child_list_attrs, slot_attrs, snapshot_tables

__all__ = [
    "END_TIME",
    "REQUEST_INPUTS",
    "CollectorFactory",
    "CollectorLike",
    "HistoryRead",
    "IdleRead",
    "LivePool",
    "ScheddFactory",
    "ScheddLike",
    "checkpoint_key",
    "history_constraint",
    "history_projection",
    "history_since",
    "idle_projection",
    "slot_projection",
]

log = logging.getLogger("fairacct.live")

PROGRESS_EVERY_S = 30.0
"""Seconds between the log lines of a long history answer's progress."""

T = TypeVar("T")

#: A job's end as the jobs table has it: its completion, or for a removed job (CompletionDate
#: 0 or missing) the time it entered its last status.
END_TIME = "((CompletionDate =!= undefined && CompletionDate > 0) ? CompletionDate : EnteredCurrentStatus)"

#: Attributes that HTCondor's default request expressions refer to (RequestMemory is
#: ``ifThenElse(MemoryUsage =!= undefined, MemoryUsage, (ImageSize + 1023) / 1024)``,
#: MemoryUsage ``((ResidentSetSize + 1023) / 1024)``, RequestDisk ``DiskUsage``): a projection
#: without them would turn those requests into undefined.
REQUEST_INPUTS = ("MemoryUsage", "ResidentSetSize", "ImageSize", "DiskUsage")

_AUTOCLUSTER_ONLY = {"jobcount", "jobids"}  # attributes of autocluster ads, not of job ads


class CollectorLike(Protocol):
    """What fairacct calls on an ``htcondor2.Collector``."""

    def query(
        self, ad_type: htcondor2.AdType, constraint: str | None = None, projection: list[str] | None = None
    ) -> Iterable[classad2.ClassAd]: ...

    def locateAll(self, daemon_type: htcondor2.DaemonType) -> list[classad2.ClassAd]: ...  # noqa: N802 - the bindings' name


class ScheddLike(Protocol):
    """What fairacct calls on an ``htcondor2.Schedd``."""

    def query(
        self, constraint: str = ..., projection: list[str] = ..., opts: htcondor2.QueryOpt = ...
    ) -> list[classad2.ClassAd]: ...

    def history(
        self, constraint: str | None = None, projection: list[str] = ..., match: int = -1, since: str | None = None
    ) -> Iterable[classad2.ClassAd]: ...


CollectorFactory = Callable[[str | None, "htcondor2.SecurityContext | None"], CollectorLike]
"""(address or None for COLLECTOR_HOST, security context) -> a collector client."""
ScheddFactory = Callable[[classad2.ClassAd], ScheddLike]
"""(a schedd's location ad, as locateAll gives it) -> a schedd client."""


# -- projections and constraints ------------------------------------------------------------------


def _refs(expression: str) -> list[str]:
    """The attributes a configured ClassAd expression refers to (MY.x is x; TARGET.x is not ours)."""
    if not expression.strip():
        return []
    refs = classad2.ClassAd().externalRefs(classad2.ExprTree(expression))
    out = []
    for ref in refs:
        scope, dot, name = ref.rpartition(".")
        if not dot:
            out.append(ref)
        elif scope.lower() == "my":
            out.append(name)
    return out


def _names(attrs: Sequence[Attr], *more: str) -> list[str]:
    seen: set[str] = set()
    out = []
    for name in [*(a.name for a in attrs), *more]:
        if name and name.lower() not in seen:
            seen.add(name.lower())
            out.append(name)
    return out


def slot_projection(
    reading: SlotReading, expressions: Sequence[str] = (), attributes: Sequence[str] = (), *, child_lists: bool = True
) -> list[str]:
    """The startd attributes a snapshot needs: the slots table's (with its extras), what the
    partitions' ``match`` and the other ``expressions`` evaluated in slot ads refer to, and
    ``attributes``. Without ``child_lists`` (``pool.child_lists``: the dynamic-slot ads say what
    each node holds), not the p-slots' ``Child*`` lists, a tenth of a glidein pool's answer."""
    refs = [r for _, match in reading.partitions for r in _refs(match)]
    refs += [r for e in expressions for r in _refs(e)]
    lists = set() if child_lists else {a.name for a in child_list_attrs(reading)}
    return _names([a for a in slot_attrs(reading) if a.name not in lists], *refs, *attributes)


def idle_projection(reading: JobReading = JobReading()) -> list[str]:
    """The job attributes the idle table needs (AutoClusterId, the requests, who waits)."""
    return _names([a for a in queue_attrs(reading) if a.name.lower() not in _AUTOCLUSTER_ONLY], *REQUEST_INPUTS)


def history_projection(reading: JobReading) -> list[str]:
    """The job attributes the jobs table needs, with the configured credentials and extras."""
    return _names(job_attrs(reading), "EnteredCurrentStatus", "CompletionDate", *REQUEST_INPUTS)


def _and(*parts: str) -> str:
    parts = tuple(p.strip() for p in parts if p and p.strip())
    if not parts:
        return "true"
    return parts[0] if len(parts) == 1 else " && ".join(f"({p})" for p in parts)


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def history_constraint(job_constraint: str, checkpoint: Mapping[str, Any] | None) -> str:
    """The constraint of a pass over a schedd's history: the configured one, or the newest job
    the checkpoint names (whose answer shows that the scan reached the checkpoint's position)."""
    tail = checkpoint.get("tail") if checkpoint else None
    if not tail or not job_constraint.strip():
        return _and(job_constraint)
    return f"({job_constraint.strip()}) || GlobalJobId == {classad2.quote(tail[0])}"


def history_since(checkpoint: Mapping[str, Any] | None, lookback_s: float) -> str | None:
    """Where a pass's backward scan of a schedd's history stops (``Schedd.history``'s ``since``,
    the first ad it holds for, not answered): at the checkpoint's second newest job; nowhere
    without a checkpoint (or with one job in it: then the answer is cut at that job); for an
    older probe's checkpoint, at the first job that ended ``lookback_s`` before its end time."""
    if not checkpoint:
        return None
    tail = checkpoint.get("tail")
    if tail:
        return f"GlobalJobId == {classad2.quote(tail[1])}" if len(tail) > 1 else None
    return f"{END_TIME} < {_number(float(checkpoint['end']) - lookback_s)}"


# -- what the reads return --------------------------------------------------------------------------


@dataclass
class IdleRead:
    """Idle demand of the schedds that answered; ``failures``: source -> why, for the others."""

    idle: pd.DataFrame | None
    report: ReadReport
    failures: dict[str, str] = field(default_factory=dict)


@dataclass
class HistoryRead:
    """New jobs of the schedds that answered, and their checkpoints (to commit with them).

    ``pages``: schedd name -> history calls made (one a pass; two when the answer's expressions
    referred to attributes the projection lacked); ``failures``: source -> why it was skipped;
    ``problems``: source -> what went wrong while it was read all the same (logged too).
    """

    jobs: pd.DataFrame
    checkpoints: dict[str, Any]
    report: ReadReport
    pages: dict[str, int] = field(default_factory=dict)
    failures: dict[str, str] = field(default_factory=dict)
    problems: dict[str, str] = field(default_factory=dict)


# -- the pool ---------------------------------------------------------------------------------------


class LivePool:
    """A pool (or several) read through htcondor2; see the module docstring.

    ``pool``: the pool's settings; ``slots`` and ``jobs``: what the table builders read;
    ``slot_expressions`` and ``slot_attributes``: more that slot ads must carry (the speed and
    cost expressions' references, the machine class attributes).
    ``collector_factory`` and ``schedd_factory`` make the clients of the single network calls:
    by default those of :class:`~probes.sources.bindings.Bindings`, which make every call in a
    worker process killed at ``pool.timeout_s`` (there ``pool.condor_config`` is loaded and
    ``pool.timeout_s`` becomes HTCondor's QUERY_TIMEOUT). :meth:`cancel` makes calls in flight
    give up at once (the service stopping).
    """

    def __init__(
        self,
        pool: PoolSettings,
        slots: SlotReading = SlotReading(),
        jobs: JobReading = JobReading(),
        *,
        slot_expressions: Sequence[str] = (),
        slot_attributes: Sequence[str] = (),
        collector_factory: CollectorFactory | None = None,
        schedd_factory: ScheddFactory | None = None,
    ) -> None:
        self.pool = pool
        self.slots = slots
        self.jobs = jobs
        self.slot_expressions = tuple(slot_expressions)
        self.slot_attributes = tuple(slot_attributes)
        self.groups: list[list[str | None]] = []
        for entry in pool.collectors:
            replicas: list[str | None] = [a.strip() for a in entry.split(",") if a.strip()]
            if not replicas:
                raise ConfigError(f"pool.collectors: expected host:port entries, got an empty one ({entry!r})")
            self.groups.append(replicas)
        if not self.groups:
            self.groups = [[None]]  # COLLECTOR_HOST of the HTCondor configuration
        self.security = security_context(pool.token_file)
        self.bindings: Bindings | None = None
        if collector_factory is None or schedd_factory is None:
            self.bindings = Bindings(pool.condor_config, pool.timeout_s, pool.token_file)
            collector_factory = collector_factory or self.bindings.collector
            schedd_factory = schedd_factory or self.bindings.schedd
        self._collector_factory: CollectorFactory = collector_factory
        self._schedd_factory: ScheddFactory = schedd_factory
        self.timeout_s = pool.timeout_s
        self._cancel = threading.Event()
        self.abandoned = 0  # calls given up on (their threads may still be waiting on a daemon)
        self.learned: dict[str, set[str]] = {"startd": set(), "idle": set(), "history": set()}
        # a long history answer (a first pass, a backfill, after an outage) says how far it got:
        # a log line every progress_every_s, and on_progress(schedd, ads) after each chunk (the
        # command line draws a bar with it on a terminal)
        self.progress_every_s = PROGRESS_EVERY_S
        self.on_progress: Callable[[str, int], None] | None = None
        # startd ads converted per chunk as they arrive: the bindings' worker sends CHUNK a message
        self.slot_chunk = CHUNK
        # on_slot_ads(source, ads) sees each chunk of startd ads as it arrives (before the
        # de-duplication; a chunk of an answer abandoned to ask again too): a seam for tests
        # that compare a snapshot with its collector's answer, which is never kept whole
        self.on_slot_ads: Callable[[str, list[classad2.ClassAd]], None] | None = None

    def __repr__(self) -> str:
        return f"LivePool(collectors={self.pool.collectors!r}, token={'set' if self.security else 'none'})"

    def cancel(self) -> None:
        """Make calls in flight, and later ones, fail at once (the bindings' workers are killed)."""
        self._cancel.set()
        if self.bindings is not None:
            self.bindings.close()

    # -- the one network call -------------------------------------------------------------------

    def _call(self, what: str, call: Callable[[], T]) -> T:
        """Run one network call with the deadline; translate the bindings' errors."""
        if self._cancel.is_set():
            raise SourceError(f"{what}: not asked, the probe is stopping")
        box: dict[str, Any] = {}
        done = threading.Event()

        def run() -> None:
            try:
                box["value"] = call()
            except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread, translated or re-raised there
                box["error"] = exc
            finally:
                done.set()

        worker = threading.Thread(target=run, name=f"fairacct: {what}", daemon=True)
        started = time.monotonic()
        worker.start()
        while not done.wait(0.05):
            if self._cancel.is_set():
                self.abandoned += 1
                raise SourceError(f"{what}: abandoned, the probe is stopping")
            if time.monotonic() - started >= self.timeout_s:
                self.abandoned += 1
                raise SourceError(f"{what}: no answer within {self.timeout_s:g} s (pool.timeout_s)")
        error = box.get("error")
        if error is not None:
            raise _translated(what, error)
        return box["value"]  # type: ignore[no-any-return]

    def _ads(self, what: str, call: Callable[[], Any]) -> list[classad2.ClassAd]:
        """A call whose answer must be a list of ClassAds."""
        answer = self._call(what, call)
        if not isinstance(answer, (list, tuple)):
            raise SourceError(f"{what}: expected a list of ClassAds, got {type(answer).__name__}")
        for i, ad in enumerate(answer):
            if not isinstance(ad, classad2.ClassAd):
                raise SourceError(f"{what}: expected a list of ClassAds, item {i} is a {type(ad).__name__}")
        return list(answer)

    def _projected(
        self, kind: str, what: str, base: Sequence[str], ask: Callable[[list[str]], list[classad2.ClassAd]]
    ) -> list[classad2.ClassAd]:
        """Ask with the projection ``base`` (and what was learned for ``kind``); when the answer's
        expressions refer to attributes it lacks, learn them and ask again, once."""
        projection = _names_str([*base, *sorted(self.learned[kind])])
        ads = ask(projection)
        missing = _missing_refs(ads, projection)
        if missing:
            self.learned[kind] |= missing
            log.info(
                "%s: the answer refers to %s, which the projection lacked; asking again with them",
                what, ", ".join(sorted(missing)),
            )  # fmt: skip
            ads = ask([*projection, *sorted(missing)])
        return ads

    def _ask_collector(self, call: Callable[[CollectorLike], Any], address: str | None) -> Any:
        return call(self._collector_factory(address, self.security))

    def _failover(
        self, group: Sequence[str | None], what: str, call: Callable[[CollectorLike], Any]
    ) -> tuple[list[classad2.ClassAd], str]:
        """Ask the replicas of one pool in order until one answers: (its ads, its address)."""
        problems = []
        for i, address in enumerate(group):
            name = f"collector {address or 'COLLECTOR_HOST'}"
            try:
                ads = self._ads(f"{name}: {what}", functools.partial(self._ask_collector, call, address))
            except SourceError as exc:
                problems.append(str(exc))
                if i < len(group) - 1 and not self._cancel.is_set():
                    log.warning("%s; trying the next replica", exc)
                continue
            return ads, address or "COLLECTOR_HOST"
        raise SourceError(
            problems[0] if len(problems) == 1 else "no collector of the pool answered: " + "; ".join(problems)
        )

    # -- slots ----------------------------------------------------------------------------------

    def slot_columns(self) -> tuple[AdColumns, list[str], ReadReport]:
        """Startd ads of every pool, each slot once, as columns: (columns, the collector each row
        came from, report). Each answer is converted a chunk at a time as it arrives
        (:meth:`_slot_answer`); the slots are then chosen from all of them at once
        (:func:`_kept_slots`), so that no answer is ever held whole as ClassAds."""
        answers: list[_SlotAnswer] = []
        for group in self.groups:
            learned = sorted(self.learned["startd"])
            projection = _names_str(
                [
                    *slot_projection(
                        self.slots, self.slot_expressions, self.slot_attributes, child_lists=self.pool.child_lists
                    ),
                    *learned,
                ]
            )
            answer = self._failover_slots(group, projection, again=True)
            if answer is None:  # its expressions referred to attributes the projection lacked
                projection = _names_str([*projection, *sorted(self.learned["startd"])])
                answer = self._failover_slots(group, projection, again=False)
            assert answer is not None  # the second answer is always read whole
            answers.append(answer)
        return _kept_slots(answers, slot_attrs(self.slots))

    def _failover_slots(self, group: Sequence[str | None], projection: list[str], *, again: bool) -> _SlotAnswer | None:
        """The startd ads of the first replica of ``group`` that answers whole (see
        :meth:`_slot_answer`); a replica that fails midway costs only its partial answer."""
        constraint = self.pool.slot_constraint.strip() or None
        problems = []
        for i, address in enumerate(group):
            what = f"collector {address or 'COLLECTOR_HOST'}: startd ads"
            try:
                ask = functools.partial(
                    self._ask_collector, functools.partial(_startd_query, constraint, projection), address
                )
                return self._slot_answer(
                    what, address or "COLLECTOR_HOST", self._call(what, ask), projection, again=again
                )
            except SourceError as exc:
                problems.append(str(exc))
                if i < len(group) - 1 and not self._cancel.is_set():
                    log.warning("%s; trying the next replica", exc)
        raise SourceError(
            problems[0] if len(problems) == 1 else "no collector of the pool answered: " + "; ".join(problems)
        )

    def _slot_answer(
        self, what: str, address: str, answer: Any, projection: list[str], *, again: bool
    ) -> _SlotAnswer | None:
        """One collector's answer, converted to columns :attr:`slot_chunk` ads at a time as it
        arrives (the bindings' worker sends it in chunks of that size). Each ad's place in the
        answer is its row's ``line``, and its ``Name`` (case-folded) and the time it was heard
        from are kept beside, for :func:`_kept_slots`. None when ``again`` and the answer's
        expressions refer to attributes the projection lacks, decided on each chunk as it comes:
        the chunks after the first such one are only checked for what else is lacking (never
        converted), all of it is learned, and the caller asks again, once."""
        if isinstance(answer, (str, bytes, Mapping)) or not isinstance(answer, Iterable):
            raise SourceError(f"{what}: expected a list of ClassAds, got {type(answer).__name__}")
        attrs = slot_attrs(self.slots)
        out = _SlotAnswer(f"collector {address}")
        missing: set[str] = set()
        ads = iter(answer)
        try:
            for first in itertools.count(0, self.slot_chunk):
                chunk = self._next_ads(what, ads, self.slot_chunk, first)
                if not chunk:
                    break
                if self.on_slot_ads is not None:
                    self.on_slot_ads(out.origin, chunk)
                missing |= _missing_refs(chunk, projection)
                if not (missing and again):
                    out.add(chunk, attrs)
                # else: the answer is asked again; the rest is read only for what else it lacks,
                # so that one more query asks for all of it (a chunk at a time, never converted)
        finally:
            close = getattr(ads, "close", None)
            if close is not None:
                close()  # a stream left early (a failure) frees its worker
        if missing:
            self.learned["startd"] |= missing
            then = "asking again with them" if again else "asked for from now on"
            log.info("startd ads: the answer refers to %s, which the projection lacked; %s",
                     ", ".join(sorted(missing)), then)  # fmt: skip
            if again:
                return None
        return out

    def snapshot(self, *, now: float) -> tuple[Snapshot, ReadReport]:
        """The slots and allocations tables of the pool, observed at ``now``.

        The answers of all its collectors are one query at one instant: a p-slot kept from one
        collector and its dynamic slots from another (a startd seen by both) are one node, and
        the Child* lists serve only when no collector held a dynamic-slot ad and ``child_lists``
        says the query leaves them out: an answer of a pool between two claims holds none, and its
        p-slots may still list released claims, or already list new ones. Each slot's
        ``source`` still names the collector its ad came from (``line``: its place in the answer).
        """
        columns, origins, report = self.slot_columns()
        snapshot = snapshot_tables(columns, self.slots, report.malformed, child_lists=self.pool.child_lists)
        snapshot.slots["source"] = np.array(origins, dtype=object)[snapshot.slots["line"].to_numpy(dtype=np.int64) - 1]
        snapshot.slots["observed_at"] = float(now)
        snapshot.allocations["observed_at"] = float(now)
        return snapshot, report

    # -- schedds --------------------------------------------------------------------------------

    def schedds(self) -> tuple[list[tuple[str, classad2.ClassAd]], dict[str, str]]:
        """The schedds to read, (name, location ad), each once; and the configured ones not found."""
        found: dict[str, classad2.ClassAd] = {}
        for group in self.groups:
            ads, _ = self._failover(group, "locate schedds", lambda c: c.locateAll(htcondor2.DaemonType.Schedd))
            for ad in ads:
                name = ad.get("Name")
                if isinstance(name, str) and name and name not in found:
                    found[name] = ad
        wanted = self.pool.schedds
        failures = {}
        if wanted:
            for name in wanted:
                if name not in found:
                    failures[f"schedd:{name}"] = f"schedd {name}: not known to any collector"
            found = {n: found[n] for n in wanted if n in found}
        chosen = []
        for name, ad in sorted(found.items()):
            if not isinstance(ad.get("MyAddress"), str):
                failures[f"schedd:{name}"] = f"schedd {name}: its location ad has no MyAddress"
                continue
            chosen.append((name, ad))
        return chosen, failures

    def _schedd(self, name: str, location: classad2.ClassAd) -> ScheddLike:
        return self._call(f"schedd {name}: connect", lambda: self._schedd_factory(location))

    # -- idle demand ----------------------------------------------------------------------------

    def idle(self, schedds: Sequence[tuple[str, classad2.ClassAd]]) -> IdleRead:
        """The idle jobs of every schedd, grouped by autocluster."""
        constraint = _and("JobStatus == 1", self.pool.job_constraint)
        frames, report, failures = [], ReadReport(), {}
        for name, location in schedds:
            what = f"schedd {name}: idle jobs"
            try:
                schedd = self._schedd(name, location)
                ads = self._projected(
                    "idle",
                    what,
                    idle_projection(self.jobs),
                    functools.partial(self._ask_idle, schedd, what, constraint),
                )
            except SourceError as exc:
                failures[f"schedd:{name}"] = str(exc)
                continue
            columns, rep = columns_from_classads(ads, queue_attrs(self.jobs), origin=f"schedd {name}")
            report.merge(rep)
            frames.append(idle_table(columns, self.jobs, origin=f"schedd {name}"))
        if not frames and failures:
            return IdleRead(None, report, failures)  # nobody answered: no demand known, not "none"
        return IdleRead(stack(frames, IDLE_COLUMNS), report, failures)

    def running_identities(
        self, schedds: Sequence[tuple[str, classad2.ClassAd]]
    ) -> tuple[pd.DataFrame, dict[str, str]]:
        """Who each running job of every schedd is, by its own ad (the configured job
        credentials): ``job_id``, ``user``, ``group``, ``project``; and the schedds that failed
        (source -> why), whose jobs keep their slots' names."""
        identity = self.jobs.identity
        projection = _names_str(["GlobalJobId", *(a.name for a in identity_attrs(identity))])
        constraint = _and("JobStatus == 2", self.pool.job_constraint)
        frames, failures = [], {}
        for name, location in schedds:
            what = f"schedd {name}: running jobs"
            try:
                schedd = self._schedd(name, location)
                ads = self._ads(
                    what,
                    lambda s=schedd: s.query(  # type: ignore[misc]
                        constraint=constraint, projection=projection, opts=htcondor2.QueryOpt.Default
                    ),
                )
            except SourceError as exc:
                failures[f"schedd:{name}"] = str(exc)
                continue
            ads = [ad for ad in ads if isinstance(ad.get("GlobalJobId"), str)]

            def values(attr: str, ads: list[classad2.ClassAd] = ads) -> np.ndarray:
                return np.array([v if isinstance(v := ad.get(attr), str) else None for ad in ads], dtype=object)

            names = identities(values, len(ads), identity)
            frames.append(running_table([ad["GlobalJobId"] for ad in ads], names))
        return (pd.concat(frames, ignore_index=True) if frames else running_table([], None)), failures

    def _ask_idle(
        self, schedd: ScheddLike, what: str, constraint: str, projection: list[str]
    ) -> list[classad2.ClassAd]:
        # the idle jobs themselves: with QueryOpt.AutoCluster a status constraint answers nothing
        return self._ads(
            what, lambda: schedd.query(constraint=constraint, projection=projection, opts=htcondor2.QueryOpt.Default)
        )

    # -- history --------------------------------------------------------------------------------

    def history(self, schedds: Sequence[tuple[str, classad2.ClassAd]], checkpoint: Callable[[str], Any]) -> HistoryRead:
        """Every schedd's jobs past its checkpoint (``checkpoint(key)`` reads the committed one)."""
        frames, checkpoints, report = [], {}, ReadReport()
        pages: dict[str, int] = {}
        failures: dict[str, str] = {}
        problems: dict[str, str] = {}
        for name, location in schedds:
            key = checkpoint_key(name)
            mark = checkpoint(key)
            try:
                jobs, n, rep = self._schedd_history(name, location, mark)
            except SourceError as exc:
                failures[f"schedd:{name}"] = str(exc)
                continue
            if mark and not mark.get("tail"):
                log.info(
                    "schedd %s: a checkpoint without a position in the history, read once more by its end time", name
                )
            fresh, advanced, problem = new_schedd_jobs(jobs, mark, schedd=f"schedd {name}")
            if problem:
                log.warning("%s", problem)
                problems[f"schedd:{name}"] = problem
            if mark is not None or len(fresh):
                checkpoints[key] = advanced
            frames.append(fresh)
            pages[name] = n
            report.merge(rep)
        return HistoryRead(stack(frames, JOB_COLUMNS), checkpoints, report, pages, failures, problems)

    def _schedd_history(
        self, name: str, location: classad2.ClassAd, mark: Mapping[str, Any] | None
    ) -> tuple[pd.DataFrame, int, ReadReport]:
        """One schedd's answer past ``mark``, in its order (newest first in its history file): the
        jobs table of one scan, read as it streams in; and the calls made."""
        what = f"schedd {name}: history"
        constraint = history_constraint(self.pool.job_constraint, mark)
        since = history_since(mark, self.pool.history_lookback_s)
        schedd = self._schedd(name, location)
        for calls in (1, 2):
            projection = _names_str([*history_projection(self.jobs), *sorted(self.learned["history"])])
            ask = functools.partial(schedd.history, constraint=constraint, projection=projection, match=-1, since=since)
            answer = self._call(what, ask)
            read = self._read_history(what, name, answer, projection, again=calls == 1)
            if read is not None:
                return read[0], calls, read[1]
        raise AssertionError("unreachable: the second answer is always read whole")

    def _read_history(
        self, what: str, name: str, answer: Any, projection: list[str], *, again: bool
    ) -> tuple[pd.DataFrame, ReadReport] | None:
        """The jobs table of one history answer, converted ``pool.history_match`` ads at a time, so
        that a long answer is never held as ClassAds whole. None when ``again`` and the answer's
        expressions refer to attributes the projection lacks: they are learned, and the caller asks
        again (once)."""
        if isinstance(answer, (str, bytes, Mapping)) or not isinstance(answer, Iterable):
            raise SourceError(f"{what}: expected a list of ClassAds, got {type(answer).__name__}")
        attrs = job_attrs(self.jobs)
        origin = f"schedd {name}"
        report = ReadReport()
        parts: list[AdColumns] = []
        ads = iter(answer)
        started = said = time.monotonic()
        try:
            for first in itertools.count(0, self.pool.history_match):
                chunk = self._next_ads(what, ads, self.pool.history_match, first)
                if not chunk:
                    break
                if self.on_progress is not None:
                    self.on_progress(name, len(chunk))
                if (now := time.monotonic()) - said >= self.progress_every_s:
                    said, done = now, first + len(chunk)
                    log.info("%s: %d jobs read so far, %.0f a second", what, done, done / max(now - started, 1e-9))
                missing = _missing_refs(chunk, projection)
                if missing:
                    self.learned["history"] |= missing
                    then = "asking again with them" if again else "asked for from now on"
                    refs = ", ".join(sorted(missing))
                    log.info("%s: the answer refers to %s, which the projection lacked; %s", what, refs, then)
                    if again:
                        return None
                columns, rep = columns_from_classads(chunk, attrs, origin=origin)
                columns.line = columns.line + first  # the ad's place in the whole answer
                columns.raw = None  # kept for evaluating expressions, which this table never does
                rep.malformed = [dataclasses.replace(m, line=m.line + first) for m in rep.malformed]
                report.merge(rep)
                parts.append(columns)
        finally:
            close = getattr(ads, "close", None)
            if close is not None:
                close()  # a stream left early (asked again, a failure) frees its worker
        jobs = jobs_table(AdColumns.concat(parts, attrs), self.jobs)
        usable = jobs["job_id"].notna().to_numpy() & np.isfinite(pd.to_numeric(jobs["end"]).to_numpy(dtype=np.float64))
        if not usable.all():
            report.rejects["GlobalJobId or end time: missing, the job was skipped"] += int((~usable).sum())
            jobs = jobs[usable].reset_index(drop=True)
        return jobs, report

    def _next_ads(self, what: str, ads: Iterator[Any], n: int, first: int) -> list[classad2.ClassAd]:
        """The next ``n`` ads of an answer (fewer at its end): the bindings' errors translated, and
        anything that is not a ClassAd refused."""
        if self._cancel.is_set():
            raise SourceError(f"{what}: abandoned, the probe is stopping")
        try:
            chunk = list(itertools.islice(ads, n))
        except Exception as exc:  # the bindings' errors become SourceError, others go on as they are
            error = _translated(what, exc)
            if error is exc:
                raise
            raise error from exc
        for i, ad in enumerate(chunk):
            if not isinstance(ad, classad2.ClassAd):
                raise SourceError(f"{what}: expected a list of ClassAds, item {first + i} is a {type(ad).__name__}")
        return chunk


def _translated(what: str, error: BaseException) -> BaseException:
    """The bindings' errors (and the workers'), as a SourceError naming ``what`` was asked;
    anything else as it is."""
    if isinstance(error, (htcondor2.HTCondorException, classad2.ClassAdException, OSError, RuntimeError, ValueError)):
        text = " ".join(str(error).split()) or type(error).__name__
        translated = SourceError(f"{what}: {text}")
        translated.__cause__ = error
        return translated
    return error


def _names_str(names: Sequence[str]) -> list[str]:
    first: dict[str, str] = {}
    for n in names:
        first.setdefault(n.lower(), n)
    return list(first.values())


def _missing_refs(ads: Sequence[classad2.ClassAd], projection: Sequence[str]) -> set[str]:
    """Attributes that the projected attributes' expressions refer to and the projection lacks."""
    wanted = {p.lower() for p in projection}
    missing: set[str] = set()
    for ad in ads:
        for name in projection:
            value = ad.get(name)
            if not isinstance(value, classad2.ExprTree):
                continue  # a literal (or absent)
            for ref in ad.externalRefs(value):
                scope, dot, attr = ref.rpartition(".")
                # classad2 lists "" for an expression whose references are all internal
                if attr and (not dot or scope.lower() == "my") and attr.lower() not in wanted:
                    missing.add(attr)
    return missing


def _startd_query(
    constraint: str | None, projection: list[str], collector: CollectorLike
) -> Iterable[classad2.ClassAd]:
    return collector.query(ad_type=htcondor2.AdType.Startd, constraint=constraint, projection=projection)


@dataclass
class _SlotAnswer:
    """One collector's startd ads, converted a chunk at a time (:meth:`LivePool._slot_answer`).

    ``keys`` and ``heard``: per ad with a ``Name``, in the answer's order, its name case-folded
    and when its collector last heard from it (UTC seconds); a row of ``parts`` has its ad's place
    among them as its ``line`` (1-based), as has a quarantined ad in ``report.malformed``.
    """

    origin: str
    parts: list[AdColumns] = field(default_factory=list)
    keys: list[str] = field(default_factory=list)
    heard: list[float] = field(default_factory=list)
    report: ReadReport = field(default_factory=ReadReport)

    def add(self, chunk: Sequence[classad2.ClassAd], attrs: Sequence[Attr]) -> None:
        """Convert one chunk of the answer; ads without a Name are counted and skipped."""
        first = len(self.keys)
        named = []
        for ad in chunk:
            name = ad.get("Name")
            if not isinstance(name, str) or not name:
                self.report.rejects["Name: missing, the slot ad was skipped"] += 1
                continue
            named.append(ad)
            self.keys.append(name.lower())
            self.heard.append(_heard(ad))
        columns, rep = columns_from_classads(named, attrs, origin="collector")
        if columns.raw is not None:
            # an ad's text serves its p-slot or static slot (partitions, Snapshot.ads), never a
            # dynamic slot: dropped here, it is not held for the ~10 dynamic slots of every node
            columns.raw[_dynamic(columns)] = None
        _share_repeats(columns)
        columns.line = columns.line + first
        rep.malformed = [dataclasses.replace(m, line=m.line + first) for m in rep.malformed]
        self.report.merge(rep)
        self.parts.append(columns)


def _share_repeats(ads: AdColumns) -> None:
    """Make equal strings of a column, or of its lists' items, one object (``sys.intern``) where
    most of them repeat: a global pool's ads name a few thousand machines, users, groups, sites
    and states over and over (a node's ~10 dynamic slots and the ``Child*`` lists of its p-slot),
    and the columns of a whole answer are held until the tables are built. Columns mostly of
    distinct values (``Name``, ``GlobalJobId``) are left as they are, not filling the table of
    interned strings."""
    for column in ads.columns.values():
        if column.dtype != object or not len(column):
            continue
        values = column.tolist()
        strings = [v for v in values if type(v) is str]
        if strings and len(set(strings)) <= len(strings) // 2:
            column[:] = [sys.intern(v) if type(v) is str else v for v in values]
        lists = [v for v in values if type(v) is list]
        items = [e for v in lists for e in v if type(e) is str]
        if items and len(set(items)) <= len(items) // 2:
            for v in lists:
                v[:] = [sys.intern(e) if type(e) is str else e for e in v]


def _dynamic(ads: AdColumns) -> np.ndarray:
    """Which ads are of dynamic slots, by the rule of :func:`~probes.sources.status.snapshot_tables`."""
    slot_type = pd.Series(ads["SlotType"], dtype=object).fillna("").str.lower().to_numpy()
    dynamic: np.ndarray = (slot_type == "dynamic") | (ads["DynamicSlot"] == True)  # noqa: E712 - bools/None
    return dynamic


def _kept_slots(answers: Sequence[_SlotAnswer], attrs: Sequence[Attr]) -> tuple[AdColumns, list[str], ReadReport]:
    """Each slot once from the collectors' answers: the copy heard from last (the first of
    them, on a tie), at the place of its first copy. Rows are numbered (``line``, 1-based) by
    their place among the kept ads, a quarantined one included, as the origins are listed; the
    answers give up their columns. A slot whose kept copy was quarantined has no row, as if it
    alone had been read (its value rejects of a copy that was not kept stay counted)."""
    sizes = [len(a.keys) for a in answers]
    offsets = np.cumsum([0, *sizes])[:-1]
    keys = np.array([k for a in answers for k in a.keys], dtype=object)
    heard = np.array([h for a in answers for h in a.heard], dtype=np.float64)
    origin = np.repeat(np.array([a.origin for a in answers], dtype=object), sizes)
    report = ReadReport()
    if len(keys):
        # idxmax: the first of the latest copies; sort=False: the slots in order of first appearance
        order = pd.Series(heard).groupby(keys, sort=False).idxmax().to_numpy(dtype=np.int64)
    else:
        order = np.array([], dtype=np.int64)
    if len(keys) > len(order):
        report.rejects["Name: seen twice (two pools or replicas), kept once"] += len(keys) - len(order)
    place = np.zeros(len(keys), dtype=np.int64)  # 1-based place among the kept ads; 0: not kept
    place[order] = np.arange(1, len(order) + 1)
    parts = []
    for answer, offset in zip(answers, offsets, strict=True):
        for part in answer.parts:
            part.line = part.line - 1 + offset  # the ad's place among all the answers' (0-based)
            parts.append(part)
        answer.report.malformed = [
            dataclasses.replace(m, line=int(place[m.line - 1 + offset]))
            for m in answer.report.malformed
            if place[m.line - 1 + offset]
        ]
        report.merge(answer.report)
    columns = AdColumns.concat(parts, attrs)
    if len(order) < len(keys):
        row_of = np.full(len(keys), -1, dtype=np.int64)
        row_of[columns.line] = np.arange(len(columns))
        rows = row_of[order]
        columns = columns.take(rows[rows >= 0])
        columns.line = np.flatnonzero(rows >= 0) + 1
    else:  # every ad kept, in its place
        columns.line = columns.line + 1
    report.ads = len(columns)
    return columns, origin[order].tolist(), report


def _heard(ad: classad2.ClassAd) -> float:
    for attr in ("LastHeardFrom", "MyCurrentTime"):
        value = ad.get(attr)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            return float(value)
    return -math.inf
