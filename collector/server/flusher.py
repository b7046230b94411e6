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
letters and the newest one's reason (records set aside: a record too large for the store
alone, one whose fields the mapping refuses), the last time the store took records or the
outbox was found empty, and how many rounds in a row the store took none of the records
waiting (:data:`STUCK_ROUNDS` of them: delivery is stuck). A round that
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

Before a round sends anything it passes the store's :class:`~collector.sinks.gate.TemplateGate`,
the probe's own: the index templates checked (installed where ``store.install_templates``
allows) and the indices behind them moved, at the first round and again after every round that
left records behind after errors (a store that failed may come back empty). So a collector that
started while its store was down or answering 503 takes records into its outbox all the same,
and sends none into an index before its template is right. A check that fails costs the round
(the records wait) and is said once per reason: a WARNING while the store does not answer, an
ERROR when it answers and refuses (credentials, templates missing that may not be installed).
The check comes first in a round, then the batch a full disk left in memory is written down,
then the rest is sent. A check that fails never strands such a batch: a round that leaves one
(the disk full) ends before the gate hears of its errors, so the templates stay checked and the
next round passes the gate without asking the store and writes that batch first, as above.
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
from typing import Any, cast

from collector.errors import DiskFullError, FairacctError, SinkError
from collector.outbox import SHRINK_KEEP_BYTES, FlushResult, Outbox, Unrecorded, Writer
from collector.server.metrics import ServerMetrics
from collector.sinks import Sink
from collector.sinks.gate import Prepared, TemplateGate
from collector.transaction import free_bytes

__all__ = ["FULL_BACKOFF_MAX_S", "ROUND_S", "STUCK_ROUNDS", "FlushState", "Flusher", "said_prepared"]

_log = logging.getLogger("fairacct.collector")
_store_log = logging.getLogger("fairacct.store")

# A round ends after this many seconds (the batch under way finishes): the depth, the store's
# progress (backpressure, /healthz) and the WAL's checkpoint are brought up to date each round,
# and 20 batches of a slow store (osmem-server took 2,000 records in ~7 s) would hold them for minutes.
ROUND_S = 2.0

FULL_BACKOFF_MAX_S = 30.0
"""The longest wait between two rounds while the outbox's file system is full (seconds): room
freed is found at once (the free space is looked at every ``every_s``), room the file system does
not count as free (a quota, a file size limit) at the latest after this."""

STUCK_ROUNDS = 3
"""Rounds in a row in which records waited and the store took none of them, after which
/healthz says that delivery is stuck (an outage, a store that refuses every request: whatever
the cause, the records wait); ``store_stale_s`` later it answers 503."""

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
    templates_checked: bool = False  # the store's templates are right (the gate's): records may be sent
    store_problem: str | None = None  # why they are not: the last check's failure
    store_refuses: bool = False  # that failure was the store's answer (credentials, templates), not an outage
    stuck_rounds: int = 0  # rounds in a row, to the last, in which records waited and the store took none
    stuck_since: float | None = None  # when the first of them ended
    last_dead_letter: dict[str, Any] | None = None  # the newest record set aside: kind, id, error, failed_at


class Flusher:
    """Flushes the outbox at ``path`` to ``sink_factory()``'s sink (see the module docstring)."""

    def __init__(
        self,
        path: str | Path,
        sink_factory: Callable[[], Sink],
        *,
        every_s: float,
        batch_size: int,
        batch_bytes: int | None = None,
        metrics: ServerMetrics,
        on_depth: Callable[[int, int, bool], None],
        depth_mark: Callable[[], int],
        writer: Writer | None = None,
        keep_free_bytes: int = SHRINK_KEEP_BYTES,
        short_of_room: Callable[[], bool] = lambda: False,
        shrink_step_bytes: int = SHRINK_KEEP_BYTES // 2,
        gate: TemplateGate | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """``batch_size`` records and ``batch_bytes`` bytes (None: any) make a batch at most
        (:meth:`~collector.outbox.Outbox.flush`). ``short_of_room``: whether the collector refuses
        records for want of room now (then each round gives up to ``shrink_step_bytes`` of the
        outbox's free pages back)."""
        self.path = Path(path)
        self._short_of_room = short_of_room
        self._shrink_step_bytes = shrink_step_bytes
        self._unrecorded = Unrecorded()
        self._full_now = False  # this round found no room to write to the outbox
        self.every_s = every_s
        self.batch_size = batch_size
        self.batch_bytes = batch_bytes
        self._sink_factory = sink_factory
        self._metrics = metrics
        self._on_depth = on_depth
        self._depth_mark = depth_mark
        self._writer = writer
        self._keep_free_bytes = keep_free_bytes
        self._clock = clock
        self.gate = gate or TemplateGate("the store", install=False)
        self._stop = threading.Event()
        # a check made at start (collector.server.serve) is known, and its failure said, already
        self.state = FlushState(clock(), last_error=self.gate.problem, templates_checked=self.gate.checked,
                                store_problem=self.gate.problem, store_refuses=self.gate.refused)  # fmt: skip
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
                    self._stuck()
                    busy = False
                except Exception as exc:  # noqa: BLE001 - a bug must cost a round, never the delivery
                    self.state.crashes += 1
                    self.state.crashed = self.state.last_error = f"{type(exc).__name__}: {exc}"
                    _log.exception("flush: a round failed unexpectedly; the next one starts afresh")
                    self._stuck()
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

    def _stuck(self) -> None:
        """A round in which the store took none of the records waiting."""
        if not self.state.stuck_rounds:
            self.state.stuck_since = self._clock()
        self.state.stuck_rounds += 1

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
        if self._passed(sink):
            # what the store took and a full disk kept from being written down goes first (DiskFullError
            # while it still cannot be: the round ends there, see _run)
            result = outbox.flush(
                sink,
                batch_size=self.batch_size,
                batch_bytes=self.batch_bytes,
                max_batches=20,
                max_seconds=ROUND_S,
                writer=self._writer,
                unrecorded=self._unrecorded,
            )
        else:  # the records wait; the state below still says how many
            result = FlushResult()
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
        self.gate.settle(errors=bool(result.errors), waiting=depth)
        state.templates_checked = self.gate.checked
        if sent or sum(result.dead.values()) or depth == 0:  # records set aside are an answer too
            state.stuck_rounds, state.stuck_since = 0, None
        else:
            self._stuck()
        if result.errors:
            state.last_error = "; ".join(result.errors[:3])
            _log.warning("flush: %s", state.last_error)
        elif sent:
            state.last_error = None
        if not status.dead_letters:
            state.last_dead_letter = None
        elif sum(result.dead.values()) or state.last_dead_letter is None:  # or counted when the outbox was opened
            state.last_dead_letter = next(iter(outbox.dead_letters(1)), None)
        if sum(result.dead.values()):
            last = state.last_dead_letter or {}
            _log.error(
                "flush: %s record(s) set aside: the store refused them for good (dead letters); the last, %s %s: %s",
                dict(result.dead), last.get("kind"), last.get("id"), last.get("error"),
            )  # fmt: skip
        return bool(sent) and depth > 0

    def _passed(self, sink: Sink) -> bool:
        """Whether records may be sent now: the gate's check passed, now or before. A check that
        fails is said once per reason (see the module docstring) and leaves the records waiting."""
        state = self.state
        try:
            said_prepared(self.gate.ensure(sink))
        except SinkError as exc:
            said = state.store_problem
            state.templates_checked, state.store_problem, state.store_refuses = False, str(exc), self.gate.refused
            state.last_error = str(exc)
            if str(exc) != said:
                level = logging.ERROR if self.gate.refused else logging.WARNING
                _log.log(level, "flush: %s; %s", exc, _WAITING)
            return False
        if state.store_problem is not None:
            _log.info("flush: the store answers and its index templates are right; sending what waited")
        state.templates_checked, state.store_problem, state.store_refuses = True, None, False
        return True


_WAITING = "records are taken and wait in the outbox until the store's index templates are checked"


def said_prepared(prepared: Prepared) -> None:
    """Log what a template check did: the templates installed, a line per index moved."""
    if prepared.installed:
        _store_log.info("installed index templates %s (store.install_templates)", ", ".join(prepared.installed))
    for line in prepared.migrated:
        _store_log.warning("store migrated: %s", line)


def _wal_checkpoint(outbox: Outbox) -> None:
    outbox.wal_checkpoint()


def _shrink(outbox: Outbox, keep_free_bytes: int, max_bytes: int | None) -> int:
    return outbox.shrink(keep_free_bytes=keep_free_bytes, max_bytes=max_bytes)
