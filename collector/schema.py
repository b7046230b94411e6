"""What a store can hold, field by field: the check a record passes before anything is acknowledged.

A record that the collector answers "accepted" for must never fail later, in the flusher
(``OverflowError: Python int too large to convert to SQLite INTEGER`` once stopped every
delivery), in the outbox's serializer (a record nested a few hundred deep), or in the store
(Elasticsearch refuses a keyword of more than 32,766 bytes, an integer past 64 bits, a field
named like its metadata). So every field of every record is checked here, against the types
the index templates of ``mappings/`` give each kind's fields:

===========  ==========================================================================
type         a value the stores hold
===========  ==========================================================================
keyword      a string of at most :data:`MAX_STRING_BYTES` bytes (UTF-8)
date         an ISO-8601 time, as a string
long         a number within 64 bits (a float too: pandas writes whole columns with gaps as
integer      floats, and Elasticsearch truncates); ``integer`` within 32 bits
double       a finite number, whole numbers within 64 bits (the embedded store's columns)
boolean      true or false
===========  ==========================================================================

Any field may be null. A field the template does not name (a site's extra ClassAd attributes)
takes any of those scalars. Records are flat: an array or an object is refused, whatever its
depth, so neither a serializer nor a store ever recurses into one. Field names are ClassAd-
or column-like words (at most :data:`MAX_FIELDS` of them), never Elasticsearch's own
(``_id``) nor paths (``a.b``).

The check is plain Python over the fields, on purpose: it runs for every record a collector
takes (see the collector's benchmark, bench_collector.py in the source tree, for what it costs).
"""

from __future__ import annotations

import itertools
import json
import operator
import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from functools import cache
from typing import Any

from mappings import DIRECTORY

__all__ = ["MAX_FIELDS", "MAX_STRING_BYTES", "field_types", "is_iso_time", "record_fault", "records_faults", "show"]

MAX_STRING_BYTES = 32_766
"""Lucene's largest term: a longer keyword makes Elasticsearch refuse the whole document."""

MAX_FIELDS = 256
"""Fields of one record: a probe's table has about forty; Elasticsearch's index stops at 1,000."""

_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,127}")
_INT64 = (-(2**63), 2**63 - 1)
_INT32 = (-(2**31), 2**31 - 1)
_SURE_FIT = MAX_STRING_BYTES // 4  # characters that fit in any UTF-8 encoding: no need to encode


@cache
def field_types(kind: str) -> Mapping[str, str]:
    """The type of each field the index template of ``kind`` names (``mappings/<kind>.json``)."""
    template = json.loads((DIRECTORY / f"{kind}.json").read_text())
    properties = template["template"]["mappings"]["properties"]
    return {name: spec.get("type", "object") for name, spec in properties.items()}


def records_faults(kind: str, docs: Sequence[Mapping[str, Any]]) -> dict[int, str]:
    """Why a store could not hold each of ``docs`` that it could not (by position), as
    :func:`record_fault` says it. Checked a field at a time across the batch: a column's types
    and ranges in one pass of C-level builtins (a request's records are mostly alike), and only
    the records of a column that does not pass are looked at one by one."""
    suspects = {i for i, doc in enumerate(docs) if len(doc) > MAX_FIELDS}
    types = field_types(kind)
    names = sorted(set().union(*docs)) if docs else []
    for name, values in zip(names, _columns(docs, names), strict=True):
        expected = types.get(name)
        if (expected is None and not _NAME.fullmatch(name)) or not _column_fits(expected, values):
            suspects.update(i for i, v in enumerate(values) if v is not None or name in docs[i])
    faults = {}
    for i in sorted(suspects):
        reason = record_fault(kind, docs[i])
        if reason is not None:
            faults[i] = reason
    return faults


def _columns(docs: Sequence[Mapping[str, Any]], names: list[str]) -> list[Sequence[Any]]:
    """The values of each of ``names`` in ``docs`` (None where a record lacks it), transposed
    in C when every record has every name (the common case), else a name at a time."""
    try:
        rows = list(map(operator.itemgetter(*names), docs)) if len(names) > 1 else None
    except KeyError:
        rows = None
    if rows is not None:
        return list(zip(*rows, strict=True))
    return [list(map(dict.get, docs, itertools.repeat(name))) for name in names]  # type: ignore[arg-type]


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
            try:
                list(map(datetime.fromisoformat, texts))  # in C: a call per value costs more than the parse
            except ValueError:
                return False
    if int in kinds or float in kinds:
        numbers = values if kinds <= {int, float} else [v for v in values if type(v) in (int, float)]
        low, high = _INT32 if expected == "integer" else _INT64
        if (int in kinds or expected in ("long", "integer")) and not low <= min(numbers) <= max(numbers) <= high:
            return False
    return True


def record_fault(kind: str, doc: Mapping[str, Any]) -> str | None:
    """Why a store could not hold ``doc``, a record of ``kind`` (None: it can), naming the
    field, what was expected and a short rendering of what came."""
    if len(doc) > MAX_FIELDS:
        return f"a record has at most {MAX_FIELDS} fields, this one {len(doc)}"
    types = field_types(kind)
    for name, value in doc.items():
        if value is None:
            continue
        expected = types.get(name)
        fault = _value_fault(expected, value)
        if fault is not None:
            return f"field {show(name)}: expected {fault}, got {show(value)}"
        if expected is None and not _NAME.fullmatch(name):
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
            return "an ISO-8601 time like '2026-11-21T14:00:00Z'"
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
        if expected in (None, "double", "float"):
            return None  # finite: JSON has no NaN or infinity, and orjson refuses them
        if expected in ("long", "integer"):  # Elasticsearch truncates a fraction, as it is asked to
            low, high = _INT32 if expected == "integer" else _INT64
            return None if low <= number <= high else f"a whole number from {low} to {high}"
        return f"a {expected}"
    if t is list or t is dict:
        return f"a {expected or 'scalar'} (records are flat: no arrays or objects)"
    return f"a {expected or 'scalar'}"


def is_iso_time(text: str) -> bool:
    """Whether ``text`` is an ISO-8601 time (``datetime.fromisoformat``'s reading)."""
    try:
        datetime.fromisoformat(text)
    except ValueError:
        return False
    return True


def show(value: object) -> str:
    """A short, safe rendering of a value from the network for a message."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
