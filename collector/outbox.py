"""The durable outbox: nothing a cycle produced is lost between the probe and the store.

A cycle commits its records and its checkpoint advances in ONE SQLite transaction
(:meth:`Outbox.commit`): after a crash at any point there are either the old checkpoints and
no records, or the new checkpoints and the records, waiting here. The flusher
(:meth:`Outbox.flush`) sends them to a sink in batches and deletes only what the sink
acknowledged; what it could not take now (an outage) stays and is tried again, what it refused
for good goes to the dead-letter table with the sink's error. Record ids are deterministic, so
sending an item twice (a crash after the sink stored it but before it was deleted here)
stores it once. The flush itself is :mod:`collector.flushing`, with what it does when what the
sink took cannot be written here (a full disk, :class:`~collector.errors.DiskFullError`): kept
in memory and written first by the next flush, never sent again meanwhile.

Records wait as *parcels* (:mod:`collector.parcels`): one row holds records of one kind, as
they were encoded (:class:`~collector.encoded.Encoded`: committed, flushed and stored without
being decoded), a cycle's records in rows of up to :data:`PARCEL_RECORDS`
(:meth:`Outbox.commit`), a network request's in one row per kind (:meth:`Outbox.commit_parcels`,
the collector). The records are as durable, for a fraction of the cost of a row, two index
entries and a delete per record (about half the CPU of commit and flush per record into the
embedded store: bench_store.py). The flusher sends the
oldest parcels of one kind, at most ``batch_size`` records and ``batch_bytes`` bytes (the rest of
a larger parcel waits in it), and rewrites a parcel with what the sink did not take yet. A record committed again while
an older copy waits (a fairshare window re-priced by the next cycle) waits twice, and is never
lost by the delete of its older copy: a commit writes new rows, and a flush deletes or rewrites
only the rows it read. The newer copy wins because parcels of a kind are sent oldest first, a
parcel the sink did not take whole keeps its place, and a batch holding several copies of a
record sends only the newest (the sink, keyed by id, stores it once). The outbox's depth counts
both copies.

A record may wait for a second destination too (the probe's ``[upstream]``: job records for
a Gratia collector besides the store): committed in the same transaction under kind
``<lane>:<kind>`` (``upstream:job``), it waits in a lane of its own, sent only by a flush of
that lane (``flush(sink, lane=...)``) and settled there, so that it leaves each destination's
lane only when that destination took it.

The ``item`` table (a row per record, replaced by id) holds what earlier versions committed
and the dead letters put back (:meth:`Outbox.retry_dead_letters`); the flusher sends it before
the parcels, so that the newer copies, in parcels, are stored last.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from collector import faults
from collector.encoded import Encoded
from collector.flushing import FlushResult, Unrecorded, Writer, flush
from collector.parcels import Parcel, parcel_row, read_parcel
from collector.records import encode_docs
from collector.sinks.base import Sink
from collector.transaction import store_error, use_wal, write_transaction

__all__ = [
    "BATCH_BYTES",
    "PARCEL_RECORDS",
    "PROBE_SHRINK_KEEP_BYTES",
    "SHRINK_KEEP_BYTES",
    "FlushResult",
    "Outbox",
    "OutboxStatus",
    "Parcel",
    "Unrecorded",
    "Writer",
]

PARCEL_RECORDS = 1000
"""Records per outbox row of a cycle's commit: about 1 MB of slot records; a batch sent reads whole rows."""

BATCH_BYTES = 16 * 2**20
"""The bytes of records a flush sends in one batch at most, by default (:meth:`Outbox.flush`):
about 1.5 times 2,000 of the largest records a probe makes, a sixth of what Elasticsearch takes
in one request by default (``http.max_content_length``, 100 MB)."""

_TIMEOUT_S = 60.0  # how long an open or a write waits for another connection to the file

WAL_LIMIT_BYTES = 64 * 1024 * 1024
"""The size the outbox's WAL is cut back to after a checkpoint: what a few seconds of a busy
collector's commits write."""

SHRINK_KEEP_BYTES = 64 * 1024 * 1024
"""Free space :meth:`Outbox.shrink` keeps in the file, for the next commits to reuse."""

PROBE_SHRINK_KEEP_BYTES = 4 * 1024 * 1024
"""What a probe's outbox keeps: a cycle's records are a few MB, and a site's state directory
should not keep a backlog's worth of free pages (23 MB after 30,000 jobs, under the
collector's 64 MiB, was never given back)."""
_INSERT_PARCEL = "INSERT INTO parcel(kind, count, docs, encoding, fields, enqueued_at) VALUES (?, ?, ?, ?, ?, ?)"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS item (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    kind TEXT NOT NULL,
    id TEXT NOT NULL,
    doc TEXT NOT NULL,
    enqueued_at REAL NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    last_error TEXT,
    UNIQUE (kind, id)
);
CREATE INDEX IF NOT EXISTS item_kind_seq ON item(kind, seq);
CREATE TABLE IF NOT EXISTS dead_letter (
    kind TEXT NOT NULL,
    id TEXT NOT NULL,
    doc TEXT NOT NULL,
    error TEXT NOT NULL,
    failed_at REAL NOT NULL,
    PRIMARY KEY (kind, id)
);
CREATE TABLE IF NOT EXISTS parcel (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    kind TEXT NOT NULL,
    count INTEGER NOT NULL,
    docs BLOB NOT NULL,
    encoding TEXT NOT NULL,
    fields BLOB,
    enqueued_at REAL NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    last_error TEXT
);
CREATE INDEX IF NOT EXISTS parcel_kind_seq ON parcel(kind, seq);
CREATE TABLE IF NOT EXISTS checkpoint (
    source TEXT PRIMARY KEY,
    value TEXT NOT NULL,
    updated_at REAL NOT NULL
);
"""


def _add_fields(db: sqlite3.Connection) -> None:
    """The ``fields`` column of a parcel table made before records were committed encoded
    (another connection opening the same file at once may add it first)."""
    try:
        db.execute("ALTER TABLE parcel ADD COLUMN fields BLOB")
    except sqlite3.OperationalError as exc:
        if "duplicate column" not in str(exc):
            raise


@dataclass
class OutboxStatus:
    depth: dict[str, int]
    oldest: float | None  # enqueue time (UNIX seconds) of the oldest waiting item
    dead_letters: dict[str, int]


class Outbox:
    """The outbox in one SQLite file (WAL, one writer at a time)."""

    def __init__(
        self,
        path: str | Path,
        *,
        clock: Callable[[], float] = time.time,
        autocheckpoint: bool = True,
        wal_limit_bytes: int = WAL_LIMIT_BYTES,
    ) -> None:
        """``autocheckpoint=False``: commits never copy the WAL back into the database (SQLite does
        it by default every 1000 pages, inside the commit that crosses the mark); whoever opens
        it so calls :meth:`wal_checkpoint` from another connection instead, off the commit path.
        ``wal_limit_bytes``: what the WAL file is cut back to once a checkpoint has copied it
        (a backlog's WAL would otherwise keep its largest size for good)."""
        self.path = str(path)
        self._clock = clock
        try:
            if self.path != ":memory:":
                Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, isolation_level=None, timeout=_TIMEOUT_S)
            # a parcel is ~1 MB in a chain of overflow pages, written, read and freed whole:
            # 64 KiB pages make that 16 page operations instead of 256 (about a third less CPU per
            # commit: bench_store.py); a file that exists keeps its page size
            self._db.execute("PRAGMA page_size=65536")
            # a new file gives the pages a drained backlog freed back (shrink()); a file made
            # before keeps SQLite's default, which only a VACUUM changes. Asked of a new file
            # only: on a file that exists the pragma writes its header in a transaction of its
            # own, even when the mode is already set, and on a full disk that failed every open,
            # so that a collector could neither start nor say how many records wait
            if not self._db.execute("PRAGMA page_count").fetchone()[0]:
                self._db.execute("PRAGMA auto_vacuum=INCREMENTAL")
            use_wal(self._db, _TIMEOUT_S)
            self._db.execute(f"PRAGMA journal_size_limit={int(wal_limit_bytes)}")
            self._db.execute("PRAGMA synchronous=FULL")  # a committed cycle survives a power cut
            # records pass through: zeroing the pages a flush frees (SQLite's default here)
            # would write them once more; FAST zeroes only what costs no extra write
            self._db.execute("PRAGMA secure_delete=FAST")
            if not autocheckpoint:
                self._db.execute("PRAGMA wal_autocheckpoint=0")
            self._db.executescript(_SCHEMA)
            if "fields" not in {row[1] for row in self._db.execute("PRAGMA table_info(parcel)")}:
                _add_fields(self._db)  # a file of an earlier version
        except (OSError, sqlite3.Error) as exc:
            with contextlib.suppress(AttributeError):  # connected, then failed: no file stays held
                self._db.close()
            raise store_error(self.path, "cannot open the outbox", exc) from exc

    def __repr__(self) -> str:
        return f"Outbox({self.path!r})"

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> Outbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- writing a cycle -----------------------------------------------------------------------

    def commit(
        self, records: Mapping[str, Encoded | Sequence[Mapping[str, Any]]], checkpoints: Mapping[str, Any]
    ) -> int:
        """Enqueue a cycle's records (encoded, or documents encoded here), as parcels of up to
        :data:`PARCEL_RECORDS`, and advance its checkpoints, atomically. Each record needs an
        ``id`` (see the module docstring for a record committed again while it waits). Returns
        the number of records enqueued.
        """
        now = self._clock()
        encoded = {}
        for kind, docs in records.items():
            if not isinstance(docs, Encoded):
                if not all("id" in d for d in docs):
                    raise ValueError(f"a {kind} record to commit has no id")
                docs = encode_docs(kind, docs)
            encoded[kind] = docs
        rows = [
            parcel_row(kind, docs.pick(range(i, min(i + PARCEL_RECORDS, len(docs)))), now)
            for kind, docs in encoded.items()
            for i in range(0, len(docs), PARCEL_RECORDS)
        ]
        marks = [(source, json.dumps(value), now) for source, value in checkpoints.items()]
        with self._transaction("cannot commit the cycle to the outbox"):
            self._db.executemany(_INSERT_PARCEL, rows)
            self._db.executemany(
                "INSERT INTO checkpoint(source, value, updated_at) VALUES (?, ?, ?) "
                "ON CONFLICT(source) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
                marks,
            )
            faults.point("during-commit")
        return sum(r[1] for r in rows)

    def commit_parcels(self, parcels: Sequence[Parcel]) -> int:
        """Enqueue parcels in one transaction (see the module docstring); returns the number of
        records enqueued."""
        now = self._clock()
        rows = [parcel_row(p.kind, p.docs, now) for p in parcels if p.docs]
        with self._transaction("cannot commit records to the outbox"):
            self._db.executemany(_INSERT_PARCEL, rows)
            faults.point("during-commit")
        return sum(r[1] for r in rows)

    # the connection, clock and transaction that settling a batch writes with (collector.parcels.Writes)

    @property
    def db(self) -> sqlite3.Connection:
        return self._db

    def now(self) -> float:
        return self._clock()

    def transaction(self, what: str) -> contextlib.AbstractContextManager[None]:
        return self._transaction(what)

    def _transaction(self, what: str) -> contextlib.AbstractContextManager[None]:
        return write_transaction(self._db, self.path, what)

    def wal_checkpoint(self, *, truncate: bool = False) -> None:
        """Copy the committed WAL into the database without blocking writers (a passive
        checkpoint), so that the WAL file stops growing; see ``autocheckpoint``. ``truncate``:
        wait for the writer's transaction under way, copy it all and cut the WAL file to nothing,
        giving its space back to the file system (a copied WAL otherwise keeps its size, up to
        the limit, for the next commits to write over)."""
        try:
            self._db.execute(f"PRAGMA wal_checkpoint({'TRUNCATE' if truncate else 'PASSIVE'})").fetchall()
        except sqlite3.Error as exc:
            raise store_error(self.path, "cannot checkpoint the outbox's WAL", exc) from exc

    def shrink(self, *, keep_free_bytes: int = SHRINK_KEEP_BYTES, max_bytes: int | None = None) -> int:
        """Give the file's free pages beyond ``keep_free_bytes`` back to the file system (after a
        backlog was sent, the pages it held stay free in the file otherwise), at most ``max_bytes``
        of them; the bytes given back. A file made before the outbox freed pages (``auto_vacuum``
        off) is converted once (:meth:`_convert`), drained (``max_bytes`` None) only.

        What is given back is written first: the pages still in use past the new end of the file
        move into free ones, through the WAL. ``max_bytes`` bounds that, on a file system short
        of room (a backlog half sent)."""
        try:
            page = int(self._db.execute("PRAGMA page_size").fetchone()[0])
            free = int(self._db.execute("PRAGMA freelist_count").fetchone()[0])
            extra = free - keep_free_bytes // page
            if max_bytes is not None:
                extra = min(extra, max_bytes // page)
            if extra <= 0:
                return 0
            if int(self._db.execute("PRAGMA auto_vacuum").fetchone()[0]) != 2:
                return 0 if max_bytes is not None else self._convert(free, page)  # a VACUUM writes it all again
            self._db.executescript(f"PRAGMA incremental_vacuum({extra});")  # execute() frees one page a step
        except sqlite3.Error as exc:
            raise store_error(self.path, "cannot shrink the outbox", exc) from exc
        return (free - int(self._db.execute("PRAGMA freelist_count").fetchone()[0])) * page

    def _convert(self, free: int, page: int) -> int:
        """A file made before the outbox freed pages (``auto_vacuum`` off), drained: rewritten
        once by a VACUUM that turns it on and gives every free page back; the bytes given back.
        A VACUUM needs the file alone: while another connection writes, it waits for the next
        drained flush (0)."""
        try:
            self._db.execute("PRAGMA auto_vacuum=INCREMENTAL")
            self._db.execute("VACUUM")
        except sqlite3.OperationalError as exc:
            if "locked" in str(exc) or "busy" in str(exc):
                return 0
            raise
        return (free - int(self._db.execute("PRAGMA freelist_count").fetchone()[0])) * page

    def checkpoint(self, source: str) -> Any:
        """The value last committed for a source, or None."""
        row = self._db.execute("SELECT value FROM checkpoint WHERE source = ?", (source,)).fetchone()
        return json.loads(row[0]) if row else None

    def checkpoints(self, prefix: str = "") -> dict[str, tuple[Any, float]]:
        """Every checkpoint whose source starts with ``prefix``: its value and when it was last
        committed (UNIX seconds)."""
        rows = self._db.execute(
            "SELECT source, value, updated_at FROM checkpoint WHERE substr(source, 1, ?) = ? ORDER BY source",
            (len(prefix), prefix),
        ).fetchall()
        return {source: (json.loads(value), float(at)) for source, value, at in rows}

    def forget_checkpoint(self, source: str) -> bool:
        """Delete a source's checkpoint (its next read starts from nothing); whether there was one."""
        with self._transaction("cannot delete a checkpoint"):
            deleted = self._db.execute("DELETE FROM checkpoint WHERE source = ?", (source,)).rowcount
        return bool(deleted)

    # -- sending -------------------------------------------------------------------------------

    def flush(
        self,
        sink: Sink,
        *,
        batch_size: int = 2000,
        batch_bytes: int | None = BATCH_BYTES,
        max_batches: int | None = None,
        max_seconds: float | None = None,
        writer: Writer | None = None,
        lane: str | None = None,
        unrecorded: Unrecorded | None = None,
    ) -> FlushResult:
        """Send waiting items, then parcels, oldest first, until the outbox is empty or the sink
        stops taking them (a batch with nothing acknowledged, or some records to retry, ends the flush),
        or after ``max_batches`` batches, or once a batch ends ``max_seconds`` after the start. A
        batch holds at most ``batch_size`` records and ``batch_bytes`` bytes of them (None: any; a
        record larger than that goes alone).

        ``writer``: what the flush writes (deletes, dead letters, attempts) is handed to it as a
        function of an :class:`Outbox` of the same file, instead of written here; the collector
        runs them in its single outbox writer thread, so that a flush never holds the write lock
        that the requests' commits wait for (SQLite's busy wait sleeps up to 100 ms at a time).

        ``lane``: send only the records waiting for that second destination (kinds
        ``<lane>:<kind>``, :func:`~collector.parcels.lane_kind`), to the sink and in the result as
        ``<kind>``; None: only the records of no lane.

        ``unrecorded``: where a batch the sink took is kept when its settling cannot be written
        (a full disk: :class:`~collector.errors.DiskFullError` raised), to be
        written first by the next flush given it, which sends nothing before
        (:mod:`collector.flushing`); None: the next flush reads that batch and sends it again."""
        return flush(
            self._db,
            sink,
            writer or (lambda fn: fn(self)),
            batch_size=batch_size,
            batch_bytes=batch_bytes,
            max_batches=max_batches,
            max_seconds=max_seconds,
            lane=lane,
            unrecorded=unrecorded,
        )

    # -- looking ---------------------------------------------------------------------------------

    def status(self) -> OutboxStatus:
        """What waits, by kind, since when, and the dead letters (reads only: a full disk does
        not keep it from counting)."""
        try:
            depth: Counter[str] = Counter(
                dict(self._db.execute("SELECT kind, count(*) FROM item GROUP BY kind").fetchall())
            )
            depth.update(dict(self._db.execute("SELECT kind, sum(count) FROM parcel GROUP BY kind").fetchall()))
            (oldest,) = self._db.execute(
                "SELECT min(t) FROM (SELECT min(enqueued_at) AS t FROM item UNION ALL "
                "SELECT min(enqueued_at) FROM parcel)"
            ).fetchone()
            dead = dict(
                self._db.execute("SELECT kind, count(*) FROM dead_letter GROUP BY kind ORDER BY kind").fetchall()
            )
        except sqlite3.Error as exc:
            raise store_error(self.path, "cannot count what waits in the outbox", exc) from exc
        return OutboxStatus(depth=dict(sorted(depth.items())), oldest=oldest, dead_letters=dead)

    def waiting(self, kind: str) -> list[dict[str, Any]]:
        """The records of ``kind`` waiting, in the order they will be sent (every copy)."""
        items = self._db.execute("SELECT doc FROM item WHERE kind = ? ORDER BY seq", (kind,)).fetchall()
        parcels = self._db.execute(
            "SELECT docs, encoding, fields FROM parcel WHERE kind = ? ORDER BY seq", (kind,)
        ).fetchall()
        return [orjson.loads(doc) for (doc,) in items] + [
            d for blob, encoding, fields in parcels for d in read_parcel(kind, blob, encoding, fields).decoded()
        ]

    def dead_letters(self, limit: int | None = 20, *, kind: str | None = None) -> list[dict[str, Any]]:
        """The dead letters (of ``kind``), newest first, with the store's reason; all when
        ``limit`` is None."""
        rows = self._db.execute(
            "SELECT kind, id, error, failed_at FROM dead_letter WHERE ? IS NULL OR kind = ? "
            "ORDER BY failed_at DESC, kind, id LIMIT ?",
            (kind, kind, -1 if limit is None else limit),
        ).fetchall()
        return [{"kind": k, "id": i, "error": e, "failed_at": t} for k, i, e, t in rows]

    def retry_dead_letters(self, kind: str | None = None) -> dict[str, int]:
        """Put the dead letters (of ``kind``) back in the outbox, to be sent by the next flush
        (once their cause is fixed: a template, a mapping, a record). Per kind, how many."""
        now = self._clock()
        try:
            self._db.execute("BEGIN IMMEDIATE")
            moved = dict(
                self._db.execute(
                    "SELECT kind, count(*) FROM dead_letter WHERE ? IS NULL OR kind = ? GROUP BY kind ORDER BY kind",
                    (kind, kind),
                ).fetchall()
            )
            self._db.execute(
                "INSERT INTO item(kind, id, doc, enqueued_at) "
                "SELECT kind, id, doc, ? FROM dead_letter WHERE ? IS NULL OR kind = ? ORDER BY failed_at "
                # a copy already waiting is newer: it stays, and waits in parcels sent after the items
                "ON CONFLICT(kind, id) DO NOTHING",
                (now, kind, kind),
            )
            self._db.execute("DELETE FROM dead_letter WHERE ? IS NULL OR kind = ?", (kind, kind))
            self._db.execute("COMMIT")
        except sqlite3.Error as exc:
            if self._db.in_transaction:
                self._db.execute("ROLLBACK")
            raise store_error(self.path, "cannot put the dead letters back in the outbox", exc) from exc
        return moved
