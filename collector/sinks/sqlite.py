"""The embedded store: one SQLite file, a table per record kind, keyed by the record id.

This is the default sink, so that nothing but Python is needed to run fairacct. All storage
policy lives in this class: WAL mode (a report can read while the probe writes), one writer
at a time (``BEGIN IMMEDIATE``), and upserts by id, so that storing the same fact twice keeps
one document and a corrected fact replaces the old one. The record's time and the fields its
kind names as ``indexed`` are columns with indexes, for reports.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson

from collector.errors import ConfigError, StoreError
from collector.records import KINDS
from collector.sinks.base import SendResult, TemplateCheck

__all__ = ["EmbeddedStore"]


class EmbeddedStore:
    """Records in one SQLite file; ``path`` may be ``:memory:`` for tests."""

    def __init__(self, path: str | Path, *, timeout: float = 30.0, create: bool = True) -> None:
        """``timeout``: seconds to wait for another writer before giving up (StoreError).
        Without ``create``, a store that does not exist is a :class:`StoreError` naming the
        path (reading an empty store that a typo created would say "0 records")."""
        self.path = str(path)
        if not create and self.path != ":memory:" and not Path(self.path).is_file():
            raise StoreError(f"{self.path}: no embedded store here (nothing stored yet, or another store.url or state_dir?)")
        try:
            if self.path != ":memory:":
                Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, isolation_level=None, timeout=timeout)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
        except (OSError, sqlite3.Error) as exc:
            raise StoreError(f"{self.path}: cannot open the embedded store ({exc})") from exc
        self._ready: set[str] = set()

    def __repr__(self) -> str:
        return f"EmbeddedStore({self.path!r})"

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> EmbeddedStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _table(self, kind: str) -> str:
        if kind not in KINDS:
            raise StoreError(f"unknown record kind {kind!r}, expected one of {', '.join(KINDS)}")
        if kind not in self._ready:
            cols = "".join(f', "{c}" TEXT' for c in KINDS[kind].indexed)
            try:
                self._db.execute(f'CREATE TABLE IF NOT EXISTS "{kind}" (id TEXT PRIMARY KEY, timestamp TEXT{cols}, doc TEXT NOT NULL)')
                for c in ("timestamp", *KINDS[kind].indexed):
                    self._db.execute(f'CREATE INDEX IF NOT EXISTS "{kind}_{c}" ON "{kind}"("{c}")')
            except sqlite3.Error as exc:
                raise StoreError(f"{self.path}: cannot create the {kind} table ({exc})") from exc
            self._ready.add(kind)
        return f'"{kind}"'

    def send(self, kind: str, docs: Sequence[Mapping[str, Any]]) -> SendResult:
        """Upsert documents in one transaction: all are acknowledged, or none (StoreError)."""
        table = self._table(kind)
        fields = ("timestamp", *KINDS[kind].indexed)
        try:
            rows = [(d["id"], *(_text(d.get(f)) for f in fields), orjson.dumps(d).decode()) for d in docs]
        except (KeyError, TypeError, orjson.JSONEncodeError) as exc:
            raise StoreError(f"{self.path}: a {kind} record cannot be stored ({exc})") from exc
        names = ", ".join(f'"{c}"' for c in ("id", *fields, "doc"))
        marks = ", ".join("?" * (len(fields) + 2))
        updates = ", ".join(f'"{c}" = excluded."{c}"' for c in (*fields, "doc"))
        try:
            self._db.execute("BEGIN IMMEDIATE")
            self._db.executemany(f"INSERT INTO {table}({names}) VALUES ({marks}) ON CONFLICT(id) DO UPDATE SET {updates}", rows)
            self._db.execute("COMMIT")
        except sqlite3.Error as exc:
            if self._db.in_transaction:
                self._db.execute("ROLLBACK")
            raise StoreError(f"{self.path}: cannot store {kind} records ({exc})") from exc
        return SendResult(acked=[r[0] for r in rows])

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
        sql, params = f"SELECT doc FROM {table} WHERE 1", []
        if since is not None:
            sql, params = sql + " AND timestamp >= ?", [*params, since]
        if until is not None:
            sql, params = sql + " AND timestamp < ?", [*params, until]
        sql += " ORDER BY timestamp, id"
        if limit is not None:
            sql, params = sql + " LIMIT ?", [*params, limit]
        return [orjson.loads(doc) for (doc,) in self._db.execute(sql, params)]


def _text(value: object) -> str | None:
    return None if value is None else str(value)
