"""The one parser of times given on the command line."""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, timedelta

from collector.errors import ConfigError

__all__ = ["parse_day", "parse_time", "window_end"]

_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")  # a bare day: YYYY-MM-DD


def parse_time(text: str, option: str = "--at") -> float:
    """UNIX seconds from ``1364601600`` or an ISO-8601 time (``2013-03-30T00:00:00Z``; UTC when
    no zone is given). A :class:`ConfigError` naming ``option`` otherwise."""
    try:
        return float(text)
    except ValueError:
        pass
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ConfigError(
            f"{option}: expected UNIX seconds or an ISO-8601 time like 2013-03-30T00:00:00Z, got {text!r}"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.timestamp()


def window_end(text: str, option: str = "--to") -> float:
    """The end of a window, in UNIX seconds: a bare UTC day (``2026-11-30``) is that day included,
    so its end is the next day's first second, as ``--to`` of ``report`` and ``export`` means;
    a time (UNIX seconds, ISO-8601 with its hour) is the instant the window ends, excluded."""
    if not _DAY.fullmatch(text.strip()):
        return parse_time(text, option)
    day = parse_day(text, option)
    return datetime.combine(day + timedelta(days=1), datetime.min.time(), UTC).timestamp()


def parse_day(text: str, option: str) -> date:
    """A UTC day from ``2026-01-31`` (or any time :func:`parse_time` takes: its day)."""
    try:
        return date.fromisoformat(text.strip())
    except ValueError:
        return datetime.fromtimestamp(parse_time(text, option), UTC).date()
