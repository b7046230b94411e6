"""Opening an input file, with errors that name it and what it should hold."""

from __future__ import annotations

import os
from typing import BinaryIO

from collector.errors import SourceError

__all__ = ["open_input"]


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
