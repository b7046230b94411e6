"""The flusher: the collector's outbox goes to the store on a cadence, in a thread of its own.

It uses :meth:`collector.outbox.Outbox.flush` with the sink the store URL names, exactly as a
probe does: batches are read outside any write transaction (the outbox is in WAL mode, so
the writer thread keeps committing requests meanwhile), sent over the network, and only the
acknowledged records are deleted, in a short write transaction. While the store keeps taking
records the flusher goes on at once; when the outbox is empty or the store stops taking them,
it waits ``every_s`` seconds.

It writes nothing to the outbox itself: what a flush writes (deleting what the store took) is
handed to the outbox's writer thread (``writer``, :meth:`~collector.server.committer.GroupCommitter.write`),
so that the requests' commits never wait on a lock the flusher holds. And it runs at a lower
CPU priority than the event loop (nice +10 on its own thread, Linux): on a core shared with
the requests it takes what they leave (the store writes run in SQLite, off the GIL), and
falls behind in the outbox rather than slowing the replies; the outbox is there for that.

After each round (at most 20 batches, about :data:`ROUND_S` seconds) it checkpoints the
outbox's WAL: passively, never blocking the writer, which is opened without automatic
checkpoints so that no reply waits for one, then the few frames committed meanwhile in the
writer, between two groups, so that the WAL starts over. It tells the group committer whether
the store took records, for its backpressure (429 over ``backpressure_depth``). It reports, after
every round, what :mod:`collector.server.app` shows on /healthz and
/metrics: the depth (handed to the group committer), the oldest waiting record, the dead
letters, and the last time the store took records or the outbox was found empty. A round that
fails for any other reason (a bug) is logged with its traceback and counted, and the next one
starts with a new connection to the store: the flusher never stops while the collector runs,
not even when the outbox cannot be opened (it is tried again each round).

When the outbox's file system is full, what the store took cannot be written down (the
deletes are writes too): the batch is kept in memory (:class:`~collector.flushing.Unrecorded`)
and written first by the next round, which sends nothing before, so nothing is sent again
while the disk stays full. Rounds then come further apart (``every_s`` doubled each time, up
to :data:`FULL_BACKOFF_MAX_S`), and at once when the file system has more room than at the
failure, so that the flusher goes on by itself once there is room. While the outbox is short of
room (:mod:`collector.server.room`), each round also gives some of the file's free pages back
to the file system, not only once the backlog is sent, so that records are taken again before
a long backlog has drained.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

from collector.errors import DiskFullError, FairacctError
from collector.outbox import SHRINK_KEEP_BYTES, Outbox, Unrecorded, Writer
from collector.server.metrics import ServerMetrics
from collector.sinks import Sink
from collector.transaction import free_bytes

__all__ = ["FULL_BACKOFF_MAX_S", "ROUND_S", "FlushState", "Flusher"]

_log = logging.getLogger("fairacct.collector")

# A round ends after this many seconds (the batch under way finishes): the depth, the store's
# progress (backpressure, /healthz) and the WAL's checkpoint are brought up to date each round,
# and 20 batches of a slow store (osmem-server took 2,000 records in ~7 s) would hold them for minutes.
ROUND_S = 2.0

FULL_BACKOFF_MAX_S = 30.0
"""The longest wait between two rounds while the outbox's file system is full (seconds): room
freed is found at once (the free space is looked at every ``every_s``), room the file system does
not count as free (a quota, a file size limit) at the latest after this."""

_NICE = 10  # the flusher's thread, above the event loop's 0: CFS gives it ~1/10 of a contended core


@dataclass
class FlushState:
    """What the last flush round found (UNIX seconds)."""

    started: float
    last_flush: float | None = None
    last_store_success: float | None = None
    last_error: str | None = None
    depth: int = 0
    oldest: float | None = None
    dead_letters: dict[str, int] = field(default_factory=dict)
    crashes: int = 0  # rounds ended by an error that is not the store's or the outbox's (a bug)
    crashed: str | None = None  # the last such error, while the rounds since have not succeeded
    disk_full: str | None = None  # why the last round could not write to the outbox for want of room
    unrecorded: int = 0  # records the store answered for that the outbox could not write down yet


class Flusher:
    """Flushes the outbox at ``path`` to ``sink_factory()``'s sink (see the module docstring)."""

    def __init__(
        self,
        path: str | Path,
        sink_factory: Callable[[], Sink],
        *,
        every_s: float,
        batch_size: int,
        metrics: ServerMetrics,
        on_depth: Callable[[int, int, bool], None],
        depth_mark: Callable[[], int],
        writer: Writer | None = None,
        keep_free_bytes: int = SHRINK_KEEP_BYTES,
        short_of_room: Callable[[], bool] = lambda: False,
        shrink_step_bytes: int = SHRINK_KEEP_BYTES // 2,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """``short_of_room``: whether the collector refuses records for want of room now (then
        each round gives up to ``shrink_step_bytes`` of the outbox's free pages back)."""
        self.path = Path(path)
        self._short_of_room = short_of_room
        self._shrink_step_bytes = shrink_step_bytes
        self._unrecorded = Unrecorded()
        self._full_now = False  # this round found no room to write to the outbox
        self.every_s = every_s
        self.batch_size = batch_size
        self._sink_factory = sink_factory
        self._metrics = metrics
        self._on_depth = on_depth
        self._depth_mark = depth_mark
        self._writer = writer
        self._keep_free_bytes = keep_free_bytes
        self._clock = clock
        self._stop = threading.Event()
        self.state = FlushState(started=clock())
        self._thread = threading.Thread(target=self._run, name="fairacct: flusher", daemon=True)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout_s: float = 30.0) -> None:
        """Finish the round under way (a batch in flight is settled) and end the thread."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout_s)

    def _run(self) -> None:
        if hasattr(os, "setpriority"):  # Linux: a thread id is a process id here, and this nices the thread alone
            with contextlib.suppress(OSError):
                os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), os.getpriority(os.PRIO_PROCESS, 0) + _NICE)
        sink: Sink | None = None
        outbox: Outbox | None = None
        full_wait = self.every_s
        try:
            while not self._stop.is_set():
                self._full_now = wrote = False
                try:
                    if outbox is None:
                        outbox = Outbox(self.path)
                    if sink is None:
                        sink = self._sink_factory()
                    busy = self.flush_round(outbox, sink)
                    self.state.crashed, wrote = None, True
                except DiskFullError as exc:  # what the store took waits in memory (self._unrecorded)
                    self._full(str(exc))
                    busy = False
                except FairacctError as exc:  # the store or the outbox failed: say so, try again later
                    self.state.last_error = str(exc)
                    _log.error("flush: %s", exc)
                    busy = False
                except Exception as exc:  # noqa: BLE001 - a bug must cost a round, never the delivery
                    self.state.crashes += 1
                    self.state.crashed = self.state.last_error = f"{type(exc).__name__}: {exc}"
                    _log.exception("flush: a round failed unexpectedly; the next one starts afresh")
                    if sink is not None:
                        with contextlib.suppress(Exception):
                            sink.close()
                        sink = None
                    busy = False
                self.state.unrecorded = self._unrecorded.records
                if not busy and outbox is not None:
                    self._checkpoint(outbox)  # whatever became of the round: the WAL must not grow
                if wrote and not self._full_now and self.state.disk_full is not None:
                    _log.warning("flush: room again on the outbox's file system: what the store took is written down")
                    self.state.disk_full = None
                if busy:
                    continue
                if self.state.disk_full is None:
                    full_wait = self.every_s
                    self._stop.wait(self.every_s)
                else:
                    self._wait_for_room(full_wait)
                    full_wait = min(2 * full_wait, max(self.every_s, FULL_BACKOFF_MAX_S))
        finally:
            if sink is not None:
                sink.close()
            if outbox is not None:
                outbox.close()

    def _full(self, why: str) -> None:
        """A round (or its checkpoint) found no room to write to the outbox: said once, kept for /healthz."""
        self._full_now = True
        if self.state.disk_full is None:
            _log.error("flush: %s; waiting for room on the outbox's file system", why)
        else:
            _log.debug("flush: still no room: %s", why)
        self.state.disk_full = self.state.last_error = why

    def _wait_for_room(self, seconds: float) -> None:
        """Wait ``seconds``, or less: until the outbox's file system has more room than now."""
        before = free_bytes(self.path)
        until = time.monotonic() + seconds
        while not self._stop.wait(min(self.every_s, max(0.0, until - time.monotonic()))):
            now_free = free_bytes(self.path)
            if time.monotonic() >= until or (before is not None and now_free is not None and now_free > before):
                return

    def _checkpoint(self, outbox: Outbox) -> None:
        """A passive WAL checkpoint (the writer leaves it to us: no request waits for it), then
        the rest of it in the writer; after a drained backlog, the file's free pages given back,
        through the writer. While the outbox is short of room, some of the free pages each round
        and the WAL's file cut to nothing, so that what they held is free on the file system."""
        try:
            short = self._short_of_room()
            outbox.wal_checkpoint()
            if self._writer is not None:
                # Frames committed while ours copied are left, and SQLite starts the WAL over only
                # once every frame is copied: with the writer committing every few milliseconds,
                # a passive checkpoint beside it never got there and the WAL grew without end
                # (1.1 GB in 24 s at 30,000 records/s: bench_sustained.py). Between two of the
                # writer's groups nothing commits, so this one copies the last frames, the few
                # committed meanwhile, and the writer's next commit starts the WAL again.
                self._writer(_wal_checkpoint)
            drained = self.state.depth == 0
            if drained or short:
                # short of room, a step at a time: the pages in use past the new end move through the WAL
                step = None if drained else self._shrink_step_bytes
                shrink = functools.partial(_shrink, keep_free_bytes=self._keep_free_bytes, max_bytes=step)
                given = int(cast(int, self._writer(shrink))) if self._writer is not None else shrink(outbox)
                if given:
                    after = "a backlog" if drained else "records sent, while the outbox is short of room"
                    _log.info("outbox: %.0f MiB given back to the file system after %s", given / 2**20, after)
            if short:
                # from this connection, not the writer's: it waits for the commit under way, which
                # the writer would wait for itself, holding up the requests behind it
                outbox.wal_checkpoint(truncate=True)
        except DiskFullError as exc:
            self._full(str(exc))
        except FairacctError as exc:
            _log.warning("outbox: %s", exc)

    def flush_round(self, outbox: Outbox, sink: Sink) -> bool:
        """Flush up to 20 batches, for about :data:`ROUND_S` at most; True when the store took
        records and more are waiting."""
        start = time.perf_counter()
        result = outbox.flush(
            sink,
            batch_size=self.batch_size,
            max_batches=20,
            max_seconds=ROUND_S,
            writer=self._writer,
            unrecorded=self._unrecorded,
        )
        elapsed = time.perf_counter() - start
        self._checkpoint(outbox)
        mark = self._depth_mark()  # before counting: what is admitted later is added to the count
        status = outbox.status()
        now = self._clock()
        depth = sum(status.depth.values())
        sent = sum(result.sent.values())
        self._on_depth(depth, mark, bool(sent))
        self._metrics.flushed(elapsed, result.sent, result.superseded)
        state = self.state
        state.last_flush, state.depth, state.oldest, state.dead_letters = now, depth, status.oldest, status.dead_letters
        if sent or depth == 0:
            state.last_store_success = now
        if result.errors:
            state.last_error = "; ".join(result.errors[:3])
            _log.warning("flush: %s", state.last_error)
        elif sent:
            state.last_error = None
        if sum(result.dead.values()):
            _log.error("flush: the store refused %s record(s) for good (dead letters)", dict(result.dead))
        return bool(sent) and depth > 0


def _wal_checkpoint(outbox: Outbox) -> None:
    outbox.wal_checkpoint()


def _shrink(outbox: Outbox, keep_free_bytes: int, max_bytes: int | None) -> int:
    return outbox.shrink(keep_free_bytes=keep_free_bytes, max_bytes=max_bytes)
