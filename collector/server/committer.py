"""Group commit: one writer thread makes the records of many requests durable together.

Each request hands its accepted records to :meth:`GroupCommitter.commit` and waits. The
writer thread takes every request waiting (up to ``max_records`` records), commits all of
their records in ONE transaction of the collector's :class:`~collector.outbox.Outbox`
(SQLite, WAL, ``synchronous=FULL``: durable when the commit returns), one parcel per request
and kind (:meth:`~collector.outbox.Outbox.commit_parcels`: a row holding the documents as one
JSON array, not a row and an index entry per record), and only then wakes each of those
requests, which may now answer 202. A failed commit (disk full, an I/O error)
fails every request of the group with the :class:`StoreError`: none of them was stored, and
each answers 503. One transaction and one fsync for many requests is what lets a single
SQLite file take tens of thousands of records a second while each reply still waits for
its records to be on disk.

The writer thread is the outbox's only writer: the flusher hands it what a flush writes
(:meth:`GroupCommitter.write`, the deletes of what the store took), run between two groups,
so that no commit ever waits on SQLite's write lock: its busy wait sleeps 1, 2, 5, ... up
to 100 ms at a time, and a flush settling on a connection of its own holds that lock for a
synced commit (the requests' slowest replies then took many times as long as without the
flusher writing on the same core: bench_collector.py --flush-every 1).

The committer also keeps the outbox's depth (records waiting), counted up by each request
admitted and set by the flusher after each flush to what it counted plus what was admitted
meanwhile; over ``max_depth`` a request is refused with :class:`OverloadedError` before
anything is written. And it applies backpressure: while the flusher finds the store taking
records but the outbox holds more than ``backpressure_depth`` (the store is slower than the
probes), :meth:`GroupCommitter.admit` refuses the requests of a probe that holds its share of
that budget or more (:mod:`collector.server.backlog`) with :class:`SlowDownError` (429) before
their body is read, so that a sustained load keeps the outbox bounded instead of filling it to
``max_depth``, and the probe that sends the most is slowed, not the quiet ones; during an outage
(the store takes nothing) the outbox holds records up to ``max_depth``, as it is there for.

And it keeps the outbox from filling its file system (:mod:`collector.server.room`): a group
whose records would leave less than ``reserve_bytes`` free (less the WAL's size) is refused with
:class:`DiskFullError` before anything is written, and so is a request, before its body is read,
while there is no room for one more body; both answer 503. It says once in the log when the
outbox has no room and once when it has room again. And it counts the records waiting when it
opens the outbox, so that a collector started again says its true depth from its first reply,
before the flusher's first count.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from collector.errors import DiskFullError, OverloadedError, SlowDownError, StoreError
from collector.outbox import Outbox, Parcel
from collector.server.backlog import Backlog
from collector.server.room import Room, room_of

__all__ = ["GroupCommitter"]

_log = logging.getLogger("fairacct.collector")


@dataclass
class _Job:
    parcels: Sequence[Parcel]
    count: int
    done: concurrent.futures.Future[int]


@dataclass
class _Write:
    """A write of another thread (the flusher's), run by the writer with its outbox."""

    fn: Callable[[Outbox], object]
    done: concurrent.futures.Future[object]


class GroupCommitter:
    """The writer thread of the collector's outbox at ``path`` (see the module docstring)."""

    def __init__(
        self,
        path: str | Path,
        *,
        max_depth: int,
        max_records: int = 50_000,
        backpressure_depth: int | None = None,
        reserve_bytes: int = 0,
        request_bytes: int = 0,
    ) -> None:
        """``reserve_bytes``: what commits leave free on the outbox's file system (see the module
        docstring); ``request_bytes``: the room a request needs to be read at all (a body at most)."""
        self.path = Path(path)
        self.reserve_bytes = reserve_bytes
        self.request_bytes = request_bytes
        self.max_depth = max_depth
        self.backpressure_depth = max_depth if backpressure_depth is None else backpressure_depth
        self.store_taking = False  # the flusher's last round: the store took records (set_depth)
        self.max_records = max_records
        self._queue: queue.SimpleQueue[_Job | _Write | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._depth = 0
        self._admitted = 0
        # Who holds the records waiting, in segments of about 1/64 of the budget (640 at most at the defaults).
        self._backlog = Backlog(self.backpressure_depth // 64)
        self._ready = threading.Event()
        self._failed: StoreError | None = None
        self._thread = threading.Thread(target=self._run, name="fairacct: outbox writer", daemon=True)
        self.commits = 0  # transactions, for the metrics
        self.committed = 0  # records
        # Why the last commit failed (the disk is full, an I/O error), and when (UNIX seconds),
        # until one succeeds: /healthz fails meanwhile, since every request gets 503.
        self.failing: tuple[str, float] | None = None
        # The free bytes the outbox's file system had when the last commit failed for want of
        # room (None: it did not, or none since): room freed after it ends what /healthz says.
        self.full_at_free: int | None = None
        self._said_full = False  # the log said the outbox has no room, and not yet that it has again

    def __repr__(self) -> str:
        return f"GroupCommitter({str(self.path)!r}, depth={self._depth})"

    @property
    def depth(self) -> int:
        """Records waiting in the outbox: an upper bound, never less than the truth."""
        return self._depth

    @property
    def admitted(self) -> int:
        """Records admitted so far (a running count), to mark when the flusher starts counting."""
        return self._admitted

    def set_depth(self, counted: int, mark: int, store_taking: bool = False) -> None:
        """The depth the flusher counted, having read :attr:`admitted` as ``mark`` before it
        began: records admitted since are added (some may be counted twice until the next count).
        ``store_taking``: the store took records in the flusher's last round (see :meth:`admit`)."""
        with self._lock:
            self._depth = counted + (self._admitted - mark)
            self.store_taking = store_taking
            self._backlog.trim(self._depth)

    def room(self) -> Room:
        """The room for commits on the outbox's file system now."""
        return room_of(self.path, self.reserve_bytes)

    def admit(self, probe: str) -> None:
        """Raise :class:`DiskFullError` when the outbox's file system has no room for one more
        request's records (see the module docstring), and :class:`SlowDownError` when the store
        is taking records but the outbox holds more than ``backpressure_depth`` and ``probe``
        holds its share of that or more: its request should not be read, let alone committed,
        until there is room or the flusher has caught up."""
        room = self.room()
        if not room.fits(self.request_bytes):
            raise self._no_room(room, self.request_bytes)
        if not (self.store_taking and self._depth > self.backpressure_depth):
            return
        with self._lock:
            held, holders = self._backlog.held(probe), self._backlog.holders(probe)
        share = self.backpressure_depth // holders
        if held >= share:
            raise SlowDownError(
                f"the collector's outbox holds {self._depth} records, over its backpressure depth of "
                f"{self.backpressure_depth}, and {held} of them are probe {probe!r}'s, at or over its share of "
                f"{share} (that depth shared by {holders} probe{'s' if holders > 1 else ''} holding records): the "
                "store takes records more slowly than they come; send this batch again after Retry-After"
            )

    def start(self) -> None:
        """Open the outbox in the writer thread; raises :class:`StoreError` if it cannot be opened."""
        self._thread.start()
        self._ready.wait()
        if self._failed is not None:
            raise self._failed

    def stop(self) -> None:
        """Commit what is waiting, then end the thread."""
        if self._thread.is_alive():
            self._queue.put(None)
            self._thread.join()

    async def commit(self, parcels: Sequence[Parcel], probe: str) -> int:
        """Make the records of ``parcels`` (``probe``'s) durable; returns how many were committed.

        Raises :class:`SlowDownError` or :class:`OverloadedError` (nothing written) when the outbox
        is too deep (see :meth:`admit`), and
        :class:`StoreError` when the commit failed (nothing written either).
        """
        count = sum(len(p.docs) for p in parcels)
        if count == 0:
            return 0
        self.admit(probe)  # a request read while the depth passed the bound
        with self._lock:
            if self._depth + count > self.max_depth:
                raise OverloadedError(
                    f"the collector's outbox holds {self._depth} records and may hold {self.max_depth}: "
                    "the store is not keeping up; retry later"
                )
            self._depth += count
            self._admitted += count
            self._backlog.add(probe, count, self._depth)
        if not self._thread.is_alive():
            raise StoreError(f"{self.path}: the outbox writer has stopped")
        done: concurrent.futures.Future[int] = concurrent.futures.Future()
        self._queue.put(_Job(parcels, count, done))
        return await asyncio.wrap_future(done)

    def write(self, fn: Callable[[Outbox], object]) -> object:
        """Run ``fn`` with the writer's outbox in the writer thread, after the group under way,
        and return what it returns (or raise what it raised); blocks, so it is for threads other
        than the event loop's (the flusher's). A :class:`StoreError` if the writer has stopped."""
        if not self._thread.is_alive():
            raise StoreError(f"{self.path}: the outbox writer has stopped")
        done: concurrent.futures.Future[object] = concurrent.futures.Future()
        self._queue.put(_Write(fn, done))
        while True:
            try:
                return done.result(timeout=1.0)
            except concurrent.futures.TimeoutError:
                if not self._thread.is_alive() and not done.done():
                    raise StoreError(f"{self.path}: the outbox writer has stopped") from None

    # -- the writer thread ---------------------------------------------------------------------

    def _run(self) -> None:
        try:
            outbox = Outbox(self.path, autocheckpoint=False)  # the flusher checkpoints, off the reply path
            # what waits from before a restart, said from the first reply on (the flusher's first
            # count may be long in coming: its store may be down, its disk full)
            self._depth = sum(outbox.status().depth.values())
        except StoreError as exc:
            self._failed = exc
            self._ready.set()
            return
        self._ready.set()
        try:
            stopping = False
            while not stopping:
                first = self._queue.get()
                if first is None:
                    break
                if isinstance(first, _Write):
                    self._write(outbox, first)
                    continue
                group, size, after = [first], first.count, None
                while size < self.max_records:
                    try:
                        job = self._queue.get_nowait()
                    except queue.Empty:
                        break
                    if not isinstance(job, _Job):  # a write or the end: after this group, in order
                        stopping, after = job is None, job
                        break
                    group.append(job)
                    size += job.count
                self._commit_group(outbox, group)
                if after is not None:
                    self._write(outbox, after)
        finally:
            outbox.close()
            self._fail_waiting()

    @staticmethod
    def _write(outbox: Outbox, write: _Write) -> None:
        if not write.done.set_running_or_notify_cancel():
            return
        try:
            write.done.set_result(write.fn(outbox))
        except Exception as exc:  # noqa: BLE001  the flusher's to handle (a StoreError: it tries again later)
            write.done.set_exception(exc)

    def _no_room(self, room: Room, size: int) -> DiskFullError:
        """The error of records refused for want of room (logged once until there is room again)."""
        why = f"{self.path}: {room.says(size)}; requests get 503 until there is room"
        if not self._said_full:
            self._said_full = True
            _log.error("outbox: %s", why)
        return DiskFullError(why)

    def _fail_waiting(self) -> None:
        """The writer is ending: whatever is still queued hears so, instead of waiting for ever."""
        stopped = StoreError(f"{self.path}: the outbox writer has stopped")
        while True:
            try:
                item: Any = self._queue.get_nowait()
            except queue.Empty:
                return
            if isinstance(item, _Job):
                with self._lock:
                    self._depth -= item.count
            if item is not None and item.done.set_running_or_notify_cancel():
                item.done.set_exception(stopped)

    def _commit_group(self, outbox: Outbox, group: list[_Job]) -> None:
        live = [job for job in group if job.done.set_running_or_notify_cancel()]
        parcels = [parcel for job in live for parcel in job.parcels]
        room = self.room()
        try:
            if not room.fits(size := _stored_size(parcels)):
                raise self._no_room(room, size)  # before SQLite writes a byte: the reserve stays the flusher's
            outbox.commit_parcels(parcels)
        except Exception as exc:  # noqa: BLE001  StoreError, or a bug: either way each waiting request must hear of it
            if isinstance(exc, DiskFullError):
                self.full_at_free = room.free
                if not self._said_full:  # SQLite found no room where the look above found some (a quota, a limit)
                    self._said_full = True
                    _log.error("outbox: %s; requests get 503 until there is room", exc)
            elif isinstance(exc, StoreError):
                _log.error("%d request(s) refused with 503: %s", len(live), exc)
            self.failing = (str(exc)[:500], time.time())
            with self._lock:
                self._depth -= sum(job.count for job in group)
            for job in live:
                job.done.set_exception(exc)
            return
        self.failing = self.full_at_free = None
        if self._said_full:
            self._said_full = False
            _log.warning("outbox: room again on its file system; records are taken")
        self.commits += 1
        self.committed += sum(job.count for job in live)
        for job in live:
            job.done.set_result(job.count)


_PAGE = 65536  # the outbox's page (collector.outbox): a parcel's row and its index entry take a page or two besides


def _stored_size(parcels: Sequence[Parcel]) -> int:
    """About what committing ``parcels`` writes: their documents and ids, and a page or two each."""
    return sum(sum(map(len, p.docs.docs)) + sum(map(len, p.docs.ids)) + 2 * _PAGE for p in parcels)
