"""The numbers HTCondor writes, and the values that only begin like one (issue 51).

HTCondor writes every amount it bills with as a plain decimal number in its own unit: memory in
MiB (``Memory = 8192``), disk in KiB, cores, devices, seconds (``RemoteWallClockTime = 3600.0``),
never with a unit, a base or a leading zero. classad2 reads such values all the same, and
wrongly: the old syntax stops at the number (``Memory = 8 GB`` is 8 MiB, ``8GB`` too), the new
syntax of a ``-json`` expression reads ``0x10`` as 0 and ``010`` as 10. So both readers (jobs
and slots, through :mod:`probes.sources.classad`) refuse them: a number attribute whose text
:func:`not_plain` finds wanting is not a number (its ad is set aside where the attribute must be
one, :attr:`~probes.sources.classad.Attr.finite`; else the value is ignored and counted).

An expression that begins with a number (``2048 * RequestCpus``) is an expression, and is
evaluated as before.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["NOT_PLAIN", "NotPlain", "not_plain"]

#: What a read's report counts a refused value under (one reason per attribute, whatever the text).
NOT_PLAIN = "a number with a unit, in hexadecimal or with a leading zero, not a plain number as HTCondor writes"

# a number as the value begins: sign, digits (a fraction, an exponent)
_LEADING = re.compile(r"\s*[-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?")
# what may follow a number in an expression: an operator, a bracket, a comment, or nothing;
# ``is``/``isnt`` are ClassAd's only operators spelled as words
_WORD = re.compile(r"\s*([A-Za-z_0-9][A-Za-z_0-9.]*)")
_OPERATOR_WORDS = frozenset({"is", "isnt"})
_HEX = re.compile(r"\s*[-+]?0[xX]")
_LEADING_ZERO = re.compile(r"\s*[-+]?0[0-9]")


@dataclass(frozen=True)
class NotPlain:
    """A number attribute's value refused by :func:`not_plain`: its ``text`` and ``why``; the
    readers store it as no number."""

    text: str
    why: str


def not_plain(text: str) -> str | None:
    """Why ``text`` (a value as written) is not a number HTCondor writes though it begins as
    one: a unit after it (``8 GB``, ``2GiB``), hexadecimal (``0x10``), a leading zero (``010``,
    octal to some readers); None for a plain number, an expression, or any other value."""
    m = _LEADING.match(text)
    if m is None:
        return None
    if _HEX.match(text):
        return f"{' '.join(text.split())!r} is hexadecimal, not a plain decimal number"
    if _LEADING_ZERO.match(text):
        return f"{' '.join(text.split())!r} has a leading zero (octal?), not a plain decimal number"
    word = _WORD.match(text, m.end())
    if word is None or word.group(1).lower() in _OPERATOR_WORDS:
        return None
    return (
        f"{' '.join(text.split())!r} is a number followed by {word.group(1)!r} (a unit?), not a plain number "
        "in HTCondor's unit (MiB of memory, KiB of disk, cores, seconds)"
    )
