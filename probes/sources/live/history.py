"""The history pass of a live pool: every schedd's new jobs, and where the next pass starts.

Per schedd, one ``Schedd.history(constraint, projection, match, since=...)`` call per pass, read
as it streams in (a chunk of ``pool.history_match`` jobs converted at a time), for a backlog of
up to ``pool.history_piece`` jobs: the bindings' worker holds an answer whole, so a longer one is
asked in parts (:meth:`HistoryPass._query_pieces`), and a schedd whose history files the probe
reads (``pool.history_files``) is read from them (:mod:`probes.sources.history_files`); each
part is handed on with its checkpoint, to be committed before the next. The schedd scans its
history file backwards from its end, in the order jobs left its queue, which is not the order
they ended; so the checkpoint is a position in that file, not a time: the scan stops
(``since``) at the newest jobs the last pass read, and every job answered before them is new,
however long ago it ended (:func:`probes.sources.checkpoints.new_schedd_jobs`, which also says
what is logged when a schedd's history lost that position or does not apply ``since``). Paging
it by end time (an earlier release) lost, for good, a job found past a page's boundary that
ended later than the boundary: the parts here are of jobs by id, each placed in the file by the
job that was newest when the pass began. A checkpoint of an older probe (an end time and the
ids at it) is read once more as it was (the scan stopping ``pool.history_lookback_s`` before
it) and left positioned. The checkpoint is returned, never written here: it reaches the outbox
in the transaction of the records.
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
from probes.sources.checkpoints import TAIL, checkpoint_key, new_schedd_jobs, schedd_mark
from probes.sources.classad import AdColumns, columns_from_classads
from probes.sources.frames import stack
from probes.sources.history import JOB_COLUMNS, job_attrs, jobs_table, placed_jobs
from probes.sources.history_files import read_history_files
from probes.sources.live.calls import Calls, close_stream, missing_refs
from probes.sources.live.projections import (
    history_constraint,
    history_part_constraint,
    history_projection,
    history_since,
    job_part,
)
from probes.sources.report import ReadReport, ReadTally
from probes.sources.settings import JobReading

__all__ = ["PROGRESS_EVERY_S", "HistoryPass", "HistoryRead"]

log = logging.getLogger("fairacct.live")

SAMPLE_PARTS = 64
"""A backlog longer than a piece is sized by counting one part of this many (ids only)."""

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


def _settled(mark: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A schedd's checkpoint without the parts of a pass in progress (``pass``)."""
    return {k: v for k, v in mark.items() if k != "pass"} if mark else None


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
                yield from self._query_pieces(name, location, key, mark)
            except SourceError as exc:
                yield _failed(name, str(exc))

    def _query_pieces(
        self, name: str, location: classad2.ClassAd, key: str, mark: Mapping[str, Any] | None
    ) -> Iterator[HistoryRead]:
        """Schedd ``name``'s jobs past ``mark``, asked of it: its whole answer when it holds at
        most ``pool.history_piece`` of them (one call, the usual pass), else in parts.

        The bindings' worker holds an answer whole, so a longer backlog is asked for in parts
        of the jobs by ``(ClusterId + ProcId) % m``, each part one call and one scan of the
        backlog by the schedd (:func:`history_part_constraint`): ``m`` from a sample (part 0 of
        64, only the ids), a part whose answer still reaches the bound split in two. Every part
        answers the job that was newest when the pass began, and the jobs before it there are
        left for the next pass; every part's checkpoint says which parts are left and where the
        pass stops (``pass``), so a pass cut short resumes with them."""
        progress = mark.get("pass") if mark else None
        if mark and not mark.get("tail") and progress is None:
            log.info("schedd %s: a checkpoint without a position in the history, read once more by its end time", name)
        if progress is None:
            piece = self.pool.history_piece
            constraint = history_constraint(self.pool.job_constraint, mark)
            jobs, n, rep = self._schedd_history(name, location, mark, constraint, match=piece + 1)  # +1 says "longer"
            if rep.ads <= piece:  # the whole backlog in one answer
                fresh, advanced, problem = new_schedd_jobs(jobs, mark, schedd=f"schedd {name}")
                if problem:
                    log.warning("%s", problem)
                marks = {key: advanced} if mark is not None or len(fresh) else {}
                yield HistoryRead(fresh, marks, rep, {name: n}, {}, {f"schedd:{name}": problem} if problem else {})
                return
            progress = self._plan(name, location, mark, jobs)
        yield from self._parts(name, location, key, mark, progress)

    def _plan(
        self, name: str, location: classad2.ClassAd, mark: Mapping[str, Any] | None, first: pd.DataFrame
    ) -> dict[str, Any]:
        """The parts of a backlog longer than a piece, ``first`` its newest jobs (an answer cut
        at the bound): the job they start from, the tail they end with, the parts to ask."""
        ids = [i for i in first["job_id"] if isinstance(i, str) and job_part(i, 2) is not None]
        if not ids:
            raise SourceError(
                f"schedd {name}: history: no job of its newest {len(first)} has a GlobalJobId to start from"
            )
        newest = ids[0]
        sample = self._count_part(name, location, mark, newest, (0, SAMPLE_PARTS))
        backlog = max(sample * SAMPLE_PARTS, self.pool.history_piece + 1)
        m = 2
        while backlog * 1.25 / m > self.pool.history_piece:
            m *= 2
        log.info(
            "schedd %s: history: some %d new jobs, more than history_piece (%d): asked in %d parts, each a scan of "
            "the backlog by the schedd",
            name, backlog, self.pool.history_piece, m,
        )  # fmt: skip
        return {"newest": newest, "tail": ids[:TAIL], "todo": [[r, m] for r in range(m)], "from": _settled(mark)}

    def _count_part(
        self, name: str, location: classad2.ClassAd, mark: Mapping[str, Any] | None, newest: str, part: tuple[int, int]
    ) -> int:
        """How many jobs of part ``part`` the backlog holds from ``newest`` on (their ids only)."""
        constraint = history_part_constraint(self.pool.job_constraint, mark, part, newest)
        since = history_since(mark, self.pool.history_lookback_s)
        stop = (mark.get("tail") or [None])[0] if mark else None
        ask = functools.partial(
            self.calls.schedd(name, location).history,
            constraint=constraint, projection=["GlobalJobId"], match=-1, since=since,
        )  # fmt: skip
        ads = iter(self.calls.call(f"schedd {name}: history sample", ask))
        counted, started = 0, False
        try:
            for ad in ads:
                job = ad.get("GlobalJobId")
                if job == stop:
                    break
                if started or job == newest:
                    started = True
                    counted += job != newest
        finally:
            close_stream(ads)
        return counted

    def _parts(
        self,
        name: str,
        location: classad2.ClassAd,
        key: str,
        mark: Mapping[str, Any] | None,
        progress: Mapping[str, Any],
    ) -> Iterator[HistoryRead]:
        """Each part of ``progress`` asked and handed on with the checkpoint after it."""
        base = progress["from"]  # where the pass stops, as it was when it began
        current = _settled(mark)
        todo = [list(p) for p in progress["todo"]]
        newest = progress["newest"]
        while todo:
            r, m = todo[0]
            constraint = history_part_constraint(self.pool.job_constraint, base, (r, m), newest)
            bound = self.pool.history_piece + 3  # a piece, the two jobs that place it, one more says "longer"
            jobs, n, rep = self._schedd_history(name, location, base, constraint, match=bound)
            if rep.ads >= bound:  # still too long for one answer: in two
                todo[:1] = [[r, 2 * m], [r + m, 2 * m]]
                continue
            ids = jobs["job_id"].to_numpy(dtype=object)
            at = np.flatnonzero(ids == newest)
            if not len(at):
                raise SourceError(
                    f"schedd {name}: history: job {newest}, the newest when this pass began, is no longer in it; "
                    "the pass starts again"
                )
            first = int(at[0]) + (0 if job_part(newest, m) == r else 1)
            fresh, _, problem = new_schedd_jobs(jobs.iloc[first:].reset_index(drop=True), base, schedd=f"schedd {name}")
            if problem:
                log.warning("%s", problem)
            todo = todo[1:]
            if todo:  # the stop of the scan stays where it was until the last part
                current = schedd_mark(_settled(current), [], fresh) | {"pass": {**progress, "todo": todo}}
            else:
                current = schedd_mark(_settled(current), list(progress["tail"]), fresh)
            yield HistoryRead(fresh, {key: current}, rep, {name: n}, {}, {f"schedd:{name}": problem} if problem else {})

    def _file_pieces(self, name: str, key: str, mark: Mapping[str, Any] | None) -> Iterator[HistoryRead]:
        """:func:`read_history_files` of schedd ``name``, as parts of the pass."""
        path = self.pool.history_files[name]
        on_part = self._progress(name, f"schedd {name}: history files")
        try:
            for piece in read_history_files(name, path, mark, self.reading, self.pool.history_piece, on_part=on_part):
                if piece.problem:
                    log.warning("%s", piece.problem)
                problems = {f"schedd:{name}": piece.problem} if piece.problem else {}
                marks = {key: piece.mark} if mark is not None or piece.mark.get("tail") else {}
                yield HistoryRead(piece.jobs, marks, piece.report, {name: 0}, {}, problems)
        except SourceError as exc:
            yield _failed(name, str(exc))

    def _progress(self, name: str, what: str) -> Callable[[int], None]:
        """How far a long answer got: ``on_progress(name, jobs)`` after each part, and a log
        line every ``progress_every_s``."""
        done = 0
        started = said = time.monotonic()

        def advance(n: int) -> None:
            nonlocal done, said
            done += n
            if self.on_progress is not None:
                self.on_progress(name, n)
            if (now := time.monotonic()) - said >= self.progress_every_s:
                said = now
                log.info("%s: %d jobs read so far, %.0f a second", what, done, done / max(now - started, 1e-9))

        return advance

    def _schedd_history(
        self, name: str, location: classad2.ClassAd, mark: Mapping[str, Any] | None, constraint: str, *, match: int
    ) -> tuple[pd.DataFrame, int, ReadReport]:
        """One schedd's answer past ``mark`` to ``constraint``, at most ``match`` jobs, in its
        order (newest first in its history file): the jobs table of one scan, read as it
        streams in; and the calls made."""
        what = f"schedd {name}: history"
        since = history_since(mark, self.pool.history_lookback_s)
        schedd = self.calls.schedd(name, location)
        for calls in (1, 2):
            projection = self.calls.projection("history", history_projection(self.reading))
            ask = functools.partial(
                schedd.history, constraint=constraint, projection=projection, match=match, since=since
            )
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
        advance = self._progress(name, what)
        try:
            for first in itertools.count(0, self.pool.history_match):
                chunk = self.calls.next_ads(what, ads, self.pool.history_match, first)
                if not chunk:
                    break
                advance(len(chunk))
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
        return placed_jobs(jobs, tally), tally.report()
