"""What reading a source found besides its values, and the quarantine of what could not be read.

Nothing read is lost: an ad that cannot be parsed is skipped by the cycle, counted in the
:class:`ReadReport`, and written to the quarantine with where it came from and why it was
refused (:func:`write_quarantine`); :func:`problem_lines` says it all in one line each, the
same for the command line (stderr) and the service (its log).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path

from probes.errors import ClassAdError
from probes.files import atomic_write

__all__ = ["EXCERPT_CHARS", "Malformed", "ReadReport", "problem_lines", "write_quarantine"]

EXCERPT_CHARS = 64 * 1024


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


@dataclass
class ReadReport:
    """What reading one or more files found, besides the values.

    Two ways to combine reports: ``a | b`` is a new report, neither ``a`` nor ``b`` changed
    (what a result handed on should get); :meth:`merge` adds ``other`` to this report in place,
    for a reader filling its own report as it goes (a streaming reader fills the report it is
    given: :func:`~probes.sources.history.iter_history`). A report a reader returned belongs to
    its caller: it is not changed after it was returned.
    """

    ads: int = 0
    evaluated: int = 0  # ads that went through classad2 (expressions, unusual spellings)
    malformed: list[Malformed] = field(default_factory=list)
    rejects: Counter[str] = field(default_factory=Counter)  # "attribute: reason" -> count
    skipped: list[str] = field(default_factory=list)  # "path: why" of each file of a folder not read

    def merge(self, other: ReadReport) -> None:
        """Add ``other`` to this report, in place (``other`` is not changed); see ``|`` for a new one."""
        self.ads += other.ads
        self.evaluated += other.evaluated
        self.malformed.extend(other.malformed)
        self.rejects.update(other.rejects)
        self.skipped.extend(other.skipped)

    def __or__(self, other: ReadReport) -> ReadReport:
        """A new report of both: this one's findings, then ``other``'s; neither is changed."""
        if not isinstance(other, ReadReport):
            return NotImplemented
        rejects = Counter(self.rejects)
        rejects.update(other.rejects)  # as merge does: not Counter's +, which drops counts <= 0
        return ReadReport(
            ads=self.ads + other.ads,
            evaluated=self.evaluated + other.evaluated,
            malformed=[*self.malformed, *other.malformed],
            rejects=rejects,
            skipped=[*self.skipped, *other.skipped],
        )

    @classmethod
    def combine(cls, reports: Iterable[ReadReport]) -> ReadReport:
        """One new report of all of ``reports``, in order; none of them is changed."""
        out = cls()
        for report in reports:
            out.merge(report)
        return out

    def shifted(self, lines: int) -> ReadReport:
        """A new report whose malformed ads are ``lines`` further on (ads read in chunks, each
        numbered from 1, placed in the whole answer); this one is not changed."""
        return replace(
            self,
            malformed=[replace(m, line=m.line + lines) for m in self.malformed],
            rejects=Counter(self.rejects),
            skipped=list(self.skipped),
        )


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
            first = " ".join(str(report.malformed[0].error()).split())
            line = f"{len(report.malformed)} malformed {what} ad(s) skipped, the first: {first}"
            if quarantine is None:
                lines.append(f"{line} (--quarantine DIR keeps them)")
            else:
                try:
                    lines.append(f"{line}; quarantined in {write_quarantine(report.malformed, quarantine, now)}")
                except OSError as exc:  # the ads are still in their input; say why no copy was kept
                    lines.append(f"{line}; NOT quarantined: cannot write in {quarantine} ({exc.strerror or exc})")
        lines += [f"{what}: {count} value(s) ignored: {reason}" for reason, count in sorted(report.rejects.items())]
    return lines
