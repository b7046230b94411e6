"""The one form every time a collector stores is in: RFC 3339 in UTC, to the second.

A record's times arrive as text (``timestamp``, the ``*_iso`` fields) and are kept as text;
the stores compare them as text (a day's range, a month's index) and the summaries cut the day
out of them (its first ten characters). So a collector takes a time only in a form where text
order is time order and the first ten characters are the UTC day:
``YYYY-MM-DDTHH:MM:SSZ`` (:data:`CANONICAL`), e.g. ``2025-12-31T00:00:00Z``.

What comes is read as ISO 8601 (``datetime.fromisoformat``) and must carry a UTC offset
(``Z``, ``+14:00``): a time without one names no instant. It is then written in UTC, its
fraction of a second dropped (as Go's ``time.RFC3339`` and the probes write times):
``20251231T000000Z`` and ``2025-12-31T14:00:00+14:00`` both become ``2025-12-31T00:00:00Z``.
A date without a time (``2026-W47-6``), a time without an offset, or one outside the years 1
to 9999 once in UTC is refused with its reason (:class:`ValueError`).

A record's own ``timestamp`` (what it is summed under) must also fall within
:func:`timestamp_range`: from :data:`EARLIEST` (1990, before any HTCondor pool kept accounts)
to a day after the collector's clock (a probe's clock may be a little ahead; a record from
next year is a broken clock, and would stand in next year's totals).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

__all__ = ["CANONICAL", "EARLIEST", "FUTURE_SLACK_S", "timestamp_range", "utc_second"]

CANONICAL = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z", re.ASCII)
"""A time in the one form (the day, month and hour still to be checked: ``datetime.fromisoformat``)."""

EARLIEST = "1990-01-01T00:00:00Z"
"""The earliest ``timestamp`` a collector takes."""

FUTURE_SLACK_S = 86400.0
"""How far after the collector's clock a ``timestamp`` may be (seconds)."""

_FORMAT = "%Y-%m-%dT%H:%M:%SZ"


def utc_second(text: str) -> str:
    """``text``, an ISO-8601 time with a UTC offset, in the one form (see the module
    docstring); ValueError saying what is wrong otherwise."""
    if CANONICAL.fullmatch(text):
        datetime.fromisoformat(text)  # a real day and time of day (ValueError otherwise)
        return text
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError("not an ISO-8601 time") from None
    if moment.tzinfo is None:
        raise ValueError("no UTC offset ('Z' or '+hh:mm')")
    try:
        moment = moment.astimezone(UTC)
    except OverflowError:
        raise ValueError("outside the years 1 to 9999 in UTC") from None
    return moment.strftime(_FORMAT) if moment.year >= 1000 else f"{moment.year:04d}" + moment.strftime(_FORMAT)[-16:]


def timestamp_range(now: float) -> tuple[str, str]:
    """The first and last ``timestamp`` a collector whose clock reads ``now`` (UNIX seconds)
    takes, in the one form."""
    latest = datetime.fromtimestamp(now, UTC) + timedelta(seconds=FUTURE_SLACK_S)
    return EARLIEST, latest.strftime(_FORMAT)
