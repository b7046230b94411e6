"""The data types of ClassAd reading: the attributes wanted (:class:`Attr` of a :class:`Kind`), the
columns read (:class:`AdColumns`), and one ad as a classad2 object."""

from __future__ import annotations

import enum
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import classad2
import numpy as np
import pandas as pd

from probes.sources.classad_semantics import use_condor_functions

__all__ = [
    "CHUNK_BYTES",
    "AdColumns",
    "Attr",
    "Kind",
    "empty_column",
    "expr_text",
    "fallbacks",
    "is_expr",
    "json_to_classad",
    "repeat",
    "to_classad",
    "unique_attrs",
    "wide_int",
]

#: Bytes read from a file at a time; an ad longer than this is read whole all the same. Each chunk
#: costs a few hundred numpy calls whatever its length, so 4 MiB (~1,100 job ads) reads a history
#: on less CPU than 2 MiB did, for a few MB more at the peak (the benchmarks' notes on the readers).
CHUNK_BYTES = 1 << 22


class Kind(enum.Enum):
    """How an attribute's values are held in its column."""

    NUMBER = "number"  # float64, NaN where missing or undefined
    STRING = "string"  # str or None
    BOOL = "bool"  # True, False or None
    LIST = "list"  # list or None
    ANY = "any"  # the value as classad2 evaluates it, None for missing or undefined


@dataclass(frozen=True)
class Attr:
    """An attribute a table needs.

    ``unless`` names other attributes: where any of them is present, this one is not read (its
    column holds None or NaN there). ``RequestMemory`` is usually an expression, and behind
    ``MemoryProvisioned`` it is not needed; this spares evaluating it for every job. The same
    makes a list of fallbacks cheap ("the first of Owner, User present").

    ``limits`` (NUMBER only): the range ``[low, high)`` a value must lie in. An ad with a value
    outside it (a negative ``Cpus``, a ``RemoteWallClockTime`` of 2^63) is malformed and
    quarantined by the reader (:mod:`probes.sources.classad.limits`).

    ``finite`` (NUMBER only): a value that is present but does not evaluate to a finite number
    (``undefined``, ``error``, a string, ``real("INF")``, ``Cpus = Cpus``) makes the ad malformed
    too, where it would otherwise be a missing value: an amount that is added up (a slot's
    ``Cpus``) must be known, or a neighbour is billed for it.
    """

    name: str
    kind: Kind = Kind.ANY
    unless: str | tuple[str, ...] | None = None
    limits: tuple[float, float] | None = None
    finite: bool = False

    @property
    def shadows(self) -> tuple[str, ...]:
        """The attributes whose presence makes this one unread."""
        if self.unless is None:
            return ()
        return (self.unless,) if isinstance(self.unless, str) else tuple(self.unless)


def fallbacks(names: Sequence[str], kind: Kind, limits: tuple[float, float] | None = None) -> list[Attr]:
    """Attributes of which the first present is used: each is read only where none of those
    before it is present."""
    return [Attr(name, kind, unless=tuple(names[:i]) or None, limits=limits) for i, name in enumerate(names)]


def unique_attrs(attrs: Sequence[Attr]) -> list[Attr]:
    """One Attr per name (names are case-insensitive), in first-seen order. An attribute wanted
    twice is skipped only where both occurrences would skip it."""
    merged: dict[str, Attr] = {}
    for a in attrs:
        key = a.name.lower()
        if key not in merged:
            merged[key] = a
            continue
        old = merged[key]
        common = tuple(u for u in old.shadows if u.lower() in {v.lower() for v in a.shadows})
        merged[key] = Attr(
            old.name, old.kind, unless=common or None, limits=old.limits or a.limits, finite=old.finite or a.finite
        )
    return list(merged.values())


@dataclass
class AdColumns:
    """The wanted attributes of a sequence of ads, one column (numpy array) per attribute.

    ``path`` and ``line`` say where each ad came from (its first line, 1-based).
    """

    columns: dict[str, np.ndarray]
    path: np.ndarray
    line: np.ndarray
    raw: np.ndarray | None = None  # with ``keep_raw``: each ad's text (-long) or dict (-json)

    def __len__(self) -> int:
        return len(self.line)

    def __getitem__(self, name: str) -> np.ndarray:
        return self.columns[name]

    def take(self, rows: np.ndarray) -> AdColumns:
        """The ads of ``rows`` (a boolean mask or positions)."""
        return AdColumns(
            {k: v[rows] for k, v in self.columns.items()},
            self.path[rows],
            self.line[rows],
            self.raw[rows] if self.raw is not None else None,
        )

    @staticmethod
    def concat(parts: Sequence[AdColumns], attrs: Sequence[Attr]) -> AdColumns:
        """One AdColumns of all the parts; the parts give up their columns to it."""
        if not parts:
            return AdColumns(
                {a.name: empty_column(a.kind) for a in attrs},
                np.array([], dtype=object),
                np.array([], dtype=np.int64),
            )
        if len(parts) == 1:
            return parts[0]
        raws = [p.raw for p in parts]
        present = [r for r in raws if r is not None]
        columns = {}
        for a in attrs:
            # one column at a time, releasing the parts' pieces, so that the whole is not held twice
            columns[a.name] = np.concatenate([p.columns.pop(a.name) for p in parts])
        return AdColumns(
            columns,
            np.concatenate([p.path for p in parts]),
            np.concatenate([p.line for p in parts]),
            np.concatenate(present) if len(present) == len(raws) else None,
        )

    def first(self, names: Sequence[str], default: Any = None) -> np.ndarray:
        """Per ad, the value of the first of ``names`` that is present (not None/NaN)."""
        if not names:
            return repeat(default, len(self))
        out = self.columns[names[0]].copy()
        missing = np.flatnonzero(pd.isna(out))
        for name in names[1:]:
            if not len(missing):
                break
            taken = self.columns[name][missing]
            out[missing] = taken
            missing = missing[pd.isna(taken)]  # only the rows still without a value are looked at again
        if default is not None:
            out[missing] = default
        return out

    def classad(self, i: int) -> classad2.ClassAd:
        """The i-th ad as a classad2.ClassAd (needs ``keep_raw``), to evaluate expressions in it."""
        if self.raw is None:
            raise ValueError("these ads were read without keep_raw=True")
        return to_classad(self.raw[i])


def to_classad(raw: str | dict[str, Any]) -> classad2.ClassAd:
    """A classad2.ClassAd from an ad's -long text or -json object."""
    if isinstance(raw, dict):
        return json_to_classad(raw)
    use_condor_functions()
    return classad2.parseOne(raw, classad2.ParserType.Old)


def repeat(value: object, n: int) -> np.ndarray:
    """An object array of ``n`` references to one object (np.full would copy a str n times)."""
    out = np.empty(n, dtype=object)
    out.fill(value)
    return out


def empty_column(kind: Kind, n: int = 0) -> np.ndarray:
    if kind is Kind.NUMBER:
        return np.full(n, np.nan)
    return np.full(n, None, dtype=object)


def is_expr(raw: Any) -> bool:
    return isinstance(raw, str) and raw.startswith("/Expr(") and raw.endswith(")/")


def json_to_classad(obj: dict[str, Any]) -> classad2.ClassAd:
    """A classad2.ClassAd from one object of HTCondor's JSON (expressions as "/Expr(...)/")."""
    use_condor_functions()
    ad = classad2.ClassAd()
    for key, raw in obj.items():
        if isinstance(raw, int) and not isinstance(raw, bool) and not -(2**63) <= raw < 2**63:
            ad[key] = wide_int(raw)  # the bindings refuse an integer beyond 64 bits
        elif isinstance(raw, (bool, int, float, str)) and not is_expr(raw):
            ad[key] = raw
        else:
            ad[key] = classad2.ExprTree(expr_text(raw))
    return ad


def wide_int(value: int) -> float:
    """An integer beyond 64 bits (from JSON, which has no bound) as the real nearest it,
    infinite past a double's range: a malformed value where a number is read."""
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def expr_text(raw: Any) -> str:
    """A JSON value as ClassAd expression text."""
    if is_expr(raw):
        return str(raw[6:-2])
    if raw is None:
        return "undefined"
    if isinstance(raw, bool):
        return "true" if raw else "false"
    if isinstance(raw, int) and not -(2**63) <= raw < 2**63:
        return repr(wide_int(raw))  # classad2 reads an integer beyond 64 bits as 0
    if isinstance(raw, (int, float)):
        return repr(raw)
    if isinstance(raw, str):
        return str(classad2.quote(raw))
    if isinstance(raw, list):
        return "{ " + ", ".join(expr_text(v) for v in raw) + " }"
    if isinstance(raw, dict):
        return "[ " + " ".join(f"{k} = {expr_text(v)};" for k, v in raw.items()) + " ]"
    raise TypeError(f"not a JSON value: {raw!r}")
