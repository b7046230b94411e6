"""What reading a source found besides its values, and the quarantine of what could not be read.

Nothing read is lost: an ad that cannot be parsed is skipped by the cycle, counted in the
reader's :class:`ReadTally` and handed on in the frozen :class:`ReadReport` it gives, and
written to the quarantine with where it came from and why it was refused
(:func:`write_quarantine`); :func:`problem_lines` says it all in one line each, the same for
the command line (stderr) and the service (its log).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from types import MappingProxyType
from typing import Any

from probes.errors import ClassAdError
from probes.files import atomic_write

__all__ = [
    "DUPLICATES_NAMED",
    "EXCERPT_CHARS",
    "Malformed",
    "ReadReport",
    "ReadTally",
    "problem_lines",
    "write_quarantine",
]

EXCERPT_CHARS = 64 * 1024
DUPLICATES_NAMED = 20
"""Jobs read more than once are all counted, and the first this many named: a history given
twice names a few of its jobs, not all of them again."""


@dataclass(frozen=True)
class Malformed:
    """An ad that could not be read: where it is, why, and its text (for the quarantine), of
    which at most :data:`EXCERPT_CHARS` are kept: a 100 MB region of garbage is quarantined
    by its place and an excerpt, not copied."""

    path: str
    line: int
    reason: str
    text: str

    def __post_init__(self) -> None:
        if len(self.text) > EXCERPT_CHARS:
            cut = len(self.text) - EXCERPT_CHARS
            object.__setattr__(self, "text", f"{self.text[:EXCERPT_CHARS]}\n# ... {cut} more characters not kept\n")

    def error(self) -> ClassAdError:
        return ClassAdError(self.path, self.line, self.reason)


@dataclass(frozen=True)
class ReadReport:
    """What reading one or more files found, besides the values: frozen, all the way down.

    A reader fills a :class:`ReadTally` as it goes and hands on its :meth:`ReadTally.report`;
    reports are combined into new ones (``a | b``, :meth:`combine`), never changed: the one a
    reader returned, or a :class:`~probes.pipeline.reading.Reading` holds, is the same for
    everyone who reads it. ``malformed`` and ``skipped`` are tuples (lists given are copied into
    tuples) and ``rejects`` a read-only view of its own copy of the counts given, read as a
    ``Counter`` is (a reason not counted is 0).
    """

    ads: int = 0
    evaluated: int = 0  # ads that went through classad2 (expressions, unusual spellings)
    malformed: tuple[Malformed, ...] = ()
    rejects: Mapping[str, int] = field(default_factory=dict)  # "attribute: reason" -> count
    skipped: tuple[str, ...] = ()  # "path: why" of each file of a folder not read
    duplicates: int = 0  # jobs read again (a GlobalJobId read before), counted once
    duplicate_jobs: tuple[str, ...] = ()  # the first DUPLICATES_NAMED of them: "id (path line N)"

    def __post_init__(self) -> None:
        object.__setattr__(self, "malformed", tuple(self.malformed))
        object.__setattr__(self, "skipped", tuple(self.skipped))
        object.__setattr__(self, "duplicate_jobs", tuple(self.duplicate_jobs)[:DUPLICATES_NAMED])
        # a copy of its own behind a read-only view: no one holding the mapping given changes it
        object.__setattr__(self, "rejects", MappingProxyType(Counter(self.rejects)))

    def __or__(self, other: ReadReport) -> ReadReport:
        """A new report of both: this one's findings, then ``other``'s; neither is changed."""
        if not isinstance(other, ReadReport):
            return NotImplemented
        rejects = Counter(self.rejects)
        rejects.update(other.rejects)  # not Counter's +, which drops counts <= 0
        return ReadReport(
            ads=self.ads + other.ads,
            evaluated=self.evaluated + other.evaluated,
            malformed=self.malformed + other.malformed,
            rejects=rejects,
            skipped=self.skipped + other.skipped,
            duplicates=self.duplicates + other.duplicates,
            duplicate_jobs=self.duplicate_jobs + other.duplicate_jobs,
        )

    @classmethod
    def combine(cls, reports: Iterable[ReadReport]) -> ReadReport:
        """One new report of all of ``reports``, in order; none of them is changed."""
        tally = ReadTally()
        for report in reports:
            tally.merge(report)
        return tally.report()

    def shifted(self, lines: int) -> ReadReport:
        """A new report whose malformed ads are ``lines`` further on (ads read in chunks, each
        numbered from 1, placed in the whole answer); this one is not changed."""
        return replace(self, malformed=tuple(replace(m, line=m.line + lines) for m in self.malformed))

    def __hash__(self) -> int:
        # as equal reports' rejects compare (as Counters do, a count of 0 as no count)
        counts = frozenset((reason, n) for reason, n in self.rejects.items() if n)
        return hash((self.ads, self.evaluated, self.malformed, counts, self.skipped, self.duplicates))

    def __reduce__(self) -> tuple[Any, ...]:
        # pickle and copy: the read-only view cannot be pickled, its counts can
        return (
            type(self),
            (
                self.ads, self.evaluated, self.malformed, dict(self.rejects), self.skipped,
                self.duplicates, self.duplicate_jobs,
            ),
        )  # fmt: skip


@dataclass(slots=True)
class ReadTally:
    """What a reader has found so far besides the values: the mutable counterpart of
    :class:`ReadReport`, of the same fields, that a reader fills as it goes (its counters and
    lists directly on the hot paths, or :meth:`merge`, :meth:`add_malformed`, :meth:`reject`,
    :meth:`skip`) and hands on as a frozen report (:meth:`report`).

    A streaming reader (:func:`~probes.sources.history.iter_history`) fills the tally it is
    given as its parts are taken: its :meth:`report` is complete once they are exhausted.
    """

    ads: int = 0
    evaluated: int = 0
    malformed: list[Malformed] = field(default_factory=list)
    rejects: Counter[str] = field(default_factory=Counter)
    skipped: list[str] = field(default_factory=list)
    duplicates: int = 0
    duplicate_jobs: list[str] = field(default_factory=list)

    def merge(self, report: ReadReport) -> None:
        """Add ``report`` (what a reader of a part returned) to this tally."""
        self.ads += report.ads
        self.evaluated += report.evaluated
        self.malformed.extend(report.malformed)
        self.rejects.update(report.rejects)
        self.skipped.extend(report.skipped)
        for name in report.duplicate_jobs:
            self.duplicate(name)
        self.duplicates += report.duplicates - len(report.duplicate_jobs)

    def add_malformed(self, malformed: Malformed) -> Malformed:
        """Count an ad that could not be read; return it (to raise its error in strict mode)."""
        self.malformed.append(malformed)
        return malformed

    def reject(self, reason: str, count: int = 1) -> None:
        """Count ``count`` values ignored (or ads skipped) for ``reason``."""
        self.rejects[reason] += count

    def duplicate(self, name: str) -> None:
        """Count a job read again (its GlobalJobId read before), named as "id (path line N)"."""
        self.duplicates += 1
        if len(self.duplicate_jobs) < DUPLICATES_NAMED:
            self.duplicate_jobs.append(name)

    def skip(self, entries: Iterable[str]) -> None:
        """Name files not read, each as "path: why"."""
        self.skipped.extend(entries)

    def report(self) -> ReadReport:
        """A frozen report of what was found so far; the tally goes on, the report does not."""
        return ReadReport(
            self.ads, self.evaluated, tuple(self.malformed), self.rejects, tuple(self.skipped),
            self.duplicates, tuple(self.duplicate_jobs),
        )  # fmt: skip


def write_quarantine(malformed: Sequence[Malformed], directory: Path, now: datetime) -> Path:
    """Write malformed ads to a new file in ``directory``; return its path.

    Each ad is preceded by comment lines naming its file, line and reason. The file is
    written whole (see :func:`~probes.files.atomic_write`) so a reader never sees half of it.
    """
    path = directory / f"malformed-{now.strftime('%Y%m%dT%H%M%S.%fZ')}.ads"
    text = "".join(
        f"# from {m.path} line {m.line}\n# reason: {m.reason}\n{m.text.rstrip(chr(10))}\n\n" for m in malformed
    )
    atomic_write(path, text)
    return path


def problem_lines(
    reports: Mapping[str, ReadReport], failures: Mapping[str, str], quarantine: Path | None, now: datetime
) -> list[str]:
    """One line per problem of a read: each source that was skipped (a live schedd that did not
    answer), the malformed ads of each input (written to the directory ``quarantine`` first, so
    the line can say where; None: not kept; a directory that cannot be written: the line says
    so), and each kind of value that was ignored."""
    lines = [f"{source} skipped: {' '.join(why.split())}" for source, why in sorted(failures.items())]
    for what, report in reports.items():
        lines += [f"{what}: skipped {entry}" for entry in report.skipped]
        if report.malformed:
            # each reason counted (with one reason, the line below says it and how many)
            reasons = Counter(m.reason for m in report.malformed)
            if len(reasons) > 1:
                lines += [f"{what}: {n} ad(s) set aside: {why}" for why, n in sorted(reasons.items())]
            first = " ".join(str(report.malformed[0].error()).split())
            line = f"{len(report.malformed)} malformed {what} ad(s) skipped, the first: {first}"
            if quarantine is None:
                lines.append(f"{line} (--quarantine DIR keeps them)")
            else:
                try:
                    lines.append(f"{line}; quarantined in {write_quarantine(report.malformed, quarantine, now)}")
                except OSError as exc:  # the ads are still in their input; say why no copy was kept
                    lines.append(f"{line}; NOT quarantined: cannot write in {quarantine} ({exc.strerror or exc})")
        if report.duplicates:
            named = ", ".join(report.duplicate_jobs[:3]) + (", ..." if report.duplicates > 3 else "")
            lines.append(
                f"{what}: {report.duplicates} job(s) read more than once (a GlobalJobId read before: the same job "
                f"in two inputs, or twice in one), each counted once; again: {named}"
            )
        lines += [f"{what}: {count} value(s) ignored: {reason}" for reason, count in sorted(report.rejects.items())]
    return lines
