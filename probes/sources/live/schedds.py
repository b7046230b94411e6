"""The schedds of a live pool, their idle demand and who their running jobs are.

- **schedds**: ``Collector.locateAll(DaemonType.Schedd)`` on every pool, each schedd once
  (``pool.schedds`` chooses among them).
- **idle demand**: per schedd, ``Schedd.query("JobStatus == 1", projection)`` of the idle jobs
  themselves, grouped by autocluster. Not an autocluster query: with ``QueryOpt.AutoCluster`` a
  status constraint returns nothing on HTCondor 25, and without one it counts running jobs too.
- **job identities**: per schedd, the running jobs' own ads, for the names on their bills, and
  those of the other jobs the slots' claims name, whatever their status (queue, then recent
  history): the names of a job's last bill, and which claims hold an idle or held job.

A schedd's failure costs only that schedd's part of a cycle: it is listed in ``failures``.
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

import classad2
import htcondor2
import numpy as np
import pandas as pd

from probes.config import PoolSettings
from probes.errors import SourceError
from probes.sources.classad import columns_from_classads
from probes.sources.credentials import identities, identity_attrs
from probes.sources.frames import stack
from probes.sources.job_identity import jobs_table
from probes.sources.live.calls import Calls, ScheddLike
from probes.sources.live.projections import conjunction, idle_projection, unique_names
from probes.sources.queue import IDLE_COLUMNS, idle_table, queue_attrs
from probes.sources.report import ReadReport
from probes.sources.settings import JobReading

__all__ = ["HISTORY_LOOKBACK_S", "IdleRead", "Schedds"]

HISTORY_LOOKBACK_S = 3600.0
"""How far back a schedd's history is scanned for the job of a claim not in its queue (s): a
job that left the queue longer ago than that is no claim's any more; its slot's ad is stale."""

Located = Sequence[tuple[str, classad2.ClassAd]]
"""Schedds to read: (name, location ad), as :meth:`Schedds.locate` gives them."""


@dataclass
class IdleRead:
    """Idle demand of the schedds that answered; ``failures``: source -> why, for the others."""

    idle: pd.DataFrame | None
    report: ReadReport
    failures: dict[str, str] = field(default_factory=dict)


class Schedds:
    """The schedd queries of a pool (``groups``: its collectors, as
    :func:`~probes.sources.live.calls.replica_groups` lists them)."""

    def __init__(
        self, calls: Calls, pool: PoolSettings, groups: Sequence[Sequence[str | None]], reading: JobReading
    ) -> None:
        self.calls = calls
        self.pool = pool
        self.groups = groups
        self.reading = reading

    def locate(self) -> tuple[list[tuple[str, classad2.ClassAd]], dict[str, str]]:
        """The schedds to read, (name, location ad), each once; and the configured ones not found."""
        found: dict[str, classad2.ClassAd] = {}
        for group in self.groups:
            ads, _ = self.calls.failover(group, "locate schedds", lambda c: c.locateAll(htcondor2.DaemonType.Schedd))
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

    def idle(self, schedds: Located) -> IdleRead:
        """The idle jobs of every schedd, grouped by autocluster."""
        constraint = conjunction("JobStatus == 1", self.pool.job_constraint)
        frames, report, failures = [], ReadReport(), {}
        for name, location in schedds:
            what = f"schedd {name}: idle jobs"
            try:
                schedd = self.calls.schedd(name, location)
                ads = self.calls.projected(
                    "idle",
                    what,
                    idle_projection(self.reading),
                    functools.partial(self._ask_idle, schedd, what, constraint),
                )
            except SourceError as exc:
                failures[f"schedd:{name}"] = str(exc)
                continue
            columns, rep = columns_from_classads(ads, queue_attrs(self.reading), origin=f"schedd {name}")
            report = report | rep
            frames.append(idle_table(columns, self.reading, origin=f"schedd {name}"))
        if not frames and failures:
            return IdleRead(None, report, failures)  # nobody answered: no demand known, not "none"
        return IdleRead(stack(frames, IDLE_COLUMNS), report, failures)

    def _ask_idle(
        self, schedd: ScheddLike, what: str, constraint: str, projection: list[str]
    ) -> list[classad2.ClassAd]:
        # the idle jobs themselves: with QueryOpt.AutoCluster a status constraint answers nothing
        return self.calls.ads(
            what, lambda: schedd.query(constraint=constraint, projection=projection, opts=htcondor2.QueryOpt.Default)
        )

    def job_identities(
        self, schedds: Located, claimed: Collection[str], *, now: float
    ) -> tuple[pd.DataFrame, dict[str, str]]:
        """Who the jobs of the slots' claims are, by their own ads (the configured job
        credentials), and their ``JobStatus``: :data:`~probes.sources.job_identity.JOB_COLUMNS`;
        and the schedds that failed (source -> why), whose jobs keep their slots' names.

        Per schedd, its running jobs; then those of ``claimed`` (the allocations' ``GlobalJobId``,
        which begins with its schedd's name) that were not among them, whatever their status:
        first in its queue, then in its history back to :data:`HISTORY_LOOKBACK_S` before
        ``now`` (a job that has just left the queue; the scan stops there, so a claim of a long
        gone job costs no scan of the whole file)."""
        identity = self.reading.identity
        projection = unique_names(["GlobalJobId", "JobStatus", *(a.name for a in identity_attrs(identity))])
        running = conjunction("JobStatus == 2", self.pool.job_constraint)
        frames, failures = [], {}
        for name, location in schedds:
            what = f"schedd {name}: running jobs"
            try:
                schedd = self.calls.schedd(name, location)
                ads = self.calls.ads(
                    what,
                    lambda s=schedd: s.query(  # type: ignore[misc]
                        constraint=running, projection=projection, opts=htcondor2.QueryOpt.Default
                    ),
                )
            except SourceError as exc:
                failures[f"schedd:{name}"] = str(exc)
                continue
            ads = [ad for ad in ads if isinstance(ad.get("GlobalJobId"), str)]
            seen = {ad["GlobalJobId"] for ad in ads}
            others = sorted(j for j in claimed if j.partition("#")[0] == name and j not in seen)
            if others:
                try:
                    ads += self._claimed_jobs(name, schedd, others, projection, now)
                except SourceError as exc:  # the running jobs' names still serve
                    failures[f"schedd:{name}"] = str(exc)
            frames.append(self._jobs_table(ads))
        return (pd.concat(frames, ignore_index=True) if frames else jobs_table([], None)), failures

    def _claimed_jobs(
        self, name: str, schedd: ScheddLike, job_ids: list[str], projection: list[str], now: float
    ) -> list[classad2.ClassAd]:
        """The ads of ``job_ids`` in the schedd's queue, whatever their status, then of those
        not there in its recent history."""
        listed = conjunction(
            f"member(GlobalJobId, {{{', '.join(classad2.quote(j) for j in job_ids)}}})", self.pool.job_constraint
        )
        ads = self.calls.ads(
            f"schedd {name}: claimed jobs not running",
            lambda: schedd.query(constraint=listed, projection=projection, opts=htcondor2.QueryOpt.Default),
        )
        ads = [ad for ad in ads if isinstance(ad.get("GlobalJobId"), str)]
        gone = sorted(set(job_ids) - {ad["GlobalJobId"] for ad in ads})
        if not gone:
            return ads
        listed = conjunction(
            f"member(GlobalJobId, {{{', '.join(classad2.quote(j) for j in gone)}}})", self.pool.job_constraint
        )
        since = f"EnteredCurrentStatus < {int(now - HISTORY_LOOKBACK_S)}"
        history = self.calls.ads(
            f"schedd {name}: claimed jobs' history",
            lambda: list(schedd.history(constraint=listed, projection=projection, match=len(gone), since=since)),
        )
        return ads + [ad for ad in history if isinstance(ad.get("GlobalJobId"), str)]

    def _jobs_table(self, ads: list[classad2.ClassAd]) -> pd.DataFrame:
        def values(attr: str, ads: list[classad2.ClassAd] = ads) -> np.ndarray:
            return np.array([v if isinstance(v := ad.get(attr), str) else None for ad in ads], dtype=object)

        names = identities(values, len(ads), self.reading.identity)
        status = [v if isinstance(v := ad.get("JobStatus"), int) else None for ad in ads]
        return jobs_table([ad["GlobalJobId"] for ad in ads], names, status)
