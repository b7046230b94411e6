"""What a store can hold, field by field: the check a record passes before anything is acknowledged.

A record that the collector answers "accepted" for must never fail later, in the flusher
(``OverflowError: Python int too large to convert to SQLite INTEGER`` once stopped every
delivery), in the outbox's serializer (a record nested a few hundred deep), or in the store
(Elasticsearch refuses a keyword of more than 32,766 bytes, an integer past 64 bits, a field
named like its metadata). So every field of every record is checked here, against the types
each kind's declaration in ``mappings/`` gives its fields (its index template's types):

===========  ==========================================================================
type         a value the stores hold
===========  ==========================================================================
keyword      a string of at most :data:`MAX_STRING_BYTES` bytes (UTF-8)
date         an ISO-8601 time, as a string
long         a number within 64 bits (a float too: pandas writes whole columns with gaps as
integer      floats, and Elasticsearch truncates); ``integer`` within 32 bits
double       a finite number of magnitude at most :data:`MAX_MAGNITUDE` (2^63), whole
             numbers within 64 bits (the embedded store's columns)
boolean      true or false
===========  ==========================================================================

Any field may be null. A field the template does not name (a site's extra ClassAd attributes)
takes any of those scalars, a number within :data:`MAX_MAGNITUDE` too.

Why a double is bounded though JSON and both stores hold any finite one: the summaries sum
fields, and products of two, over every record of a day, and a sum past 1.8e308 is no number.
Two walltimes of 1.5e308 summed to infinity, which the embedded store kept as null and the
export as 0.0 core-hours (Elasticsearch refused the summary, and every run of those days'
summaries failed). No record of a pool comes near 2^63 (292 billion years in seconds; the probe
reads amounts below 2^53), and within it a sum of products of two fields overflows only past
10^270 records. Records are flat: an array or an object is refused, whatever its
depth, so neither a serializer nor a store ever recurses into one. Field names are ClassAd-
or column-like words (at most :data:`MAX_FIELDS` of them), never Elasticsearch's own
(``_id``) nor paths (``a.b``).

The check is plain Python over the fields, on purpose: it runs for every record a collector
takes (see the collector's benchmark, bench_collector.py in the source tree, for what it costs).
"""

from __future__ import annotations

import operator
import re
import reprlib
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from functools import cache
from typing import Any

from collector.instants import CANONICAL, utc_second
from mappings.kinds import DECLARED
from mappings.templates import MAX_INDEX_FIELDS as TEMPLATE_FIELDS

__all__ = [
    "MAX_FIELDS", "MAX_INDEX_FIELDS", "MAX_MAGNITUDE", "MAX_STRING_BYTES", "field_types", "is_iso_time",
    "record_fault", "records_faults", "show", "utc_times",
]  # fmt: skip

MAX_STRING_BYTES = 32_766
"""Lucene's largest term: a longer keyword makes Elasticsearch refuse the whole document."""

MAX_FIELDS = 256
"""Fields of one record, unless the collector's ``max_fields_per_record`` says otherwise: a
probe's table has about forty (a hundred with a site's extra attributes); the index templates
stop an index at :data:`MAX_INDEX_FIELDS`."""

MAX_INDEX_FIELDS = TEMPLATE_FIELDS
"""Fields one index may map (``index.mapping.total_fields.limit`` in every template of
``mappings/``, Elasticsearch's default made explicit): the fields of records of many shapes
add up in one monthly index, and a document that would map more is refused by the store (a
dead letter in the collector's outbox), never a mapping that grows without end."""

MAX_MAGNITUDE = 2.0**63
"""The largest magnitude of a number a record may hold, a double's as a long's: within it no sum
the summaries make can overflow (see the module docstring)."""

_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,127}")
_INT64 = (-(2**63), 2**63 - 1)
_INT32 = (-(2**31), 2**31 - 1)
_SURE_FIT = MAX_STRING_BYTES // 4  # characters that fit in any UTF-8 encoding: no need to encode


@cache
def field_types(kind: str) -> Mapping[str, str]:
    """The type of each field the index template of ``kind`` names, as its declaration says
    (:meth:`mappings.fields.Kind.types`: what ``mappings/<kind>.json`` is made from)."""
    return DECLARED[kind].types()


def records_faults(kind: str, docs: Sequence[Mapping[str, Any]], *, max_fields: int = MAX_FIELDS) -> dict[int, str]:
    """Why a store could not hold each of ``docs`` that it could not (by position), as
    :func:`record_fault` says it. Checked a field at a time across the records that have the
    same fields in the same order (a request's records are mostly alike): a column's types and
    ranges in one pass of C-level builtins, and only the records of a column that does not pass
    are looked at one by one. The cost is linear in the fields of the batch, however many
    distinct names its records hold (a record alone in its shape is checked by itself)."""
    faults: dict[int, str] = {}
    shapes: dict[tuple[str, ...], list[int]] = {}
    for i, doc in enumerate(docs):
        if len(doc) > max_fields:
            faults[i] = _too_many_fields(len(doc), max_fields)
        else:
            shapes.setdefault(tuple(doc), []).append(i)
    types = _types(kind)
    suspects: set[int] = set()
    for names, members in shapes.items():
        if len(members) < _COLUMNAR or not names:  # alone in its shape: a column of one costs more
            suspects.update(members)
            continue
        rows = list(map(operator.itemgetter(*names), map(docs.__getitem__, members)))
        columns: Iterable[Sequence[Any]] = zip(*rows, strict=True) if len(names) > 1 else [rows]
        for name, values in zip(names, columns, strict=True):
            expected = types.get(name) or _dynamic_type(name)
            if name not in types and not _NAME.fullmatch(name):
                suspects.update(members)
            elif not _column_fits(expected, values):
                bad = (m for m, v in zip(members, values, strict=True) if v is not None and _value_fault(expected, v))
                suspects.update(bad)
    for i in sorted(suspects):
        reason = record_fault(kind, docs[i], max_fields=max_fields)
        if reason is not None:
            faults[i] = reason
    return dict(sorted(faults.items()))


_COLUMNAR = 4  # records of one shape from which a column at a time is cheaper than a record at a time


def _too_many_fields(count: int, max_fields: int) -> str:
    return f"a record has at most {max_fields} fields (collector.max_fields_per_record), this one {count}"


def _dynamic_type(name: str) -> str | None:
    """The type the index templates give a field they do not name (their dynamic templates:
    ``*_iso`` is a date; anything else takes any scalar)."""
    return "date" if name.endswith("_iso") else None


@cache
def _types(kind: str) -> Mapping[str, str]:
    return field_types(kind) if kind in DECLARED else {}


_SCALARS = {
    None: {str, bool, int, float, type(None)},
    "keyword": {str, type(None)},
    "text": {str, type(None)},
    "date": {str, type(None)},
    "boolean": {bool, type(None)},
    "long": {int, float, type(None)},
    "integer": {int, float, type(None)},
    "double": {int, float, type(None)},
    "float": {int, float, type(None)},
}


def _column_fits(expected: str | None, values: Sequence[Any]) -> bool:
    """Whether every value of a column fits a field of type ``expected`` (False: look closer)."""
    kinds = set(map(type, values))
    if not kinds <= _SCALARS.get(expected, set()):
        return False
    if str in kinds:
        texts = values if len(kinds) == 1 else [v for v in values if type(v) is str]
        if max(map(len, texts)) > _SURE_FIT:
            return False
        if expected == "date":
            if not all(map(CANONICAL.fullmatch, texts)):
                return False  # another form of time, or none: look at each (utc_times rewrites them)
            try:
                list(map(datetime.fromisoformat, texts))  # in C: a call per value costs more than the parse
            except ValueError:
                return False
    if int in kinds or float in kinds:
        numbers = values if kinds <= {int, float} else [v for v in values if type(v) in (int, float)]
        low, high = _INT32 if expected == "integer" else _INT64
        if (int in kinds or expected in ("long", "integer")) and not low <= min(numbers) <= max(numbers) <= high:
            return False
        if float in kinds and not -MAX_MAGNITUDE <= min(numbers) <= max(numbers) <= MAX_MAGNITUDE:
            return False
    return True


def record_fault(kind: str, doc: Mapping[str, Any], *, max_fields: int = MAX_FIELDS) -> str | None:
    """Why a store could not hold ``doc``, a record of ``kind`` (None: it can), naming the
    field, what was expected and a short rendering of what came."""
    if len(doc) > max_fields:
        return _too_many_fields(len(doc), max_fields)
    types = _types(kind)
    for name, value in doc.items():
        if value is None:
            continue
        expected = types.get(name) or _dynamic_type(name)
        fault = _value_fault(expected, value)
        if fault is not None:
            return f"field {show(name)}: expected {fault}, got {show(value)}"
        if name not in types and not _NAME.fullmatch(name):
            return (
                f"field name {show(name)}: expected a letter then letters, digits or '_' "
                "(at most 128; no '.', no leading '_')"
            )
    return None


def _value_fault(expected: str | None, value: object) -> str | None:
    """What ``value`` should have been for a field of type ``expected`` (None: any scalar), or
    None when it fits."""
    t = type(value)
    if t is str:
        text: str = value  # type: ignore[assignment]
        if expected not in (None, "keyword", "date", "text"):
            return f"a {expected}"
        if len(text) > _SURE_FIT and len(text.encode("utf-8", "surrogatepass")) > MAX_STRING_BYTES:
            return f"a string of at most {MAX_STRING_BYTES} bytes"
        if expected == "date" and not is_iso_time(text):
            return "an ISO-8601 time with a UTC offset like '2026-11-21T14:00:00Z'"
        return None
    if t is bool:
        return None if expected in (None, "boolean") else f"a {expected}"
    if t is int:
        low, high = _INT32 if expected == "integer" else _INT64
        if expected not in (None, "long", "integer", "double", "float"):
            return f"a {expected}"
        return None if low <= value <= high else f"a whole number from {low} to {high}"  # type: ignore[operator]
    if t is float:
        number: float = value  # type: ignore[assignment]
        if expected in (None, "double", "float"):  # finite: JSON has no NaN or infinity, and orjson refuses them
            return None if -MAX_MAGNITUDE <= number <= MAX_MAGNITUDE else _TOO_LARGE
        if expected in ("long", "integer"):  # Elasticsearch truncates a fraction, as it is asked to
            low, high = _INT32 if expected == "integer" else _INT64
            return None if low <= number <= high else f"a whole number from {low} to {high}"
        return f"a {expected}"
    if t is list or t is dict:
        return f"a {expected or 'scalar'} (records are flat: no arrays or objects)"
    return f"a {expected or 'scalar'}"


_TOO_LARGE = f"a number of magnitude at most 2^63 ({MAX_MAGNITUDE:.4g}: the summaries' sums of larger ones overflow)"


def is_iso_time(text: str) -> bool:
    """Whether ``text`` is an ISO-8601 time with a UTC offset, within the years 1 to 9999 in
    UTC (what :func:`collector.instants.utc_second` takes)."""
    try:
        utc_second(text)
    except ValueError:
        return False
    return True


def utc_times(kind: str, doc: dict[str, Any]) -> None:
    """Write every time of ``doc`` (a record of ``kind`` that :func:`record_fault` passed: its
    ``date`` fields, and the ``*_iso`` ones its template does not name) in the one form of
    :mod:`collector.instants`, in place."""
    types = _types(kind)
    names = [n for n in _date_fields(kind) if n in doc]
    if len(doc) > len(types) or not doc.keys() <= types.keys():
        names += [n for n in doc.keys() - types.keys() if n.endswith("_iso")]
    for name in names:
        value = doc[name]
        if type(value) is str and not CANONICAL.fullmatch(value):
            doc[name] = utc_second(value)


@cache
def _date_fields(kind: str) -> tuple[str, ...]:
    return tuple(name for name, type_ in _types(kind).items() if type_ == "date")


_SHOWN = reprlib.Repr()  # (keyword arguments only from Python 3.12)
_SHOWN.maxlevel, _SHOWN.maxdict, _SHOWN.maxlist = 2, 4, 4
_SHOWN.maxstring = _SHOWN.maxother = _SHOWN.maxlong = 60


def show(value: object) -> str:
    """A short, safe rendering of a value from the network for a message: nested values are cut
    a few levels down (a record nested a thousand deep is shown, not recursed through)."""
    text = _SHOWN.repr(value) if type(value) in (list, dict) else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
