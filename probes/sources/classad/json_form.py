"""The ``-json`` form (``condor_status -json``, ``condor_history -json``): a JSON array of ads,
streamed object by object; expressions (``"/Expr(...)/"``) are evaluated by classad2 in their ad,
as in a ``-long`` dump: an attribute behind a present one is never evaluated, and one that may
call a regular expression is evaluated under the sandbox's budget (:mod:`probes.sources.sandbox`)."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any, TextIO

import classad2
import numpy as np

from collector.errors import ClassAdError, SourceError
from probes.sources.classad import model
from probes.sources.classad.literals import drop_infinities, store_value
from probes.sources.classad.model import AdColumns, Attr, Kind, is_expr, json_to_classad, repeat
from probes.sources.report import Malformed, ReadReport
from probes.sources.sandbox import EvaluationTimeout, evaluate_ad

__all__ = ["from_json", "needs_classad2", "read_json"]


def _json_objects(fh: TextIO, path: str) -> Iterator[tuple[dict[str, Any], int]]:
    """Stream the objects of a JSON array without loading the file: (object, first line)."""
    decoder = json.JSONDecoder()
    buf = ""
    pos = 0
    line = 1
    started = False
    while True:
        # skip separators
        while True:
            while pos < len(buf) and buf[pos] in " \t\r\n,[":
                if buf[pos] == "\n":
                    line += 1
                if buf[pos] == "[":
                    started = True
                pos += 1
            if pos < len(buf):
                break
            more = fh.read(model.CHUNK_BYTES)
            if not more:
                return
            buf, pos = buf[pos:] + more, 0
        if buf[pos] == "]":
            return
        if not started or buf[pos] != "{":
            raise SourceError(
                f"{path} line {line}: expected a JSON array of ads (as condor_status -json writes), "
                f"got {buf[pos : pos + 20]!r}"
            )
        while True:
            try:
                obj, end = decoder.raw_decode(buf, pos)
                break
            except json.JSONDecodeError as exc:
                more = fh.read(model.CHUNK_BYTES)
                if not more:
                    raise ClassAdError(path, line, f"truncated or invalid JSON ({exc.msg})") from exc
                buf = buf[pos:] + more
                pos = 0
        yield obj, line
        line += buf.count("\n", pos, end)
        pos = end
        if pos > model.CHUNK_BYTES:
            buf, pos = buf[pos:], 0


def read_json(
    text: TextIO, path: str, attrs: Sequence[Attr], strict: bool, keep_raw: bool = False
) -> tuple[AdColumns, ReadReport]:
    report = ReadReport()
    columns: dict[str, list[Any]] = {a.name: [] for a in attrs}
    lines: list[int] = []
    raws: list[dict[str, Any]] = []
    for obj, line in _json_objects(text, path):
        if not isinstance(obj, dict):
            m = Malformed(path, line, f"expected a JSON object, got {type(obj).__name__}", json.dumps(obj)[:1000])
            if strict:
                raise m.error()
            report.malformed.append(m)
            continue
        folded = {k.lower(): v for k, v in obj.items()}
        values: list[Any] = []
        exprs: list[int] = []  # the attributes only classad2 can evaluate
        for a in attrs:
            raw = folded.get(a.name.lower())
            if any(u.lower() in folded for u in a.shadows):
                values.append(None)  # behind a present attribute: never evaluated
            elif needs_classad2(raw):
                exprs.append(len(values))
                values.append(None)
            else:
                values.append(from_json(raw))
        if exprs:
            try:
                ad = json_to_classad(obj)
                report.evaluated += 1
                got = evaluate_ad(ad, [(attrs[j].name, ()) for j in exprs], _expressions(obj))
            except (classad2.ClassAdException, EvaluationTimeout, ValueError) as exc:
                if isinstance(exc, classad2.ClassAdException):
                    reason = f"cannot parse an expression ({exc})"
                elif isinstance(exc, EvaluationTimeout):
                    reason = f"{exc} (a regular expression that backtracks?); the ad was skipped"
                else:
                    reason = f"cannot evaluate ({exc}); the ad was skipped"
                m = Malformed(path, line, reason, json.dumps(obj)[:100000])
                if strict:
                    raise m.error() from exc
                report.malformed.append(m)
                continue
            for j, value in zip(exprs, got, strict=True):
                values[j] = value
        for a, v in zip(attrs, values, strict=True):
            columns[a.name].append(v)
        lines.append(line)
        if keep_raw:
            raws.append(obj)
    n = len(lines)
    report.ads += n
    numeric = np.full((n, len(attrs)), np.nan)
    objects = np.full((n, len(attrs)), None, dtype=object)
    for j, a in enumerate(attrs):
        for i, v in enumerate(columns[a.name]):
            store_value(numeric, objects, a, i, j, v, report)
    drop_infinities(numeric, attrs, report)
    out = {a.name: (numeric if a.kind is Kind.NUMBER else objects)[:, j] for j, a in enumerate(attrs)}
    raw = np.array([*raws, None], dtype=object)[:-1] if keep_raw else None
    return AdColumns(out, repeat(path, n), np.array(lines, dtype=np.int64), raw), report


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
