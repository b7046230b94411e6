"""What classad2 reads as spacing in the ``-long`` form, which the fast scan does not: a line of
white space only (the end of an ad, as a blank line), and a byte order mark at the start of a
file (which classad2 would read as part of the first attribute's name: stripped).
"""

from __future__ import annotations

import re

import numba
import numpy as np

__all__ = ["BOM", "blank_white_lines", "white_separator"]

#: A UTF-8 byte order mark, which an editor may put at the start of a file: not part of the first
#: attribute's name (classad2 would read ``\ufeffActivity``), so it is read as three spaces, which
#: classad2 skips before a name and which keep every offset and line where it is.
BOM = b"\xef\xbb\xbf"
#: A line of spaces and tabs only: classad2 reads it as a blank line, the end of an ad.
_WHITE_LINE = re.compile(rb"(?m)^[ \t]+$")
_WHITE_SEPARATOR = re.compile(rb"\n[ \t]+\n")


def blank_white_lines(data: bytes, n: int, pad: bytes) -> tuple[bytes, int]:
    """``data[:n]`` with its lines of white space only made empty, as classad2 reads them (the
    end of an ad), and ``pad`` after them; the scan takes only an empty line for one. Lines stay
    where they were. ``data`` as it is when it has none."""
    if not _indented(np.frombuffer(data, dtype=np.uint8), n):
        return data, n  # a canonical line starts with a name: the usual case costs one pass
    whole = _WHITE_LINE.sub(b"", data[:n])
    return whole + pad, len(whole)


def white_separator(data: bytes) -> int:
    """Where the last line of white space only that ends an ad in ``data`` starts (at its
    newline before), -1 if none: a chunk of ads separated by such lines only is cut there."""
    return max((m.start() for m in _WHITE_SEPARATOR.finditer(data)), default=-1)


@numba.njit(cache=True, nogil=True)
def _indented(buf: np.ndarray, n: int) -> bool:  # pragma: no cover - compiled
    """Whether a line of ``buf[:n]`` starts with a space or a tab: one compiled pass (two
    ``bytes.find`` of ``b"\\n "`` and ``b"\\n\\t"`` cost as much as the whole scan of a history)."""
    if n > 0 and (buf[0] == 32 or buf[0] == 9):
        return True
    for i in range(min(n, len(buf) - 1)):  # noqa: SIM110 - numba compiles a loop, not a generator
        if buf[i] == 10 and (buf[i + 1] == 32 or buf[i + 1] == 9):
            return True
    return False
