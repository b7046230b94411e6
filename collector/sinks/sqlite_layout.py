"""The embedded store's layout version, and the migrations that bring an older file to it.

SQLite's ``PRAGMA user_version`` holds the layout a store file has: 0 for every file written
before layouts had a number (909f578 and earlier), :data:`LAYOUT_VERSION` for this release's.
A store opens through :func:`migrate`: an older layout is brought up in place, in one write
transaction (a crash leaves the old layout whole, and the next open does it again), step by
step, and one log line (WARNING, so that a one-shot command shows it too) says what was done;
a newer one, written by a later release, is refused with a one-line
:class:`~collector.errors.StoreError` that names both versions, never read or written as if
it were this one's.

Layouts:

0. a table per record kind (id, timestamp, ``labels`` as text columns, doc); a ``measured``
   field or label that a later release made a column lived only in the document until the
   store touched the table, and the stores of releases before 909f578 had an index per label
   (every write paid for them, no query used them).
1. every table has a column for each label and measured field of its kind, filled from the
   documents; the label indexes are gone, and the time index is there.
2. every table has a ``version`` column (:data:`collector.records.VERSION`; none for the records
   stored before, which any copy replaces), and the store a ``lease`` table
   (:mod:`collector.sinks.sqlite_lease`).

Which fields are columns is not a layout of its own: each kind's declaration (``mappings/``) says
it (its ``TEXT`` and ``COLUMN`` fields), and a store of this layout that lacks a column a
declaration names (a field declared since the file was written) gets it when it is opened,
filled from the documents (:func:`bring_up_table`), in one write transaction and one log line,
as a migration does. So adding a field to a kind is a line of its declaration, never a layout.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable

from collector.errors import StoreError
from collector.records import KINDS
from collector.transaction import write_transaction

__all__ = ["LAYOUT_VERSION", "LEASE_TABLE", "bring_up_table", "migrate"]

LAYOUT_VERSION = 2
"""The layout this release writes (``PRAGMA user_version`` of its store files)."""

LEASE_TABLE = (
    "CREATE TABLE IF NOT EXISTS lease "
    "(name TEXT PRIMARY KEY, holder TEXT NOT NULL, token INTEGER NOT NULL, expires REAL NOT NULL)"
)
"""The leases of the store (:mod:`collector.sinks.sqlite_lease`), one row each."""

_log = logging.getLogger("fairacct.store")


def migrate(db: sqlite3.Connection, path: str) -> int:
    """Bring the store ``db`` (file ``path``) to :data:`LAYOUT_VERSION` in place; the layout
    it had. Raises StoreError for a layout newer than this release knows."""
    found = _version(db, path)
    if found == LAYOUT_VERSION:
        if _lacking(db):
            _add_columns(db, path)
        return found
    if found > LAYOUT_VERSION:
        raise StoreError(_too_new(path, found))
    with write_transaction(db, path, f"cannot migrate the embedded store from layout {found}"):
        found = _version(db, path)  # another process may have migrated it meanwhile
        if found > LAYOUT_VERSION:
            raise StoreError(_too_new(path, found))
        (tables,) = db.execute("SELECT count(*) FROM sqlite_master WHERE type = 'table'").fetchone()
        done = [step for v in range(found, LAYOUT_VERSION) if (step := _STEPS[v](db))]
        db.execute(f"PRAGMA user_version = {LAYOUT_VERSION}")
    if found < LAYOUT_VERSION and tables:  # a new file has nothing to say
        _log.warning(
            "%s: embedded store migrated from layout %d to %d: %s",
            path, found, LAYOUT_VERSION, "; ".join(done) or "its tables were up to date, the version is set",
        )  # fmt: skip
    return found


def bring_up_table(db: sqlite3.Connection, kind: str) -> list[str]:
    """Give the existing table of ``kind`` this layout's columns (filled from its documents) and
    indexes; what was changed, as phrases (none when it was up to date). In a write transaction."""
    spec = KINDS[kind]
    have = {row[1] for row in db.execute(f'PRAGMA table_info("{kind}")')}
    changed = []
    for c in dict.fromkeys((*spec.labels, *spec.measured)):
        if c not in have:  # measured ones untyped: numbers stay numbers, names stay text
            db.execute(f'ALTER TABLE "{kind}" ADD COLUMN "{c}"{" TEXT" if c in spec.labels else ""}')
            changed.append(c)
    if changed:  # one pass over the table for all of them (a pass each: 10 times the writes)
        filled = ", ".join(f""""{c}" = json_extract(doc, '$."{c}"')""" for c in changed)
        db.execute(f'UPDATE "{kind}" SET {filled}')
    indexes = {row[1] for row in db.execute(f'PRAGMA index_list("{kind}")')}
    dropped = [f"{kind}_{c}" for c in spec.labels if f"{kind}_{c}" in indexes]
    for name in dropped:
        db.execute(f'DROP INDEX "{name}"')
    db.execute(f'CREATE INDEX IF NOT EXISTS "{kind}_timestamp" ON "{kind}"(timestamp)')
    out = []
    if changed:
        out.append(f"{kind}: {len(changed)} column(s) added from the documents ({', '.join(changed)})")
    if dropped:
        out.append(f"{kind}: {len(dropped)} unused index(es) dropped")
    return out


def _lacking(db: sqlite3.Connection) -> list[str]:
    """The kinds whose table lacks a column their declaration names."""
    tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    lacking = []
    for kind in (k for k in KINDS if k in tables):
        have = {row[1] for row in db.execute(f'PRAGMA table_info("{kind}")')}
        if not {*KINDS[kind].labels, *KINDS[kind].measured} <= have:
            lacking.append(kind)
    return lacking


def _add_columns(db: sqlite3.Connection, path: str) -> None:
    with write_transaction(
        db, path, f"cannot add the declared columns to the embedded store (layout {LAYOUT_VERSION})"
    ):
        done = [phrase for kind in _lacking(db) for phrase in bring_up_table(db, kind)]  # again: under the lock
    if done:
        _log.warning("%s: embedded store brought up to the declared columns: %s", path, "; ".join(done))


def _to_1(db: sqlite3.Connection) -> str:
    tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    done = [phrase for kind in KINDS if kind in tables for phrase in bring_up_table(db, kind)]
    return ", ".join(done) if done else ""


def _to_2(db: sqlite3.Connection) -> str:
    tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    versioned = []
    for kind in KINDS:
        if kind in tables and "version" not in {row[1] for row in db.execute(f'PRAGMA table_info("{kind}")')}:
            db.execute(f'ALTER TABLE "{kind}" ADD COLUMN version INTEGER')  # no rewrite: the old rows read NULL
            versioned.append(kind)
    db.execute(LEASE_TABLE)
    return f"a version column in {', '.join(versioned)}" if versioned else ""


_STEPS: dict[int, Callable[[sqlite3.Connection], str]] = {0: _to_1, 1: _to_2}
"""From layout N to N+1: what was done, as a phrase ("" when nothing needed doing)."""


def _version(db: sqlite3.Connection, path: str) -> int:
    try:
        (version,) = db.execute("PRAGMA user_version").fetchone()
    except sqlite3.Error as exc:
        raise StoreError(f"{path}: cannot read the embedded store's layout version ({exc})") from exc
    return int(version)


def _too_new(path: str, found: int) -> str:
    return (
        f"{path}: the embedded store has layout {found}, newer than this fairacct's {LAYOUT_VERSION} (a later "
        "release wrote it): upgrade fairacct, or point store.url at another file; nothing was read or written"
    )
