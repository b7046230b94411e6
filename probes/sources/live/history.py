"""The history pass of a live pool: every schedd's new jobs, and where the next pass starts.

Per schedd, one ``Schedd.history(constraint, projection, since=...)`` call per pass, read as it
streams in (a chunk of ``pool.history_match`` jobs converted at a time). The schedd scans its
history file backwards from its end, in the order jobs left its queue, which is not the order
they ended; so the checkpoint is a position in that file, not a time: the scan stops
(``since``) at the newest jobs the last pass read, and every job answered before them is new,
however long ago it ended (:func:`probes.sources.checkpoints.new_schedd_jobs`, which also says
what is logged when a schedd's history lost that position or does not apply ``since``). One
scan of the file, however long the backlog: paging it by end time rescanned the file for every
page and lost, for good, a job found past a page's boundary that ended later than the
boundary. A checkpoint of an older probe (an end time and the ids at it) is read once more as
it was (the scan stopping ``pool.history_lookback_s`` before it) and left positioned. The
checkpoint is returned, never written here: it reaches the outbox in the transaction of the
records.
"""

from __future__ import annotations

import functools
import itertools
import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import classad2
import numpy as np
import pandas as pd

from probes.config import PoolSettings
from probes.errors import SourceError
from probes.sources.checkpoints import checkpoint_key, new_schedd_jobs
from probes.sources.classad import AdColumns, columns_from_classads
from probes.sources.frames import stack
from probes.sources.history import JOB_COLUMNS, job_attrs, jobs_table
from probes.sources.history_files import read_history_files
from probes.sources.live.calls import Calls, close_stream, missing_refs
from probes.sources.live.projections import history_constraint, history_projection, history_since
from probes.sources.report import ReadReport, ReadTally
from probes.sources.settings import JobReading

__all__ = ["PROGRESS_EVERY_S", "HistoryPass", "HistoryRead"]

log = logging.getLogger("fairacct.live")

PROGRESS_EVERY_S = 30.0
"""Seconds between the log lines of a long history answer's progress."""


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


def _failed(name: str, why: str) -> HistoryRead:
    return HistoryRead(stack([], JOB_COLUMNS), {}, ReadReport(), failures={f"schedd:{name}": why})


class HistoryPass:
    """The history queries of a pool's schedds.

    A long history answer (a first pass, a backfill, after an outage) says how far it got: a
    log line every ``progress_every_s``, and ``on_progress(schedd, ads)`` after each chunk (the
    command line draws a bar with it on a terminal).
    """

    def __init__(self, calls: Calls, pool: PoolSettings, reading: JobReading) -> None:
        self.calls = calls
        self.pool = pool
        self.reading = reading
        self.progress_every_s = PROGRESS_EVERY_S
        self.on_progress: Callable[[str, int], None] | None = None

    def read(self, schedds: Sequence[tuple[str, classad2.ClassAd]], checkpoint: Callable[[str], Any]) -> HistoryRead:
        """Every schedd's jobs past its checkpoint (``checkpoint(key)`` reads the committed one),
        all :meth:`pieces` as one."""
        frames: list[pd.DataFrame] = []
        checkpoints: dict[str, Any] = {}
        report = ReadReport()
        pages: dict[str, int] = {}
        failures: dict[str, str] = {}
        problems: dict[str, str] = {}
        for piece in self.pieces(schedds, checkpoint):
            frames.append(piece.jobs)
            checkpoints |= piece.checkpoints
            report = report | piece.report
            pages |= piece.pages
            failures |= piece.failures
            problems |= piece.problems
        return HistoryRead(stack(frames, JOB_COLUMNS), checkpoints, report, pages, failures, problems)

    def pieces(
        self, schedds: Sequence[tuple[str, classad2.ClassAd]], checkpoint: Callable[[str], Any]
    ) -> Iterator[HistoryRead]:
        """Every schedd's jobs past its checkpoint, each part with the checkpoint after it, to be
        committed before the next is read: one part of a schedd that is asked (its whole answer),
        parts of ``pool.history_piece`` jobs of one whose files are read (``pool.history_files``:
        :mod:`~probes.sources.history_files`)."""
        for name, location in schedds:
            key = checkpoint_key(name)
            mark = checkpoint(key)
            if name in self.pool.history_files:
                yield from self._file_pieces(name, key, mark)
                continue
            try:
                jobs, n, rep = self._schedd_history(name, location, mark)
            except SourceError as exc:
                yield _failed(name, str(exc))
                continue
            if mark and not mark.get("tail"):
                log.info(
                    "schedd %s: a checkpoint without a position in the history, read once more by its end time", name
                )
            fresh, advanced, problem = new_schedd_jobs(jobs, mark, schedd=f"schedd {name}")
            if problem:
                log.warning("%s", problem)
            marks = {key: advanced} if mark is not None or len(fresh) else {}
            yield HistoryRead(fresh, marks, rep, {name: n}, {}, {f"schedd:{name}": problem} if problem else {})

    def _file_pieces(self, name: str, key: str, mark: Mapping[str, Any] | None) -> Iterator[HistoryRead]:
        """:func:`read_history_files` of schedd ``name``, as parts of the pass."""
        path = self.pool.history_files[name]
        what = f"schedd {name}: history files"
        done = 0
        started = said = time.monotonic()

        def on_part(n: int) -> None:
            nonlocal done, said
            done += n
            if self.on_progress is not None:
                self.on_progress(name, n)
            if (now := time.monotonic()) - said >= self.progress_every_s:
                said = now
                log.info("%s: %d jobs read so far, %.0f a second", what, done, done / max(now - started, 1e-9))

        try:
            for piece in read_history_files(name, path, mark, self.reading, self.pool.history_piece, on_part=on_part):
                if piece.problem:
                    log.warning("%s", piece.problem)
                problems = {f"schedd:{name}": piece.problem} if piece.problem else {}
                marks = {key: piece.mark} if mark is not None or piece.mark.get("tail") else {}
                yield HistoryRead(piece.jobs, marks, piece.report, {name: 0}, {}, problems)
        except SourceError as exc:
            yield _failed(name, str(exc))

    def _schedd_history(
        self, name: str, location: classad2.ClassAd, mark: Mapping[str, Any] | None
    ) -> tuple[pd.DataFrame, int, ReadReport]:
        """One schedd's answer past ``mark``, in its order (newest first in its history file): the
        jobs table of one scan, read as it streams in; and the calls made."""
        what = f"schedd {name}: history"
        constraint = history_constraint(self.pool.job_constraint, mark)
        since = history_since(mark, self.pool.history_lookback_s)
        schedd = self.calls.schedd(name, location)
        for calls in (1, 2):
            projection = self.calls.projection("history", history_projection(self.reading))
            ask = functools.partial(schedd.history, constraint=constraint, projection=projection, match=-1, since=since)
            answer = self.calls.call(what, ask)
            read = self._read_answer(what, name, answer, projection, again=calls == 1)
            if read is not None:
                return read[0], calls, read[1]
        raise AssertionError("unreachable: the second answer is always read whole")

    def _read_answer(
        self, what: str, name: str, answer: Any, projection: list[str], *, again: bool
    ) -> tuple[pd.DataFrame, ReadReport] | None:
        """The jobs table of one history answer, converted ``pool.history_match`` ads at a time, so
        that a long answer is never held as ClassAds whole. None when ``again`` and the answer's
        expressions refer to attributes the projection lacks: they are learned, and the caller asks
        again (once)."""
        if isinstance(answer, (str, bytes, Mapping)) or not isinstance(answer, Iterable):
            raise SourceError(f"{what}: expected a list of ClassAds, got {type(answer).__name__}")
        attrs = job_attrs(self.reading)
        origin = f"schedd {name}"
        tally = ReadTally()
        parts: list[AdColumns] = []
        ads = iter(answer)
        started = said = time.monotonic()
        try:
            for first in itertools.count(0, self.pool.history_match):
                chunk = self.calls.next_ads(what, ads, self.pool.history_match, first)
                if not chunk:
                    break
                if self.on_progress is not None:
                    self.on_progress(name, len(chunk))
                if (now := time.monotonic()) - said >= self.progress_every_s:
                    said, done = now, first + len(chunk)
                    log.info("%s: %d jobs read so far, %.0f a second", what, done, done / max(now - started, 1e-9))
                missing = missing_refs(chunk, projection)
                if missing:
                    self.calls.learned["history"] |= missing
                    then = "asking again with them" if again else "asked for from now on"
                    refs = ", ".join(sorted(missing))
                    log.info("%s: the answer refers to %s, which the projection lacked; %s", what, refs, then)
                    if again:
                        return None
                columns, rep = columns_from_classads(chunk, attrs, origin=origin)
                columns.line = columns.line + first  # the ad's place in the whole answer
                columns.raw = None  # kept for evaluating expressions, which this table never does
                tally.merge(rep.shifted(first))
                parts.append(columns)
        finally:
            close_stream(ads)  # a stream left early (asked again, a failure) frees its worker
        jobs = jobs_table(AdColumns.concat(parts, attrs), self.reading, tally)  # impossible jobs quarantined
        usable = jobs["job_id"].notna().to_numpy() & np.isfinite(pd.to_numeric(jobs["end"]).to_numpy(dtype=np.float64))
        if not usable.all():
            tally.reject("GlobalJobId or end time: missing, the job was skipped", int((~usable).sum()))
            jobs = jobs[usable].reset_index(drop=True)
        return jobs, tally.report()
