"""Named points where a test can make a process die, to prove that nothing is lost.

Test-only. ``FAIRACCT_CRASH_AT=NAME`` makes the process kill itself with SIGKILL the first
time it reaches point ``NAME``; ``NAME:N`` the N-th time (so that a test can kill a process
in the middle of a stream, deterministically). No configuration setting reaches it: only the
environment of a process a test starts. No cleanup, no flush, as a power cut or the OOM killer
would. The points: ``before-commit``, ``after-commit``, ``after-flush`` (the probe's cycle),
``during-commit``, ``during-flush`` (the outbox), ``gratia-after-commit`` (the collector: a
Gratia bundle durable, its ``OK`` not yet sent). Unset (as in production), a point costs one
dictionary lookup.
"""

from __future__ import annotations

import os
import signal

__all__ = ["point"]

_passed: dict[str, int] = {}  # times each point was reached, counted only while one is armed


def point(name: str) -> None:
    armed = os.environ.get("FAIRACCT_CRASH_AT")
    if armed is None:
        return
    at, _, nth = armed.partition(":")
    if at != name:
        return
    _passed[name] = _passed.get(name, 0) + 1
    if _passed[name] >= (int(nth) if nth.isdigit() else 1):
        os.kill(os.getpid(), signal.SIGKILL)
