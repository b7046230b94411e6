"""The ``-json`` form (``condor_status -json``, ``condor_history -json``): a JSON array of ads,
streamed object by object; expressions (``"/Expr(...)/"``) are evaluated by classad2 in their ad,
as in a ``-long`` dump: an attribute behind a present one is never evaluated, and one that may
call a regular expression is evaluated under the sandbox's budget (:mod:`probes.sources.sandbox`)."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator, Sequence
from typing import Any, TextIO

import classad2
import numpy as np

from probes.errors import SourceError
from probes.sources.classad import model
from probes.sources.classad.limits import MAX_OPERATORS, out_of_range, too_many_operators
from probes.sources.classad.literals import drop_infinities, store_value
from probes.sources.classad.model import AdColumns, Attr, Kind, is_expr, json_to_classad, repeat
from probes.sources.report import Malformed, ReadReport, ReadTally
from probes.sources.sandbox import EvaluationTimeout, evaluate_ad
from probes.sources.values import NotPlain, not_plain

__all__ = ["from_json", "needs_classad2", "read_json"]


def _json_objects(fh: TextIO, path: str, rejects: Counter[str]) -> Iterator[tuple[Any, int]]:
    """Stream the objects of a JSON array without loading the file: (object, first line).

    An object that is not valid JSON (a missing comma, a cut quote, nesting deeper than Python's
    recursion allows) is yielded as a :class:`Malformed` naming its place and the key before
    the damage, and the array is read on from the next ad (a ``{`` that starts a line, as
    HTCondor writes each ad; else the next ``}, {``): one damaged ad costs only itself. Values
    the bindings cannot take are made readable first (:func:`_clean`), counted in ``rejects``.
    """
    decoder = json.JSONDecoder()
    buf = ""
    pos = 0
    line = 1
    started = False
    index = 0  # of the ad in the array, 1-based
    while True:
        # skip separators
        while True:
            gap = _SEPARATORS.match(buf, pos).end()  # type: ignore[union-attr]  # it matches "" at least
            line += buf.count("\n", pos, gap)
            pos = gap
            if pos < len(buf) and buf[pos] == "[" and not started:  # the array's own; any other is damage
                started = True
                pos += 1
                continue
            if pos < len(buf):
                break
            more = fh.read(model.CHUNK_BYTES)
            if not more:
                return
            buf, pos = buf[pos:] + more, 0
        if buf[pos] == "]":
            return
        if not started or (buf[pos] != "{" and index == 0):
            raise SourceError(
                f"{path} line {line}: expected a JSON array of ads (as condor_status -json writes), "
                f"got {buf[pos : pos + 20]!r}"
            )
        # past the first ad, anything else than "{" is damage between two ads: an ad of its own
        index += 1
        grown = False  # an ad that fails is given one more chunk: it may only be cut by the buffer
        while True:
            try:
                obj, end = decoder.raw_decode(buf, pos)
                if not isinstance(obj, dict):
                    raise ValueError(f"expected a JSON object, got {type(obj).__name__}")
                break
            except (ValueError, RecursionError) as exc:  # JSONDecodeError is a ValueError, as is an int of 4,300 digits
                resume = _next_ad(buf, pos + 1)
                more = fh.read(model.CHUNK_BYTES) if resume is None or not grown else ""
                if more:  # the ad may go on in the next chunk
                    buf, pos, grown = buf[pos:] + more, 0, True
                    continue
                if resume is None:
                    resume = len(buf)
                yield _damaged(path, line, index, buf, pos, resume, exc), line
                obj, end = None, resume
                break
        if obj is not None:
            # a lone surrogate can only be spelled as a \u escape: with none, no string of the ad
            # needs a look (the usual case, found at C speed)
            if buf.find("\\u", pos, end) >= 0:
                try:
                    obj = _clean(obj, "", rejects)
                except RecursionError:
                    obj = Malformed(path, line, f"ad {index}: nested deeper than can be read; the ad was skipped",
                                    buf[pos:end])  # fmt: skip
            yield obj, line
        line += buf.count("\n", pos, end)
        pos = end
        if pos > model.CHUNK_BYTES:
            buf, pos = buf[pos:], 0


# Where the next ad of a damaged array starts: "{" at a line start (HTCondor's layout), else "}, {".
_AD_START = re.compile(r"(?m)^\{")
_AD_AFTER = re.compile(r"\}\s*,\s*(\{)")
_SEPARATORS = re.compile(r"[ \t\r\n,]*")  # between ads (a run of them found at C speed)
_KEY = re.compile(r'"((?:[^"\\\n]|\\.){1,200})"\s*:')
_SURROGATE = re.compile("[\ud800-\udfff]")  # in a str from json: only lone ones (pairs are decoded)


def _next_ad(buf: str, at: int) -> int | None:
    """Where the next ad after ``at`` starts in ``buf`` (None: not in it)."""
    m = _AD_START.search(buf, at)
    if m is not None:
        return m.start()
    after = _AD_AFTER.search(buf, at)
    return after.start(1) if after is not None else None


def _damaged(path: str, line: int, index: int, buf: str, pos: int, end: int, exc: Exception) -> Malformed:
    """The malformed ad ``buf[pos:end]`` (the ``index``-th, from ``line``) that ``exc`` refused."""
    text = buf[pos:end]
    if isinstance(exc, json.JSONDecodeError):
        at = min(max(exc.pos - pos, 0), len(text))
        keys = _KEY.findall(text, 0, at)
        where = f" at line {line + text.count(chr(10), 0, at)}" + (f", after key '{keys[-1]}'" if keys else "")
        why = f"invalid JSON ({exc.msg}{where})"
    elif isinstance(exc, RecursionError):
        why = "nested deeper than can be read"
    else:
        why = str(exc)
    last = line + text.rstrip().count("\n")
    return Malformed(path, line, f"ad {index} (lines {line}-{last}): {why}; the ad was skipped", text)


def _clean(value: Any, key: str, rejects: Counter[str]) -> Any:
    """``value`` with each lone surrogate (``"\\ud800"``, no text, which crashes the bindings)
    made U+FFFD, as an invalid UTF-8 byte of a ``-long`` dump is, counted under ``key``.
    (An integer beyond 64 bits is made a real where it is read (:func:`store_value`) or given
    to classad2 (:func:`~probes.sources.classad.model.json_to_classad`).)"""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            rejects[f"{key}: a lone UTF-16 surrogate, replaced by U+FFFD"] += 1
            return _SURROGATE.sub("\ufffd", value)
        return value
    if isinstance(value, list):
        return [_clean(v, key, rejects) for v in value]
    if isinstance(value, dict):
        return {_clean(k, key or "(a key)", rejects): _clean(v, key or str(k), rejects) for k, v in value.items()}
    return value


def read_json(
    text: TextIO, path: str, attrs: Sequence[Attr], strict: bool, keep_raw: bool = False
) -> tuple[AdColumns, ReadReport]:
    tally = ReadTally()
    columns: dict[str, list[Any]] = {a.name: [] for a in attrs}
    lines: list[int] = []
    raws: list[dict[str, Any]] = []
    finite = [j for j, a in enumerate(attrs) if a.finite]
    given: list[dict[int, Any]] = []  # per ad, the raw values of the finite attributes it has
    for obj, line in _json_objects(text, path, tally.rejects):
        if isinstance(obj, Malformed):
            if strict:
                raise obj.error()
            tally.add_malformed(obj)
            continue
        try:
            values = _values(obj, attrs, tally)
        except (classad2.ClassAdException, EvaluationTimeout, ValueError, RecursionError, _TooLong) as exc:
            if isinstance(exc, _TooLong):
                reason = str(exc)
            elif isinstance(exc, classad2.ClassAdException):
                reason = f"cannot parse an expression ({exc})"
            elif isinstance(exc, EvaluationTimeout):
                reason = f"{exc} (a regular expression that backtracks?); the ad was skipped"
            elif isinstance(exc, RecursionError):
                reason = "nested deeper than can be read; the ad was skipped"
            else:
                reason = f"cannot evaluate ({exc}); the ad was skipped"
            m = Malformed(path, line, reason, _dumps(obj))
            if strict:
                raise m.error() from exc
            tally.add_malformed(m)
            continue
        for a, v in zip(attrs, values, strict=True):
            columns[a.name].append(v)
        lines.append(line)
        if keep_raw:
            raws.append(obj)
        if finite:
            given.append(_given(obj, [attrs[j] for j in finite], finite))
    n = len(lines)
    numeric = np.full((n, len(attrs)), np.nan)
    objects = np.full((n, len(attrs)), None, dtype=object)
    for j, a in enumerate(attrs):
        for i, v in enumerate(columns[a.name]):
            store_value(numeric, objects, a, i, j, v, tally)
    keep = np.ones(n, dtype=bool)
    present = np.zeros((n, len(attrs)), dtype=bool)
    for i, values_given in enumerate(given):
        present[i, list(values_given)] = True

    def shown(i: int, j: int) -> str:
        raw = given[i][j]
        return str(raw[6:-2]) if is_expr(raw) else _dumps(raw)

    for i, reason in out_of_range(numeric, attrs, present, shown).items():
        m = Malformed(path, lines[i], reason, _dumps({a.name: columns[a.name][i] for a in attrs}))
        if strict:
            raise m.error()
        tally.add_malformed(m)
        keep[i] = False
    drop_infinities(numeric, attrs, tally, keep)
    rows = slice(None) if keep.all() else keep
    tally.ads += int(keep.sum())
    out = {a.name: (numeric if a.kind is Kind.NUMBER else objects)[rows, j] for j, a in enumerate(attrs)}
    raw = np.array([*raws, None], dtype=object)[:-1][rows] if keep_raw else None
    line_numbers = np.array(lines, dtype=np.int64)[rows]
    return AdColumns(out, repeat(path, len(line_numbers)), line_numbers, raw), tally.report()


class _TooLong(Exception):
    """An expression longer than classad2 can take (:func:`~probes.sources.classad.limits.too_many_operators`)."""


def _values(obj: dict[str, Any], attrs: Sequence[Attr], tally: ReadTally) -> list[Any]:
    """The values of ``attrs`` in one ad: literals as they are, expressions by classad2."""
    folded = {k.lower(): v for k, v in obj.items()}
    values: list[Any] = []
    exprs: list[int] = []  # the attributes only classad2 can evaluate
    for a in attrs:
        raw = folded.get(a.name.lower())
        if any(u.lower() in folded for u in a.shadows):
            values.append(None)  # behind a present attribute: never evaluated
        elif a.kind is Kind.NUMBER and is_expr(raw) and (why := not_plain(str(raw)[6:-2])) is not None:
            values.append(NotPlain(str(raw)[6:-2], why))  # classad2 reads 0x10 as 0 (probes.sources.values)
        elif needs_classad2(raw):
            exprs.append(len(values))
            values.append(None)
        else:
            values.append(from_json(raw))
    for key, raw in obj.items():  # the ad is made a classad2 ad here, or later if kept whole
        long_expr = isinstance(raw, str) and len(raw) > MAX_OPERATORS and is_expr(raw)
        if long_expr and (why := too_many_operators(f"{key} = {raw[6:-2]}")) is not None:
            raise _TooLong(why)
    if exprs:
        ad = json_to_classad(obj)
        tally.evaluated += 1
        got = evaluate_ad(ad, [(attrs[j].name, ()) for j in exprs], _expressions(obj))
        for j, value in zip(exprs, got, strict=True):
            values[j] = value
    return values


def _given(obj: dict[str, Any], attrs: Sequence[Attr], columns: Sequence[int]) -> dict[int, Any]:
    """The raw values of ``attrs`` (at ``columns``) that ``obj`` has and that are read (not
    behind a present attribute), by column."""
    folded = {k.lower(): v for k, v in obj.items()}
    return {
        j: folded[a.name.lower()]
        for a, j in zip(attrs, columns, strict=True)
        if a.name.lower() in folded and not any(u.lower() in folded for u in a.shadows)
    }


def _dumps(obj: Any) -> str:
    """An ad as JSON text for the quarantine (a value that is no JSON, as text)."""
    return json.dumps(obj, default=str)[:100000]


def needs_classad2(raw: Any) -> bool:
    """An expression, or a list or nested ad holding one: only classad2 can evaluate it."""
    if isinstance(raw, list):
        return any(needs_classad2(v) for v in raw)
    if isinstance(raw, dict):
        return any(needs_classad2(v) for v in raw.values())
    return is_expr(raw)


def _expressions(raw: Any) -> str:
    """The text of every expression in a JSON value, one a line: where a regular expression
    could be called (a string value is never code)."""
    if isinstance(raw, list):
        return "\n".join(_expressions(v) for v in raw)
    if isinstance(raw, dict):
        return "\n".join(_expressions(v) for v in raw.values())
    return str(raw) if is_expr(raw) else ""


def from_json(raw: Any) -> Any:
    if isinstance(raw, list):
        return [from_json(v) for v in raw]
    if isinstance(raw, dict):
        return json_to_classad(raw)
    return raw  # None stands for undefined, as null does in HTCondor's JSON
