"""Opening an input file, and telling what it holds is not what was expected: errors that name
the file and what it should hold, written once for every reader."""

from __future__ import annotations

import os
from typing import BinaryIO, Literal, overload

from probes.errors import SourceError

__all__ = ["content_problem", "is_blank", "open_input", "read_input"]


def open_input(path: str | os.PathLike[str], what: str) -> BinaryIO:
    """``path`` opened for reading bytes; :class:`SourceError` when it is missing, a directory
    (``what`` says what was expected instead) or unreadable."""
    name = os.fspath(path)
    try:
        return open(name, "rb")  # the caller closes it
    except FileNotFoundError as exc:
        raise SourceError(f"{name}: no such file") from exc
    except IsADirectoryError as exc:
        raise SourceError(f"{name}: is a directory, expected {what}") from exc
    except OSError as exc:
        raise SourceError(f"{name}: cannot be read ({exc.strerror})") from exc


@overload
def read_input(path: str | os.PathLike[str], what: str, *, missing_ok: Literal[False] = ...) -> bytes: ...
@overload
def read_input(path: str | os.PathLike[str], what: str, *, missing_ok: bool) -> bytes | None: ...
def read_input(path: str | os.PathLike[str], what: str, *, missing_ok: bool = False) -> bytes | None:
    """The whole of a (small) file, as :func:`open_input` opens it; None for a file that is gone
    when ``missing_ok`` (a history file rotated away between listing and reading)."""
    try:
        with open_input(path, what) as fh:
            return fh.read()
    except SourceError as exc:
        if missing_ok and isinstance(exc.__cause__, FileNotFoundError):
            return None
        raise


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
