"""The one way fairacct writes to SQLite: a transaction that takes the write lock first."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator

from collector.errors import StoreError

__all__ = ["write_transaction"]


@contextlib.contextmanager
def write_transaction(db: sqlite3.Connection, path: object, what: str) -> Iterator[None]:
    """A write transaction on ``db`` (autocommit mode): ``BEGIN IMMEDIATE``, so that another
    writer (a second process on the same file) waits here rather than failing mid-way;
    committed at the end, rolled back and raised as :class:`StoreError` naming ``path`` and
    ``what`` failed on any SQLite error."""
    try:
        db.execute("BEGIN IMMEDIATE")
        yield
        db.execute("COMMIT")
    except sqlite3.Error as exc:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise StoreError(f"{path}: {what} ({exc})") from exc
