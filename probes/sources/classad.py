"""Fast, exact reading of the attributes fairacct needs from ClassAd dumps.

HTCondor writes ``condor_status -long``, ``condor_q -long``, ``condor_history -long`` and its
history files in the "old" ClassAd syntax: one ``Name = value`` line per attribute, ads separated
by blank lines (history files separate them with ``*** ...`` banner lines instead).
``classad2.parseAds`` reads them exactly, but slows down on large inputs and builds every
attribute of every ad, while a table needs a few dozen.

So this module reads whole chunks of a file with numpy: it finds the lines of the wanted
attributes by comparing 8-byte words of each line's start, and converts the values that are
literals (numbers, plain strings, booleans, ``undefined``, lists of those) column by column.
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
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, BinaryIO, TextIO

import classad2
import numpy as np
import pandas as pd

from collector.errors import ClassAdError, SourceError

__all__ = [
    "Attr",
    "fallbacks",
    "unique_attrs",
    "columns_from_classads",
    "read_ad_files",
    "to_classad",
    "AdColumns",
    "Kind",
    "Malformed",
    "ReadReport",
    "read_ads",
]

#: Bytes read from a file at a time; an ad longer than this is read whole all the same.
CHUNK_BYTES = 1 << 21

_FOLD = np.uint64(0x2020202020202020)  # OR-ing 0x20 folds ASCII letters; names are case-insensitive
_PAD = b"\0" * 72  # lets 8-byte words be read past the end of a chunk
_MAX_INT_DIGITS = 18  # larger integers overflow ClassAd's int64; classad2 decides what they become


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
        out: np.ndarray | None = None
        for name in names:
            col = self.columns[name]
            if out is None:
                out = col.copy()
            else:
                missing = pd.isna(out)
                out[missing] = col[missing]
        if out is None:
            return _repeat(default, len(self))
        if default is not None:
            out[pd.isna(out)] = default
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
    name = os.fspath(path)
    try:
        fh = open(name, "rb")
    except FileNotFoundError as exc:
        raise SourceError(f"{name}: no such file") from exc
    except IsADirectoryError as exc:
        raise SourceError(f"{name}: is a directory, expected a file of ClassAds") from exc
    except OSError as exc:
        raise SourceError(f"{name}: cannot be read ({exc.strerror})") from exc
    with fh:
        head = fh.read(4096)
        fh.seek(0)
        if not head.strip():
            raise SourceError(f"{name}: the file is empty, expected ClassAds")
        if b"\0" in head:
            raise SourceError(f"{name}: binary file (NUL bytes), expected ClassAds in text form")
        if head.lstrip()[:1] != b"[":
            return _read_long(fh, name, attrs, strict, keep_raw)
    with open(name, encoding="utf-8", errors="replace") as text:
        return _read_json(text, name, attrs, strict, keep_raw)


# ---------------------------------------------------------------------------------------------
# the "-long" form


def _chunks(fh: BinaryIO, path: str) -> Iterator[tuple[bytes, int, bool]]:
    """Yield (data, n, truncated): ``data[:n]`` holds whole ads and ends with a newline.

    ``data`` goes on for at least ``len(_PAD)`` bytes after ``n`` (the next ads, or padding),
    so that 8-byte words can be read at any line start without copying the chunk.
    ``truncated`` is set on the last chunk when the file does not end with a newline: HTCondor
    always ends a dump with one, so the last ad was cut short.
    """
    rest = b""
    banners: bool | None = None  # history files separate ads with "*** " lines
    offset = 0
    while True:
        block = fh.read(CHUNK_BYTES)
        if b"\0" in block:
            at = offset + block.index(b"\0")
            raise SourceError(f"{path}: binary file (a NUL byte at offset {at}), expected ClassAds in text form")
        offset += len(block)
        data = rest + block if rest else block
        if banners is None:
            banners = data.startswith(b"***") or b"\n***" in data
        if not block:
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
            rest = data  # one ad longer than a block: keep reading
            continue
        n = cut + 1
        yield (data if len(data) - n >= len(_PAD) else data[:n] + _PAD), n, False
        rest = data[n:]


def _read_long(fh: BinaryIO, path: str, attrs: Sequence[Attr], strict: bool, keep_raw: bool = False) -> tuple[AdColumns, ReadReport]:
    scanner = _Scanner(attrs, keep_raw)
    report = ReadReport()
    table = _Table(attrs, os.fstat(fh.fileno()).st_size)
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
        first_line += n_lines
        table.append(part, done)
    return table.result(), report


class _Table:
    """The columns of a file's ads, filled chunk by chunk.

    They are allocated once for the number of ads the file's size suggests (and grown by a
    quarter if it was too few), so a table is held once: concatenating per-chunk parts at the
    end would hold it twice, and leave the heap too fragmented to give the parts' memory back.
    """

    def __init__(self, attrs: Sequence[Attr], size: int) -> None:
        self.attrs = attrs
        self.size = size  # bytes in the file
        self.n = 0
        self.columns: dict[str, np.ndarray] = {}
        self.path = np.empty(0, dtype=object)
        self.line = np.empty(0, dtype=np.int64)
        self.raws: list[np.ndarray] = []

    def append(self, part: AdColumns, done: int) -> None:
        """Add a chunk's ads; ``done`` is the bytes of the file read so far."""
        m = len(part)
        if not m:
            return
        if self.n + m > len(self.line):
            estimate = int(1.05 * (self.n + m) * self.size / max(done, 1)) + 16  # ads per byte so far
            self._grow(max(self.n + m, estimate, int(1.25 * len(self.line))))
        end = self.n + m
        for a in self.attrs:
            self.columns[a.name][self.n : end] = part.columns[a.name]
        self.path[self.n : end] = part.path
        self.line[self.n : end] = part.line
        if part.raw is not None:
            self.raws.append(part.raw)
        self.n = end

    def _grow(self, capacity: int) -> None:
        for a in self.attrs:  # one column at a time, so that only one is held twice
            new = _empty(a.kind, capacity)
            if a.name in self.columns:
                new[: self.n] = self.columns[a.name][: self.n]
            self.columns[a.name] = new
        path = np.empty(capacity, dtype=object)
        path[: self.n] = self.path[: self.n]
        line = np.zeros(capacity, dtype=np.int64)
        line[: self.n] = self.line[: self.n]
        self.path, self.line = path, line

    def result(self) -> AdColumns:
        n = self.n
        if not self.columns:
            return AdColumns.concat([], self.attrs)
        raw = np.concatenate(self.raws) if self.raws else None
        return AdColumns({k: v[:n] for k, v in self.columns.items()}, self.path[:n], self.line[:n], raw)


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
    scanner = _Scanner(attrs)
    report = ReadReport()
    parts: list[AdColumns] = []
    batch: list[tuple[str, bytes]] = []
    size = 0

    def flush() -> None:
        nonlocal batch, size
        if not batch:
            return
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
        parts.append(AdColumns(part.columns, names[i], part.line - first[i] + 1))

    for p in paths:
        name = os.fspath(p)
        try:
            with open(name, "rb") as fh:
                data = fh.read()
        except FileNotFoundError:
            continue  # HTCondor removed it (history rotation) between the listing and now
        except OSError as exc:
            raise SourceError(f"{name}: cannot be read ({exc.strerror})") from exc
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
            flush()
    flush()
    return AdColumns.concat(parts, attrs), report


class _Scanner:
    """Reads the wanted attributes out of chunks of ``-long`` text (see the module docstring)."""

    def __init__(self, attrs: Sequence[Attr], keep_raw: bool = False) -> None:
        self.keep_raw = keep_raw
        self.attrs = list(attrs)
        self.index = {a.name.lower(): i for i, a in enumerate(self.attrs)}
        # per attribute, the columns of the attributes that shadow it (see Attr.unless)
        self._shadows = [[self.index[u.lower()] for u in a.shadows if u.lower() in self.index] for a in self.attrs]
        # each attribute as the folded bytes "name = " in little-endian 8-byte words
        self.patterns = []
        for a in self.attrs:
            pat = _fold(a.name.encode("ascii")) + b" = "
            padded = pat + b"\0" * (-len(pat) % 8)
            words = np.frombuffer(padded, dtype="<u8")
            masks = np.full(len(words), np.uint64(0xFFFFFFFFFFFFFFFF))
            tail = len(pat) % 8
            if tail:
                masks[-1] = np.uint64((1 << (8 * tail)) - 1)
            self.patterns.append((len(pat), words, masks))
        self.lengths = np.array([n for n, _, _ in self.patterns], dtype=np.int64)
        self.kinds = np.array([_KIND_CODE[a.kind] for a in self.attrs], dtype=np.int8)
        # patterns of 8 bytes or more, grouped by their first word, in a hash table of those
        firsts = sorted({int(w[0]) for n, w, _ in self.patterns if n >= 8})
        self.group_of = [firsts.index(int(w[0])) if n >= 8 else -1 for n, w, _ in self.patterns]
        self.first_words = np.array(firsts, dtype=np.uint64)
        self.hash = _hash_table(firsts)

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
        buf = np.frombuffer(data, dtype=np.uint8)
        words = np.ndarray((n,), dtype="<u8", buffer=data, offset=0, strides=(1,))  # 8 bytes from each position
        # Newlines and '=' signs in one pass. A line's first '=' is then the event right after
        # the newline before it (when that event is not its own newline): no search pairs them.
        head = buf[:n]
        events = np.flatnonzero((head == 10) | (head == 61))
        event_byte = buf[events]
        nl_event = np.flatnonzero(event_byte == 10)
        ends = events[nl_event]
        starts = np.empty(len(ends), dtype=np.int64)
        starts[0] = 0
        starts[1:] = ends[:-1] + 1
        line_event = np.empty(len(ends), dtype=np.int64)  # the first event of each line
        line_event[0] = 0
        line_event[1:] = nl_event[:-1] + 1
        w0 = words[starts]
        first = w0 & np.uint64(0xFF)
        sep = (ends == starts) | (first == 42)  # blank line, or a history file's "*** " banner
        attr_line = ~sep
        prev_sep = np.empty_like(sep)
        prev_sep[0] = True
        prev_sep[1:] = sep[:-1]
        ad_start = attr_line & prev_sep
        ad_first_line = np.flatnonzero(ad_start)
        n_ads = len(ad_first_line)
        if n_ads == 0:
            return AdColumns.concat([], self.attrs), len(ends)
        ad_of = np.cumsum(ad_start) - 1  # meaningful on attribute lines only
        next_sep = np.empty_like(sep)
        next_sep[-1] = True
        next_sep[:-1] = sep[1:]
        ad_last_line = np.flatnonzero(attr_line & next_sep)
        ad_begin = starts[ad_first_line]
        ad_end = ends[ad_last_line] + 1

        # A line is canonical when it is "Name = value" as HTCondor writes it: a name start
        # character, and its first '=' with one space on each side and a value after it. The
        # bytes around the '=' are read as one word: x" = "y with x and y not spaces.
        eq = events[line_event]
        around = words[np.maximum(eq - 2, 0)]
        ok = (
            (line_event != nl_event)  # the line's first event is a '=', not its newline
            & (eq < ends - 1)
            & ((((first | np.uint64(0x20)) - np.uint64(97)) < 26) | (first == 95))  # a letter or '_'
            & ((around & np.uint64(0xFFFFFF00)) == np.uint64(0x203D2000))
            & ((around & np.uint64(0xFF)) != 32)
            & ((around & np.uint64(0xFF00000000)) != np.uint64(0x2000000000))
        )
        odd = np.zeros(n_ads, dtype=bool)
        odd[ad_of[np.flatnonzero(attr_line & ~ok)]] = True
        if truncated:
            odd[-1] = True

        # Find the wanted attributes' lines: a line's first folded 8-byte word is looked up in
        # a small hash table of the patterns' first words, then candidates' further words are
        # compared. Separator lines never match: no pattern starts with '*' or a newline.
        w0 |= _FOLD
        if self.hash is not None:
            mult, shift, table_word, table_group = self.hash
            slot = (w0 * mult) >> shift
            cand = np.flatnonzero(table_word[slot] == w0)
            cand_group = table_group[slot[cand]]
        else:  # hundreds of attributes: the differential tests, not the tables
            pos = np.searchsorted(self.first_words, w0)
            pos[pos == len(self.first_words)] = 0
            cand = np.flatnonzero(self.first_words[pos] == w0)
            cand_group = pos[cand]
        line_of = np.full((n_ads, len(self.attrs)), -1, dtype=np.int64)
        for j, (length, pwords, pmasks) in enumerate(self.patterns):
            if length >= 8:
                lines = cand[cand_group == self.group_of[j]]
            else:
                lines = np.flatnonzero((w0 & pmasks[0]) == pwords[0])
            for i in range(1, len(pwords)):
                w = (words[starts[lines] + 8 * i] | _FOLD) & pmasks[i]
                lines = lines[w == pwords[i]]
            line_of[ad_of[lines], j] = lines  # in file order, so a repeated attribute's last wins

        # an attribute behind one that is present (RequestMemory behind MemoryProvisioned) is
        # not read at all
        wanted = line_of >= 0
        for j, attr in enumerate(self.attrs):
            for u in self._shadows[j]:
                wanted[:, j] &= line_of[:, u] < 0
        ad_i, attr_j = np.nonzero(wanted)
        lines = line_of[ad_i, attr_j]
        vs = starts[lines] + self.lengths[attr_j]
        ascii_text = data.decode("ascii") if data.isascii() else None
        numeric, objects, fast = _convert(self.kinds, data, ascii_text, buf, words, vs, ends[lines], ad_i, attr_j, n_ads, report, self.attrs)
        slow = odd.copy()
        deferred = np.zeros((n_ads, len(self.attrs)), dtype=bool)
        deferred[ad_i[~fast], attr_j[~fast]] = True
        # An expression needs classad2, unless the attribute it stands behind is present.
        for j, attr in enumerate(self.attrs):
            need = deferred[:, j]
            for u in self._shadows[j]:
                need = need & (line_of[:, u] < 0)
            slow |= need

        keep = np.ones(n_ads, dtype=bool)
        for ad in np.flatnonzero(slow):
            text = data[ad_begin[ad] : ad_end[ad]].decode("utf-8", "replace")
            line = first_line + int(ad_first_line[ad])
            values = self._evaluate(text, path, line, truncated and ad == n_ads - 1, deferred[ad], odd[ad], report)
            if values is None:
                if strict:
                    raise report.malformed[-1].error()
                keep[ad] = False
                continue
            report.evaluated += 1
            for j, value in values.items():
                _store(numeric, objects, self.attrs[j], ad, j, value, report)

        for j, attr in enumerate(self.attrs):
            if self._shadows[j]:
                shadowed = (line_of[:, self._shadows[j]] >= 0).any(axis=1)
                if attr.kind is Kind.NUMBER:
                    numeric[shadowed, j] = np.nan
                else:
                    objects[shadowed, j] = None
        report.ads += int(keep.sum())
        raw = None
        if self.keep_raw:
            raw = np.array([data[b:e].decode("utf-8", "replace") for b, e in zip(ad_begin[keep], ad_end[keep])] + [None], dtype=object)[:-1]
        return AdColumns(
            {a.name: (numeric if a.kind is Kind.NUMBER else objects)[keep, j] for j, a in enumerate(self.attrs)},
            _repeat(path, int(keep.sum())),
            first_line + ad_first_line[keep],
            raw,
        ), len(ends)

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
        ads = list(classad2.parseAds(text, classad2.ParserType.Old))
        # classad2 drops an ad it cannot parse, or silently keeps only the lines before the
        # first bad one: every attribute of the text must be in what it parsed. As many
        # attributes as lines proves it; only an ad that repeats a name needs the names compared.
        if len(ads) != 1 or (len(ads[0]) != text.count("\n") and _names(text) - {k.lower() for k in ads[0].keys()}):
            offset, reason = _diagnose(text)
            report.malformed.append(Malformed(path, line + offset, reason, text))
            return None
        ad = ads[0]
        wanted = range(len(self.attrs)) if whole else np.flatnonzero(deferred)
        return {int(j): _eval(ad, self.attrs[j].name) for j in wanted}


def _names(text: str) -> set[str]:
    """The attribute names of an ad's text, case-folded."""
    return {ln.partition("=")[0].strip().lower() for ln in text.split("\n") if ln.strip()}


def _hash_table(keys: Sequence[int]) -> tuple[np.uint64, np.uint64, np.ndarray, np.ndarray] | None:
    """A collision-free multiplicative hash of the 8-byte words ``keys``: (multiplier, shift,
    the key in each slot, the key's index in each slot), or None for too many keys to keep the
    table small. Empty slots hold the word 0, which no folded line start is (folding sets a
    bit in every byte)."""
    if len(keys) > _MAX_HASHED:
        return None
    bits = 2 * len(keys).bit_length() + 1  # twice the square of the keys: few collisions
    words = np.array(keys, dtype=np.uint64)
    shift = np.uint64(64 - bits)
    rng = np.random.default_rng(0)  # the same table on every run
    while True:
        mult = rng.integers(1 << 62, 1 << 63, dtype=np.uint64) | np.uint64(1)
        slots = (words * mult) >> shift
        if len(np.unique(slots)) == len(keys):
            break
    table_word = np.zeros(1 << bits, dtype=np.uint64)
    table_word[slots] = words
    table_group = np.full(1 << bits, -1, dtype=np.int16)
    table_group[slots] = np.arange(len(keys))
    return mult, shift, table_word, table_group


_MAX_HASHED = 64  # a table of at most 2**15 slots; more keys are looked up by binary search


def _fold(name: bytes) -> bytes:
    return bytes(c | 0x20 for c in name)


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
    ascii_text: str | None,
    buf: np.ndarray,
    words: np.ndarray,
    vs: np.ndarray,
    ve: np.ndarray,
    ad_i: np.ndarray,
    attr_j: np.ndarray,
    n_ads: int,
    report: ReadReport,
    attrs: Sequence[Attr],
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Convert the literal values ``data[vs:ve]`` of the pairs (ad_i, attr_j) of one chunk.

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
    fb = buf[vs]
    width = ve - vs

    def reject(sel: np.ndarray, got: str) -> None:
        for j, count in zip(*np.unique(attr_j[sel], return_counts=True)):
            report.rejects[f"{attrs[j].name}: expected a {attrs[j].kind.value}, got {got}"] += int(count)

    # strings: "..." with no quote or backslash inside (old-syntax escapes are left to classad2)
    s = np.flatnonzero((fb == 34) & (buf[ve - 1] == 34) & (width >= 2))
    if len(s):
        clean, texts = _strings(data, ascii_text, buf, vs[s] + 1, ve[s] - 1)
        keep = clean & ((kind[s] == _STRING) | (kind[s] == _ANY))
        if keep.any():
            objects[ad_i[s[keep]], attr_j[s[keep]]] = texts[keep]
        reject(s[clean & ~keep], "string")
        fast[s[clean]] = True

    # numbers, in the spellings HTCondor writes
    s = np.flatnonzero((((fb >= 48) & (fb <= 57)) | (fb == 45)) & (width <= 40))
    if len(s):
        ok, is_int, values = _numbers(data, ascii_text, buf, words, vs[s], width[s])
        s, is_int, values = s[ok], is_int[ok], values[ok]
        to_num = kind[s] == _NUMBER
        numeric[ad_i[s[to_num]], attr_j[s[to_num]]] = values[to_num]
        to_any = kind[s] == _ANY
        if to_any.any():
            objs = values[to_any].astype(object)
            ints = np.flatnonzero(is_int[to_any])
            exact = s[to_any]
            for i in ints:
                # re-read integers from the text: float64 holds only 53 bits
                objs[i] = int(data[vs[exact[i]] : ve[exact[i]]]) if width[exact[i]] > 15 else int(objs[i])
            objects[ad_i[exact], attr_j[exact]] = objs
        reject(s[~to_num & ~to_any], "number")
        fast[s] = True

    # true, false, undefined (case-insensitive keywords)
    word = words[vs] | _FOLD
    for literal, value in ((b"true", True), (b"false", False), (b"undefined", None)):
        mask = np.uint64((1 << (8 * min(len(literal), 8))) - 1)
        target = np.frombuffer(literal[:8].ljust(8, b"\0"), dtype="<u8")[0]
        hit = (width == len(literal)) & ((word & mask) == target)
        if len(literal) > 8:
            hit &= (buf[vs + 8] | 0x20) == literal[8]
        h = np.flatnonzero(hit)
        if len(h) and value is not None:
            to_obj = (kind[h] == _BOOL) | (kind[h] == _ANY)
            objects[ad_i[h[to_obj]], attr_j[h[to_obj]]] = value
            reject(h[~to_obj], "bool")
        fast[h] = True

    # lists of literals
    for i in np.flatnonzero((fb == 123) & (buf[ve - 1] == 125)):
        items = _list_literal(data[vs[i] : ve[i]].decode("utf-8", "replace"))
        if items is not None:
            if kind[i] in (_LIST, _ANY):
                objects[ad_i[i], attr_j[i]] = items
            else:
                reject(np.array([i]), "list")
            fast[i] = True
    return numeric, objects, fast


def _texts(data: bytes, ascii_text: str | None, a: np.ndarray, b: np.ndarray) -> list[str]:
    """The texts ``data[a:b]``: sliced from the chunk's str when it is ASCII (the usual case,
    and much cheaper), decoded one by one otherwise."""
    if ascii_text is not None:
        return [ascii_text[i:j] for i, j in zip(a.tolist(), b.tolist())]
    return [data[i:j].decode("utf-8", "replace") for i, j in zip(a.tolist(), b.tolist())]


def _strings(data: bytes, ascii_text: str | None, buf: np.ndarray, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The texts ``data[a:b]`` as an object array, and whether each is free of quotes and
    backslashes (the others are left to classad2).

    Slicing a str is cheaper than any numpy detour here: the texts must become Python str
    objects for the table anyway.
    """
    got = _texts(data, ascii_text, a, b)
    # Users, groups, sites repeat in every ad: one str object each keeps a table of 200,000
    # jobs in a third of the memory. The cache is bounded so that it cannot grow with history.
    if len(_STRINGS) > _MAX_CACHED:
        _STRINGS.clear()
    got = [_STRINGS.setdefault(t, t) for t in got]
    texts = np.empty(len(got), dtype=object)
    texts[:] = got
    joined = "\0".join(got)
    if '"' not in joined and "\\" not in joined:  # the usual case: one C-level scan decides
        return np.ones(len(got), dtype=bool), texts
    clean = np.fromiter(('"' not in t and "\\" not in t for t in got), dtype=bool, count=len(got))
    return clean, texts


def _numbers(
    data: bytes, ascii_text: str | None, buf: np.ndarray, words: np.ndarray, vs: np.ndarray, width: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Validate and parse numbers written as -?(0|[1-9]d*)(.d+)?([eE][+-]?d+)?.

    Returns (ok, is_int, values as float64). Anything else (".5", "007", "1.", "+1") is not ok
    and goes to classad2, which decides what it means. Integers of up to 16 digits, the bulk,
    are parsed eight digits at a time in 64-bit words; the others are parsed one by one.
    """
    neg = buf[vs] == 45
    digits_at = vs + neg
    count = width - neg
    ok = np.zeros(len(vs), dtype=bool)
    values = np.full(len(vs), np.nan)
    short = np.flatnonzero((count >= 1) & (count <= 16))
    if len(short):
        c = count[short]
        at = digits_at[short]
        head = words[at]
        long = c > 8
        magnitude, digits = _digits8(head, np.where(long, c - 8, c))
        tail = np.flatnonzero(long)
        if len(tail):
            low, low_digits = _digits8(words[at[tail] + c[tail] - 8], np.full(len(tail), 8))
            magnitude[tail] = magnitude[tail] * np.uint64(100_000_000) + low
            digits[tail] &= low_digits
        digits &= ((head & np.uint64(0xFF)) != 48) | (c == 1)  # no leading zero
        good = short[digits]
        ok[good] = True
        mag = magnitude[digits].astype(np.float64)
        values[good] = np.where(neg[good], -mag, mag)
    is_int = ok.copy()
    # reals written -I.F with at most 15 digits, as HTCondor writes times and CPU seconds
    rest = np.flatnonzero(~ok & (width <= 16))
    if len(rest):
        real, value = _decimals(buf, vs[rest], width[rest])
        ok[rest[real]] = True
        values[rest[real]] = value[real]
    # the rest (exponents, long numbers, and what is no number at all), one at a time
    rest = np.flatnonzero(~ok)
    if len(rest):
        texts = _texts(data, ascii_text, vs[rest], vs[rest] + width[rest])
        for k, text in zip(rest.tolist(), texts):
            m = _NUMBER_TEXT.fullmatch(text)
            if m is None:
                continue
            integral = m.group(2) is None and m.group(3) is None
            if integral and len(m.group(1)) > _MAX_INT_DIGITS:
                continue
            ok[k] = True
            is_int[k] = integral
            values[k] = float(text)
    return ok, is_int, values


def _decimals(buf: np.ndarray, vs: np.ndarray, width: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Which values are -?(0|[1-9]d*).d+ with at most 15 digits, and their values.

    The digits make an integer mantissa M below 2**53, so M / 10**f is one correctly rounded
    division of exact operands: the double strtod (and so classad2) gives.
    """
    cols = np.arange(16)
    inside = cols < width[:, None]
    m = buf[vs[:, None] + cols]
    d = m - np.uint8(48)
    digit = (d < 10) & inside
    dot = (m == 46) & inside
    neg = m[:, 0] == 45
    dpos = dot.argmax(axis=1)
    n_digits = digit.sum(axis=1)
    ok = (dot.sum(axis=1) == 1) & (n_digits == width - 1 - neg) & (n_digits <= 15)
    ok &= (dpos > neg) & (dpos < width - 1)  # digits on both sides of the dot
    ok &= (m[np.arange(len(m)), neg.astype(np.int64)] != 48) | (dpos == neg + 1)  # no leading zero
    frac = width - 1 - dpos
    # digit c has weight 10**(width - 1 - c), less one before the dot
    power = width[:, None] - 1 - cols - (cols < dpos[:, None])
    mantissa = np.where(digit, d, 0).astype(np.float64) * _POW10[np.clip(power, 0, 15)]
    value = mantissa.sum(axis=1) / _POW10[np.clip(frac, 0, 15)]
    return ok, np.where(neg, -value, value)


_POW10 = 10.0 ** np.arange(16)
_NUMBER_TEXT = re.compile(r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?")
_ZEROS = np.uint64(0x3030303030303030)
_HIGH_NIBBLES = np.uint64(0xF0F0F0F0F0F0F0F0)
_LOW_NIBBLES = np.uint64(0x0F0F0F0F0F0F0F0F)
_ONE = np.uint64(1)


def _digits8(word: np.ndarray, count: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The first ``count`` (1 to 8) bytes of each little-endian word read as a decimal number,
    and whether they are all digits (SWAR: all lanes of a word at once)."""
    shift = (8 * (8 - count)).astype(np.uint64)
    # shift the digits to the top and fill below with '0's: leading zeros, value unchanged
    x = (word << shift) | (_ZEROS & ((_ONE << shift) - _ONE))
    digits = ((x & _HIGH_NIBBLES) == _ZEROS) & ((((x & _LOW_NIBBLES) + np.uint64(0x0606060606060606)) & _HIGH_NIBBLES) == 0)
    v = x & _LOW_NIBBLES
    v = (v * np.uint64(10) + (v >> np.uint64(8))) & np.uint64(0x00FF00FF00FF00FF)
    v = (v * np.uint64(100) + (v >> np.uint64(16))) & np.uint64(0x0000FFFF0000FFFF)
    v = (v * np.uint64(10000) + (v >> np.uint64(32))) & np.uint64(0xFFFFFFFF)
    return v, digits


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
