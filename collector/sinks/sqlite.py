"""The embedded store: one SQLite file, a table per record kind, keyed by the record id.

This is the default sink, so that nothing but Python is needed to run fairacct. All storage
policy lives in this class: WAL mode (a report can read while the probe writes), one writer
at a time (``BEGIN IMMEDIATE``), a commit durable before it is acknowledged, and upserts by
id, so that storing the same fact twice keeps one document and a corrected fact replaces the
old one, whatever its timestamp, unless the stored copy has a higher version (a ``version``
column: an older copy flushed late by another collector is acknowledged, not stored); the ids
a write found already stored are looked up in its transaction, so that a backfill can say
what it read again, and which copies were older than the stored ones. The record's time
(indexed: every query bounds it) and the fields its kind names as ``labels`` are text
columns; those it names as ``measured`` are plain columns, so that
:meth:`EmbeddedStore.aggregate` (one SQL ``GROUP BY``) sums columns instead of parsing every
document. A store file written by an earlier release is brought to this release's layout
when it is opened (:mod:`collector.sinks.sqlite_layout`: ``PRAGMA user_version``), and one
written by a later release is refused. The daily summaries ask for a covering index of
what they group and sum (:meth:`EmbeddedStore.index_aggregation`): the GROUP BY then reads
that index in order, and take a lease (:mod:`collector.sinks.sqlite_lease`) so that two
collectors on one store file summarize one at a time.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson

from collector.encoded import Encoded
from collector.errors import ConfigError, StoreError
from collector.records import KINDS, VERSION, encode_docs
from collector.sinks import sqlite_lease
from collector.sinks.base import Aggregation, Lease, SendResult, TemplateCheck
from collector.sinks.registry import Opening, StoreSettings, sqlite_path
from collector.sinks.sqlite_layout import migrate
from collector.transaction import use_wal, write_transaction

__all__ = ["EmbeddedStore"]

PAGE_BYTES = 16384
"""The page size of a new store file."""

CACHE_KIB = 64 * 1024
"""SQLite's page cache of a store connection, in KiB (its default is 2 MiB)."""


class EmbeddedStore:
    """Records in one SQLite file; ``path`` may be ``:memory:`` for tests."""

    def __init__(self, path: str | Path, *, timeout: float = 30.0, create: bool = True) -> None:
        """``timeout``: seconds to wait for another writer before giving up (StoreError).
        Without ``create``, a store that does not exist is a :class:`StoreError` naming the
        path (reading an empty store that a typo created would say "0 records")."""
        self.path = str(path)
        if not create and self.path != ":memory:" and not Path(self.path).is_file():
            raise StoreError(
                f"{self.path}: no embedded store here (nothing stored yet, or another store.url or state_dir?)"
            )
        try:
            if self.path != ":memory:":
                Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, isolation_level=None, timeout=timeout)
            # A row is a ~1 KB document: 16 KiB pages hold four times as many per page as SQLite's
            # 4 KiB, so a batch's inserts touch, write and checkpoint a quarter as many pages (a
            # third less CPU per record sent: bench_store.py). A file that exists keeps its size.
            self._db.execute(f"PRAGMA page_size={PAGE_BYTES}")
            # the id index of a store of millions of records is hundreds of MB: what a batch's
            # inserts touch of it stays in this cache instead of being read again every batch
            self._db.execute(f"PRAGMA cache_size=-{CACHE_KIB}")
            use_wal(self._db, timeout)
            # FULL: a send is acknowledged only once its commit is on disk, because the outbox
            # deletes what was acknowledged. WAL with NORMAL syncs only at checkpoints, so a power
            # cut may take back the last commits, records the outbox no longer holds. FULL costs
            # one fsync per batch: wall time, not CPU (bench_store.py counts the same CPU-s per
            # record as with NORMAL).
            self._db.execute("PRAGMA synchronous=FULL")
            migrate(self._db, self.path)
        except (OSError, sqlite3.Error) as exc:
            raise StoreError(f"{self.path}: cannot open the embedded store ({exc})") from exc
        except StoreError:
            self._db.close()
            raise
        self._ready: set[str] = set()
        self._indexes: set[str] = set()  # covering indexes known to exist (index_aggregation)

    @classmethod
    def from_settings(cls, settings: StoreSettings, opening: Opening) -> EmbeddedStore:
        """The store of a ``sqlite:///PATH`` URL, PATH relative to the opening's ``base``
        (:func:`collector.sinks.registry.open_store`)."""
        path = sqlite_path(settings.url, opening.base)
        if path is None:  # the registry sends only sqlite:/// URLs here
            raise ConfigError(f"store.url: expected sqlite:///PATH, got {settings.url!r}")
        return cls(path, create=opening.create)

    def __repr__(self) -> str:
        return f"EmbeddedStore({self.path!r})"

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> EmbeddedStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def ping(self) -> str:
        """Take the write lock and let it go (a transaction that writes nothing): the file and
        its directory are writable by this user, and no other writer holds the lock longer than
        the timeout."""
        if self.path != ":memory:" and not os.access(self.path, os.W_OK):
            raise StoreError(f"{self.path}: the embedded store is not writable by user id {os.geteuid()}")
        with write_transaction(self._db, self.path, "cannot take the embedded store's write lock"):
            pass
        return f"{self.path} writable"

    def _table(self, kind: str) -> str:
        if kind not in KINDS:
            raise StoreError(f"unknown record kind {kind!r}, expected one of {', '.join(KINDS)}")
        if kind not in self._ready:
            spec = KINDS[kind]
            cols = "".join(f', "{c}" TEXT' for c in spec.labels)
            cols += "".join(f', "{c}"' for c in _measured(kind))  # untyped: numbers stay numbers, names text
            # one writer: another process (the service's flush, a summary) may be making it too
            with write_transaction(self._db, self.path, f"cannot create the {kind} table"):
                self._db.execute(
                    f'CREATE TABLE IF NOT EXISTS "{kind}" '
                    f"(id TEXT PRIMARY KEY, timestamp TEXT{cols}, version INTEGER, doc TEXT NOT NULL)"
                )
                # every query bounds the time (EXPLAIN QUERY PLAN: none needs an index of a label)
                self._db.execute(f'CREATE INDEX IF NOT EXISTS "{kind}_timestamp" ON "{kind}"(timestamp)')
            self._ready.add(kind)
        return f'"{kind}"'

    def send(self, kind: str, docs: Sequence[Mapping[str, Any]]) -> SendResult:
        """Upsert documents, encoded here (see :meth:`send_encoded`); a document that cannot be
        encoded (a value that is not JSON, no string id) is refused by itself (``rejected``),
        never the batch."""
        rejected: dict[str, str] = {}
        try:
            records = encode_docs(kind, docs)
        except (TypeError, ValueError):  # orjson's JSONEncodeError is a TypeError
            records, rejected = _encode_each(kind, docs)
        result = self.send_encoded(kind, records)
        result.rejected.update(rejected)
        return result

    def send_encoded(self, kind: str, records: Encoded) -> SendResult:
        """Upsert records in one transaction, their JSON stored as it is and their columns from
        the fields they carry: all are acknowledged, or none (StoreError); a record the store can
        never hold (a whole number past 64 bits in a column) is refused by itself
        (``rejected``), never the batch, so it cannot block the ones behind it. A record whose
        id is stored with a higher version is acknowledged and not written (``superseded``)."""
        table = self._table(kind)
        fields = ("timestamp", *KINDS[kind].labels, *_measured(kind), "version")
        rows = _rows(kind, records)
        rejected: dict[str, str] = {}
        names = ", ".join(f'"{c}"' for c in ("id", *fields, "doc"))
        marks = ", ".join("?" * (len(fields) + 2))
        updates = ", ".join(f'"{c}" = excluded."{c}"' for c in (*fields, "doc"))
        # the stored copy stays when it is of a higher version than this one (both versioned)
        newer = f"excluded.version IS NULL OR {table}.version IS NULL OR excluded.version >= {table}.version"
        sql = f"INSERT INTO {table}({names}) VALUES ({marks}) ON CONFLICT(id) DO UPDATE SET {updates} WHERE {newer}"
        try:
            held = self._upsert(kind, table, sql, rows)
        except OverflowError:  # a whole number SQLite cannot bind (rolled back): refuse its rows alone
            rows, rejected = _bindable(rows)
            held = self._upsert(kind, table, sql, rows)
        acked = [r[0] for r in rows]
        mine = {r[0]: r[-2] for r in rows}  # the version of each id's last row: the copy that counts
        return SendResult(
            acked=acked,
            rejected=rejected,
            created=[i for i in acked if i not in held],
            existed=sorted(held),
            superseded=sorted(i for i, v in held.items() if v is not None and mine[i] is not None and v > mine[i]),
        )

    def _upsert(self, kind: str, table: str, sql: str, rows: Sequence[tuple[Any, ...]]) -> dict[str, int | None]:
        """Write ``rows`` by ``sql`` in one transaction; the ids among them the table held before,
        with their versions. They are looked up in the same transaction as the write, so no other
        writer comes between: one lookup of the id index per record, whose pages the insert then
        finds cached (about 0.5 us of CPU a record with hashed ids, 6 % of the write; 2-3 % with
        ids in order: bench_store.py, ten runs paired with the store before), and the row of
        each id found, for its version."""
        with write_transaction(self._db, self.path, f"cannot store {kind} records"):
            held = self._db.execute(
                f"SELECT id, version FROM {table} WHERE id IN (SELECT value FROM json_each(?))",
                (orjson.dumps([r[0] for r in rows]).decode(),),
            )
            existed = dict(held.fetchall())
            self._db.executemany(sql, rows)
        return existed

    def aggregate(self, query: Aggregation) -> list[dict[str, Any]]:
        """The sums of ``query`` by one SQL ``GROUP BY`` (see :meth:`Sink.aggregate`)."""
        table = self._table(query.kind)
        columns = {"timestamp", *KINDS[query.kind].labels, *_measured(query.kind)}

        def value(field: str) -> str:
            if field in columns:
                return f'"{field}"'
            return f"json_extract(doc, '$.\"{field}\"')"

        keys = [f"substr(timestamp, 1, {_PERIOD_CHARS[query.period]})"] if query.period else []
        keys += [value(f) for f in query.group_by]
        sums = []
        for t in query.totals:
            if t.op != "sum":  # a least or greatest value: as stored, None over no values
                sums.append(f"{t.op}({value(t.fields[0])})")
                continue
            if not t.fields:  # a count stays a whole number
                sums.append(f"count(CASE WHEN {value(t.where)} THEN 1 END)" if t.where else "count(*)")
                continue
            term = " * ".join(value(f) for f in t.fields)
            if t.whole:  # CAST to INTEGER drops the fraction towards zero, as a long field indexes it
                term = f"CAST({term} AS INTEGER)"
            if t.missing:
                term = f"coalesce({term}, {float(t.missing)!r})"
            if t.where is not None:
                term = f"CASE WHEN {value(t.where)} THEN {term} END"
            sums.append(f"total({term}) * {float(t.scale)!r}")  # total(): 0.0 over no values
        sql = f"SELECT {', '.join([*keys, *sums])} FROM {table} WHERE 1"
        params: list[str | float] = []
        if query.period:  # implied by the bounds below; they let the covering index (see index_aggregation) be used
            period = keys[0]
            if query.since is not None:
                sql, params = (
                    sql + f" AND {period} >= substr(?, 1, {_PERIOD_CHARS[query.period]})",
                    [*params, query.since],
                )
            if query.until is not None:
                sql, params = (
                    sql + f" AND {period} <= substr(?, 1, {_PERIOD_CHARS[query.period]})",
                    [*params, query.until],
                )
        if query.since is not None:
            sql, params = sql + " AND timestamp >= ?", [*params, query.since]
        if query.until is not None:
            sql, params = sql + " AND timestamp < ?", [*params, query.until]
        for f in query.requires:
            sql += f" AND {value(f)} IS NOT NULL"
        for f, low, high in query.ranges:
            sql += f" AND {value(f)} IS NOT NULL"
            if low is not None:
                sql, params = sql + f" AND {value(f)} >= ?", [*params, float(low)]
            if high is not None:
                sql, params = sql + f" AND {value(f)} < ?", [*params, float(high)]
        if keys:
            sql += " GROUP BY " + ", ".join(str(i + 1) for i in range(len(keys)))
        else:  # one row for the whole range, none when it holds no record (as a composite aggregation)
            sql += " HAVING count(*) > 0"
        names = (["period"] if query.period else []) + list(query.group_by) + [t.name for t in query.totals]
        try:
            rows = self._db.execute(sql, params).fetchall()
        except sqlite3.Error as exc:
            raise StoreError(f"{self.path}: cannot aggregate {query.kind} records ({exc})") from exc
        return [dict(zip(names, row, strict=True)) for row in rows]

    def index_aggregation(self, query: Aggregation) -> None:
        """A covering index for aggregations of this shape, made once: the period of the
        timestamp, the grouped fields, the timestamp and the summed fields, in that order, so
        that :meth:`aggregate` reads the index alone, in its order, with no sort and no table
        row (several times less CPU than without it on a million job records by day:
        bench_summaries.py).
        Every write of ``kind`` then updates one more index. Nothing is made when a field is
        not a column (Gratia's) or the query has no period; an index of an earlier shape of
        the same kind is dropped."""
        if not query.period:
            return
        table = self._table(query.kind)
        columns = {"timestamp", *KINDS[query.kind].labels, *_measured(query.kind)}
        summed = [f for t in query.totals for f in (*t.fields, *((t.where,) if t.where else ()))]
        fields = list(dict.fromkeys([*query.group_by, "timestamp", *summed]))
        if not set(fields) <= columns:
            return
        parts = [f"substr(timestamp, 1, {_PERIOD_CHARS[query.period]})", *(f'"{f}"' for f in fields)]
        prefix = f"{query.kind}_{query.period}_sums_"
        name = prefix + hashlib.sha256(",".join(parts).encode()).hexdigest()[:8]
        if name in self._indexes:
            return
        with write_transaction(self._db, self.path, f"cannot index the {query.kind} table for summaries"):
            have = {row[1] for row in self._db.execute(f"PRAGMA index_list({table})")}
            if name not in have:
                for old in have:
                    if old.startswith(prefix):
                        self._db.execute(f'DROP INDEX IF EXISTS "{old}"')
                self._db.execute(f'CREATE INDEX IF NOT EXISTS "{name}" ON {table}({", ".join(parts)})')
        self._indexes.add(name)

    def delete_stale(
        self,
        kind: str,
        since: str,
        until: str,
        *,
        field: str,
        value: str,
        keep: Collection[str],
        version: int | None = None,
    ) -> int:
        """One ``DELETE`` of the documents of ``kind`` in [since, until) whose ``field`` is
        ``value``, whose id is not in ``keep`` and whose version is below ``version`` (see
        :meth:`Sink.delete_stale`)."""
        table = self._table(kind)
        column = (
            f'"{field}"' if field in {*KINDS[kind].labels, *_measured(kind)} else f"json_extract(doc, '$.\"{field}\"')"
        )
        sql = (
            f"DELETE FROM {table} WHERE timestamp >= ? AND timestamp < ? AND {column} = ? "
            "AND id NOT IN (SELECT value FROM json_each(?))"
        )
        params: list[Any] = [since, until, value, orjson.dumps(list(keep)).decode()]
        if version is not None:
            sql, params = sql + " AND (version IS NULL OR version < ?)", [*params, version]
        with write_transaction(self._db, self.path, f"cannot delete stale {kind} records"):
            deleted = self._db.execute(sql, params).rowcount
        return int(deleted)

    def take_lease(self, name: str, holder: str, ttl_s: float, *, now: float) -> Lease:
        """See :meth:`Sink.take_lease` (:mod:`collector.sinks.sqlite_lease`)."""
        return sqlite_lease.take_lease(self._db, self.path, name, holder, ttl_s, now)

    def release_lease(self, lease: Lease) -> None:
        """See :meth:`Sink.release_lease`."""
        sqlite_lease.release_lease(self._db, self.path, lease)

    def check_templates(self) -> TemplateCheck:
        """The embedded store keeps a table per kind, created on first write: nothing to check."""
        return TemplateCheck()

    def install_templates(self) -> list[str]:
        raise ConfigError(f"{self.path} is the embedded store; index templates are for Elasticsearch")

    def count(self, kind: str) -> int:
        table = self._table(kind)
        return int(self._db.execute(f"SELECT count(*) FROM {table}").fetchone()[0])

    def query(
        self, kind: str, *, since: str | None = None, until: str | None = None, limit: int | None = None
    ) -> list[dict[str, Any]]:
        """Documents of one kind, oldest first; ``since``/``until`` are ISO-8601 UTC bounds
        on the record's ``timestamp`` (since inclusive, until exclusive)."""
        table = self._table(kind)
        sql = f"SELECT doc FROM {table} WHERE 1"
        params: list[str | int] = []
        if since is not None:
            sql, params = sql + " AND timestamp >= ?", [*params, since]
        if until is not None:
            sql, params = sql + " AND timestamp < ?", [*params, until]
        sql += " ORDER BY timestamp, id"
        if limit is not None:
            sql, params = sql + " LIMIT ?", [*params, limit]
        return [orjson.loads(doc) for (doc,) in self._db.execute(sql, params)]


_PERIOD_CHARS = {"day": 10, "month": 7}  # of the ISO timestamp: 'YYYY-MM-DD', 'YYYY-MM'


def _measured(kind: str) -> tuple[str, ...]:
    spec = KINDS[kind]
    return tuple(c for c in spec.measured if c not in spec.labels)


def _rows(kind: str, records: Encoded) -> list[tuple[Any, ...]]:
    """The rows of ``records``: id, the text columns (timestamp, labels), the measured columns,
    the version (None: none carried), the document as it was encoded. Built a column at a time
    from the fields the records carry, with one type check per column in the common case (text
    columns all text, measured all plain), not a function call per value (bench_store.py)."""
    spec = KINDS[kind]
    columns: list[Sequence[Any]] = [records.ids]
    for f in ("timestamp", *spec.labels):
        values = records.column(f)
        if not _TEXT_TYPES.issuperset(map(type, values)):
            values = tuple(_text(v) for v in values)
        columns.append(values)
    for f in _measured(kind):
        values = records.column(f)
        if not _PLAIN_TYPES.issuperset(map(type, values)):
            values = tuple(_plain(v) for v in values)
        columns.append(values)
    columns.append(records.column(VERSION))
    columns.append([d.decode() for d in records.docs])  # text: SQLite's JSON functions read no BLOB
    return list(zip(*columns, strict=True))


def _encode_each(kind: str, docs: Sequence[Mapping[str, Any]]) -> tuple[Encoded, dict[str, str]]:
    """``docs`` encoded one by one: those that encode, and why each other one cannot be stored (by id)."""
    good: list[Encoded] = []
    rejected: dict[str, str] = {}
    for doc in docs:
        try:
            good.append(encode_docs(kind, [doc]))
        except (TypeError, ValueError) as exc:
            rejected[str(doc.get("id"))] = f"a {kind} record the embedded store cannot hold ({exc})"
    return Encoded.join(good), rejected


def _bindable(rows: Sequence[tuple[Any, ...]]) -> tuple[list[tuple[Any, ...]], dict[str, str]]:
    """The rows SQLite can bind, and why each other one cannot (by id): a whole number past
    64 bits in one of its columns."""
    good: list[tuple[Any, ...]] = []
    rejected: dict[str, str] = {}
    for row in rows:
        big = next((v for v in row if type(v) is int and not -(2**63) <= v < 2**63), None)
        if big is None:
            good.append(row)
        else:
            rejected[str(row[0])] = f"a whole number past 64 bits, which the embedded store cannot hold: {big}"
    return good, rejected


_TEXT_TYPES = frozenset({str, type(None)})  # kept as they are by _text
_PLAIN_TYPES = frozenset({int, float, bool, str, type(None)})  # kept as they are by _plain


def _plain(value: object) -> object:
    """A measured field as SQLite keeps it: numbers and text as they are, anything else as JSON."""
    if value is None or isinstance(value, (int, float, str)):
        return value
    return orjson.dumps(value).decode()


def _text(value: object) -> str | None:
    return None if value is None else str(value)
