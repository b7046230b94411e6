"""The idle table: demand waiting in the queue, one row per autocluster and submitter.

Idle demand is read from the idle jobs themselves (``JobStatus == 1`` in a ``condor_q -long``
dump), grouped by ``AutoClusterId`` or, where a job has none, by its requests, and by who
waits: the jobs of an autocluster may belong to several submitters (the schedd's autoclusters
are not per owner), and the negotiator serves each submitter on its own, so each row names one
submitter, user, group and project (:mod:`probes.sources.credentials`). A
``condor_q -autocluster -long`` dump is accepted as well, but it lists the autoclusters of ALL
jobs, running ones included, and a status constraint on such a query returns nothing on
HTCondor 25; so its counts are demand only after the jobs seen running (the dynamic slots of a
status dump of the same instant) are taken out of them; it names nobody.

Requests are in HTCondor's units (cores, MiB, KiB, devices). ``RequestMemory`` and
``RequestDisk`` are often expressions; they are evaluated with classad2 in the job's context.
"""

from __future__ import annotations

import os
import re
from collections.abc import Collection, Iterable, Sequence

import numpy as np
import pandas as pd

from probes.errors import SourceError
from probes.sources.classad import AdColumns, Attr, Kind, unique_attrs
from probes.sources.classad.limits import AMOUNT
from probes.sources.credentials import IDENTITY_COLUMNS, identities, identity_attrs
from probes.sources.frames import stack
from probes.sources.inputs import is_blank
from probes.sources.kinds import MY_TYPE, AdKind, KindCheck
from probes.sources.report import ReadReport, ReadTally
from probes.sources.settings import JobReading

__all__ = [
    "IDLE_COLUMNS",
    "cluster_proc",
    "expand_job_ids",
    "idle_table",
    "queue_attrs",
    "read_idle",
    "running_job_ids",
]

IDLE = 1
REQUESTS = ("request_cpus", "request_memory", "request_disk", "request_gpus")
IDLE_COLUMNS = (
    "schedd", "autocluster_id", *REQUESTS, "count", *IDENTITY_COLUMNS, "example_job", "source", "line",
)  # fmt: skip

_QUEUE_ATTRS = [
    Attr("JobStatus", Kind.NUMBER),
    Attr("AutoClusterId", Kind.NUMBER),
    Attr("GlobalJobId", Kind.STRING),
    Attr("ClusterId", Kind.NUMBER),
    Attr("ProcId", Kind.NUMBER),
    Attr("RequestCpus", Kind.NUMBER, limits=AMOUNT),
    Attr("RequestMemory", Kind.NUMBER, limits=AMOUNT),
    Attr("RequestDisk", Kind.NUMBER, limits=AMOUNT),
    Attr("RequestGPUs", Kind.NUMBER, limits=AMOUNT),
    Attr("JobCount", Kind.NUMBER, limits=AMOUNT),  # autocluster dumps only
    Attr("JobIds", Kind.STRING),
]


def queue_attrs(reading: JobReading = JobReading()) -> list[Attr]:
    """The job attributes the idle table needs: status, autocluster, requests, and who waits
    (the identity attributes of ``reading``)."""
    return unique_attrs([*_QUEUE_ATTRS, *identity_attrs(reading.identity)])


QUEUE_ADS = AdKind(
    "Job", ("JobStatus", "JobCount"), "job ads (condor_q -long) or autoclusters (condor_q -autocluster -long)"
)


def read_idle(
    paths: Sequence[str | os.PathLike[str]],
    reading: JobReading = JobReading(),
    *,
    running: Collection[str] | None = None,
    strict: bool = False,
) -> tuple[pd.DataFrame, ReadReport]:
    """Read queue dumps into the idle table; ``reading`` names who waits.

    ``running`` holds the ids ("cluster.proc", or GlobalJobIds) of jobs known to be running;
    it is required for ``condor_q -autocluster`` dumps and ignored for job dumps.
    """
    from probes.sources.classad import read_ads  # the scanner and numba: only where ads are read

    frames, tally = [], ReadTally()
    for path in paths:
        if is_blank(path):  # condor_q -long of an empty queue writes nothing: no idle job
            continue
        ads, rep = read_ads(path, [*queue_attrs(reading), MY_TYPE], strict=strict, keep_raw=True)
        tally.merge(rep)
        check = KindCheck(QUEUE_ADS)
        ads = check.keep(ads, tally)
        check.verdict(path, len(rep.malformed))
        frames.append(idle_table(ads, reading, running=running, origin=os.fspath(path)))
    return stack(frames, IDLE_COLUMNS), tally.report()


def idle_table(
    ads: AdColumns, reading: JobReading = JobReading(), *, running: Collection[str] | None = None, origin: str = ""
) -> pd.DataFrame:
    """Group idle jobs (or autoclusters) into the idle table (:data:`IDLE_COLUMNS`); ``ads``
    holds :func:`queue_attrs` of ``reading``."""
    if not len(ads):
        return pd.DataFrame(columns=list(IDLE_COLUMNS))
    is_autocluster = np.isnan(ads["JobStatus"]) & ~np.isnan(ads["JobCount"])
    if is_autocluster.all():
        return _from_autoclusters(ads, running, origin)
    jobs = np.flatnonzero(ads["JobStatus"] == IDLE)
    frame = pd.DataFrame(
        {
            "schedd": _schedd(ads["GlobalJobId"][jobs]),
            "autocluster_id": ads["AutoClusterId"][jobs],
            **_requests(ads, jobs),
            **identities(lambda attr: ads[attr][jobs], len(jobs), reading.identity),
            "example_job": ads.raw[jobs] if ads.raw is not None else None,
            "source": ads.path[jobs],
            "line": ads.line[jobs],
        }
    )
    # Jobs of an autocluster request the same; jobs without one (not yet negotiated) are
    # grouped by what they request.
    grouped = frame.groupby(["schedd", "autocluster_id", *REQUESTS, *IDENTITY_COLUMNS], sort=True, dropna=False)
    out = grouped.agg(
        count=("line", "size"),
        example_job=("example_job", "first"),
        source=("source", "first"),
        line=("line", "first"),
    ).reset_index()
    return out.reindex(columns=list(IDLE_COLUMNS))


def _from_autoclusters(ads: AdColumns, running: Collection[str] | None, origin: str) -> pd.DataFrame:
    if running is None:
        raise SourceError(
            f"{origin}: a condor_q -autocluster dump counts running jobs too; give the status dump of the "
            "same instant (--status-file) so that they can be taken out, or use a condor_q -long dump"
        )
    local = {_local_id(j) for j in running}
    all_rows = np.arange(len(ads))
    ids = [expand_job_ids(text) for text in ads["JobIds"]]
    idle_counts = [
        (count if not isinstance(text, str) else len([j for j in expanded if j not in local]))
        for count, text, expanded in zip(ads["JobCount"], ads["JobIds"], ids, strict=True)
    ]
    frame = pd.DataFrame(
        {
            "schedd": None,
            "autocluster_id": ads["AutoClusterId"],
            **_requests(ads, all_rows),
            "count": np.array(idle_counts, dtype=np.int64),
            **dict.fromkeys(IDENTITY_COLUMNS),
            "example_job": ads.raw if ads.raw is not None else None,
            "source": ads.path,
            "line": ads.line,
        }
    )
    return frame[frame["count"] > 0].reset_index(drop=True).reindex(columns=list(IDLE_COLUMNS))


_RANGE = re.compile(r"(\d+)\.(\d+)\s*\.\.\.\s*(\d+)\.(\d+)")


def expand_job_ids(text: object) -> list[str]:
    """'11.0 ... 11.2 12.5' -> ['11.0', '11.1', '11.2', '12.5'] (condor_q -autocluster's JobIds)."""
    if not isinstance(text, str):
        return []
    out: list[str] = []
    rest = text
    for m in _RANGE.finditer(text):
        c1, p1, c2, p2 = map(int, m.groups())
        if c1 == c2:
            out += [f"{c1}.{p}" for p in range(p1, p2 + 1)]
        else:  # a range over clusters is written only for single-proc clusters
            out += [f"{c}.0" for c in range(c1, c2 + 1)]
        rest = rest.replace(m.group(0), " ")
    out += [t for t in rest.split() if re.fullmatch(r"\d+\.\d+", t)]
    return out


def running_job_ids(allocations: pd.DataFrame) -> set[str]:
    """The "cluster.proc" ids of the jobs holding the dynamic slots of a snapshot."""
    return {_local_id(j) for j in allocations["job_id"].dropna()}


def _local_id(job_id: str) -> str:
    """'schedd#11.2#1795269336' -> '11.2'; '11.2' stays."""
    parts = job_id.split("#")
    return parts[1] if len(parts) == 3 else job_id


def cluster_proc(job_id: str) -> tuple[int, int] | None:
    """(ClusterId, ProcId) of a GlobalJobId: 'schedd#11.2#1795269336' -> (11, 2); None when it
    does not say."""
    cluster, dot, proc = _local_id(job_id).partition(".")
    return (int(cluster), int(proc)) if dot and cluster.isdigit() and proc.isdigit() else None


def _schedd(global_ids: Iterable[object]) -> list[str | None]:
    return [g.split("#")[0] if isinstance(g, str) and "#" in g else None for g in global_ids]


def _requests(ads: AdColumns, rows: np.ndarray) -> dict[str, np.ndarray]:
    return {
        "request_cpus": np.where(np.isnan(ads["RequestCpus"][rows]), 1.0, ads["RequestCpus"][rows]),
        "request_memory": ads["RequestMemory"][rows],
        "request_disk": ads["RequestDisk"][rows],
        "request_gpus": np.nan_to_num(ads["RequestGPUs"][rows], nan=0.0),
    }
