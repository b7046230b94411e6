"""A bill named after its job, not after what the slot's ad kept of it.

A dynamic slot names its job's ``AcctGroupUser``, ``AcctGroup`` and ``ProjectName`` only when
the startds copy them (``STARTD_JOB_ATTRS``); without that a bill has no project and its user
comes from the slot's ``AccountingGroup``, whose last component cuts a user with a dot
(``john.smith`` becomes ``smith``). The schedds know: a live probe asks each for its running
jobs' names (:meth:`~probes.sources.live.LivePool.running_identities`) and
:func:`adopt_job_identities` gives each allocation its job's, so an ``accounting_group_user``
pool is billed right without configuring its execute nodes.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["NAMES", "adopt_job_identities", "running_table"]

NAMES = ("user", "group", "project")
"""What a job's own ad names better than its slot's."""


def adopt_job_identities(allocations: pd.DataFrame, jobs: pd.DataFrame) -> pd.DataFrame:
    """``allocations`` (column ``job_id``, and :data:`NAMES`) with each name its running job has
    (``jobs``: ``job_id`` and :data:`NAMES`, the schedds' running jobs) in place of the slot's;
    a name the job lacks keeps the slot's. A new table."""
    if not len(allocations) or not len(jobs) or "job_id" not in allocations:
        return allocations
    known = jobs.drop_duplicates("job_id").set_index("job_id")
    out = allocations.copy()
    for name in NAMES:
        if name not in out or name not in known:
            continue
        theirs = out["job_id"].map(known[name])
        use = theirs.notna().to_numpy()
        if use.any():
            out[name] = out[name].mask(use, theirs)
    return out


def running_table(job_ids: list[str], names: dict[str, np.ndarray] | None) -> pd.DataFrame:
    """The running jobs' table: ``job_id`` and :data:`NAMES` (None where the job has none;
    ``names`` None: no job)."""
    empty = np.array([], dtype=object)
    return pd.DataFrame(
        {"job_id": np.array(job_ids, dtype=object), **{n: empty if names is None else names[n] for n in NAMES}}
    )
