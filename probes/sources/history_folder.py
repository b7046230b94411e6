"""What a history folder holds, and compressed histories: the inputs a ``--history DIR`` is.

A folder given as a history is read whole, not only its ``PER_JOB_HISTORY_DIR`` files
(``history.<cluster>.<proc>``, read together, in job order): every other file in it that holds
ClassAds is read as its own input, whether a ``condor_history -long`` dump or schedd history
file (``*** `` banners), a ``condor_history -json`` dump, or either compressed with gzip
(``.gz``). Everything else is skipped *by name* with the reason (a subfolder, an empty or
binary file, text that is not ClassAds), so nothing is left out without a word.

A ``.gz`` input is decompressed to a temporary file without a name while it is read (the readers
scan files, and a history is read once), up to a bound, and gone however the run ends.
"""

from __future__ import annotations

import gzip
import os
import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from probes.errors import SourceError
from probes.sources.inputs import MAX_INFLATED_BYTES, MAX_INFLATION, content_problem, open_input

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
    """What of the folder ``path`` is read, and what is skipped (each named, with the reason);
    :class:`SourceError` naming the folder when it cannot be listed (permission, a symbolic link
    loop, a file system gone)."""
    folder = Folder()
    numbered = []
    try:
        entries = sorted(os.scandir(path), key=lambda e: e.name)
    except OSError as exc:
        raise SourceError(f"{os.fspath(path)}: this history folder cannot be listed ({exc.strerror or exc})") from exc
    for entry in entries:
        m = _PER_JOB_FILE.fullmatch(entry.name)
        try:  # an entry's type follows its symbolic link, which may loop or be unreadable
            is_file, is_dir = entry.is_file(), entry.is_dir()
        except OSError as exc:
            folder.skipped.append(f"{entry.path}: cannot be read ({exc.strerror or exc})")
            continue
        if m and is_file:
            numbered.append(((int(m.group(1)), int(m.group(2))), Path(entry.path)))
        elif is_dir:
            folder.skipped.append(f"{entry.path}: a subfolder, not read (give it as a --history of its own)")
        elif not is_file:
            folder.skipped.append(f"{entry.path}: not a regular file (a FIFO, a device, a dangling or looping link)")
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
        with open_input(path, "a history") as fh:
            return fh.read(2) == _GZIP_MAGIC
    except SourceError:  # its reader says why it cannot be opened
        return False


@contextmanager
def readable(path: str | os.PathLike[str]) -> Iterator[str]:
    """A path the readers can scan for ``path``: itself, or for a gzip file its text in a
    temporary file, decompressed to :data:`~probes.sources.inputs.MAX_INFLATED_BYTES` at most
    (or :data:`~probes.sources.inputs.MAX_INFLATION` times its size) and checked as it is. The
    temporary file has no name (``O_TMPFILE``, read through ``/proc/self/fd``): nothing is left
    behind however the run ends, a kill included. Where the system cannot make one, a named file
    in a temporary directory, removed on leaving."""
    if not is_gzip(path):
        yield os.fspath(path)
        return
    name = os.fspath(path)
    with open_input(path, "a gzip-compressed history") as packed_file, _scratch() as (out, plain):
        limit = max(MAX_INFLATED_BYTES, MAX_INFLATION * os.fstat(packed_file.fileno()).st_size)
        written = 0
        try:
            with gzip.GzipFile(fileobj=packed_file, mode="rb") as packed:
                while chunk := packed.read(1 << 20):
                    written += len(chunk)
                    if written > limit:
                        raise SourceError(
                            f"{name}: decompresses to more than {limit >> 20} MiB ({MAX_INFLATION} times its size, "
                            f"or {MAX_INFLATED_BYTES >> 20} MiB): not a history (a gzip bomb?); not read further"
                        )
                    out.write(chunk)
            out.flush()
        except (OSError, EOFError) as exc:  # gzip.BadGzipFile is an OSError; EOFError: cut short
            raise SourceError(f"{name}: cannot be decompressed ({exc})") from exc
        yield plain


@contextmanager
def _scratch() -> Iterator[tuple[BinaryIO, str]]:
    """A temporary file to write, and the path to read it by (see :func:`readable`)."""
    try:
        anonymous = tempfile.TemporaryFile(prefix="fairacct-history-")  # noqa: SIM115 (closed below)
    except OSError:
        anonymous = None
    if anonymous is not None and os.path.exists(f"/proc/self/fd/{anonymous.fileno()}"):
        with anonymous:
            yield anonymous, f"/proc/self/fd/{anonymous.fileno()}"
        return
    if anonymous is not None:
        anonymous.close()
    with tempfile.TemporaryDirectory(prefix="fairacct-history-") as directory:
        plain = Path(directory) / "history"
        with open(plain, "wb") as out:
            yield out, str(plain)


def _not_classads(path: Path) -> str | None:
    """Why ``path`` is not a ClassAd dump (None when it looks like one, compressed or not)."""
    try:
        with open_input(path, "ClassAds") as fh:
            if fh.read(2) == _GZIP_MAGIC:
                fh.seek(0)
                with gzip.GzipFile(fileobj=fh, mode="rb") as packed:
                    head = packed.read(4096)
            else:
                fh.seek(0)
                head = fh.read(4096)
    except (OSError, EOFError, SourceError) as exc:
        return f"cannot be read ({exc})"
    if (problem := content_problem(head, "ClassAds")) is not None:
        return problem
    start = head.lstrip()
    if start.startswith((b"[", b"*** ")) or any(_ATTRIBUTE_LINE.match(line) for line in start.splitlines()[:3]):
        return None
    return "not ClassAds (neither condor_history -long nor -json)"
