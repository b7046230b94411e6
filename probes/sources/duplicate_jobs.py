"""A job once, whatever the inputs: the same ``GlobalJobId`` read again is not a second job.

A site hands the readers overlapping inputs without meaning to: the same ad twice in a history
(a schedd that rewrote its file), the same file given twice, a ``condor_history`` dump given
beside the ``PER_JOB_HISTORY_DIR`` it was made from, a ``history.bak`` copy left in that folder.
Counted as they come, each would bill its jobs twice or three times and double their fairshare
usage. ``GlobalJobId`` ("schedd#cluster.proc#qdate") names one job of one schedd for ever, so
every read of one run or probe cycle shares one :class:`JobsSeen`: the first ad of a job is
kept, every later one is dropped, counted and named in the read's report
(:meth:`~probes.sources.report.ReadTally.duplicate`). Jobs without a ``GlobalJobId`` cannot be
told apart and are all kept (the readers count them: see :mod:`probes.sources.kinds`).

Memory: one reference per job read to its id string, which the jobs table holds anyway while
it is built (about 60 bytes a job beyond it when the table is streamed out).
"""

from __future__ import annotations

import numpy as np

from probes.sources.report import ReadTally

__all__ = ["JobsSeen"]


class JobsSeen:
    """The ``GlobalJobId`` of every job kept so far in one run (files, folders, dumps, copies)."""

    def __init__(self) -> None:
        self._ids: set[str] = set()

    def __len__(self) -> int:
        return len(self._ids)

    def first_reads(
        self, job_ids: np.ndarray, paths: np.ndarray, lines: np.ndarray, tally: ReadTally
    ) -> np.ndarray | None:
        """Which of the jobs ``job_ids`` (with the ``paths`` and ``lines`` they were read at)
        are read for the first time, as a boolean mask; None when all of them are (the usual
        case: no mask to apply). The others are counted and named in ``tally``."""
        seen = self._ids
        ids = job_ids.tolist()
        new = set(ids)
        if len(new) == len(ids) and None not in new and seen.isdisjoint(new):  # every id named, each once
            seen |= new
            return None
        new.discard(None)
        if len(new) == len(ids) - ids.count(None) and seen.isdisjoint(new):  # some ads without an id
            seen |= new
            return None
        keep = np.ones(len(ids), dtype=bool)
        for row, job_id in enumerate(ids):
            if job_id is None:
                continue
            if job_id in seen:
                keep[row] = False
                tally.duplicate(f"{job_id} ({paths[row]} line {int(lines[row])})")
            else:
                seen.add(job_id)
        return keep
