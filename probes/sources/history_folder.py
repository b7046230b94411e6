"""What a history folder holds, and compressed histories: the inputs a ``--history DIR`` is.

A folder given as a history is read whole, not only its ``PER_JOB_HISTORY_DIR`` files
(``history.<cluster>.<proc>``, read together, in job order): every other file in it that holds
ClassAds is read as its own input, whether a ``condor_history -long`` dump or schedd history
file (``*** `` banners), a ``condor_history -json`` dump, or either compressed with gzip
(``.gz``). Everything else is skipped *by name* with the reason (a subfolder, an empty or
binary file, text that is not ClassAds), so nothing is left out without a word.

A ``.gz`` input is decompressed to a temporary file beside nothing of the site's (the temporary
directory) while it is read, a chunk at a time, and removed after: the readers scan files, and
a history is read once.
"""

from __future__ import annotations

import gzip
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from probes.errors import SourceError
from probes.sources.inputs import content_problem

__all__ = ["Folder", "is_gzip", "list_folder", "readable"]

_PER_JOB_FILE = re.compile(r"history\.(\d+)\.(\d+)")
_ATTRIBUTE_LINE = re.compile(rb"^\s*[A-Za-z_][A-Za-z0-9_.]*\s*=")
_GZIP_MAGIC = b"\x1f\x8b"


@dataclass
class Folder:
    """A history folder's inputs: its per-job files (in job order), its other dumps (by name),
    and each entry skipped with why."""

    per_job: list[Path] = field(default_factory=list)
    dumps: list[Path] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def list_folder(path: str | os.PathLike[str]) -> Folder:
    """What of the folder ``path`` is read, and what is skipped (each named, with the reason)."""
    folder = Folder()
    numbered = []
    for entry in sorted(os.scandir(path), key=lambda e: e.name):
        m = _PER_JOB_FILE.fullmatch(entry.name)
        if m and entry.is_file():
            numbered.append(((int(m.group(1)), int(m.group(2))), Path(entry.path)))
        elif entry.is_dir():
            folder.skipped.append(f"{entry.path}: a subfolder, not read (give it as a --history of its own)")
        elif not entry.is_file():
            folder.skipped.append(f"{entry.path}: not a regular file")
        elif (why := _not_classads(Path(entry.path))) is not None:
            folder.skipped.append(f"{entry.path}: {why}")
        else:
            folder.dumps.append(Path(entry.path))
    folder.per_job = [p for _, p in sorted(numbered)]
    if not folder.per_job and not folder.dumps:
        raise SourceError(
            f"{os.fspath(path)}: no history.<cluster>.<proc> files nor ClassAd dumps in this folder"
            + (f" ({len(folder.skipped)} entries skipped: {'; '.join(folder.skipped[:3])})" if folder.skipped else "")
        )
    return folder


def is_gzip(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is gzip-compressed (by its first bytes, not its name)."""
    try:
        with open(path, "rb") as fh:
            return fh.read(2) == _GZIP_MAGIC
    except OSError:  # its reader says why it cannot be opened
        return False


@contextmanager
def readable(path: str | os.PathLike[str]) -> Iterator[str]:
    """A path the readers can scan for ``path``: itself, or for a gzip file its text in a
    temporary file removed on leaving."""
    if not is_gzip(path):
        yield os.fspath(path)
        return
    with tempfile.TemporaryDirectory(prefix="fairacct-history-") as directory:
        plain = Path(directory) / Path(path).name.removesuffix(".gz")
        try:
            with gzip.open(path, "rb") as packed, open(plain, "wb") as out:
                shutil.copyfileobj(packed, out, 1 << 20)
        except (OSError, EOFError) as exc:  # gzip.BadGzipFile is an OSError; EOFError: cut short
            raise SourceError(f"{os.fspath(path)}: cannot be decompressed ({exc})") from exc
        yield str(plain)


def _not_classads(path: Path) -> str | None:
    """Why ``path`` is not a ClassAd dump (None when it looks like one, compressed or not)."""
    try:
        if is_gzip(path):
            with gzip.open(path, "rb") as fh:
                head = fh.read(4096)
        else:
            with open(path, "rb") as fh:
                head = fh.read(4096)
    except (OSError, EOFError) as exc:
        return f"cannot be read ({exc})"
    if (problem := content_problem(head, "ClassAds")) is not None:
        return problem
    start = head.lstrip()
    if start.startswith((b"[", b"*** ")) or any(_ATTRIBUTE_LINE.match(line) for line in start.splitlines()[:3]):
        return None
    return "not ClassAds (neither condor_history -long nor -json)"
