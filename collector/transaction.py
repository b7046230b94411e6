"""How fairacct opens and writes its SQLite files: WAL mode set even while other connections
open the same new file, and a transaction that takes the write lock first."""

from __future__ import annotations

import contextlib
import sqlite3
import time
from collections.abc import Iterator

from collector.errors import StoreError

__all__ = ["use_wal", "write_transaction"]


@contextlib.contextmanager
def write_transaction(db: sqlite3.Connection, path: object, what: str) -> Iterator[None]:
    """A write transaction on ``db`` (autocommit mode): ``BEGIN IMMEDIATE``, so that another
    writer (a second process on the same file) waits here rather than failing mid-way;
    committed at the end, rolled back and raised as :class:`StoreError` naming ``path`` and
    ``what`` failed on any SQLite error; rolled back and raised as it is on any other."""
    try:
        db.execute("BEGIN IMMEDIATE")
        yield
        db.execute("COMMIT")
    except sqlite3.Error as exc:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise StoreError(f"{path}: {what} ({exc})") from exc
    except BaseException:  # a value SQLite cannot bind (OverflowError), a bug: nothing half-written stays
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise


def use_wal(db: sqlite3.Connection, timeout_s: float) -> None:
    """Put ``db`` in WAL mode, waiting up to ``timeout_s`` for other connections to the file.

    The switch needs the file to itself for a moment, and when another connection is opening
    the same new file SQLite answers "database is locked" at once, without the busy wait that
    the connection's timeout sets (four threads opening one new store: 21 failed in 300 tries).
    So this waits and tries again, as that busy wait would; any other error is raised."""
    deadline = time.monotonic() + timeout_s
    pause_s = 0.001
    while True:
        try:
            db.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() + pause_s > deadline:
                raise
        time.sleep(pause_s)
        pause_s = min(2 * pause_s, 0.1)
