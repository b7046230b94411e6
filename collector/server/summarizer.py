"""The summarizer: the collector re-summarizes the last days in its store on a cadence, in a
thread of its own, as GRACC's periodic summarizer does (the last 7 days every 15 minutes, the
last 365 once a day), so that late records count and vanished groups go.

Two schedules (``recent_days`` every ``every_s`` seconds, ``nightly_days`` every 86,400 s; 0 days
turns one off), both due when the thread starts, then at their period after each start: a run
that takes longer than the period is followed by the next at once, never by several. A run
that fails (the store is down) is logged and counted; the next goes on. Stopping ends a run
under way between two chunks of days: what was summarized stays, the rest waits for the next.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from collector.errors import FairacctError
from collector.sinks import Sink
from collector.summaries.run import last_days, summarize

__all__ = ["NIGHTLY_S", "Schedule", "Summarizer", "SummaryState"]

_log = logging.getLogger("fairacct.collector")

NIGHTLY_S = 86400.0


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
    failures: int = 0
    last_error: str | None = None


class _Stopped(Exception):
    """Raised between two chunks of a run when the summarizer is stopped."""


class Summarizer:
    """Runs the ``schedules`` against ``sink_factory()``'s store (see the module docstring);
    ``probe`` names the summaries' writer; ``clock`` gives UNIX seconds."""

    def __init__(
        self,
        sink_factory: Callable[[], Sink],
        schedules: tuple[Schedule, ...],
        *,
        probe: str,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.schedules = tuple(s for s in schedules if s.days > 0)
        self.probe = probe
        self._sink_factory = sink_factory
        self._clock = clock
        self._stop = threading.Event()
        self._due = {s.name: 0.0 for s in self.schedules}  # all due at the start
        self.state = SummaryState()
        self._thread = threading.Thread(target=self._run, name="fairacct: summarizer", daemon=True)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def start(self) -> None:
        if self.schedules:
            self._thread.start()

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
        if not due:
            return ran
        widest = due[0]
        try:
            self._summarize(widest, now)
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
            done = summarize(sink, first, last, probe=self.probe, progress=progress)
        finally:
            sink.close()
        self.state.runs += 1
        self.state.last_error = None
        self.state.last_summaries[schedule.name] = done.total
        _log.info(
            "summaries (%s): %d of %s .. %s, %d stale deleted, in %.1f s",
            schedule.name, done.total, first, last, sum(done.deleted.values()), time.perf_counter() - start,
        )  # fmt: skip

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.run_due()
            except _Stopped:
                return
            self._stop.wait(max(0.0, self.next_due() - self._clock()))
