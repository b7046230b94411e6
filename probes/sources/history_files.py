"""A live schedd's history read from its own files, beside it: a backlog in a piece's memory.

``htcondor2``'s ``Schedd.history`` answers a list, so the bindings' worker holds the whole
answer (about 9.8 KB a job, measured on an HTCondor 25.0 pool: gigabytes for a month of a big
schedd), and the answer cannot be asked for in parts without the schedd's history helper
scanning the file again from its end for each part: it parses every ad it passes, whatever the
constraint (0.42 ms an ad on the unoptimised build of the tests' pool). Where the probe runs on
the access point, ``pool.history_files`` names the schedd's ``HISTORY`` file, and a pass reads
the jobs the schedd wrote after the checkpoint's position from that file and its rotations, in
the order the schedd wrote them, with the file reader, ``pool.history_piece`` jobs at a time
(:class:`FilePiece`), each handed on with the checkpoint after it: a backlog costs a piece's
memory, the files are read once, and a pass cut short resumes after the last piece committed.

The checkpoint is the query's (:func:`~probes.sources.checkpoints.new_schedd_jobs`): ``tail``
names the newest jobs read, so a probe moves between asking the schedd and reading its files
either way. Its position in the files is after the banner that ends the ad of ``tail[0]``,
found by that ad's ``GlobalJobId = "..."`` line, newest file first; ``at`` (the file's device
and inode, the offset after that banner, the line there) spares the search while it holds.
A job the schedd is still writing (bytes after the last whole banner) is the next pass's.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import pandas as pd

from probes.errors import SourceError
from probes.sources.checkpoints import TAIL, history_lost, history_rewritten, new_jobs, schedd_mark
from probes.sources.history import JOB_COLUMNS, iter_history, placed_jobs
from probes.sources.inputs import FileRange
from probes.sources.queue import cluster_proc
from probes.sources.report import ReadReport, ReadTally
from probes.sources.settings import JobReading

__all__ = ["FilePiece", "read_history_files", "schedd_history_files"]

#: A rotated history file's suffix: HTCondor renames ``history`` to ``history.<UTC time>`` when
#: it reaches MAX_HISTORY_LOG (``history.20261129T093512``), so names sort as they were written.
_ROTATED = re.compile(r"\d{8}T\d{6}")
_BANNER_IDS = re.compile(rb"\*\*\* .*?\bClusterId = (\d+) ProcId = (\d+)\b")
_BANNER_BYTES = 4096  # a banner line is some 120 bytes
_BLOCK = 8 << 20  # bytes of a history file read at a time to search it or count its lines


@dataclass(frozen=True)
class FilePiece:
    """Jobs of one schedd's history files, in the order it wrote them, and its checkpoint once
    they are committed; ``report``: what the whole pass found besides values, on its last piece
    (empty on the others); ``problem``: what was said of the position (None: nothing)."""

    jobs: pd.DataFrame
    mark: dict[str, Any]
    report: ReadReport
    problem: str | None = None


def schedd_history_files(path: str | os.PathLike[str]) -> list[Path]:
    """The schedd's history ``path`` and its rotations, oldest first; :class:`SourceError`
    naming ``path`` when there is neither or its folder cannot be listed."""
    current = Path(path)
    try:
        names = os.listdir(current.parent)
    except OSError as exc:
        raise SourceError(f"{current}: its folder cannot be listed ({exc.strerror or exc})") from exc
    prefix = current.name + "."
    files = [current.parent / n for n in sorted(names) if n.startswith(prefix) and _ROTATED.fullmatch(n[len(prefix) :])]
    if current.name in names:
        files.append(current)
    if not files:
        raise SourceError(f"{current}: no such history file (pool.history_files: condor_config_val HISTORY)")
    return files


class _Text:
    """A history file read a block at a time, forwards or backwards: searching a
    3.6 GB file must not map it (its pages would count in the probe's memory)."""

    def __init__(self, fh: BinaryIO) -> None:
        self._fh = fh
        self.size = os.fstat(fh.fileno()).st_size

    def read(self, start: int, stop: int) -> bytes:
        self._fh.seek(start)
        return self._fh.read(max(0, stop - start))

    def rfind(self, needle: bytes, start: int, end: int) -> int:
        """The last ``needle`` in ``[start, end)``, -1 when none."""
        hi = end
        while hi > start:
            lo = max(start, hi - _BLOCK)
            at = self.read(lo, min(end, hi + len(needle) - 1)).rfind(needle)
            if at >= 0:
                return lo + at
            hi = lo
        return -1

    def find(self, needle: bytes, start: int) -> int:
        """The first ``needle`` at or after ``start``, -1 when none."""
        lo = start
        while lo < self.size:
            at = self.read(lo, lo + _BLOCK + len(needle) - 1).find(needle)
            if at >= 0:
                return lo + at
            lo += _BLOCK
        return -1

    def lines(self, start: int, stop: int) -> int:
        """Newlines in ``[start, stop)``."""
        return sum(self.read(lo, min(lo + _BLOCK, stop)).count(b"\n") for lo in range(start, stop, _BLOCK))


@contextmanager
def _opened(path: Path) -> Iterator[_Text]:
    try:
        with open(path, "rb") as fh:
            yield _Text(fh)
    except OSError as exc:
        raise SourceError(f"{path}: cannot be read ({exc.strerror or exc})") from exc


def _whole_end(text: _Text, start: int) -> int:
    """Where the last whole job at or after ``start`` ends: after the last banner line that ends
    with a newline (the schedd may be writing the next)."""
    end = text.size
    while end > start:
        banner = text.rfind(b"\n*** ", max(start - 1, 0), end)
        if banner < 0:
            return start
        stop = text.find(b"\n", banner + 1)
        if stop >= 0:
            return stop + 1
        end = banner
    return start


def _after_job(text: _Text, job: str) -> int | None:
    """The offset after the banner that ends the newest ad of ``job`` (its GlobalJobId) in the
    file; None when it holds none."""
    line = f'GlobalJobId = "{job}"\n'.encode()
    at = text.rfind(b"\n" + line, 0, text.size)
    if at < 0:
        if text.read(0, len(line)) != line:
            return None
        at = -1
    banner = text.find(b"\n*** ", at + len(line))
    stop = text.find(b"\n", banner + 1) if banner >= 0 else -1
    return None if stop < 0 else stop + 1


def _position(files: Sequence[Path], mark: Mapping[str, Any]) -> tuple[int, int, int] | None:
    """(file index, offset, line there) after ``tail[0]``'s ad: from ``at`` when its file still
    holds that job's banner there, else by searching the files, newest first."""
    job = mark["tail"][0]
    at, ids = mark.get("at"), cluster_proc(job)
    if at and ids is not None:
        for i, path in enumerate(files):
            st = path.stat()
            if [st.st_dev, st.st_ino] != at["file"] or not 0 < at["offset"] <= st.st_size:
                continue
            with _opened(path) as text:
                window = max(0, at["offset"] - _BANNER_BYTES)
                begin = text.rfind(b"\n", window, at["offset"] - 1) + 1 or window
                banner = _BANNER_IDS.match(text.read(begin, at["offset"]))
            if banner is not None and tuple(map(int, banner.groups())) == ids:
                return i, at["offset"], at["line"]
            break  # the file is there, that job's banner is not: search
    for i in reversed(range(len(files))):
        with _opened(files[i]) as text:
            offset = _after_job(text, job)
            if offset is not None:
                return i, offset, 1 + text.lines(0, offset)
    return None


def _holds_any(files: Sequence[Path], jobs: Sequence[str]) -> bool:
    for path in files:
        with _opened(path) as text:
            if any(_after_job(text, job) is not None for job in jobs):
                return True
    return False


def read_history_files(
    schedd: str,
    path: str,
    mark: Mapping[str, Any] | None,
    reading: JobReading,
    piece: int,
    *,
    on_part: Callable[[int], None] | None = None,
) -> Iterator[FilePiece]:
    """The jobs of schedd ``schedd``'s history files (``path`` and its rotations) written after
    the checkpoint ``mark``'s position, ``piece`` jobs at a time, each with the checkpoint after
    it; the last piece (maybe empty, always yielded) carries ``at``. Without a position (no
    checkpoint, or one of a probe before positions: its ``end`` and ``ids`` decide), every file
    is read; a position the files no longer hold is said as :func:`new_schedd_jobs` says it.
    ``on_part(jobs)`` after each part read (a progress bar)."""
    files = schedd_history_files(path)
    what = f"schedd {schedd}"
    start, problem, by_end = (0, 0, 1), None, bool(mark) and not (mark or {}).get("tail")
    if mark and mark.get("tail"):
        found = _position(files, mark)
        if found is not None:
            start = found
        elif _holds_any(files, mark.get("ids", [])[:8]):
            problem, by_end = history_rewritten(what, mark["tail"][0], float(mark["end"])), True
        else:
            problem = history_lost(what, mark["tail"][0])
    ranges = []
    for i in range(start[0], len(files)):
        with _opened(files[i]) as text:
            begin = start[1] if i == start[0] else 0
            ranges.append(FileRange(files[i], begin, _whole_end(text, begin), start[2] if i == start[0] else 1))
            if i == len(files) - 1:
                st = files[i].stat()
                last = ranges[-1]
                at = {"file": [st.st_dev, st.st_ino], "offset": last.stop,
                      "line": last.first_line + text.lines(last.start, last.stop)}  # fmt: skip
    tally = ReadTally()
    current: dict[str, Any] | None = dict(mark) if mark else None
    held: list[pd.DataFrame] = []
    rows = 0
    checked = False
    for part in iter_history(ranges, reading, tally):
        if on_part is not None:
            on_part(len(part))
        part = placed_jobs(part, tally)
        if by_end and mark:
            part, _ = new_jobs(part, mark)
        if not checked and len(part):
            checked = True
            if not part["job_id"].astype(str).str.startswith(f"{schedd}#").any():
                raise SourceError(
                    f"{files[-1]}: its jobs are not schedd {schedd}'s (their GlobalJobId is {part['job_id'].iloc[0]}): "
                    f"pool.history_files names another schedd's history"
                )
        held.append(part)
        rows += len(part)
        while rows >= piece:
            jobs = pd.concat(held, ignore_index=True) if len(held) > 1 else held[0].reset_index(drop=True)
            out, rest = jobs.iloc[:piece].reset_index(drop=True), jobs.iloc[piece:]
            held, rows = [rest], len(rest)
            current = _advance(current, out)
            yield FilePiece(out, current, ReadReport(), problem)
            problem = None
    jobs = pd.concat(held, ignore_index=True) if held else pd.DataFrame(columns=JOB_COLUMNS)
    current = _advance(current, jobs)
    yield FilePiece(jobs, current | {"at": at} if current.get("tail") else current, tally.report(), problem)


def _advance(mark: Mapping[str, Any] | None, jobs: pd.DataFrame) -> dict[str, Any]:
    """The checkpoint once ``jobs`` (the next ones the schedd wrote, oldest first) are read."""
    return schedd_mark(mark, jobs["job_id"].iloc[-TAIL:].iloc[::-1].tolist(), jobs)
