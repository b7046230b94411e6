"""How a ClassAd value becomes a column entry: the literals the scanner found (numbers, plain
strings, booleans, ``undefined``, lists) converted as whole arrays, and classad2's own values
checked against the kind of the attribute (a wrong kind is a counted reject, not an error)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import classad2
import numpy as np

from probes.sources.classad.kernel import (
    ESCAPED,
    FALSE,
    INT,
    LIST,
    NUMBER_TEXT,
    OTHER,
    REAL,
    STRING,
    TRUE,
    UNDEFINED,
    first_equal,
    texts,
)
from probes.sources.classad.model import Attr, Kind, wide_int
from probes.sources.report import ReadTally
from probes.sources.sandbox import evaluate, from_classad
from probes.sources.values import NOT_PLAIN, NotPlain, not_plain

__all__ = [
    "ANY_CODE",
    "BOOL_CODE",
    "KIND_CODE",
    "LIST_CODE",
    "NUMBER_CODE",
    "STRING_CODE",
    "convert_literals",
    "decode_strings",
    "drop_infinities",
    "evaluate",
    "from_classad",
    "list_literal",
    "store_value",
    "type_name",
]


KIND_CODE = {Kind.NUMBER: 0, Kind.STRING: 1, Kind.BOOL: 2, Kind.LIST: 3, Kind.ANY: 4}


NUMBER_CODE, STRING_CODE, BOOL_CODE, LIST_CODE, ANY_CODE = range(5)


def convert_literals(
    kinds: np.ndarray,
    data: bytes,
    literal: np.ndarray,
    number: np.ndarray,
    integer: np.ndarray,
    vs: np.ndarray,
    ve: np.ndarray,
    ad_i: np.ndarray,
    attr_j: np.ndarray,
    n_ads: int,
    tally: ReadTally,
    attrs: Sequence[Attr],
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Convert the values ``data[vs:ve]`` of the pairs (ad_i, attr_j) of one chunk, which the
    scan found to be the literals ``literal`` (spelling ``number``, ``integer``).

    All pairs are handled at once, whatever their attribute, so that the numpy calls are per
    chunk, not per attribute. Returns ``numeric`` (n_ads x attrs, float64, for NUMBER
    attributes), ``objects`` (n_ads x attrs, for the others; both column-major) and, per pair, whether the value
    was a literal; the rest are left for classad2.
    """
    # column-major: each attribute's column, which the tables are built from, is contiguous
    numeric = np.full((n_ads, len(kinds)), np.nan, order="F")
    objects = np.full((n_ads, len(kinds)), None, dtype=object, order="F")
    fast = np.zeros(len(vs), dtype=bool)
    if not len(vs):
        return numeric, objects, fast
    kind = kinds[attr_j]
    # each pair's cell in the (ads x attributes) tables, written through flat views: a fraction of
    # the cost of 2-D indexing
    cell = attr_j * n_ads + ad_i
    numeric_cells, object_cells = numeric.ravel(order="F"), objects.ravel(order="F")

    def reject(sel: np.ndarray, got: str) -> None:
        if len(sel):  # rare: a value of the wrong kind
            for j, count in zip(*np.unique(attr_j[sel], return_counts=True), strict=True):
                if not attrs[j].finite:  # else its ad is malformed, and says so (limits.out_of_range)
                    tally.rejects[f"{attrs[j].name}: expected a {attrs[j].kind.value}, got {got}"] += int(count)

    def store(sel: np.ndarray, accepts: tuple[int, ...], values: Any, got: str) -> None:
        k = kind[sel]
        to_obj = k == accepts[0]
        for other in accepts[1:]:
            to_obj |= k == other
        object_cells[cell[sel[to_obj]]] = values if np.isscalar(values) else values[to_obj]
        reject(sel[~to_obj], got)
        fast[sel] = True

    # numbers in spellings the scan leaves to Python (exponents, long mantissas, integers of more
    # digits than it reads, which classad2 would read as 0 past 64 bits)
    # digits: of the few values the scan did not take, first; its literals need no look
    odd = np.flatnonzero((literal == NUMBER_TEXT) | (literal == OTHER))
    leading = np.frombuffer(data, dtype=np.uint8)[vs[odd]]
    for i in odd[(leading == 45) | ((leading >= 48) & (leading <= 57))].tolist():
        text = data[vs[i] : ve[i]].decode("ascii", "replace")
        m = _NUMBER_TEXT.fullmatch(text)
        if m is None:
            if kind[i] == NUMBER_CODE and (why := not_plain(text)) is not None:
                # not for classad2, which reads 8 of "8 GB": no number (a finite one's ad is malformed)
                fast[i] = True
                store_value(numeric, objects, attrs[attr_j[i]], ad_i[i], attr_j[i], NotPlain(text, why), tally)
            continue
        if m.group(2) is None and m.group(3) is None:
            if kind[i] != NUMBER_CODE or -(2**63) <= _integer(text) < 2**63:
                continue  # an int64 the scan did not take, or not read as a number: classad2's value
            # as the -json reader does (model.wide_int): a real, out of range of any amount
            tally.rejects[f"{attrs[attr_j[i]].name}: an integer beyond 64 bits, read as a real"] += 1
        literal[i], number[i] = REAL, float(text)

    s = np.flatnonzero((literal == INT) | (literal == REAL))
    if len(s):
        to_num = kind[s] == NUMBER_CODE
        numeric_cells[cell[s[to_num]]] = number[s[to_num]]
        fast[s] = True
        s = s[~to_num]
        exact = np.where(literal[s] == INT, integer[s].astype(object), number[s].astype(object))  # Python int and float
        store(s, (ANY_CODE,), exact, "number")
    for code, unescape in ((STRING, False), (ESCAPED, True)):
        s = np.flatnonzero(literal == code)
        if len(s):
            store(s, (STRING_CODE, ANY_CODE), decode_strings(data, vs[s] + 1, ve[s] - 1, unescape=unescape), "string")
    for value, code in ((True, TRUE), (False, FALSE)):
        s = np.flatnonzero(literal == code)
        if len(s):
            store(s, (BOOL_CODE, ANY_CODE), value, "bool")
    fast[literal == UNDEFINED] = True  # None already
    for i in np.flatnonzero(literal == LIST).tolist():
        items = list_literal(data[vs[i] : ve[i]].decode("utf-8", "replace"))
        if items is not None:
            if kind[i] in (LIST_CODE, ANY_CODE):
                objects[ad_i[i], attr_j[i]] = items
            else:
                reject(np.array([i]), "list")
            fast[i] = True
    return numeric, objects, fast


def decode_strings(data: bytes, a: np.ndarray, b: np.ndarray, *, unescape: bool = False) -> np.ndarray:
    """The texts ``data[a:b]`` as an object array of str; with ``unescape``, the insides of
    old-syntax string literals the scan found ESCAPED, each backslash-quote made a quote (the
    one escape of that syntax: see :func:`~probes.sources.classad.kernel._escaped`).

    Each distinct text of the chunk is decoded once. Users, groups and sites repeat in every
    ad: those that repeat within the chunk also share one str object across chunks, which keeps
    a table of 200,000 jobs in a third of the memory. The texts seen once (job ids, hosts) skip
    that cache, which is bounded so that it cannot grow with history.
    """
    first = first_equal(data, a, b)
    distinct = np.flatnonzero(first == np.arange(len(first)))
    repeated = np.bincount(first, minlength=len(first))[distinct] > 1
    decoded = np.empty(len(distinct), dtype=object)
    found = texts(data, a[distinct], b[distinct])
    # a backslash-quote is ASCII: replacing it after decoding gives what decoding the unescaped bytes would
    decoded[:] = [t.replace('\\"', '"') for t in found] if unescape else found
    if len(_STRINGS) > _MAX_CACHED:
        _STRINGS.clear()
    shared = decoded[repeated]
    decoded[repeated] = list(map(_STRINGS.setdefault, shared, shared))
    rank = np.empty(len(first), dtype=np.int64)
    rank[distinct] = np.arange(len(distinct))
    out: np.ndarray = decoded[rank[first]]
    return out


_NUMBER_TEXT = re.compile(r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?")


def _integer(text: str) -> int:
    """An integer's text as an int; one of more digits than any 64-bit integer as +-2^64 (Python
    refuses to convert more than 4300 digits)."""
    digits = len(text) - text.startswith("-")
    if digits > 20:
        return -(2**64) if text.startswith("-") else 2**64
    return int(text)


_STRINGS: dict[str, str] = {}


_MAX_CACHED = 20_000


_LIST_ITEM = re.compile(
    r'\s*(?:"([^"\\]*)"|(-?(?:0|[1-9]\d{0,17})(?:\.\d+)?(?:[eE][+-]?\d+)?)|(true|false|undefined))\s*(,|$)',
    re.IGNORECASE,
)


def list_literal(text: str) -> list[Any] | None:
    """Parse ``{ 1,"a",undefined }``; None when any element is not a literal."""
    inner = text[1:-1]
    if not inner.strip():
        return []
    items: list[Any] = []
    pos = 0
    while pos < len(inner):
        m = _LIST_ITEM.match(inner, pos)
        if m is None:
            return None
        string, number, word, comma = m.groups()
        if string is not None:
            items.append(string)
        elif number is not None:
            items.append(float(number) if any(c in number for c in ".eE") else int(number))
        else:
            items.append({"true": True, "false": False}.get(word.lower()))
        pos = m.end()
        if not comma:
            break
    return items if pos >= len(inner) else None


def store_value(
    numeric: np.ndarray, objects: np.ndarray, attr: Attr, row: int, j: int, value: Any, tally: ReadTally
) -> None:
    """Put a classad2 value into its typed column, counting values of the wrong type."""
    if isinstance(value, NotPlain):  # a number with a unit, hexadecimal (probes.sources.values)
        numeric[row, j] = np.nan
        if not attr.finite:  # a finite attribute's ad is malformed instead (limits)
            tally.rejects[f"{attr.name}: {NOT_PLAIN}, ignored"] += 1
        return
    if attr.kind is Kind.NUMBER:
        # classad2's error and undefined are an IntEnum: never numbers (``Cpus = error`` is not 1)
        if isinstance(value, (int, float)) and not isinstance(value, (bool, classad2.Value)):
            if isinstance(value, int) and not -(2**63) <= value < 2**63:  # from JSON, which has no bound
                tally.rejects[f"{attr.name}: an integer beyond 64 bits, read as a real"] += 1
                value = wide_int(value)
            numeric[row, j] = value
            return
        numeric[row, j] = np.nan
    elif value is None or attr.kind is Kind.ANY or isinstance(value, _PYTHON_TYPE[attr.kind]):
        objects[row, j] = value
        return
    else:
        objects[row, j] = None
    if value is not None and not attr.finite:  # a finite attribute's ad is malformed instead (limits)
        tally.rejects[f"{attr.name}: expected a {attr.kind.value}, got {type_name(value)}"] += 1


_PYTHON_TYPE: dict[Kind, type] = {Kind.STRING: str, Kind.BOOL: bool, Kind.LIST: list}


def type_name(value: Any) -> str:
    if value is classad2.Value.Error:
        return "error"
    return type(value).__name__


def drop_infinities(
    numeric: np.ndarray, attrs: Sequence[Attr], tally: ReadTally, kept: np.ndarray | None = None
) -> None:
    """A number out of range (``1e400``, ``real("INF")``) is a malformed value, not a number:
    NaN in ``numeric`` (ads x attributes, changed in place), counted in ``tally`` per attribute
    among the ads ``kept`` (a mask; all if None: an ad quarantined already said why)."""
    bad = np.isinf(numeric)
    if not bad.any():
        return
    counted = bad if kept is None else bad & kept[:, None]
    for j in np.flatnonzero(counted.any(axis=0)).tolist():
        tally.rejects[f"{attrs[j].name}: not a finite number, ignored"] += int(counted[:, j].sum())
    numeric[bad] = np.nan
