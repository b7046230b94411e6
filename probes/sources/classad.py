"""Fast, exact reading of the attributes fairacct needs from ClassAd dumps.

HTCondor writes ``condor_status -long``, ``condor_q -long``, ``condor_history -long`` and its
history files in the "old" ClassAd syntax: one ``Name = value`` line per attribute, ads separated
by blank lines (history files separate them with ``*** ...`` banner lines instead).
``classad2.parseAds`` reads them exactly, but slows down on large inputs and builds every
attribute of every ad, while a table needs a few dozen.

So this module reads whole chunks of a file at a time: one compiled pass over the bytes
(:mod:`probes.sources.classad_lines`) finds the ads, the lines of the wanted attributes and the
literals among their values (numbers, plain strings, booleans, ``undefined``, lists), and numpy
turns those into columns.
Anything else is handed to ``classad2`` in the context of its own ad: expressions (evaluated),
strings with backslashes, numbers in unusual spellings, and every ad with a line that is not in
HTCondor's canonical ``Name = value`` form. Those ads are rare, and for them the answer is by
construction the one ``classad2`` gives; ``tests/sources/test_classad_differential.py`` proves the
fast path gives the same values on the fixtures and on generated ads.

A malformed ad (one ``classad2`` cannot parse, or a file that ends in the middle of a line) is
reported with its file and line, counted, and written to the quarantine file, or raised as a
:class:`~collector.errors.ClassAdError` in strict mode.
"""

from __future__ import annotations

import enum
import json
import os
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, BinaryIO, TextIO

import classad2
import numpy as np
import pandas as pd

from collector.errors import ClassAdError, SourceError
from probes.sources.classad_lines import (
    FALSE,
    INT,
    LIST,
    NUMBER_TEXT,
    REAL,
    STRING,
    TRUE,
    UNDEFINED,
    NameTable,
    first_equal,
    scan_lines,
    texts,
)
from probes.sources.columns import ColumnBuilder
from probes.sources.inputs import open_input

__all__ = [
    "AdColumns",
    "Attr",
    "Kind",
    "Malformed",
    "ReadReport",
    "collect",
    "columns_from_classads",
    "fallbacks",
    "iter_ad_files",
    "iter_ads",
    "read_ad_files",
    "read_ads",
    "to_classad",
    "unique_attrs",
]

#: Bytes read from a file at a time; an ad longer than this is read whole all the same.
CHUNK_BYTES = 1 << 21

_PAD = b"\0" * 8  # the scan reads a few bytes past a line's end without checking


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
    """

    name: str
    kind: Kind = Kind.ANY
    unless: str | tuple[str, ...] | None = None

    @property
    def shadows(self) -> tuple[str, ...]:
        """The attributes whose presence makes this one unread."""
        if self.unless is None:
            return ()
        return (self.unless,) if isinstance(self.unless, str) else tuple(self.unless)


def fallbacks(names: Sequence[str], kind: Kind) -> list[Attr]:
    """Attributes of which the first present is used: each is read only where none of those
    before it is present."""
    return [Attr(name, kind, unless=tuple(names[:i]) or None) for i, name in enumerate(names)]


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
        merged[key] = Attr(old.name, old.kind, unless=common or None)
    return list(merged.values())


@dataclass(frozen=True)
class Malformed:
    """An ad that could not be read: where it is, why, and its text (for the quarantine)."""

    path: str
    line: int
    reason: str
    text: str

    def error(self) -> ClassAdError:
        return ClassAdError(self.path, self.line, self.reason)


@dataclass
class ReadReport:
    """What reading one or more files found, besides the values."""

    ads: int = 0
    evaluated: int = 0  # ads that went through classad2 (expressions, unusual spellings)
    malformed: list[Malformed] = field(default_factory=list)
    rejects: Counter[str] = field(default_factory=Counter)  # "attribute: reason" -> count

    def merge(self, other: ReadReport) -> None:
        self.ads += other.ads
        self.evaluated += other.evaluated
        self.malformed.extend(other.malformed)
        self.rejects.update(other.rejects)


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

    @staticmethod
    def concat(parts: Sequence[AdColumns], attrs: Sequence[Attr]) -> AdColumns:
        """One AdColumns of all the parts; the parts give up their columns to it."""
        if not parts:
            return AdColumns(
                {a.name: _empty(a.kind) for a in attrs},
                np.array([], dtype=object),
                np.array([], dtype=np.int64),
            )
        if len(parts) == 1:
            return parts[0]
        raws = [p.raw for p in parts]
        columns = {}
        for a in attrs:
            # one column at a time, releasing the parts' pieces, so that the whole is not held twice
            columns[a.name] = np.concatenate([p.columns.pop(a.name) for p in parts])
        return AdColumns(
            columns,
            np.concatenate([p.path for p in parts]),
            np.concatenate([p.line for p in parts]),
            np.concatenate(raws) if all(r is not None for r in raws) else None,  # type: ignore[arg-type]
        )

    def first(self, names: Sequence[str], default: Any = None) -> np.ndarray:
        """Per ad, the value of the first of ``names`` that is present (not None/NaN)."""
        if not names:
            return _repeat(default, len(self))
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
        return _json_to_classad(raw)
    return classad2.parseOne(raw, classad2.ParserType.Old)


def _repeat(value: object, n: int) -> np.ndarray:
    """An object array of ``n`` references to one object (np.full would copy a str n times)."""
    out = np.empty(n, dtype=object)
    out.fill(value)
    return out


def _empty(kind: Kind, n: int = 0) -> np.ndarray:
    if kind is Kind.NUMBER:
        return np.full(n, np.nan)
    return np.full(n, None, dtype=object)


# ---------------------------------------------------------------------------------------------
# entry point


def read_ads(
    path: str | os.PathLike[str],
    attrs: Sequence[Attr],
    *,
    strict: bool = False,
    keep_raw: bool = False,
) -> tuple[AdColumns, ReadReport]:
    """Read the wanted attributes of every ad in one file (``-long`` or ``-json`` form).

    With ``keep_raw``, each ad's text or JSON object is kept too (``AdColumns.classad``), for
    evaluating expressions against whole ads; use it for small inputs such as slot dumps.

    Raises :class:`SourceError` when the file cannot be read as ClassAds at all (missing,
    empty, binary), and :class:`ClassAdError` for the first malformed ad when ``strict``.
    Otherwise malformed ads are skipped and listed in the report.
    """
    report = ReadReport()
    return collect(iter_ads(path, attrs, report, strict=strict, keep_raw=keep_raw), attrs, _size(path)), report


def iter_ads(
    path: str | os.PathLike[str],
    attrs: Sequence[Attr],
    report: ReadReport,
    *,
    strict: bool = False,
    keep_raw: bool = False,
) -> Iterator[tuple[AdColumns, int]]:
    """:func:`read_ads` a chunk at a time: yield each chunk's ads and the bytes of the file read
    so far (of ``os.path.getsize(path)``), and add what was found besides values to ``report``.
    A caller that turns each chunk into its own table never holds the file's ads whole."""
    name = os.fspath(path)
    with open_input(path, "a file of ClassAds") as fh:
        head = fh.read(4096)
        fh.seek(0)
        if not head.strip():
            raise SourceError(f"{name}: the file is empty, expected ClassAds")
        if b"\0" in head:
            raise SourceError(f"{name}: binary file (NUL bytes), expected ClassAds in text form")
        if head.lstrip()[:1] != b"[":
            yield from _iter_long(fh, name, attrs, report, strict, keep_raw)
            return
        size = os.fstat(fh.fileno()).st_size
    with open(name, encoding="utf-8", errors="replace") as text:
        columns, found = _read_json(text, name, attrs, strict, keep_raw)
    report.merge(found)
    yield columns, size


def collect(parts: Iterable[tuple[AdColumns, int]], attrs: Sequence[Attr], size: int | None = None) -> AdColumns:
    """The ads of all ``parts`` (as :func:`iter_ads` yields them) in one AdColumns; ``size``
    is the input's length in bytes, if known, to allocate the columns once."""
    builder = ColumnBuilder(size)
    raws: list[np.ndarray] = []
    for part, done in parts:
        builder.append({**part.columns, _PATH: part.path, _LINE: part.line}, done)
        if part.raw is not None:
            raws.append(part.raw)
    columns = builder.result()
    if not columns:
        return AdColumns.concat([], attrs)
    path, line = columns.pop(_PATH), columns.pop(_LINE)
    return AdColumns(columns, path, line, np.concatenate(raws) if raws else None)


_PATH, _LINE = "\0path", "\0line"  # no attribute has these names


def _size(path: str | os.PathLike[str]) -> int | None:
    try:
        return os.path.getsize(path)
    except OSError:
        return None  # iter_ads says why


# ---------------------------------------------------------------------------------------------
# the "-long" form


def _chunks(fh: BinaryIO, path: str) -> Iterator[tuple[bytes, int, bool]]:
    """Yield (data, n, truncated): ``data[:n]`` holds whole ads and ends with a newline.

    ``data`` goes on for at least ``len(_PAD)`` bytes after ``n`` (the next ads, or padding),
    so that the scan can look a few bytes past a line without copying the chunk.
    ``truncated`` is set on the last chunk when the file does not end with a newline: HTCondor
    always ends a dump with one, so the last ad was cut short.

    Each chunk is read from the start of its first ad (the tail of the one before is read
    again) rather than joined to that tail, which would copy every chunk once more.
    """
    banners: bool | None = None  # history files separate ads with "*** " lines
    start = 0  # the file offset of data[0]
    size = CHUNK_BYTES
    while True:
        fh.seek(start)
        data = fh.read(size)
        if b"\0" in data:
            at = start + data.index(b"\0")
            raise SourceError(f"{path}: binary file (a NUL byte at offset {at}), expected ClassAds in text form")
        if banners is None:
            banners = data.startswith(b"***") or b"\n***" in data
        if len(data) < size:  # the end of the file
            if data.strip():
                truncated = not data.endswith(b"\n")
                if truncated:
                    data += b"\n"
                yield data + _PAD, len(data), truncated
            return
        cut = data.rfind(b"\n\n")
        if banners:
            cut = max(cut, data.rfind(b"\n***"))
        if cut < 0:
            size *= 2  # one ad longer than a chunk: read it whole
            continue
        n = cut + 1
        yield (data if len(data) - n >= len(_PAD) else data[:n] + _PAD), n, False
        del data  # not held while the next chunk is read
        start += n
        size = CHUNK_BYTES


def _iter_long(
    fh: BinaryIO, path: str, attrs: Sequence[Attr], report: ReadReport, strict: bool, keep_raw: bool
) -> Iterator[tuple[AdColumns, int]]:
    scanner = _Scanner(attrs, keep_raw)
    first_line = 1
    done = 0
    for data, n, truncated in _chunks(fh, path):
        done += n
        if b"\r" in data:
            n -= data.count(b"\r\n", 0, n)
            data = data.replace(b"\r\n", b"\n")
            if len(data) - n < len(_PAD):
                data = data[:n] + _PAD
        part, n_lines = scanner.scan(data, n, path, first_line, truncated, report, strict)
        del data  # not held while the next chunk is read
        first_line += n_lines
        yield part, done


def columns_from_classads(
    ads: Sequence[classad2.ClassAd], attrs: Sequence[Attr], origin: str = "<classads>"
) -> tuple[AdColumns, ReadReport]:
    """The same columns from classad2.ClassAd objects (a live query's answer, or a test's ads).

    Values are classad2's own evaluations, so both kinds of source give the same tables.
    """
    report = ReadReport(ads=len(ads))
    numeric = np.full((len(ads), len(attrs)), np.nan)
    objects = np.full((len(ads), len(attrs)), None, dtype=object)
    for i, ad in enumerate(ads):
        for j, a in enumerate(attrs):
            if not any(u in ad for u in a.shadows):
                _store(numeric, objects, a, i, j, _eval(ad, a.name), report)
    raw = np.array([ad.printOld() for ad in ads] + [None], dtype=object)[:-1]
    return (
        AdColumns(
            {a.name: (numeric if a.kind is Kind.NUMBER else objects)[:, j] for j, a in enumerate(attrs)},
            _repeat(origin, len(ads)),
            np.arange(1, len(ads) + 1, dtype=np.int64),
            raw,
        ),
        report,
    )


def read_ad_files(
    paths: Sequence[str | os.PathLike[str]],
    attrs: Sequence[Attr],
    *,
    strict: bool = False,
) -> tuple[AdColumns, ReadReport]:
    """Read many small ``-long`` files (a PER_JOB_HISTORY_DIR's ``history.C.P``) in batches.

    Files are joined into chunks and scanned together, so a directory of 100,000 one-ad files
    costs about what one file of 100,000 ads does; paths and lines are mapped back per file.
    """
    report = ReadReport()
    return collect(iter_ad_files(paths, attrs, report, strict=strict), attrs), report


def iter_ad_files(
    paths: Sequence[str | os.PathLike[str]],
    attrs: Sequence[Attr],
    report: ReadReport,
    *,
    strict: bool = False,
) -> Iterator[tuple[AdColumns, int]]:
    """:func:`read_ad_files` a batch at a time, as :func:`iter_ads` does a file: yield each
    batch's ads and the bytes read so far."""
    scanner = _Scanner(attrs)
    batch: list[tuple[str, bytes]] = []
    size = 0
    done = 0

    def scan() -> AdColumns:
        nonlocal batch, size
        names = np.array([name for name, _ in batch], dtype=object)
        counts = np.array([data.count(b"\n") + 1 for _, data in batch], dtype=np.int64)
        first = np.concatenate(([1], 1 + np.cumsum(counts)[:-1]))
        data = b"\n".join(d for _, d in batch)
        seen = len(report.malformed)
        try:
            part, _ = scanner.scan(data + _PAD, len(data), "", 1, False, report, strict=False)
        finally:
            batch, size = [], 0
        for k in range(seen, len(report.malformed)):
            m = report.malformed[k]
            i = int(np.searchsorted(first, m.line, side="right") - 1)
            report.malformed[k] = Malformed(str(names[i]), int(m.line - first[i] + 1), m.reason, m.text)
            if strict:
                raise report.malformed[k].error()
        i = np.searchsorted(first, part.line, side="right") - 1
        return AdColumns(part.columns, names[i], part.line - first[i] + 1)

    for p in paths:
        name = os.fspath(p)
        try:
            with open(name, "rb") as fh:
                data = fh.read()
        except FileNotFoundError:
            continue  # HTCondor removed it (history rotation) between the listing and now
        except OSError as exc:
            raise SourceError(f"{name}: cannot be read ({exc.strerror})") from exc
        done += len(data)
        problem = None
        if not data.strip():
            problem = "the file is empty, expected one ClassAd"
        elif b"\0" in data:
            problem = "binary file (NUL bytes), expected a ClassAd in text form"
        elif not data.endswith(b"\n"):
            problem = "truncated: the file ends in the middle of a line"
        if problem:
            m = Malformed(name, 1, problem, data[:100000].decode("utf-8", "replace"))
            if strict:
                raise m.error()
            report.malformed.append(m)
            continue
        batch.append((name, data.replace(b"\r\n", b"\n") if b"\r" in data else data))
        size += len(data)
        if size >= CHUNK_BYTES:
            yield scan(), done
    if batch:
        yield scan(), done


class _Scanner:
    """Reads the wanted attributes out of chunks of ``-long`` text (see the module docstring)."""

    def __init__(self, attrs: Sequence[Attr], keep_raw: bool = False) -> None:
        self.keep_raw = keep_raw
        self.attrs = list(attrs)
        # the scan looks each distinct name up once; attributes map to their name's columns
        names: dict[str, int] = {}
        self.name_of = np.array([names.setdefault(a.name.lower(), len(names)) for a in self.attrs], dtype=np.int64)
        self.table = NameTable.build(list(names))
        # per attribute, the attributes that shadow it (see Attr.unless), as name columns
        self._shadows = [np.array(sorted({names[u.lower()] for u in a.shadows if u.lower() in names}), dtype=np.int64) for a in self.attrs]
        self.kinds = np.array([_KIND_CODE[a.kind] for a in self.attrs], dtype=np.int8)
        self.ads_per_byte = 0.0  # of the last chunk: how many ads to make room for in the next

    # -- chunk level ----------------------------------------------------------------------------

    def scan(
        self,
        data: bytes,
        n: int,
        path: str,
        first_line: int,
        truncated: bool,
        report: ReadReport,
        strict: bool,
    ) -> tuple[AdColumns, int]:
        """Read ``data[:n]``: whole ads, ending with a newline, with at least ``len(_PAD)``
        readable bytes after them. Also return the number of lines read."""
        # room for as many ads a byte as the last chunk had, and a quarter more
        found = scan_lines(data, n, self.table, int(1.25 * n * self.ads_per_byte))
        n_ads = len(found.begin)
        self.ads_per_byte = n_ads / max(n, 1)
        if n_ads == 0:
            return AdColumns.concat([], self.attrs), found.n_lines
        odd = found.odd
        if truncated:
            odd[-1] = True

        # an attribute behind one that is present (RequestMemory behind MemoryProvisioned) is
        # not read at all
        present = found.value_start >= 0
        shadowed = np.zeros((n_ads, len(self.attrs)), dtype=bool)
        for j, behind in enumerate(self._shadows):
            if len(behind):
                shadowed[:, j] = present[:, behind].any(axis=1)
        ad_i, attr_j = np.nonzero(present[:, self.name_of] & ~shadowed)
        k = self.name_of[attr_j]
        numeric, objects, fast = _convert(
            self.kinds, data, found.literal[ad_i, k], found.number[ad_i, k], found.integer[ad_i, k],
            found.value_start[ad_i, k], found.value_end[ad_i, k], ad_i, attr_j, n_ads, report, self.attrs,
        )  # fmt: skip
        # An expression (or anything else the scan does not read) needs classad2.
        deferred = np.zeros((n_ads, len(self.attrs)), dtype=bool)
        deferred[ad_i[~fast], attr_j[~fast]] = True
        slow = odd | deferred.any(axis=1)

        keep = np.ones(n_ads, dtype=bool)
        for ad in np.flatnonzero(slow):
            text = data[found.begin[ad] : found.end[ad]].decode("utf-8", "replace")
            line = first_line + int(found.first_line[ad])
            values = self._evaluate(text, path, line, truncated and ad == n_ads - 1, deferred[ad], odd[ad], report)
            if values is None:
                if strict:
                    raise report.malformed[-1].error()
                keep[ad] = False
                continue
            report.evaluated += 1
            for j, value in values.items():
                _store(numeric, objects, self.attrs[j], ad, j, value, report)

        report.ads += int(keep.sum())
        raw = None
        if self.keep_raw:
            raw = np.array([data[b:e].decode("utf-8", "replace") for b, e in zip(found.begin[keep], found.end[keep])] + [None], dtype=object)[:-1]
        rows = slice(None) if keep.all() else keep  # views, not copies, in the usual case
        return AdColumns(
            {a.name: (numeric if a.kind is Kind.NUMBER else objects)[rows, j] for j, a in enumerate(self.attrs)},
            _repeat(path, int(keep.sum())),
            first_line + found.first_line[rows],
            raw,
        ), found.n_lines

    # -- the exact path ---------------------------------------------------------------------

    def _evaluate(
        self,
        text: str,
        path: str,
        line: int,
        truncated: bool,
        deferred: np.ndarray,
        whole: bool,
        report: ReadReport,
    ) -> dict[int, Any] | None:
        """Evaluate an ad's wanted attributes with classad2; None (and a report) if malformed."""
        if truncated:
            report.malformed.append(Malformed(path, line, "truncated: the file ends in the middle of this ad", text))
            return None
        if not whole:
            values = self._evaluate_part(text, deferred)
            if values is not None:
                return values
        ads = list(classad2.parseAds(text, classad2.ParserType.Old))
        # classad2 drops an ad it cannot parse, or silently keeps only the lines before the
        # first bad one: every attribute of the text must be in what it parsed. As many
        # attributes as lines proves it; only an ad that repeats a name needs the names compared.
        if len(ads) != 1 or (len(ads[0]) != text.count("\n") and _names(text) - {k.lower() for k in ads[0].keys()}):
            offset, reason = _diagnose(text)
            report.malformed.append(Malformed(path, line + offset, reason, text))
            return None
        ad = ads[0]
        if not whole:
            return {int(j): _eval(ad, self.attrs[j].name) for j in np.flatnonzero(deferred)}
        # every attribute, as classad2 sees the ad: one behind a present attribute is not read
        return {j: None if any(u in ad for u in a.shadows) else _eval(ad, a.name) for j, a in enumerate(self.attrs)}


    def _evaluate_part(self, text: str, deferred: np.ndarray) -> dict[int, Any] | None:
        """Evaluate the deferred attributes of a canonical ad in a classad2 ad of only the lines
        they reference, directly or through other attributes: an expression's value depends on
        nothing else, and parsing a few lines instead of a whole job ad is most of the cost.

        Any name in an expression's text counts as a reference (a superset: names in strings
        too). None, and the whole ad is parsed, when an expression builds names at run time
        (``eval``), or when classad2 does not keep every line of the part (a bad value)."""
        if not text.isascii():
            return None  # folding case could move the lines of the folded text
        folded = "\n" + text.lower()
        todo = [self.attrs[j].name.lower() for j in np.flatnonzero(deferred)]
        part: dict[str, str] = {}
        while todo:
            name = todo.pop()
            if name in part:
                continue
            at = folded.rfind("\n" + name + " = ")  # values hold no newline: a line start; the last wins
            if at < 0:
                continue
            line = text[at : text.find("\n", at)]
            part[name] = line
            value = line[len(name) + 3 :]
            if _RUNTIME_NAMES.search(value):
                return None
            todo.extend(w.lower() for w in _NAME.findall(value))
        ads = list(classad2.parseAds("\n".join(part.values()) + "\n", classad2.ParserType.Old))
        if len(ads) != 1 or len(ads[0]) != len(part):
            return None
        return {int(j): _eval(ads[0], self.attrs[j].name) for j in np.flatnonzero(deferred)}


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_RUNTIME_NAMES = re.compile(r"eval", re.IGNORECASE)  # eval("Name"), evalInEachContext(...)


def _names(text: str) -> set[str]:
    """The attribute names of an ad's text, case-folded."""
    return {ln.partition("=")[0].strip().lower() for ln in text.split("\n") if ln.strip()}


def _eval(ad: classad2.ClassAd, name: str) -> Any:
    if name not in ad:
        return None
    value = ad.eval(name)
    return _from_classad(value)


def _from_classad(value: Any) -> Any:
    if value is classad2.Value.Undefined:
        return None
    if isinstance(value, list):
        return [_from_classad(v) for v in value]
    return value


def _diagnose(text: str) -> tuple[int, str]:
    """Say which line of a malformed ad classad2 refuses, and why if it is plain to see."""
    for offset, line in enumerate(text.split("\n")):
        if not line.strip():
            continue
        name, eq, value = line.partition("=")
        if not eq or not name.strip():
            return offset, f"expected 'Name = value', got {line[:60]!r}"
        if not list(classad2.parseAds(line + "\n", classad2.ParserType.Old)):
            attr = name.strip()
            if value.count('"') - value.count('\\"') % 2 == 1 or value.count('"') % 2 == 1:
                return offset, f"unterminated string in attribute '{attr}'"
            if not value.strip():
                return offset, f"attribute '{attr}' has no value"
            return offset, f"attribute '{attr}': cannot parse the value {value.strip()[:60]!r}"
    return 0, "classad2 cannot parse this ad"


# ---------------------------------------------------------------------------------------------
# literal values, a column at a time


_KIND_CODE = {Kind.NUMBER: 0, Kind.STRING: 1, Kind.BOOL: 2, Kind.LIST: 3, Kind.ANY: 4}
_NUMBER, _STRING, _BOOL, _LIST, _ANY = range(5)


def _convert(
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
    report: ReadReport,
    attrs: Sequence[Attr],
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Convert the values ``data[vs:ve]`` of the pairs (ad_i, attr_j) of one chunk, which the
    scan found to be the literals ``literal`` (spelling ``number``, ``integer``).

    All pairs are handled at once, whatever their attribute, so that the numpy calls are per
    chunk, not per attribute. Returns ``numeric`` (n_ads x attrs, float64, for NUMBER
    attributes), ``objects`` (n_ads x attrs, for the others) and, per pair, whether the value
    was a literal; the rest are left for classad2.
    """
    numeric = np.full((n_ads, len(kinds)), np.nan)
    objects = np.full((n_ads, len(kinds)), None, dtype=object)
    fast = np.zeros(len(vs), dtype=bool)
    if not len(vs):
        return numeric, objects, fast
    kind = kinds[attr_j]

    def reject(sel: np.ndarray, got: str) -> None:
        if len(sel):  # rare: a value of the wrong kind
            for j, count in zip(*np.unique(attr_j[sel], return_counts=True)):
                report.rejects[f"{attrs[j].name}: expected a {attrs[j].kind.value}, got {got}"] += int(count)

    def store(sel: np.ndarray, accepts: tuple[int, ...], values: Any, got: str) -> None:
        k = kind[sel]
        to_obj = k == accepts[0]
        for other in accepts[1:]:
            to_obj |= k == other
        objects[ad_i[sel[to_obj]], attr_j[sel[to_obj]]] = values if np.isscalar(values) else values[to_obj]
        reject(sel[~to_obj], got)
        fast[sel] = True

    # numbers in spellings the scan leaves to Python (exponents, long mantissas)
    for i in np.flatnonzero(literal == NUMBER_TEXT).tolist():
        text = data[vs[i] : ve[i]].decode("ascii", "replace")
        m = _NUMBER_TEXT.fullmatch(text)
        if m is None:
            continue
        if m.group(2) is None and m.group(3) is None:
            continue  # an integer the scan did not take is beyond int64: classad2 decides
        literal[i], number[i] = REAL, float(text)

    s = np.flatnonzero((literal == INT) | (literal == REAL))
    if len(s):
        to_num = kind[s] == _NUMBER
        numeric[ad_i[s[to_num]], attr_j[s[to_num]]] = number[s[to_num]]
        fast[s] = True
        s = s[~to_num]
        exact = np.where(literal[s] == INT, integer[s].astype(object), number[s].astype(object))  # Python int and float
        store(s, (_ANY,), exact, "number")
    s = np.flatnonzero(literal == STRING)
    if len(s):
        store(s, (_STRING, _ANY), _strings(data, vs[s] + 1, ve[s] - 1), "string")
    for value, code in ((True, TRUE), (False, FALSE)):
        s = np.flatnonzero(literal == code)
        if len(s):
            store(s, (_BOOL, _ANY), value, "bool")
    fast[literal == UNDEFINED] = True  # None already
    for i in np.flatnonzero(literal == LIST):
        items = _list_literal(data[vs[i] : ve[i]].decode("utf-8", "replace"))
        if items is not None:
            if kind[i] in (_LIST, _ANY):
                objects[ad_i[i], attr_j[i]] = items
            else:
                reject(np.array([i]), "list")
            fast[i] = True
    return numeric, objects, fast


def _strings(data: bytes, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The texts ``data[a:b]`` as an object array of str.

    Each distinct text of the chunk is decoded once. Users, groups and sites repeat in every
    ad: those that repeat within the chunk also share one str object across chunks, which keeps
    a table of 200,000 jobs in a third of the memory. The texts seen once (job ids, hosts) skip
    that cache, which is bounded so that it cannot grow with history.
    """
    first = first_equal(data, a, b)
    distinct = np.flatnonzero(first == np.arange(len(first)))
    repeated = np.bincount(first, minlength=len(first))[distinct] > 1
    decoded = np.empty(len(distinct), dtype=object)
    decoded[:] = texts(data, a[distinct], b[distinct])
    if len(_STRINGS) > _MAX_CACHED:
        _STRINGS.clear()
    shared = decoded[repeated]
    decoded[repeated] = list(map(_STRINGS.setdefault, shared, shared))
    rank = np.empty(len(first), dtype=np.int64)
    rank[distinct] = np.arange(len(distinct))
    return decoded[rank[first]]


_NUMBER_TEXT = re.compile(r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?")
_STRINGS: dict[str, str] = {}
_MAX_CACHED = 20_000


_LIST_ITEM = re.compile(r'\s*(?:"([^"\\]*)"|(-?(?:0|[1-9]\d{0,17})(?:\.\d+)?(?:[eE][+-]?\d+)?)|(true|false|undefined))\s*(,|$)', re.I)


def _list_literal(text: str) -> list[Any] | None:
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


def _store(numeric: np.ndarray, objects: np.ndarray, attr: Attr, row: int, j: int, value: Any, report: ReadReport) -> None:
    """Put a classad2 value into its typed column, counting values of the wrong type."""
    if attr.kind is Kind.NUMBER:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            numeric[row, j] = value
            return
        numeric[row, j] = np.nan
    elif value is None or attr.kind is Kind.ANY or isinstance(value, _PYTHON_TYPE[attr.kind]):
        objects[row, j] = value
        return
    else:
        objects[row, j] = None
    if value is not None:
        report.rejects[f"{attr.name}: expected a {attr.kind.value}, got {_type_name(value)}"] += 1


_PYTHON_TYPE: dict[Kind, type] = {Kind.STRING: str, Kind.BOOL: bool, Kind.LIST: list}


def _type_name(value: Any) -> str:
    if value is classad2.Value.Error:
        return "error"
    return type(value).__name__


# ---------------------------------------------------------------------------------------------
# the "-json" form


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
            more = fh.read(CHUNK_BYTES)
            if not more:
                return
            buf, pos = buf[pos:] + more, 0
        if buf[pos] == "]":
            return
        if not started or buf[pos] != "{":
            raise SourceError(f"{path} line {line}: expected a JSON array of ads (as condor_status -json writes), got {buf[pos:pos + 20]!r}")
        while True:
            try:
                obj, end = decoder.raw_decode(buf, pos)
                break
            except json.JSONDecodeError as exc:
                more = fh.read(CHUNK_BYTES)
                if not more:
                    raise ClassAdError(path, line, f"truncated or invalid JSON ({exc.msg})") from exc
                buf = buf[pos:] + more
                pos = 0
        yield obj, line
        line += buf.count("\n", pos, end)
        pos = end
        if pos > CHUNK_BYTES:
            buf, pos = buf[pos:], 0


def _read_json(text: TextIO, path: str, attrs: Sequence[Attr], strict: bool, keep_raw: bool = False) -> tuple[AdColumns, ReadReport]:
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
        ad: classad2.ClassAd | None = None
        values = []
        for a in attrs:
            raw = folded.get(a.name.lower())
            if any(u.lower() in folded for u in a.shadows):
                values.append(None)
                continue
            if _needs_classad2(raw):
                if ad is None:
                    try:
                        ad = _json_to_classad(obj)
                    except classad2.ClassAdException as exc:
                        m = Malformed(path, line, f"cannot parse an expression ({exc})", json.dumps(obj)[:100000])
                        if strict:
                            raise m.error() from exc
                        report.malformed.append(m)
                        break
                    report.evaluated += 1
                values.append(_eval(ad, a.name))
            else:
                values.append(_from_json(raw))
        else:
            for a, v in zip(attrs, values):
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
            _store(numeric, objects, a, i, j, v, report)
    out = {a.name: (numeric if a.kind is Kind.NUMBER else objects)[:, j] for j, a in enumerate(attrs)}
    raw = np.array(raws + [None], dtype=object)[:-1] if keep_raw else None
    return AdColumns(out, _repeat(path, n), np.array(lines, dtype=np.int64), raw), report


def _is_expr(raw: Any) -> bool:
    return isinstance(raw, str) and raw.startswith("/Expr(") and raw.endswith(")/")


def _needs_classad2(raw: Any) -> bool:
    """An expression, or a list or nested ad holding one: only classad2 can evaluate it."""
    if isinstance(raw, list):
        return any(_needs_classad2(v) for v in raw)
    if isinstance(raw, dict):
        return any(_needs_classad2(v) for v in raw.values())
    return _is_expr(raw)


def _from_json(raw: Any) -> Any:
    if isinstance(raw, list):
        return [_from_json(v) for v in raw]
    if isinstance(raw, dict):
        return _json_to_classad(raw)
    return raw  # None stands for undefined, as null does in HTCondor's JSON


def _json_to_classad(obj: dict[str, Any]) -> classad2.ClassAd:
    """A classad2.ClassAd from one object of HTCondor's JSON (expressions as "/Expr(...)/")."""
    ad = classad2.ClassAd()
    for key, raw in obj.items():
        if isinstance(raw, (bool, int, float, str)) and not _is_expr(raw):
            ad[key] = raw
        else:
            ad[key] = classad2.ExprTree(_expr_text(raw))
    return ad


def _expr_text(raw: Any) -> str:
    """A JSON value as ClassAd expression text."""
    if _is_expr(raw):
        return str(raw[6:-2])
    if raw is None:
        return "undefined"
    if isinstance(raw, bool):
        return "true" if raw else "false"
    if isinstance(raw, (int, float)):
        return repr(raw)
    if isinstance(raw, str):
        return str(classad2.quote(raw))
    if isinstance(raw, list):
        return "{ " + ", ".join(_expr_text(v) for v in raw) + " }"
    if isinstance(raw, dict):
        return "[ " + " ".join(f"{k} = {_expr_text(v)};" for k, v in raw.items()) + " ]"
    raise TypeError(f"not a JSON value: {raw!r}")
