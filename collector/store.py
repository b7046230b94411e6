"""The embedded store: one SQLite file, a table per record kind, keyed by a deterministic id.

This is the default sink, so that nothing but Python is needed to run fairacct. All storage
policy lives in this class: WAL mode (a report can read while the probe writes), one writer
at a time (``BEGIN IMMEDIATE``), and upserts by id, so that storing the same fact twice keeps
one document and a corrected fact replaces the old one.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from collector.errors import StoreError

__all__ = ["EmbeddedStore", "record_id"]

_KIND = re.compile(r"[a-z][a-z_]{0,30}")


def record_id(*fields: object) -> str:
    """A stable id from the fields that identify a fact (never from a counter or the clock)."""
    text = json.dumps([_plain(f) for f in fields], separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _plain(value: object) -> object:
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return None
    if hasattr(value, "item"):  # numpy scalars
        return value.item()  # type: ignore[no-any-return, attr-defined]
    return value


class EmbeddedStore:
    """Records in one SQLite file. ``path`` may be ``:memory:`` for tests."""

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        try:
            self._db = sqlite3.connect(self.path, isolation_level=None, timeout=30)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
        except sqlite3.Error as exc:
            raise StoreError(f"{self.path}: cannot open the embedded store ({exc})") from exc

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> EmbeddedStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _table(self, kind: str) -> str:
        if not _KIND.fullmatch(kind):
            raise StoreError(f"record kind must be a lowercase word, got {kind!r}")
        self._db.execute(
            f"CREATE TABLE IF NOT EXISTS {kind} (id TEXT PRIMARY KEY, time REAL, doc TEXT NOT NULL)"
        )
        self._db.execute(f"CREATE INDEX IF NOT EXISTS {kind}_time ON {kind}(time)")
        return kind

    def put(self, kind: str, docs: Iterable[Mapping[str, Any]], *, time_field: str) -> int:
        """Upsert documents (each with an ``id``) in one transaction; return how many."""
        table = self._table(kind)
        rows = [(d["id"], _plain(d.get(time_field)), json.dumps(d, default=_plain, allow_nan=False)) for d in docs]
        try:
            self._db.execute("BEGIN IMMEDIATE")
            self._db.executemany(
                f"INSERT INTO {table}(id, time, doc) VALUES (?, ?, ?) "
                "ON CONFLICT(id) DO UPDATE SET time = excluded.time, doc = excluded.doc",
                rows,
            )
            self._db.execute("COMMIT")
        except (sqlite3.Error, ValueError) as exc:
            if self._db.in_transaction:
                self._db.execute("ROLLBACK")
            raise StoreError(f"{self.path}: cannot store {kind} records ({exc})") from exc
        return len(rows)

    def count(self, kind: str) -> int:
        table = self._table(kind)
        return int(self._db.execute(f"SELECT count(*) FROM {table}").fetchone()[0])

    def get(self, kind: str, *, limit: int | None = None) -> list[dict[str, Any]]:
        table = self._table(kind)
        sql = f"SELECT doc FROM {table} ORDER BY time, id"
        params: Sequence[Any] = ()
        if limit is not None:
            sql += " LIMIT ?"
            params = (limit,)
        return [json.loads(doc) for (doc,) in self._db.execute(sql, params)]
