"""The probe service's signals: SIGTERM and SIGINT stop it; SIGHUP is said, never acted on.

The schedules, the store and the state are built from the configuration at start: a reload
would change them under running jobs, so a SIGHUP is answered with a WARNING (restart to apply
a change) rather than the death its default would be.
"""

from __future__ import annotations

import logging
import math
import signal
import threading
import time
from types import FrameType, TracebackType
from typing import Any

__all__ = ["HANGUP_CHECK_S", "StopSignals"]

log = logging.getLogger("fairacct.service")

HANGUP_CHECK_S = 0.5
"""How often the waiting main thread wakes (seconds): Python runs a signal's handler in the main
thread only when it runs, and the kernel may deliver SIGTERM or SIGHUP to one of the scheduler's
threads, which leaves a main thread blocked without a timeout deaf to it (seen: a SIGHUP said, and
acted on, only when a later signal reached the main thread). Also when it says a noted SIGHUP."""


class StopSignals:
    """While entered (in the main thread; elsewhere no handler is installed), SIGTERM and SIGINT
    set ``stop`` and name themselves in ``why``; a SIGHUP is noted and said by :meth:`wait`. The
    previous handlers are restored on exit."""

    def __init__(self, stop: threading.Event) -> None:
        self.stop = stop
        self.why = "stopped"
        self._hangups: list[int] = []
        self._previous: dict[signal.Signals, Any] = {}

    def __enter__(self) -> StopSignals:
        if threading.current_thread() is threading.main_thread():
            self._previous = {s: signal.signal(s, self._on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
            self._previous[signal.SIGHUP] = signal.signal(signal.SIGHUP, self._on_hangup)
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        for s, handler in self._previous.items():
            signal.signal(s, handler)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self.why = signal.Signals(signum).name
        self.stop.set()

    def _on_hangup(self, signum: int, frame: FrameType | None) -> None:
        # Only noted here: a handler runs between two bytecodes of the main thread, maybe in
        # the middle of a log line of its own, where logging again would write into the
        # stream's buffer re-entrantly. The wait says it.
        self._hangups.append(signum)

    def wait(self, duration: float | None) -> None:
        """Wait for ``stop`` or ``duration`` seconds (then ``why`` says so), saying each SIGHUP."""
        deadline = math.inf if duration is None else time.monotonic() + duration
        while not self.stop.wait(min(HANGUP_CHECK_S, max(0.0, deadline - time.monotonic()))):
            if self._hangups:
                self._hangups.clear()
                log.warning(
                    "SIGHUP: the configuration is not reloaded while the service runs; restart it to apply "
                    "a change (systemctl restart fairacct-probe)"
                )
            if time.monotonic() >= deadline:
                self.why = "--for elapsed"
                break
