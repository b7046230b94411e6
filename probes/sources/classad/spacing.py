"""What classad2 reads as spacing in the ``-long`` form, which the fast scan's plain search does
not: a line of white space only between two ads (the end of an ad, as a blank line; the scan
itself reads such a line as blank, :func:`~probes.sources.classad.kernel.scan_lines`), and a
byte order mark at the start of a file (which classad2 would read as part of the first
attribute's name: stripped).
"""

from __future__ import annotations

import re

__all__ = ["BOM", "white_separator"]

#: A UTF-8 byte order mark, which an editor may put at the start of a file: not part of the first
#: attribute's name (classad2 would read ``\ufeffActivity``), so it is read as three spaces, which
#: classad2 skips before a name and which keep every offset and line where it is.
BOM = b"\xef\xbb\xbf"
_WHITE_SEPARATOR = re.compile(rb"\n[ \t]+\n")


def white_separator(data: bytes) -> int:
    """Where the last line of white space only that ends an ad in ``data`` starts (at its
    newline before), -1 if none: a chunk of ads separated by such lines only is cut there."""
    return max((m.start() for m in _WHITE_SEPARATOR.finditer(data)), default=-1)
