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
starts with a new connection to the store: the flusher never stops while the collector runs.
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

from collector.errors import FairacctError
from collector.outbox import SHRINK_KEEP_BYTES, Outbox, Writer
from collector.server.metrics import ServerMetrics
from collector.sinks import Sink

__all__ = ["ROUND_S", "FlushState", "Flusher"]

_log = logging.getLogger("fairacct.collector")

# A round ends after this many seconds (the batch under way finishes): the depth, the store's
# progress (backpressure, /healthz) and the WAL's checkpoint are brought up to date each round,
# and 20 batches of a slow store (osmem-server took 2,000 records in ~7 s) would hold them for minutes.
ROUND_S = 2.0

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
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.path = Path(path)
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
        with Outbox(self.path) as outbox:
            try:
                while not self._stop.is_set():
                    try:
                        if sink is None:
                            sink = self._sink_factory()
                        busy = self.flush_round(outbox, sink)
                        self.state.crashed = None
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
                    if not busy:
                        self._checkpoint(outbox)  # whatever became of the round: the WAL must not grow
                        self._stop.wait(self.every_s)
            finally:
                if sink is not None:
                    sink.close()

    def _checkpoint(self, outbox: Outbox) -> None:
        """A passive WAL checkpoint (the writer leaves it to us: no request waits for it), then
        the rest of it in the writer; after a drained backlog, the file's free pages given back,
        through the writer."""
        try:
            outbox.wal_checkpoint()
            if self._writer is not None:
                # Frames committed while ours copied are left, and SQLite starts the WAL over only
                # once every frame is copied: with the writer committing every few milliseconds,
                # a passive checkpoint beside it never got there and the WAL grew without end
                # (1.1 GB in 24 s at 30,000 records/s: bench_sustained.py). Between two of the
                # writer's groups nothing commits, so this one copies the last frames, the few
                # committed meanwhile, and the writer's next commit starts the WAL again.
                self._writer(_wal_checkpoint)
            if self.state.depth == 0:
                shrink = functools.partial(_shrink, keep_free_bytes=self._keep_free_bytes)
                given = int(cast(int, self._writer(shrink))) if self._writer is not None else shrink(outbox)
                if given:
                    _log.info("outbox: %.0f MiB given back to the file system after a backlog", given / 2**20)
        except FairacctError as exc:
            _log.warning("outbox: %s", exc)

    def flush_round(self, outbox: Outbox, sink: Sink) -> bool:
        """Flush up to 20 batches, for about :data:`ROUND_S` at most; True when the store took
        records and more are waiting."""
        start = time.perf_counter()
        result = outbox.flush(
            sink, batch_size=self.batch_size, max_batches=20, max_seconds=ROUND_S, writer=self._writer
        )
        elapsed = time.perf_counter() - start
        self._checkpoint(outbox)
        mark = self._depth_mark()  # before counting: what is admitted later is added to the count
        status = outbox.status()
        now = self._clock()
        depth = sum(status.depth.values())
        sent = sum(result.sent.values())
        self._on_depth(depth, mark, bool(sent))
        self._metrics.flushed(elapsed, result.sent)
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


def _shrink(outbox: Outbox, keep_free_bytes: int) -> int:
    return outbox.shrink(keep_free_bytes=keep_free_bytes)
