"""Times checked against the reading's own clock: nothing read can have happened after it was read.

A job's times are written by its schedd, a slot's ``LastHeardFrom`` by its collector and its
``MyCurrentTime`` by its startd, each from its host's clock; none of them can be later than
the moment they are read (``now``, UTC s: the reading's wall clock, or when a live source
answered), but for the skew between two hosts' clocks (:data:`CLOCK_SKEW_S`). A time after that
is a clock gone wrong or a value damaged (a job dated 2090): its ad is set aside with the reason,
and it moves nothing else (fairshare's instant, a snapshot's instant, which nodes are heard from).
"""

from __future__ import annotations

import time
from collections.abc import Mapping

import numpy as np

__all__ = ["CLOCK_SKEW_S", "credible", "from_the_future"]

CLOCK_SKEW_S = 900.0
"""How far (seconds) a time read may be after the reading's clock: NTP keeps hosts within a
second; a quarter of an hour forgives a host that lost it for a while, not a wrong date."""


def from_the_future(times: Mapping[str, np.ndarray], now: float) -> dict[int, str]:
    """The rows of ``times`` (attribute name -> UNIX seconds per ad, NaN where missing) with a
    time later than ``now`` + :data:`CLOCK_SKEW_S`, each with why (its first such attribute)."""
    bound = _bound(now)
    reasons: dict[int, str] = {}
    for name, values in times.items():
        with np.errstate(invalid="ignore"):  # NaN compares false: a missing time is no time
            late = np.flatnonzero(values > bound)
        for i in late.tolist():
            reasons.setdefault(
                i,
                f"attribute '{name}' = {values[i]:.17g} ({_utc(values[i])}) is after the time of reading "
                f"({_utc(now)}) by more than {CLOCK_SKEW_S:g} s: a clock gone wrong or a damaged value",
            )
    return reasons


def credible(times: np.ndarray, now: float | None = None) -> np.ndarray:
    """``times`` (UTC s) with those after the time of reading (``now``, else the clock's, plus
    :data:`CLOCK_SKEW_S`) made NaN: a time that cannot have been."""
    with np.errstate(invalid="ignore"):
        out: np.ndarray = np.where(times > _bound(time.time() if now is None else now), np.nan, times)
    return out


def _bound(now: float) -> float:
    """The latest time a reading at ``now`` (UTC s) can have read."""
    return now + CLOCK_SKEW_S


def _utc(t: float) -> str:
    try:
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))
    except (OverflowError, OSError, ValueError):  # beyond what the C library dates
        return "beyond year 9999"
