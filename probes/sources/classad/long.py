"""Fast, exact reading of the attributes fairacct needs from ClassAd dumps.

HTCondor writes ``condor_status -long``, ``condor_q -long``, ``condor_history -long`` and its
history files in the "old" ClassAd syntax: one ``Name = value`` line per attribute, ads separated
by blank lines (history files separate them with ``*** ...`` banner lines instead).
``classad2.parseAds`` reads them exactly, but slows down on large inputs and builds every
attribute of every ad, while a table needs a few dozen.

So this module reads whole chunks of a file at a time: one compiled pass over the bytes
(:mod:`probes.sources.classad.kernel`) finds the ads, the lines of the wanted attributes and the
literals among their values (numbers, strings, booleans, ``undefined``, lists), and numpy
turns those into columns. Strings are decoded as old ClassAd syntax has it: ``\\"`` is a quote
(except before the closing one), every other backslash is itself.
Anything else is handed to ``classad2`` in the context of its own ad: expressions (evaluated),
a quote inside a string with no backslash before it, strings with escapes inside lists, numbers
in unusual spellings, and every ad with a line that is not in
HTCondor's canonical ``Name = value`` form. Those ads are rare, and for them the answer is by
construction the one ``classad2`` gives; the differential tests (of the source tree) prove the
fast path gives the same values on the fixtures and on generated ads.

A malformed ad (one ``classad2`` cannot parse, or a file that ends in the middle of a line) is
reported with its file and line, counted, and written to the quarantine file, or raised as a
:class:`~probes.errors.ClassAdError` in strict mode.
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, BinaryIO

import classad2
import numpy as np

from probes.errors import SourceError
from probes.sources.classad import model
from probes.sources.classad.columns import ColumnBuilder
from probes.sources.classad.exact import evaluate_ad
from probes.sources.classad.json_form import read_json
from probes.sources.classad.kernel import Lines, NameTable, scan_lines
from probes.sources.classad.limits import MAX_OPERATORS, out_of_range, too_many_operators
from probes.sources.classad.literals import KIND_CODE, convert_literals, drop_infinities, store_value
from probes.sources.classad.model import AdColumns, Attr, Kind, repeat
from probes.sources.classad.spacing import BOM, white_separator
from probes.sources.inputs import MAX_AD_BYTES, FileRange, content_problem, open_input, read_input
from probes.sources.report import Malformed, ReadReport, ReadTally

__all__ = ["collect", "iter_ad_files", "iter_ads", "iter_ads_range", "read_ad_files", "read_ads"]


_PAD = b"\0" * 8  # the scan reads a few bytes past a line's end without checking


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
    tally = ReadTally()
    columns = collect(iter_ads(path, attrs, tally, strict=strict, keep_raw=keep_raw), attrs, _size(path))
    return columns, tally.report()


def iter_ads(
    path: str | os.PathLike[str],
    attrs: Sequence[Attr],
    tally: ReadTally,
    *,
    strict: bool = False,
    keep_raw: bool = False,
) -> Iterator[tuple[AdColumns, int]]:
    """:func:`read_ads` a chunk at a time: yield each chunk's ads and the bytes of the file read
    so far (of ``os.path.getsize(path)``), and add what was found besides values to ``tally``.
    A caller that turns each chunk into its own table never holds the file's ads whole."""
    name = os.fspath(path)
    with open_input(path, "a file of ClassAds") as fh:
        head = fh.read(4096)
        fh.seek(0)
        problem = content_problem(head, "ClassAds")
        if problem:
            raise SourceError(f"{name}: {problem}")
        if head.removeprefix(BOM).lstrip()[:1] != b"[":
            yield from _iter_long(fh, name, attrs, tally, strict, keep_raw)
            return
        size = os.fstat(fh.fileno()).st_size
    # utf-8-sig: a byte order mark (an editor's) is not part of the document
    with io.TextIOWrapper(open_input(path, "a file of ClassAds"), encoding="utf-8-sig", errors="replace") as text:
        columns, found = read_json(text, name, attrs, strict, keep_raw)
    tally.merge(found)
    yield columns, size


class _Window:
    """An open file seen through a :class:`FileRange`: offsets from its start, nothing past its
    stop (bytes the schedd appends meanwhile are the next pass's)."""

    def __init__(self, fh: BinaryIO, start: int, stop: int) -> None:
        self._fh, self._start, self._stop = fh, start, stop

    def seek(self, offset: int, whence: int = 0) -> int:
        return self._fh.seek(self._start + offset, whence) - self._start

    def read(self, size: int = -1) -> bytes:
        left = max(0, self._stop - self._fh.tell())
        return self._fh.read(left if size < 0 else min(size, left))


def iter_ads_range(
    part: FileRange, attrs: Sequence[Attr], tally: ReadTally, *, strict: bool = False
) -> Iterator[tuple[AdColumns, int]]:
    """:func:`iter_ads` of the ads in ``part`` of a ``-long`` file (its lines numbered as in the
    whole file); the bytes read so far are counted from ``part.start``."""
    if part.stop <= part.start:
        return
    with open_input(part.path, "a file of ClassAds") as fh:
        window = _Window(fh, part.start, part.stop)
        yield from _iter_long(window, part.path, attrs, tally, strict, False, first_line=part.first_line)  # type: ignore[arg-type]


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


_NUL_TO_SOH = bytes.maketrans(b"\0", b"\1")


def _chunks(fh: BinaryIO, path: str, tally: ReadTally) -> Iterator[tuple[bytes, int, bool]]:
    """Yield (data, n, truncated): ``data[:n]`` holds whole ads and ends with a newline.

    ``data`` goes on for at least ``len(_PAD)`` bytes after ``n`` (the next ads, or padding),
    so that the scan can look a few bytes past a line without copying the chunk.
    ``truncated`` is set on the last chunk when the file does not end with a newline: HTCondor
    always ends a dump with one, so the last ad was cut short.

    Each chunk is read from the start of its first ad (the tail of the one before is read
    again) rather than joined to that tail, which would copy every chunk once more.

    NUL bytes in a text dump (the zero-filled blocks a power cut leaves at the end of a file)
    are made \\x01, which no ClassAd line holds: the ads they are in are quarantined as
    malformed and every other ad is read. The region is said once in ``tally``.
    """
    banners: bool | None = None  # history files separate ads with "*** " lines
    start = 0  # the file offset of data[0]
    size = model.CHUNK_BYTES
    seen_nul: set[int] = set()  # a chunk's tail is read again with the next: say a region once
    while True:
        fh.seek(start)
        data = fh.read(size)
        if start == 0 and data.startswith(BOM):
            data = b"   " + data[len(BOM) :]
        if b"\0" in data:
            first, last = data.index(b"\0"), data.rindex(b"\0")
            if start + first not in seen_nul:
                seen_nul.add(start + first)
                tally.reject(
                    f"binary data: NUL bytes from offset {start + first} to {start + last}, "
                    "the ads they are in are quarantined",
                    data.count(b"\0"),
                )
            # a run of NULs that starts a line starts an ad of its own: the ad before it is whole
            data = data.replace(b"\n\0", b"\n\n").translate(_NUL_TO_SOH)
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
        if cut < 0:  # ads separated by lines of white space only (rare: found the slow way)
            cut = white_separator(data)
        if banners:
            cut = max(cut, data.rfind(b"\n***"))
        if cut < 0:
            if size >= MAX_AD_BYTES:
                raise SourceError(
                    f"{path}: an ad (or a line) of more than {MAX_AD_BYTES >> 20} MiB from byte {start}: HTCondor "
                    "writes none so long (is this a ClassAd dump?); the file was not read further"
                )
            size = min(2 * size, MAX_AD_BYTES)  # one ad longer than a chunk: read it whole
            continue
        n = cut + 1
        yield (data if len(data) - n >= len(_PAD) else data[:n] + _PAD), n, False
        del data  # not held while the next chunk is read
        start += n
        size = model.CHUNK_BYTES


def _iter_long(
    fh: BinaryIO,
    path: str,
    attrs: Sequence[Attr],
    tally: ReadTally,
    strict: bool,
    keep_raw: bool,
    *,
    first_line: int = 1,
) -> Iterator[tuple[AdColumns, int]]:
    scanner = _Scanner(attrs, keep_raw, white_lines=True)  # a line of white space ends an ad, as to classad2
    done = 0
    for data, n, truncated in _chunks(fh, path, tally):
        done += n
        if b"\r" in data:
            n -= data.count(b"\r\n", 0, n)
            data = data.replace(b"\r\n", b"\n")
            if len(data) - n < len(_PAD):
                data = data[:n] + _PAD
        part, n_lines = scanner.scan(data, n, path, first_line, truncated, tally, strict)
        del data  # not held while the next chunk is read
        first_line += n_lines
        yield part, done


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
    tally = ReadTally()
    columns = collect(iter_ad_files(paths, attrs, tally, strict=strict), attrs)
    return columns, tally.report()


def iter_ad_files(
    paths: Sequence[str | os.PathLike[str]],
    attrs: Sequence[Attr],
    tally: ReadTally,
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
        malformed = tally.malformed
        seen = len(malformed)
        try:
            part, _ = scanner.scan(data + _PAD, len(data), "", 1, False, tally, strict=False)
        finally:
            batch, size = [], 0
        for k in range(seen, len(malformed)):
            m = malformed[k]
            i = int(np.searchsorted(first, m.line, side="right") - 1)
            malformed[k] = Malformed(str(names[i]), int(m.line - first[i] + 1), m.reason, m.text)
            if strict:
                raise malformed[k].error()
        rows = np.searchsorted(first, part.line, side="right") - 1
        return AdColumns(part.columns, names[rows], part.line - first[rows] + 1)

    for p in paths:
        name = os.fspath(p)
        data = read_input(p, "a ClassAd", missing_ok=True, limit=MAX_AD_BYTES)  # a per-job file holds one ad
        if data is None:
            continue  # HTCondor removed it (history rotation) between the listing and now
        done += len(data)
        problem = content_problem(data, "one ClassAd", complete=True)
        if problem:
            m = Malformed(name, 1, problem, data[:100000].decode("utf-8", "replace"))
            if strict:
                raise m.error()
            tally.add_malformed(m)
            continue
        batch.append((name, data.replace(b"\r\n", b"\n") if b"\r" in data else data))
        size += len(data)
        if size >= model.CHUNK_BYTES:
            yield scan(), done
    if batch:
        yield scan(), done


class _Scanner:
    """Reads the wanted attributes out of chunks of ``-long`` text (see the module docstring)."""

    def __init__(self, attrs: Sequence[Attr], keep_raw: bool = False, *, white_lines: bool = False) -> None:
        self.keep_raw = keep_raw
        self.white_lines = white_lines  # a line of spaces and tabs only is a blank line (kernel.scan_lines)
        self.attrs = list(attrs)
        # the scan looks each distinct name up once; attributes map to their name's columns
        names: dict[str, int] = {}
        self.name_of = np.array([names.setdefault(a.name.lower(), len(names)) for a in self.attrs], dtype=np.int64)
        self.table = NameTable.build(list(names))
        # per attribute, the attributes that shadow it (see Attr.unless), as name columns
        self._shadows = [
            np.array(sorted({names[u.lower()] for u in a.shadows if u.lower() in names}), dtype=np.int64)
            for a in self.attrs
        ]
        self.kinds = np.array([KIND_CODE[a.kind] for a in self.attrs], dtype=np.int8)
        self.any_finite = any(a.finite for a in self.attrs)
        # each attribute its own name, in order: the scan's columns are the attributes'
        self.one_name_each = bool(np.array_equal(self.name_of, np.arange(len(self.attrs))))
        self.ads_per_byte = 0.0  # of the last chunk: how many ads to make room for in the next

    # -- chunk level ----------------------------------------------------------------------------

    def scan(
        self,
        data: bytes,
        n: int,
        path: str,
        first_line: int,
        truncated: bool,
        tally: ReadTally,
        strict: bool,
    ) -> tuple[AdColumns, int]:
        """Read ``data[:n]``: whole ads, ending with a newline, with at least ``len(_PAD)``
        readable bytes after them. Also return the number of lines read."""
        # room for as many ads a byte as the last chunk had, and a quarter more
        found = scan_lines(data, n, self.table, int(1.25 * n * self.ads_per_byte), white_lines=self.white_lines)
        n_ads = len(found.begin)
        self.ads_per_byte = n_ads / max(n, 1)
        if n_ads == 0:
            return AdColumns.concat([], self.attrs), found.n_lines
        chunk = _Chunk(data, found, path, first_line, truncated, tally, strict)
        odd = found.odd
        if truncated:
            odd[-1] = True
        ad_i, attr_j, at, read = self._read_pairs(found, n_ads)
        numeric, objects, fast = convert_literals(
            self.kinds, data, found.literal.ravel().take(at), found.number.ravel().take(at),
            found.integer.ravel().take(at), found.value_start.ravel().take(at), found.value_end.ravel().take(at),
            ad_i, attr_j, n_ads, tally, self.attrs,
        )  # fmt: skip
        # An expression (or anything else the scan does not read) needs classad2.
        deferred = np.zeros((n_ads, len(self.attrs)), dtype=bool)
        deferred[ad_i[~fast], attr_j[~fast]] = True
        slow = odd | deferred.any(axis=1)
        keep = self._within_classad2(chunk, slow)
        for ad in np.flatnonzero(slow).tolist():
            values = self._exact(chunk, ad, deferred[ad], odd[ad])
            if values is None:
                keep[ad] = False
                continue
            tally.evaluated += 1
            for j, value in values.items():
                store_value(numeric, objects, self.attrs[j], ad, j, value, tally)
        self._in_range(chunk, numeric, read, keep)
        drop_infinities(numeric, self.attrs, tally, keep)
        tally.ads += int(keep.sum())
        raw = None
        if self.keep_raw:
            raw = np.array(
                [data[b:e].decode("utf-8", "replace") for b, e in zip(found.begin[keep], found.end[keep], strict=True)]
                + [None],
                dtype=object,
            )[:-1]
        rows = slice(None) if keep.all() else keep  # views, not copies, in the usual case
        return AdColumns(
            {a.name: (numeric if a.kind is Kind.NUMBER else objects)[rows, j] for j, a in enumerate(self.attrs)},
            repeat(path, int(keep.sum())),
            first_line + found.first_line[rows],
            raw,
        ), found.n_lines

    def _read_pairs(self, found: Lines, n_ads: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The (ad, attribute) pairs read, in row-major order, and where each is in the scan's
        (ads x names) arrays: gathered by flat position, a fraction of the cost of 2-D indexing.
        Also the same pairs as a mask (ads x attributes, bool; not to be written to)."""
        # an attribute behind one that is present (RequestMemory behind MemoryProvisioned) is
        # not read at all
        present = found.value_start >= 0
        wanted = present if self.one_name_each else present[:, self.name_of]
        for j, behind in enumerate(self._shadows):
            if len(behind):
                if wanted is present:
                    wanted = present.copy()
                wanted[:, j] &= ~present[:, behind].any(axis=1)
        at = np.flatnonzero(wanted)
        ad_i = np.repeat(np.arange(n_ads), np.count_nonzero(wanted, axis=1))
        attr_j = at - ad_i * len(self.attrs)
        if not self.one_name_each:
            at = ad_i * len(self.table.lengths) + self.name_of[attr_j]
        return ad_i, attr_j, at, wanted

    def _within_classad2(self, chunk: _Chunk, slow: np.ndarray) -> np.ndarray:
        """Which ads are kept (all but those quarantined here): an ad classad2 will parse (a
        ``slow`` one, and with keep_raw all of them, later) whose expression is beyond what it can
        parse is quarantined, and no longer ``slow``."""
        found = chunk.found
        keep = np.ones(len(found.begin), dtype=bool)
        parsed = (slow | self.keep_raw) & (found.end - found.begin > MAX_OPERATORS)
        for ad in np.flatnonzero(parsed).tolist():
            if (why := too_many_operators(chunk.text(ad))) is not None:
                chunk.quarantine(ad, why)
                keep[ad] = slow[ad] = False
        return keep

    def _exact(self, chunk: _Chunk, ad: int, deferred: np.ndarray, whole: bool) -> dict[int, Any] | None:
        """The ad's deferred attributes (or, if ``whole``, all of them) as classad2 reads them;
        None, the ad quarantined, if it cannot."""
        text, line = chunk.text(ad), chunk.line(ad)
        last = chunk.truncated and ad == len(chunk.found.begin) - 1
        try:
            values = evaluate_ad(self.attrs, text, chunk.path, line, last, deferred, whole, chunk.tally)
        except (classad2.ClassAdException, RecursionError) as exc:  # classad2 bounds what it evaluates
            reason = f"classad2 cannot evaluate this ad ({exc}: an expression too long or nested too deep?)"
            chunk.tally.add_malformed(Malformed(chunk.path, line, f"{reason}; the ad was skipped", text))
            values = None
        if values is None and chunk.strict:
            raise chunk.tally.malformed[-1].error()
        return values

    def _in_range(self, chunk: _Chunk, numeric: np.ndarray, read: np.ndarray, keep: np.ndarray) -> None:
        """Quarantine (no longer ``keep``) each ad with a value out of its attribute's range;
        ``read`` (ads x attributes, bool): where the scan read each attribute (only an attribute
        that must be finite needs it)."""
        found, data = chunk.found, chunk.data

        def shown(ad: int, j: int) -> str:
            k = self.name_of[j]
            return data[found.value_start[ad, k] : found.value_end[ad, k]].decode("utf-8", "replace")

        for ad, reason in out_of_range(numeric, self.attrs, read if self.any_finite else None, shown).items():
            if keep[ad]:
                chunk.quarantine(ad, reason)
                keep[ad] = False


@dataclass(frozen=True)
class _Chunk:
    """A chunk of ``-long`` text being read: its bytes, what the scan ``found`` in them, where
    they are (``path``, the ``first_line`` of the chunk), whether the file ends inside its last
    ad, and the read's ``tally`` and mode."""

    data: bytes
    found: Lines
    path: str
    first_line: int
    truncated: bool
    tally: ReadTally
    strict: bool

    def text(self, ad: int) -> str:
        return self.data[self.found.begin[ad] : self.found.end[ad]].decode("utf-8", "replace")

    def line(self, ad: int) -> int:
        return self.first_line + int(self.found.first_line[ad])

    def quarantine(self, ad: int, why: str) -> None:
        """The ad counted as malformed for ``why``; raised in strict mode."""
        m = self.tally.add_malformed(Malformed(self.path, self.line(ad), why, self.text(ad)))
        if self.strict:
            raise m.error()
