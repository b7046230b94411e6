"""Opening an input file, and telling what it holds is not what was expected: errors that name
the file and what it should hold, written once for every reader."""

from __future__ import annotations

import io
import os
import stat
from typing import Literal, overload

from probes.errors import SourceError

__all__ = [
    "MAX_AD_BYTES",
    "MAX_INFLATED_BYTES",
    "MAX_INFLATION",
    "MAX_WHOLE_BYTES",
    "FileRange",
    "InputFile",
    "content_problem",
    "is_blank",
    "open_input",
    "read_input",
]

MAX_AD_BYTES = 16 << 20
"""The longest ad (and so the longest line) of a ``-long`` input, in bytes: HTCondor's longest
are a few hundred KiB (a p-slot's ``Child*`` lists, a job's environment). The reader holds an
ad's text some ten times over while it scans it, so an input with a longer one is refused
rather than read into gigabytes."""

MAX_WHOLE_BYTES = 512 << 20
"""The largest file read whole into memory (an SWF log, a user-vo-map), in bytes: the largest
logs of the Parallel Workloads Archive are some 100 MB; what is read whole is held a few times
over while it is parsed."""

MAX_INFLATED_BYTES = 256 << 20
MAX_INFLATION = 100
"""A compressed input may decompress to :data:`MAX_INFLATED_BYTES`, or to :data:`MAX_INFLATION`
times its own size if that is more: ClassAd text compresses some 10 to 20 times, a gzip bomb a
thousand times (1 MB of ``[`` is a GiB)."""


class FileRange:
    """Bytes ``[start, stop)`` of a ``-long`` file whose first line is line ``first_line``: the
    part of a schedd's history file a pass reads (whole ads: ``start`` and ``stop`` are where a
    banner line ends). ``os.fspath`` of it is the file's path, which messages name."""

    __slots__ = ("first_line", "path", "start", "stop")

    def __init__(self, path: str | os.PathLike[str], start: int, stop: int, first_line: int = 1) -> None:
        self.path, self.start, self.stop, self.first_line = os.fspath(path), start, stop, first_line

    def __fspath__(self) -> str:
        return self.path

    def __repr__(self) -> str:
        return f"FileRange({self.path!r}, {self.start}, {self.stop}, first_line={self.first_line})"


_KINDS = {
    stat.S_IFIFO: "a FIFO (named pipe)",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
    stat.S_IFDIR: "a directory",
}


class InputFile(io.FileIO):
    """An input file open for reading bytes, whose read errors (``EIO`` of a failing disk, a
    file system gone) are :class:`SourceError` naming the file, not an ``OSError`` from
    somewhere in a reader."""

    def read(self, size: int | None = -1, /) -> bytes:
        try:
            return super().read(size)
        except OSError as exc:
            raise self._error(exc) from exc

    def readinto(self, buffer: memoryview | bytearray, /) -> int:  # type: ignore[override]
        try:
            return super().readinto(buffer)
        except OSError as exc:
            raise self._error(exc) from exc

    def readall(self) -> bytes:
        try:
            return super().readall()
        except OSError as exc:
            raise self._error(exc) from exc

    def _error(self, exc: OSError) -> SourceError:
        return SourceError(f"{self.name}: read error after opening it ({exc.strerror or exc}): is the disk failing?")


def open_input(path: str | os.PathLike[str], what: str) -> InputFile:
    """``path`` opened for reading bytes; :class:`SourceError` when it is missing, unreadable, or
    not a regular file (``what`` says what was expected instead). A FIFO or a device is refused
    before anything is read from it: opening a FIFO blocks until a writer comes, and a device
    such as ``/dev/zero`` never ends."""
    name = os.fspath(path)
    try:
        # O_NONBLOCK: a FIFO opens at once rather than waiting for a writer; checked, then cleared
        fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError as exc:
        raise SourceError(f"{name}: no such file") from exc
    except IsADirectoryError as exc:
        raise SourceError(f"{name}: is a directory, expected {what}") from exc
    except OSError as exc:
        raise SourceError(f"{name}: cannot be read ({exc.strerror})") from exc
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = _KINDS.get(stat.S_IFMT(mode), "not a regular file")
            raise SourceError(f"{name}: is {kind}, expected {what} in a regular file")
        os.set_blocking(fd, True)
        fh = InputFile(fd, "r", closefd=True)
    except BaseException:
        os.close(fd)
        raise
    fh.name = name  # messages name the path given, not the descriptor
    return fh


@overload
def read_input(
    path: str | os.PathLike[str], what: str, *, missing_ok: Literal[False] = ..., limit: int = ...
) -> bytes: ...
@overload
def read_input(path: str | os.PathLike[str], what: str, *, missing_ok: bool, limit: int = ...) -> bytes | None: ...
def read_input(
    path: str | os.PathLike[str], what: str, *, missing_ok: bool = False, limit: int = MAX_WHOLE_BYTES
) -> bytes | None:
    """The whole of a (small) file, as :func:`open_input` opens it, of at most ``limit`` bytes
    (checked as it is read: a file that grows is not read without end); None for a file that is
    gone when ``missing_ok`` (a history file rotated away between listing and reading)."""
    try:
        with open_input(path, what) as fh:
            parts, size = [], 0
            while size <= limit and (part := fh.read(min(limit + 1 - size, 1 << 24))):
                parts.append(part)
                size += len(part)
            data = b"".join(parts)
    except SourceError as exc:
        if missing_ok and isinstance(exc.__cause__, FileNotFoundError):
            return None
        raise
    if len(data) > limit:
        raise SourceError(
            f"{os.fspath(path)}: larger than {limit / (1 << 20):g} MiB, more than {what} can be; "
            "is this the right file?"
        )
    return data


def content_problem(data: bytes, what: str, *, complete: bool = False) -> str | None:
    """Why ``data`` (the start of a file, or all of it with ``complete``) cannot hold ``what``
    in text form: empty, binary (NUL bytes) or, when complete, cut in the middle of a line.
    None when it may."""
    if not data.strip():
        return f"the file is empty, expected {what}"
    if b"\0" in data:
        return f"binary file (NUL bytes), expected {what} in text form"
    if complete and not data.endswith(b"\n"):
        return "truncated: the file ends in the middle of a line"
    return None


def is_blank(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` holds nothing but white space (an empty queue's ``condor_q -long``);
    a file that cannot be opened is not blank, so its reader says why."""
    try:
        with open_input(path, "a dump") as fh:
            while chunk := fh.read(1 << 16):
                if chunk.strip():
                    return False
    except SourceError:
        return False
    return True
