"""How fairacct opens and writes its SQLite files: WAL mode set even while other connections
open the same new file, a transaction that takes the write lock first, and SQLite's errors
made fairacct's (a full file system apart: :class:`~collector.errors.DiskFullError`)."""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

from collector.errors import DiskFullError, StoreError

__all__ = ["free_bytes", "is_disk_full", "store_error", "use_wal", "write_transaction"]

# What a write on a full file system fails with: no space, a quota, a file size limit (RLIMIT_FSIZE)
_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})


_NEARLY_FULL_BYTES = 1 << 20
"""Free bytes under which an I/O error of SQLite's is taken for a full file system: opening a
WAL file whose shared-memory index is not there (a clean close removes it) fails with
SQLITE_IOERR_SHMSIZE, not SQLITE_FULL, when there is no room for the index's 32 KiB."""


def is_disk_full(exc: BaseException, path: str | os.PathLike[str] | None = None) -> bool:
    """Whether ``exc`` says the file system had no room for a write: SQLite's SQLITE_FULL
    ("database or disk is full", which it also gives for a short write past a size limit); an
    OSError of no space, a quota or a file size limit; or, ``path`` given, SQLite's I/O error
    on a file system with almost no room left (:data:`_NEARLY_FULL_BYTES`)."""
    if isinstance(exc, sqlite3.Error):
        code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
        if code == sqlite3.SQLITE_FULL:
            return True
        if code != sqlite3.SQLITE_IOERR or path is None:
            return False
        free = free_bytes(path)
        return free is not None and free < _NEARLY_FULL_BYTES
    return isinstance(exc, OSError) and exc.errno in _FULL_ERRNOS


def free_bytes(path: str | os.PathLike[str]) -> int | None:
    """Bytes this process may still write on the file system of the file ``path`` (the free
    space of the directory that holds it; an unprivileged user's, not root's reserve); None when
    it cannot be asked."""
    try:
        return shutil.disk_usage(Path(path).parent).free
    except OSError:
        return None


def store_error(path: str | os.PathLike[str], what: str, exc: sqlite3.Error | OSError) -> StoreError:
    """The :class:`StoreError` saying that ``what`` failed on the SQLite file ``path`` with
    ``exc``: a :class:`DiskFullError` naming the room left when its file system is full."""
    if not is_disk_full(exc, path):
        return StoreError(f"{path}: {what} ({exc})")
    free = free_bytes(path)
    room = "" if free is None else f"; {free / 2**20:.1f} MiB free in {Path(path).parent}"
    return DiskFullError(f"{path}: {what}: its file system is full ({exc}{room})")


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
        raise store_error(str(path), what, exc) from exc
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
