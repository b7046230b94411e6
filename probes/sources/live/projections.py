"""What a live query asks for: its projection and its constraint, as pure functions.

Projections hold exactly what the tables and the configuration need: the attributes the table
builders read, the configured extra attributes, the attributes that the configured ClassAd
expressions (partition ``match``, speed and cost expressions) refer to, and those that
HTCondor's default ``RequestMemory``/``RequestDisk`` expressions refer to. The constraints of a
history pass, and where its backward scan stops (``since``), are read off the checkpoint
(:mod:`probes.sources.checkpoints` has the rules).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import classad2

from probes.sources.classad import Attr
from probes.sources.history import job_attrs
from probes.sources.queue import cluster_proc, queue_attrs
from probes.sources.settings import JobReading, SlotReading
from probes.sources.status import child_list_attrs, slot_attrs

__all__ = [
    "END_TIME",
    "REQUEST_INPUTS",
    "conjunction",
    "history_constraint",
    "history_part_constraint",
    "history_projection",
    "history_since",
    "idle_projection",
    "job_part",
    "slot_projection",
    "unique_names",
]

#: A job's end as the jobs table has it: its completion, or for a removed job (CompletionDate
#: 0 or missing) the time it entered its last status.
END_TIME = "((CompletionDate =!= undefined && CompletionDate > 0) ? CompletionDate : EnteredCurrentStatus)"

#: Attributes that HTCondor's default request expressions refer to (RequestMemory is
#: ``ifThenElse(MemoryUsage =!= undefined, MemoryUsage, (ImageSize + 1023) / 1024)``,
#: MemoryUsage ``((ResidentSetSize + 1023) / 1024)``, RequestDisk ``DiskUsage``): a projection
#: without them would turn those requests into undefined.
REQUEST_INPUTS = ("MemoryUsage", "ResidentSetSize", "ImageSize", "DiskUsage")

_AUTOCLUSTER_ONLY = {"jobcount", "jobids"}  # attributes of autocluster ads, not of job ads


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
    return unique_names([*(a.name for a in attrs), *more])


def unique_names(names: Sequence[str]) -> list[str]:
    """``names`` without repeats (ClassAd names are case-insensitive: the first spelling is
    kept) and without empty names, in order."""
    first: dict[str, str] = {}
    for name in names:
        if name:
            first.setdefault(name.lower(), name)
    return list(first.values())


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


def conjunction(*parts: str) -> str:
    """The ClassAd constraint that all of ``parts`` hold (empty parts left out; none: ``true``)."""
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
        return conjunction(job_constraint)
    return f"({job_constraint.strip()}) || GlobalJobId == {classad2.quote(tail[0])}"


#: Which part of a history a job is in, of ``m`` parts: ``(ClusterId + ProcId) % m``, and part 0
#: for an ad without both (never the case in a schedd's history, but no job may fall between).
#: Part ``r`` of ``m`` is parts ``r`` and ``r + m`` of ``2 m``: a part too big for one answer
#: splits in two.
_PART = "ifThenElse(isInteger(ClusterId) && isInteger(ProcId), (ClusterId + ProcId) % {m}, 0) == {r}"


def history_part_constraint(job_constraint: str, checkpoint: Mapping[str, Any] | None, part: tuple[int, int],
                            newest: str) -> str:  # fmt: skip
    """The constraint of part ``part`` (``(r, m)``) of a pass over a schedd's history: the
    configured constraint and the part's jobs, and two jobs whatever they are, that place the
    answer in the file: the checkpoint's newest job (where the pass stops) and ``newest``, the
    newest job when the pass began (where it starts: the jobs answered before it were written
    since, and are the next pass's)."""
    r, m = part
    marks = [_job_is(newest)]
    tail = checkpoint.get("tail") if checkpoint else None
    if tail:
        marks.append(_job_is(tail[0]))
    return " || ".join([f"({conjunction(job_constraint, _PART.format(r=r, m=m))})", *marks])


def _job_is(job: str) -> str:
    return f"GlobalJobId == {classad2.quote(job)}"


def job_part(job_id: str, m: int) -> int | None:
    """The part of ``m`` the job of GlobalJobId ``job_id`` (``schedd#cluster.proc#time``) is in,
    as :func:`history_part_constraint` has it; None when the id does not say."""
    ids = cluster_proc(job_id)
    return None if ids is None else sum(ids) % m


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
