"""A bill named after its job, not after what the slot's ad kept of it; and never a job's
bill while its schedd says the job is not running.

A dynamic slot names its job's ``AcctGroupUser``, ``AcctGroup`` and ``ProjectName`` only when
the startds copy them (``STARTD_JOB_ATTRS``); without that a bill has no project and its user
comes from the slot's ``AccountingGroup``, whose last component cuts a user with a dot
(``alice.smith`` becomes ``smith``, and the group ``group_phys.cms.alice``). The schedds know:
a live probe asks each for its jobs' names (:meth:`~probes.sources.live.LivePool.job_identities`)
and :func:`adopt_job_identities` gives each allocation its job's submitter, user, group and
project, so an ``accounting_group_user`` pool is billed right without configuring its execute
nodes. Not only the running jobs: a slot's ad outlives its job by a few seconds (the job has
completed, been removed, or left the queue for the history), and the last bill of a job must
name it as the ones before did and as its history record will (issue 34): the schedd is asked
for those jobs whatever their status, in its queue and then in its recent history.

The same answer says which claims are not running their job: a dynamic slot whose job the
schedd lists as idle or held (a job evicted and requeued, put on hold, whose slot's ad is still
in the collector) is not billed to it; :func:`adopt_job_identities` returns those rows apart,
for the reading's report. A claim whose job the schedd does not know at all keeps its slot's
names, as does every claim of a schedd that did not answer (or answered too late); never in
silence: :func:`named_after_slots` says, per schedd, how many bills were and why.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

import numpy as np
import pandas as pd

__all__ = ["JOB_COLUMNS", "NAMES", "NOT_RUNNING", "adopt_job_identities", "jobs_table", "named_after_slots"]

NAMES = ("submitter", "user", "group", "project")
"""What a job's own ad names better than its slot's."""

JOB_COLUMNS = ("job_id", *NAMES, "status")
"""The schedds' answer (:func:`jobs_table`): ``status`` is the job's ``JobStatus``, None when
its ad does not say."""

NOT_RUNNING = {1: "idle", 5: "held"}
"""The ``JobStatus`` values whose jobs are never billed (1 idle, 5 held), by name."""


def adopt_job_identities(allocations: pd.DataFrame, jobs: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``allocations`` (column ``job_id``, and :data:`NAMES`) with each name its job has
    (``jobs``: :data:`JOB_COLUMNS`, as the schedds answered) in place of the slot's, a name the
    job lacks keeping the slot's; and apart, the allocations whose job the schedd lists as
    idle or held (:data:`NOT_RUNNING`), with a column ``job_status`` naming which. New tables."""
    if not len(allocations) or not len(jobs) or "job_id" not in allocations:
        return allocations, allocations.iloc[:0].assign(job_status=pd.Series(dtype=object))
    known = jobs.drop_duplicates("job_id").set_index("job_id")
    out = allocations.copy()
    for name in NAMES:
        if name not in known:
            continue
        theirs = out["job_id"].map(known[name])
        use = theirs.notna().to_numpy()
        if name not in out:
            out[name] = None
        if use.any():
            out[name] = out[name].mask(use, theirs)
    status = out["job_id"].map(known["status"]) if "status" in known else pd.Series(None, index=out.index)
    idle = status.map(lambda s: NOT_RUNNING.get(int(s)) if isinstance(s, (int, float)) and s == s else None)
    unbilled = idle.notna().to_numpy()
    return (
        out.loc[~unbilled].reset_index(drop=True),
        out.loc[unbilled].assign(job_status=idle[unbilled].to_numpy()).reset_index(drop=True),
    )


def jobs_table(
    job_ids: Sequence[str], names: dict[str, np.ndarray] | None, status: Sequence[object] = ()
) -> pd.DataFrame:
    """The schedds' jobs as :data:`JOB_COLUMNS` (names None where the job has none; ``names``
    None: no job; ``status``: each job's ``JobStatus``, or None)."""
    n = len(job_ids)
    empty = np.array([], dtype=object)
    return pd.DataFrame(
        {
            "job_id": np.array(job_ids, dtype=object),
            **{k: empty if names is None else names[k] for k in NAMES},
            "status": np.array(list(status) if len(status) else [None] * n, dtype=object),
        }
    )


def named_after_slots(claimed: Collection[str], jobs: pd.DataFrame, failed: Mapping[str, str]) -> dict[str, str]:
    """The claims (``claimed``: their jobs' ``GlobalJobId``) whose job no schedd named in ``jobs``,
    so that their bills keep the slots' names, by schedd: ``"schedd:NAME (jobs' names)"`` -> one
    line saying how many, one of them, and why: the schedd's failure in ``failed`` (by
    ``"schedd:NAME"``: it did not answer, or not in time), else that it did not list the job.
    A slot's ``AccountingGroup`` cuts a user with a dot (``john.smith`` billed as ``smith``) and
    names no project, so such a bill is said, never silent."""
    named = set(jobs["job_id"]) if len(jobs) else set()
    by_schedd: dict[str, list[str]] = {}
    for job in sorted(set(claimed) - named):
        by_schedd.setdefault(job.partition("#")[0], []).append(job)
    out = {}
    for schedd, ids in by_schedd.items():
        why = failed.get(f"schedd:{schedd}") or "it listed none of these jobs (in its queue or its recent history)"
        out[f"schedd:{schedd} (jobs' names)"] = (
            f"{len(ids)} claim(s) billed under their slots' names, not their jobs' (a user with a dot cut, no "
            f"project), e.g. {ids[0]}: {' '.join(why.split())}"
        )
    return out
