"""ISO-8601 durations and RFC 3339 instants, read exactly as GRACC's Go code reads them.

Gratia records write durations as ISO-8601 (``PT1M5.32S``) and instants as RFC 3339
(``2016-05-27T22:44:08Z``). GRACC's collector turns a duration into seconds with the
``iso8601duration`` package and an instant into Go's ``time.Time``; the documents it makes hold
what those give, so this module gives the same:

* :func:`duration_seconds`: the pattern is searched for anywhere in the text (it is not
  anchored), a week form ``P<n>W`` first; years are 365 days and months 30; the value is built
  in whole nanoseconds, the seconds' fraction being cut to milliseconds, then microseconds,
  then nanoseconds as Go's code cuts it, so ``PT0.55S`` is 0.55 and not 0.5500000000000001.
  Text that does not parse is 0.0, never an error (GRACC ignores the error). A duration over
  Go's ``time.Duration`` range (an int64 of nanoseconds, about 292 years) wraps as Go's integer
  arithmetic wraps it, because that wrong number is what GRACC stores: ``PT999999999999S`` is
  3,875,820,018.684212736 s and ``P300Y`` is negative. A part of 2**63 or more is converted to
  an integer as Go on amd64 (where GRACC's collector runs) converts an out-of-range float, to
  the smallest int64, which any unit's multiplication then makes 0.
* :func:`parse_instant`: Go's strict RFC 3339 (``time.Time.UnmarshalText``): four-digit year,
  valid month, day, hour, minute and second (no leap second), an optional fraction, ``Z`` or
  ``+hh:mm``/``-hh:mm``. It is reformatted as Go's ``time.RFC3339`` formats it: whole seconds
  (the fraction is dropped, not rounded), the sender's offset kept, ``Z`` for a zero offset.
  Text that does not parse is an error, as in GRACC, which then refuses the record. One
  deliberate difference: white space around the instant is allowed (Go refuses it).
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime
from functools import lru_cache
from typing import NamedTuple

__all__ = ["Instant", "duration_seconds", "parse_instant", "utc_iso"]

_NS = 1_000_000_000
_MAX_NS = 2**63 - 1  # Go's time.Duration is an int64 of nanoseconds
_INT64 = 2**63
_UNIT_NS = {
    "year": 365 * 86400 * _NS,
    "month": 30 * 86400 * _NS,
    "week": 7 * 86400 * _NS,
    "day": 86400 * _NS,
    "hour": 3600 * _NS,
    "minute": 60 * _NS,
}
_WEEK = re.compile(r"P(?P<week>[0-9]+)W", re.ASCII)
_FULL = re.compile(
    r"P(?:(?P<year>[0-9]+)Y)?(?:(?P<month>[0-9]+)M)?(?:(?P<day>[0-9]+)D)?"
    r"(?:T(?:(?P<hour>[0-9]+)H)?(?:(?P<minute>[0-9]+)M)?(?:(?P<second>[0-9.]+)S)?)?",
    re.ASCII,
)
_INSTANT = re.compile(
    r"([0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2})(?:\.([0-9]+))?(?:Z|([+-])([0-9]{2}):([0-9]{2}))",
    re.ASCII,
)
_DAYS_IN_MONTH = (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)
# What Gratia probes write (PT1H, PT1M5.32S, PT0S) and instants in UTC to the second, read by
# one match each: every record has a distinct WallDuration, StartTime and EndTime, which no
# cache holds, and the general readers below cost several times as much (matches, groupdict,
# a loop over the parts). Anything else goes the general way.
# (At most 18 digits a part: int() of a longer one may hit Python's digit limit, and the
# duration is then over Go's range anyway, which the general reader says.)
_PLAIN_DURATION = re.compile(r"PT(?:([0-9]{1,18})H)?(?:([0-9]{1,18})M)?(?:([0-9]{1,18})(\.[0-9]*)?S)?", re.ASCII)
_PLAIN_INSTANT = re.compile(
    r"([0-9]{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12][0-9]|3[01]))T(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]Z", re.ASCII
)


@lru_cache(maxsize=4096)  # records repeat the same few durations ('PT0S')
def duration_seconds(text: str) -> float:
    """Seconds of an ISO-8601 duration as GRACC computes them; 0.0 when it does not parse."""
    plain = _PLAIN_DURATION.fullmatch(text)
    if plain is None:
        return _duration_seconds(text)
    hours, minutes, seconds, fraction = plain.groups()
    # In range, int(float(part)) == int(part) (below 2**53); out of range the general reader
    # does Go's float conversions and wraps.
    total = (int(hours or 0) * 3600 + int(minutes or 0) * 60) * _NS
    if seconds is not None:
        total += _seconds_ns(float(seconds + fraction) if fraction else float(seconds))
    if total > _MAX_NS:
        return _duration_seconds(text)
    return float(total // _NS) + float(total % _NS) / 1e9


def _go_int64(value: float) -> int:
    """``int64(value)`` of a float that is not negative, as Go on amd64 converts it: truncated,
    and the smallest int64 when it is out of range (the spec leaves that to the platform)."""
    return int(value) if value < _INT64 else -_INT64


def _seconds_ns(value: float) -> int:
    """Nanoseconds of a number of seconds as Go's code makes them: whole seconds, then the
    fraction cut to ms, then us, then ns (so 0.55 s is 550,000,000 ns, not 550,000,000.0000001)."""
    whole = math.trunc(value)
    total = _go_int64(value) * _NS
    value = (value - whole) * 1000.0
    total += int(value) * 1_000_000
    value = (value - int(value)) * 1000.0
    total += int(value) * 1_000
    value = (value - int(value)) * 1000.0
    return total + int(value)


def _duration_seconds(text: str) -> float:
    """:func:`duration_seconds` for any text: the pattern searched for anywhere, weeks first."""
    match = _WEEK.search(text) or _FULL.search(text)
    if match is None:
        return 0.0
    total = 0
    for name, part in match.groupdict().items():
        if not part:
            continue
        try:
            value = float(part)
        except ValueError:  # '1.2.3' or '.': Go's ParseFloat fails, and so does the duration
            return 0.0
        if value == math.inf:  # ParseFloat's range error
            return 0.0
        if name == "second":
            total += _seconds_ns(value)
        else:
            total += _go_int64(value) * _UNIT_NS[name]
    return _go_seconds(total)


def _go_seconds(total: int) -> float:
    """``time.Duration(total).Seconds()``: ``total`` wrapped to an int64 as Go's arithmetic wraps
    it, then whole seconds and the rest divided as Go divides (truncating towards zero)."""
    ns = (total + _INT64) % (2 * _INT64) - _INT64
    whole, rest = divmod(abs(ns), _NS)
    if ns < 0:
        whole, rest = -whole, -rest
    return float(whole) + float(rest) / 1e9


class Instant(NamedTuple):
    """An RFC 3339 instant as GRACC keeps it: ``text`` formatted as Go's ``time.RFC3339``
    formats it, and ``is_zero``, Go's ``time.Time.IsZero`` (the instant 0001-01-01T00:00:00Z,
    which GRACC leaves out of a document)."""

    text: str
    is_zero: bool


@lru_cache(maxsize=4096)  # the records of an envelope share many times (CreateTime)
def parse_instant(text: str) -> Instant:
    """Read an RFC 3339 instant as Go's ``time.Time`` does; ValueError says what was wrong."""
    plain = _PLAIN_INSTANT.fullmatch(text)
    if plain is not None and _plain_date(plain.group(1)):
        return Instant(text, False)  # Go formats it as it is written; never the zero time (year > 1)
    return _parse_instant(text)


@lru_cache(maxsize=1024)  # an envelope's records fall on a few days
def _plain_date(date: str) -> bool:
    """Whether ``YYYY-MM-DD`` (month 01-12, day 01-31 already checked) is a real day after year 1."""
    year, month, day = int(date[:4]), int(date[5:7]), int(date[8:])
    return year > 1 and day <= _days_in_month(year, month)


def _parse_instant(text: str) -> Instant:
    """:func:`parse_instant` for any text: fractions, offsets, white space, Go's zero time."""
    match = _INSTANT.fullmatch(text.strip())
    if match is None:
        raise ValueError(f"expected an RFC 3339 time like '2016-05-27T22:44:08Z', got {text!r}")
    local, fraction, sign, off_hour, off_minute = match.group(1, 2, 3, 4, 5)
    year, month, day = int(local[:4]), int(local[5:7]), int(local[8:10])
    hour, minute, second = int(local[11:13]), int(local[14:16]), int(local[17:19])
    if not 1 <= month <= 12:
        raise ValueError(f"month {month:02d} out of range in {text!r}")
    if not 1 <= day <= _days_in_month(year, month):
        raise ValueError(f"day {day:02d} out of range for {year:04d}-{month:02d} in {text!r}")
    if hour > 23 or minute > 59 or second > 59:
        raise ValueError(f"time of day {hour:02d}:{minute:02d}:{second:02d} out of range in {text!r}")
    offset = 0
    if sign is not None:
        if int(off_hour) > 23 or int(off_minute) > 59:
            raise ValueError(f"time zone offset {sign}{off_hour}:{off_minute} out of range in {text!r}")
        offset = (int(off_hour) * 3600 + int(off_minute) * 60) * (1 if sign == "+" else -1)
    formatted = local + ("Z" if offset == 0 else f"{sign}{off_hour}:{off_minute}")
    is_zero = False
    if year <= 1:  # only then can the instant be Go's zero, 0001-01-01T00:00:00Z
        seconds = _days_from_civil(year, month, day) * 86400 + hour * 3600 + minute * 60 + second - offset
        is_zero = seconds == _YEAR_ONE and not (fraction and fraction.strip("0"))
    return Instant(formatted, is_zero)


def utc_iso(instant: str) -> str:
    """An instant formatted by :func:`parse_instant`, in UTC: ``'2016-05-27T20:44:08Z'``.
    ValueError when it falls outside years 1 to 9999 once in UTC."""
    if instant.endswith("Z"):
        return instant
    try:
        moment = datetime.fromisoformat(instant).astimezone(UTC)
    except (ValueError, OverflowError) as exc:
        raise ValueError(f"{instant!r} is outside the years 1 to 9999 in UTC ({exc})") from None
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _days_in_month(year: int, month: int) -> int:
    if month == 2 and year % 4 == 0 and (year % 100 != 0 or year % 400 == 0):
        return 29
    return _DAYS_IN_MONTH[month - 1]


def _days_from_civil(year: int, month: int, day: int) -> int:
    """Days from 1970-01-01 to a proleptic Gregorian date (year 0 included, as in Go)."""
    year -= month <= 2
    era = year // 400
    year_of_era = year - era * 400
    day_of_year = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    day_of_era = year_of_era * 365 + year_of_era // 4 - year_of_era // 100 + day_of_year
    return era * 146097 + day_of_era - 719468


_YEAR_ONE = _days_from_civil(1, 1, 1) * 86400
