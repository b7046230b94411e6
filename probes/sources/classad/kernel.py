"""The compiled core of the ``-long`` reader: one pass over a chunk's bytes finds its ads, the
lines of the wanted attributes, and the literal values among them.

This is the part of reading a history that touches every byte, so it is compiled with numba
rather than written as numpy passes (each of which would touch every byte again, and gather
from unaligned words at several nanoseconds an element). What it decides is deliberately
narrow: where the ads and lines are, whether each line has HTCondor's canonical form
``Name = value``, which wanted attribute a line holds, and which literal a value is. Everything
else (kinds, rejects, strings, lists, expressions) is :mod:`probes.sources.classad`'s, which
hands anything this pass does not recognise to ``classad2``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import NamedTuple

import numba
import numpy as np

__all__ = [
    "ABSENT",
    "ESCAPED",
    "FALSE",
    "INT",
    "LIST",
    "NUMBER_TEXT",
    "OTHER",
    "REAL",
    "STRING",
    "TRUE",
    "UNDEFINED",
    "Lines",
    "NameTable",
    "first_equal",
    "scan_lines",
    "texts",
]

# What a value is, as far as its bytes tell. NUMBER_TEXT looks like a number this pass does not
# parse itself (an exponent, more digits than a double holds exactly): Python's float decides.
# ESCAPED is a string literal with backslashes, each quote inside it escaped (see _literal).
ABSENT, INT, REAL, NUMBER_TEXT, STRING, TRUE, FALSE, UNDEFINED, LIST, OTHER, ESCAPED = range(11)

_MAX_INT_DIGITS = 18  # 10**18 < 2**63; a longer integer is classad2's to decide
_MAX_REAL_DIGITS = 15  # a mantissa below 2**53: M / 10**f is then one correctly rounded division
_MAX_NUMBER_WIDTH = 40
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")  # what a canonical line's name is

_POW10 = 10.0 ** np.arange(_MAX_REAL_DIGITS + 1)
#: Hash table slots per wanted name: few probes per line. Tests set 1 to make names collide.
SLOTS_PER_NAME = 8
_HASH_MULT = np.uint64(0x9E3779B97F4A7C15)
_TRUE, _FALSE, _UNDEFINED = (np.frombuffer(w, dtype=np.uint8) for w in (b"true", b"false", b"undefined"))

# 8 bytes at a time (SWAR): a constant per byte lane
_ONES = np.uint64(0x0101010101010101)
_HIGH = np.uint64(0x8080808080808080)
_LOW7 = np.uint64(0x7F7F7F7F7F7F7F7F)
_FOLD = np.uint64(0x2020202020202020)  # OR-ing 0x20 folds ASCII letters; names are case-insensitive
_NEWLINES = np.uint64(0x0A0A0A0A0A0A0A0A)
_UNDERSCORES = np.uint64(0x5F5F5F5F5F5F5F5F)
_QUOTES = np.uint64(0x2222222222222222)
_BACKSLASHES = np.uint64(0x5C5C5C5C5C5C5C5C)
_LANE_INDEX = np.uint64(0x0001020304050607)
_ONE = np.uint64(1)
_ALL = np.uint64(0xFFFFFFFFFFFFFFFF)


class NameTable(NamedTuple):
    """The wanted names, case-folded, in an open-addressing hash table for :func:`scan_lines`."""

    slots: np.ndarray  # int32 per slot: the name's index, or -1
    words: np.ndarray  # uint64: the folded names in little-endian words, each zero-padded
    offsets: np.ndarray  # int64: name k is words[offsets[k]:offsets[k + 1]]
    lengths: np.ndarray  # int64: name k's length in bytes

    @classmethod
    def build(cls, names: Sequence[str]) -> NameTable:
        """``names`` must be distinct case-insensitively. A name that is no identifier is kept
        out of the table: no canonical line holds it, and an ad with another line is classad2's."""
        if len({n.lower() for n in names}) != len(names):
            raise ValueError(f"names must be distinct case-insensitively: {sorted(names, key=str.lower)}")
        # OR-ing 0x20 folds letters to lower case, and maps no other identifier character onto
        # another one ('_' becomes DEL, which no name holds): the same test as the scan's
        folded = [bytes(c | 0x20 for c in n.encode("ascii")) if _IDENTIFIER.fullmatch(n) else b"" for n in names]
        size = 1
        while size < max(SLOTS_PER_NAME * len(names), len(names) + 1):  # an empty slot ends every probe
            size *= 2
        slots = np.full(size, -1, dtype=np.int32)
        padded = [f + b"\0" * (-len(f) % 8) for f in folded]
        offsets = np.zeros(len(names) + 1, dtype=np.int64)
        offsets[1:] = np.cumsum([len(f) // 8 for f in padded])
        words = np.frombuffer(b"".join(padded) + b"\0" * 8, dtype="<u8")
        for k, name in enumerate(folded):
            if not name:
                continue
            text = name + b"\0" * 8
            slot = _hash(np.ndarray((len(name),), dtype="<u8", buffer=text, strides=(1,)), 0, len(name), size - 1)
            while slots[slot] >= 0:
                slot = (slot + 1) & (size - 1)
            slots[slot] = k
        return cls(slots, words, offsets, np.array([len(f) for f in folded], dtype=np.int64))


class Lines(NamedTuple):
    """What :func:`scan_lines` found in a chunk. Per ad: its first line (counted in the chunk
    from 0), its bytes ``[begin, end)``, and whether a line of it is not canonical. Per ad and
    wanted name (a repeated name's last line wins): the value's bytes ``[start, end)``, its kind
    of literal, and the number it spells (INT and REAL; INT also as an exact int64). Where the ad
    does not have the name: start -1, ABSENT, integer 0, and the end and number undefined."""

    n_lines: int
    first_line: np.ndarray
    begin: np.ndarray
    end: np.ndarray
    odd: np.ndarray
    value_start: np.ndarray
    value_end: np.ndarray
    literal: np.ndarray
    number: np.ndarray
    integer: np.ndarray


def scan_lines(data: bytes, n: int, table: NameTable, ads: int = 0, *, white_lines: bool = False) -> Lines:
    """Scan ``data[:n]``: whole lines, the last ending with a newline, and at least 8 readable
    bytes after ``n``. Ads are runs of lines between blank lines and ``***`` banners; with
    ``white_lines``, a line of spaces and tabs only is a blank line too, as classad2 reads it
    (the ``-long`` form; found in the same pass, at no cost to a line that starts with a name).
    ``ads`` is how many ads to make room for at first (more are made room for as they come)."""
    buf = np.frombuffer(data, dtype=np.uint8)
    words = np.ndarray((len(data) - 7,), dtype="<u8", buffer=data, strides=(1,))  # 8 bytes from each position
    out = _scan(
        buf, words, n, ads or n // 2048, table.slots, table.words, table.offsets, table.lengths, _POW10, white_lines
    )
    n_lines, n_ads = int(out[0]), int(out[1])
    return Lines(n_lines, *(a[:n_ads] for a in out[2:]))


@numba.njit(cache=True, nogil=True)
def _lowest_lane(t):
    """The index of the lowest byte lane whose high bit is set in ``t`` (not 0)."""
    lowest = t & (~t + _ONE)
    return int(((lowest >> np.uint64(7)) * _LANE_INDEX) >> np.uint64(56))


@numba.njit(cache=True, nogil=True)
def _zero_lanes(x):
    """The high bit of each zero byte lane of ``x``; no carries between lanes, so exact."""
    return ~(((x & _LOW7) + _LOW7) | x) & _HIGH


@numba.njit(cache=True, nogil=True)
def _newline(words, at):
    """The position of the first newline at or after ``at``."""
    while True:
        x = words[at] ^ _NEWLINES
        t = (x - _ONES) & ~x & _HIGH  # the lowest lane flagged is the first zero byte of x
        if t:
            return at + _lowest_lane(t)
        at += 8


@numba.njit(cache=True, nogil=True)
def _name_end(words, at):
    """The position of the first byte at or after ``at`` that is not in [A-Za-z0-9_]."""
    while True:
        w = words[at]
        # Lane tests valid for ASCII bytes: x + (0x80 - lo) sets the high bit when x >= lo, and
        # x + (0x7F - hi) when x > hi. A byte >= 0x80 fails (~w) and can only disturb lanes above it.
        lower = w | _FOLD
        letter = (lower + _ONES * np.uint64(0x80 - 0x61)) & ~(lower + _ONES * np.uint64(0x7F - 0x7A))
        digit = (w + _ONES * np.uint64(0x80 - 0x30)) & ~(w + _ONES * np.uint64(0x7F - 0x39))
        underscore = _zero_lanes(w ^ _UNDERSCORES)
        other = ~((letter | digit | underscore) & ~w) & _HIGH
        if other:
            return at + _lowest_lane(other)
        at += 8


@numba.njit(cache=True, nogil=True)
def _hash(words, at, length, mask):
    """The folded name of ``length`` bytes at ``at``: its first and last 8 bytes and its length, mixed."""
    if length >= 8:
        first = words[at] | _FOLD
        last = words[at + length - 8] | _FOLD
    else:
        first = (words[at] | _FOLD) & ((_ONE << np.uint64(8 * length)) - _ONE)
        last = first
    h = (first ^ (last << _ONE) ^ np.uint64(length)) * _HASH_MULT
    return int(h >> np.uint64(40)) & mask


@numba.njit(cache=True, nogil=True)
def _scan(buf, words, n, capacity, slots, names, offsets, lengths, pow10, white):
    n_names = len(offsets) - 1
    capacity = max(16, capacity)
    first_line = np.empty(capacity, dtype=np.int64)
    begin = np.empty(capacity, dtype=np.int64)
    end = np.empty(capacity, dtype=np.int64)
    odd = np.empty(capacity, dtype=np.bool_)
    value_start = np.empty((capacity, n_names), dtype=np.int64)
    value_end = np.empty((capacity, n_names), dtype=np.int64)
    literal = np.empty((capacity, n_names), dtype=np.int8)
    number = np.empty((capacity, n_names), dtype=np.float64)
    integer = np.empty((capacity, n_names), dtype=np.int64)
    pos, line, n_ads = 0, 0, 0
    while True:
        pos, line, n_ads = _fill(
            buf, words, n, slots, names, offsets, lengths, pow10, white, pos, line, n_ads,
            first_line, begin, end, odd, value_start, value_end, literal, number, integer,
        )  # fmt: skip
        if pos >= n:
            break
        # Out of rows. Growing here, not in _fill's loop: arrays reassigned inside a loop cost
        # numba reference counting on every pass.
        capacity *= 2
        first_line = _grown(first_line, capacity)
        begin = _grown(begin, capacity)
        end = _grown(end, capacity)
        odd = _grown(odd, capacity)
        value_start = _grown(value_start, capacity)
        value_end = _grown(value_end, capacity)
        literal = _grown(literal, capacity)
        number = _grown(number, capacity)
        integer = _grown(integer, capacity)
    return line, n_ads, first_line, begin, end, odd, value_start, value_end, literal, number, integer


@numba.njit(cache=True, nogil=True)
def _fill(
    buf, words, n, slots, names, offsets, lengths, pow10, white, pos, line, n_ads,
    first_line, begin, end, odd, value_start, value_end, literal, number, integer,
):  # fmt: skip
    """Scan from ``pos`` (at a line start, outside an ad when ``n_ads`` rows are filled) until
    ``n``, or until a new ad finds no free row; return where it stopped."""
    mask = len(slots) - 1
    capacity = len(begin)
    ad = n_ads - 1
    in_ad = False
    while pos < n:
        c = buf[pos]
        if c == 10:  # a blank line ends an ad
            in_ad = False
            pos += 1
            line += 1
            continue
        if c == 42:  # so does a history file's "*** " banner
            in_ad = False
            pos = _newline(words, pos) + 1
            line += 1
            continue
        if white and (c == 32 or c == 9):  # so does a line of white space only, to classad2
            e = _white_end(buf, pos)
            if e >= 0:
                in_ad = False
                pos = e + 1
                line += 1
                continue
        if not in_ad:
            if ad + 1 == capacity:
                break
            in_ad = True
            ad += 1
            first_line[ad] = line
            begin[ad] = pos
            odd[ad] = False
            # value_end and number are read only where a value was found: not cleared
            value_start[ad, :] = -1
            literal[ad, :] = ABSENT
            integer[ad, :] = 0

        # Canonical: a name [A-Za-z_][A-Za-z0-9_]*, then " = " and a value not starting with a
        # space. classad2 accepts more (other spacing, comments), so any other line makes its
        # whole ad classad2's.
        p = pos
        canonical = False
        if c == 95 or 97 <= (c | 0x20) <= 122:
            p = _name_end(words, pos + 1)
            canonical = buf[p] == 32 and buf[p + 1] == 61 and buf[p + 2] == 32 and buf[p + 3] != 32
        e = _newline(words, p)
        if not canonical:
            odd[ad] = True
        else:
            length = p - pos
            slot = _hash(words, pos, length, mask)
            while slots[slot] >= 0:
                k = slots[slot]
                if lengths[k] == length and _same_name(words, pos, length, names, offsets[k]):
                    vs = p + 3
                    value_start[ad, k] = vs
                    value_end[ad, k] = e
                    kind, value, whole = _literal(buf, words, vs, e, pow10)
                    literal[ad, k] = kind
                    number[ad, k] = value
                    integer[ad, k] = whole
                    break
                slot = (slot + 1) & mask
        end[ad] = e + 1
        pos = e + 1
        line += 1
    return pos, line, ad + 1


@numba.njit(cache=True, nogil=True)
def _white_end(buf, at):
    """The newline that ends the line from ``at`` if the line is spaces and tabs only, else -1."""
    while buf[at] == 32 or buf[at] == 9:
        at += 1
    return at if buf[at] == 10 else -1


@numba.njit(cache=True, nogil=True)
def _same_name(words, at, length, names, first):
    """Whether the folded ``length`` bytes at ``at`` are the name whose words start at ``first``."""
    i = 0
    while length > 8:
        if (words[at + i] | _FOLD) != names[first + i // 8]:
            return False
        i += 8
        length -= 8
    tail = (words[at + i] | _FOLD) & (_ALL >> np.uint64(64 - 8 * length))
    return tail == names[first + i // 8]


def texts(data: bytes, starts: np.ndarray, ends: np.ndarray) -> list[str]:
    """The texts ``data[starts[i]:ends[i]]`` (no newline in any), decoded as UTF-8 with
    replacement: copied end to end with newlines between, decoded and split in one go, which
    costs a fraction of slicing and decoding each. (An invalid sequence cannot reach past its
    text: the decoder replaces it and starts again at the newline, as it would at the end.)"""
    if not len(starts):
        return []
    joined = _joined(np.frombuffer(data, dtype=np.uint8), starts.astype(np.int64), ends.astype(np.int64))
    decoded: str = joined.tobytes().decode("utf-8", "replace")
    return decoded.split("\n")


@numba.njit(cache=True, nogil=True)
def _joined(buf, starts, ends):
    out = np.empty(int((ends - starts).sum()) + len(starts) - 1, dtype=np.uint8)
    at = 0
    for i in range(len(starts)):
        if i:
            out[at] = 10
            at += 1
        for k in range(starts[i], ends[i]):
            out[at] = buf[k]
            at += 1
    return out


def first_equal(data: bytes, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """For each text ``data[starts[i]:ends[i]]``, the index of the first text equal to it (``i``
    itself for the first of its kind), so that a column of repeated strings (users, groups,
    sites) is decoded once per distinct value. ``data`` needs 8 readable bytes after each text."""
    words = np.ndarray((len(data) - 7,), dtype="<u8", buffer=data, strides=(1,))
    first: np.ndarray = _first_equal(words, starts.astype(np.int64), ends.astype(np.int64))
    return first


@numba.njit(cache=True, nogil=True)
def _first_equal(words, starts, ends):
    size = 1
    while size < 2 * len(starts) + 1:
        size *= 2
    slots = np.full(size, -1, dtype=np.int64)
    first = np.empty(len(starts), dtype=np.int64)
    for i in range(len(starts)):
        at, length = starts[i], ends[i] - starts[i]
        h = np.uint64(length)
        for k in range(0, length, 8):
            w = words[at + k]
            if length - k < 8:
                w &= _ALL >> np.uint64(64 - 8 * (length - k))
            h = (h ^ w) * _HASH_MULT
        slot = int(h >> np.uint64(40)) & (size - 1)
        while True:
            j = slots[slot]
            if j < 0:
                slots[slot] = i
                first[i] = i
                break
            if ends[j] - starts[j] == length and _same_bytes(words, at, starts[j], length):
                first[i] = j
                break
            slot = (slot + 1) & (size - 1)
    return first


@numba.njit(cache=True, nogil=True)
def _same_bytes(words, a, b, length):
    k = 0
    while length - k >= 8:
        if words[a + k] != words[b + k]:
            return False
        k += 8
    if k == length:
        return True
    tail = _ALL >> np.uint64(64 - 8 * (length - k))
    return (words[a + k] & tail) == (words[b + k] & tail)


@numba.njit(cache=True, nogil=True)
def _grown(a, capacity):
    b = np.empty((capacity, *a.shape[1:]), dtype=a.dtype)
    b[: len(a)] = a
    return b


@numba.njit(cache=True, nogil=True)
def _literal(buf, words, vs, ve, pow10):
    """(kind of literal, its number or NaN, its exact integer or 0) of the value ``buf[vs:ve]``."""
    width = ve - vs
    if width <= 0:
        return OTHER, np.nan, 0
    c = buf[vs]
    if c == 34:  # "...": a plain string, or one with escapes (ESCAPED), or something else
        if width < 2 or buf[ve - 1] != 34:
            return OTHER, np.nan, 0
        i = vs + 1
        while i < ve - 1:  # 8 bytes at a time; lanes past the closing quote are zeroed
            w = words[i]
            if ve - 1 - i < 8:
                w &= _ALL >> np.uint64(64 - 8 * (ve - 1 - i))
            if _zero_lanes(w ^ _QUOTES) | _zero_lanes(w ^ _BACKSLASHES):
                return _escaped(buf, i, ve), np.nan, 0
            i += 8
        return STRING, np.nan, 0
    if c == 45 or 48 <= c <= 57:  # -?(0|[1-9]d*)(.d+)?
        if width > _MAX_NUMBER_WIDTH:
            return OTHER, np.nan, 0
        i = vs + (c == 45)
        first = i
        mantissa = 0
        while i < ve and 48 <= buf[i] <= 57:
            mantissa = mantissa * 10 + (buf[i] - 48) if i - first < _MAX_INT_DIGITS else mantissa
            i += 1
        n_int = i - first
        if n_int == 0 or (n_int > 1 and buf[first] == 48) or n_int > _MAX_INT_DIGITS:
            return NUMBER_TEXT, np.nan, 0
        sign = -1 if c == 45 else 1
        if i == ve:
            return INT, float(mantissa) * sign, mantissa * sign
        if buf[i] != 46:
            return NUMBER_TEXT, np.nan, 0
        i += 1
        dot = i
        while i < ve and 48 <= buf[i] <= 57:
            if i - dot + n_int <= _MAX_REAL_DIGITS:
                mantissa = mantissa * 10 + (buf[i] - 48)
            i += 1
        n_frac = i - dot
        if i != ve or n_frac == 0 or n_int + n_frac > _MAX_REAL_DIGITS:
            return NUMBER_TEXT, np.nan, 0
        return REAL, sign * (float(mantissa) / pow10[n_frac]), 0
    if c == 123:  # {...}: a list, if every element is a literal (decided in Python)
        return (LIST if buf[ve - 1] == 125 else OTHER), np.nan, 0
    if width == 4 and _folded_is(buf, vs, _TRUE):
        return TRUE, np.nan, 0
    if width == 5 and _folded_is(buf, vs, _FALSE):
        return FALSE, np.nan, 0
    if width == 9 and _folded_is(buf, vs, _UNDEFINED):
        return UNDEFINED, np.nan, 0
    return OTHER, np.nan, 0


@numba.njit(cache=True, nogil=True)
def _escaped(buf, i, ve):
    """ESCAPED if every quote in ``buf[i:ve - 1]`` (inside a string literal closed at ``ve - 1``,
    the end of its line) follows a backslash, else OTHER.

    Old ClassAd syntax (what ``-long`` dumps are written in) has one escape: a backslash before a
    quote that is not the last character of the line stands for the quote. Every other
    backslash is itself (``\\n``, ``\\\\``, ``\\101`` are two, two and four characters), and
    one before the closing quote ends the string with a backslash. A quote after no backslash
    ends the string early: what follows is classad2's to make sense of (concatenation, or an
    error). Python decodes an ESCAPED string by replacing each backslash-quote with a quote.
    """
    while i < ve - 1:
        if buf[i] == 34 and buf[i - 1] != 92:  # buf[i - 1] is at worst the opening quote
            return OTHER
        i += 1
    return ESCAPED


@numba.njit(cache=True, nogil=True)
def _folded_is(buf, at, word):
    for i in range(len(word)):  # noqa: SIM110 - numba's nopython mode compiles no generator expression for all()
        if (buf[at + i] | 0x20) != word[i]:
            return False
    return True
