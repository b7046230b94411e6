"""The summarizer: the collector re-summarizes the last days in its store on a cadence, in a
thread of its own, as GRACC's periodic summarizer does (the last 7 days every 15 minutes, the
last 365 once a day), so that late records count and vanished groups go.

Two schedules (``recent_days`` every ``every_s`` seconds, ``nightly_days`` every 86,400 s; 0 days
turns one off), both due when the thread starts, then at their period after each start: a run
that takes longer than the period is followed by the next at once, never by several. A run
that fails (the store is down) is logged and counted; the next goes on. A run that finds the
store's summaries lease held (another collector on the same store is summarizing it:
:mod:`collector.summaries.run`) is put off, counted, and tried again :data:`BUSY_RETRY_S` later
(at most its period), after the other's run: collectors on one store take turns, and each run
counts what the store holds when it starts (/healthz: ``deferred``, and ``busy`` saying who has
the lease; /metrics: ``fairacct_collector_summary_runs_total{outcome="deferred"}``). A run that
fails unexpectedly (a bug, or something in the store no summary foresaw) is logged with its
traceback and counted as crashed, and the schedules are tried again after :data:`CRASH_RETRY_S`:
the thread goes on, and /healthz says "summarizer failing" until a run succeeds. Should the
thread end all the same, :meth:`Summarizer.revive` starts another (the collector's /healthz
calls it). Stopping ends a run under way between two chunks of days: what
was summarized stays, the rest waits for the next.

A summary is a record the summarizer writes into the store, so it waits, as the flusher's
records do, until the store's index templates are checked (``ready``, the flusher's
:class:`~collector.sinks.gate.TemplateGate`): a collector started while its store was down
summarizes once the store answers, never into an index whose types the store guessed. Runs
that wait so are neither failures nor done: the schedules stay due, and are looked at again
every :data:`WAIT_S`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from collector.errors import BusyError, FairacctError
from collector.sinks import Sink
from collector.summaries.run import LEASE_S, last_days, summarize

__all__ = ["BUSY_RETRY_S", "CRASH_RETRY_S", "NIGHTLY_S", "WAIT_S", "Schedule", "Summarizer", "SummaryState"]

_log = logging.getLogger("fairacct.collector")

NIGHTLY_S = 86400.0
CRASH_RETRY_S = 60.0
"""Seconds after a run that crashed before the schedules are tried again (at most their period)."""
WAIT_S = 1.0
"""Seconds between two looks at a store not ready for summaries (its templates unchecked)."""

BUSY_RETRY_S = 60.0
"""Seconds after a run put off (another collector held the summaries' lease) before it is tried again."""


@dataclass(frozen=True)
class Schedule:
    """Re-summarize the last ``days`` days (today included) every ``every_s`` seconds."""

    name: str
    days: int
    every_s: float


@dataclass
class SummaryState:
    """What the summarizer did last (UNIX seconds), for /healthz."""

    last_run: dict[str, float] = field(default_factory=dict)
    last_summaries: dict[str, int] = field(default_factory=dict)
    runs: int = 0
    failures: int = 0  # runs the store failed (FairacctError)
    last_error: str | None = None
    crashes: int = 0  # runs that failed unexpectedly
    crashed: str | None = None  # why the last run crashed, until one succeeds
    restarts: int = 0  # threads started again after one ended
    waiting: bool = False  # runs are due and wait for the store's index templates to be checked
    deferred: int = 0  # runs put off: another writer of the store held the summaries' lease
    busy: str | None = None  # who held it, while this collector's runs are put off
    deleted: int = 0  # summaries of groups that no longer exist, deleted by this collector's runs


class _Stopped(Exception):
    """Raised between two chunks of a run when the summarizer is stopped."""


class Summarizer:
    """Runs the ``schedules`` against ``sink_factory()``'s store (see the module docstring);
    ``probe`` names the summaries' writer; ``ready`` says whether the store may be written to
    now; ``clock`` gives UNIX seconds."""

    def __init__(
        self,
        sink_factory: Callable[[], Sink],
        schedules: tuple[Schedule, ...],
        *,
        probe: str,
        ready: Callable[[], bool] = lambda: True,
        lease_s: float = LEASE_S,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.schedules = tuple(s for s in schedules if s.days > 0)
        self.probe = probe
        self.lease_s = lease_s
        self._sink_factory = sink_factory
        self._clock = clock
        self._ready = ready
        self._stop = threading.Event()
        self._due = {s.name: 0.0 for s in self.schedules}  # all due at the start
        self.state = SummaryState()
        self._thread = self._new_thread()
        self._started = False

    def _new_thread(self) -> threading.Thread:
        return threading.Thread(target=self._run, name="fairacct: summarizer", daemon=True)

    @property
    def alive(self) -> bool:
        """Whether the summarizer runs its schedules (or has none to run)."""
        return not self.schedules or not self._started or self._thread.is_alive() or self._stop.is_set()

    def start(self) -> None:
        if self.schedules:
            self._started = True
            self._thread.start()

    def revive(self) -> bool:
        """Start the thread again if it ended while it should run; whether it had to be."""
        if self.alive:
            return False
        self.state.restarts += 1
        _log.error("summaries: the summarizer's thread had ended; started again")
        self._thread = self._new_thread()
        self._thread.start()
        return True

    def stop(self, timeout_s: float = 30.0) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout_s)

    def due(self, now: float) -> list[Schedule]:
        """The schedules due at ``now``, the widest first (it covers the other's days too)."""
        return sorted((s for s in self.schedules if self._due[s.name] <= now), key=lambda s: -s.days)

    def next_due(self) -> float:
        """When the next schedule is due (UNIX seconds)."""
        return min(self._due.values())

    def run_due(self) -> list[str]:
        """Run every schedule due now, once; a run covering more days counts for the others
        due too. Returns the names of the schedules that ran (and succeeded)."""
        ran: list[str] = []
        now = self._clock()
        due = self.due(now)
        self.state.waiting = bool(due) and not self._ready()
        if not due or self.state.waiting:  # waiting: due still, looked at again in WAIT_S
            return ran
        widest = due[0]
        try:
            self._summarize(widest, now)
        except BusyError as exc:  # another collector summarizes the store: after it, not at the next period
            self.state.deferred += 1
            if self.state.busy is None:
                _log.info("summaries (%s): put off: %s", widest.name, exc)
            self.state.busy = str(exc)
            for s in due:
                self._due[s.name] = now + min(BUSY_RETRY_S, s.every_s)
            return ran
        except FairacctError as exc:  # the store failed: say so, try again at the next period
            self.state.failures += 1
            self.state.last_error = str(exc)
            _log.error("summaries: %s", exc)
            for s in due:
                self._due[s.name] = now + s.every_s
            return ran
        for s in due:
            self._due[s.name] = now + s.every_s
            self.state.last_run[s.name] = now
            ran.append(s.name)
        return ran

    def _summarize(self, schedule: Schedule, now: float) -> None:
        first, last = last_days(now, schedule.days)

        def progress(_: int) -> None:
            if self._stop.is_set():
                raise _Stopped

        start = time.perf_counter()
        sink = self._sink_factory()
        try:
            done = summarize(
                sink, first, last, probe=self.probe, progress=progress, lease_s=self.lease_s, clock=self._clock
            )
        finally:
            sink.close()
        self.state.runs += 1
        self.state.last_error = None
        self.state.crashed = None
        self.state.busy = None
        self.state.deleted += sum(done.deleted.values())
        self.state.last_summaries[schedule.name] = done.total
        _log.info(
            "summaries (%s): %d of %s .. %s, %d stale deleted, in %.1f s",
            schedule.name, done.total, first, last, sum(done.deleted.values()), time.perf_counter() - start,
        )  # fmt: skip
        if done.undated:
            _log.warning(
                "summaries (%s): left out groups of records whose timestamp names no day (stored before this "
                "collector wrote times in one form), by kind: %s", schedule.name, done.undated,
            )  # fmt: skip

    def _run(self) -> None:
        while not self._stop.is_set():
            pause_s = 0.0
            try:
                self.run_due()
            except _Stopped:
                return
            except Exception as exc:  # noqa: BLE001  counted and shown; the next run may do better
                self._crashed(exc)
                pause_s = 1.0  # a clock that jumps or has lost its precision must not make this a busy loop
            if self.state.waiting:
                pause_s = WAIT_S
            self._stop.wait(max(pause_s, self.next_due() - self._clock()))

    def _crashed(self, exc: Exception) -> None:
        now = self._clock()
        for s in self.schedules:
            self._due[s.name] = now + min(CRASH_RETRY_S, s.every_s)
        self.state.crashed = f"{type(exc).__name__}: {exc}"[:500]
        self.state.crashes += 1
        _log.exception("summaries: a run failed unexpectedly (%d so far); trying again later", self.state.crashes)
