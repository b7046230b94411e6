"""Durations and instants read exactly as GRACC's Go code reads them."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from collector.gratia import isotime
from collector.gratia.isotime import Instant, duration_seconds, parse_instant, utc_iso


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("PT1H", 3600.0),
        ("PT1M5.32S", 65.32),
        ("PT0.55S", 0.55),  # not 0.5500000000000001: Go cuts the fraction to ms, us, ns
        ("PT0.26S", 0.26),
        ("PT21.0S", 21.0),
        ("PT10M17.0S", 617.0),
        ("PT45M48S", 2748.0),
        ("PT0S", 0.0),
        ("P1DT2H", 93600.0),
        ("P2W", 1_209_600.0),
        ("P1Y", 31_536_000.0),  # a year is 365 days
        ("P1M", 2_592_000.0),  # a month is 30 days (M before T is months)
        ("PT1.5H", 0.0),  # only seconds take a fraction: the pattern then matches a bare 'P'
        ("PT1.2.3S", 0.0),  # Go's ParseFloat refuses it, and the whole duration is 0
        ("PT0.0000000004S", 0.0),  # under a nanosecond
        ("-PT5S", 5.0),  # the pattern is searched for, not anchored
        (" PT5S\n", 5.0),
        # Over int64 nanoseconds Go's arithmetic wraps, and GRACC stores what it gives:
        # 999,999,999,999 x 10**9 - 54 x 2**64 = 3,875,820,018,684,212,736 ns.
        ("PT999999999999S", 3_875_820_018 + 0.684212736),
        ("P300Y", -(8_985_944_073 + 0.709551616)),  # 300 x 365 x 86,400 x 10**9 - 2**64 ns
        ("PT99999999999999999999S", 0.0),  # a part over int64: Go on amd64 makes it -2**63, x 10**9 is 0
        ("garbage", 0.0),
        ("", 0.0),
    ],
)
def test_durations_in_seconds(text: str, seconds: float) -> None:
    assert duration_seconds(text) == seconds


@pytest.mark.parametrize(
    ("text", "instant"),
    [
        ("2016-05-27T22:44:08Z", Instant("2016-05-27T22:44:08Z", False)),
        ("2016-05-27T22:44:08.999Z", Instant("2016-05-27T22:44:08Z", False)),  # cut, not rounded
        ("2016-05-27T22:44:08+00:00", Instant("2016-05-27T22:44:08Z", False)),
        ("2016-05-27T22:44:08-00:00", Instant("2016-05-27T22:44:08Z", False)),
        ("2016-05-27T22:44:08-05:30", Instant("2016-05-27T22:44:08-05:30", False)),  # the sender's offset stays
        (" 2016-05-27T22:44:08Z\n", Instant("2016-05-27T22:44:08Z", False)),
        ("2016-02-29T00:00:00Z", Instant("2016-02-29T00:00:00Z", False)),
        ("2000-02-29T00:00:00Z", Instant("2000-02-29T00:00:00Z", False)),
        ("0001-01-01T00:00:00Z", Instant("0001-01-01T00:00:00Z", True)),  # Go's zero time
        ("0001-01-01T01:00:00+01:00", Instant("0001-01-01T01:00:00+01:00", True)),
        ("0000-12-31T23:00:00-01:00", Instant("0000-12-31T23:00:00-01:00", True)),
        ("0001-01-01T00:00:00.000Z", Instant("0001-01-01T00:00:00Z", True)),
        ("0001-01-01T00:00:00.5Z", Instant("0001-01-01T00:00:00Z", False)),
        ("0001-01-01T00:00:01Z", Instant("0001-01-01T00:00:01Z", False)),
    ],
)
def test_instants_as_go_formats_them(text: str, instant: Instant) -> None:
    assert parse_instant(text) == instant


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("", r"expected an RFC 3339 time like '2016-05-27T22:44:08Z', got ''"),
        ("2016-05-27 22:44:08Z", r"expected an RFC 3339 time .* got '2016-05-27 22:44:08Z'"),
        ("2016-05-27t22:44:08z", r"expected an RFC 3339 time"),
        ("2016-05-27T22:44:08", r"expected an RFC 3339 time"),  # no zone
        ("2016-05-27T22:44Z", r"expected an RFC 3339 time"),
        ("1464388571", r"expected an RFC 3339 time"),
        ("2016-13-01T00:00:00Z", r"month 13 out of range in '2016-13-01T00:00:00Z'"),
        ("2016-00-01T00:00:00Z", r"month 00 out of range"),
        ("2016-02-30T00:00:00Z", r"day 30 out of range for 2016-02"),
        ("2015-02-29T00:00:00Z", r"day 29 out of range for 2015-02"),
        ("1900-02-29T00:00:00Z", r"day 29 out of range for 1900-02"),
        ("2016-04-31T00:00:00Z", r"day 31 out of range for 2016-04"),
        ("2016-05-27T24:00:00Z", r"time of day 24:00:00 out of range"),
        ("2016-05-27T22:60:00Z", r"time of day 22:60:00 out of range"),
        ("2016-12-31T23:59:60Z", r"time of day 23:59:60 out of range"),  # no leap second, as Go
        ("2016-05-27T22:44:08+24:00", r"time zone offset \+24:00 out of range"),
        ("2016-05-27T22:44:08-01:60", r"time zone offset -01:60 out of range"),
    ],
)
def test_what_go_refuses_is_refused(text: str, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        parse_instant(text)


@pytest.mark.parametrize(
    ("instant", "utc"),
    [
        ("2016-05-27T22:44:08Z", "2016-05-27T22:44:08Z"),
        ("2016-05-27T22:44:08-05:30", "2016-05-28T04:14:08Z"),
        ("2016-01-01T00:30:00+01:00", "2015-12-31T23:30:00Z"),
    ],
)
def test_utc(instant: str, utc: str) -> None:
    assert utc_iso(instant) == utc


def test_utc_outside_the_years_python_holds() -> None:
    with pytest.raises(ValueError, match=r"'0001-01-01T00:30:00\+01:00' is outside the years 1 to 9999 in UTC"):
        utc_iso("0001-01-01T00:30:00+01:00")


def _outcome(read: Callable[[str], object], text: str) -> object:
    try:
        return read(text)
    except ValueError as exc:
        return ("ValueError", str(exc))


_PARTS = {
    "H": ["", "0H", "1H", "007H", "25H", "2562047H", "2562048H", "999999999999999999H"],
    "M": ["", "0M", "59M", "61M"],
    "S": ["", "0S", "5S", "0.55S", "1.S", "21.0S", "65.32S", "0.0000000004S", "60.3S", "9223372036.854775807S",
          "9223372037S"],
}  # fmt: skip


@pytest.mark.parametrize("hours", _PARTS["H"])
def test_the_shortcut_for_plain_durations_agrees_with_the_general_reader(hours: str) -> None:
    # What Gratia probes write goes a shorter way (isotime._PLAIN_DURATION); it must give the
    # very same float as the general reader, within Go's range and past it (wrapped).
    texts = [f"PT{hours}{minutes}{seconds}" for minutes in _PARTS["M"] for seconds in _PARTS["S"]]
    assert all(isotime._PLAIN_DURATION.fullmatch(t) for t in texts)
    assert [duration_seconds.__wrapped__(t) for t in texts] == [isotime._duration_seconds(t) for t in texts]


@pytest.mark.parametrize("year", ["0000", "0001", "0002", "1900", "2000", "2015", "2016", "9999"])
def test_the_shortcut_for_utc_instants_agrees_with_the_general_reader(year: str) -> None:
    # Every day of the year (and days that do not exist), at the edges of the day and past them.
    texts = [
        f"{year}-{month:02d}-{day:02d}T{time}Z"
        for month in range(14)
        for day in range(33)
        for time in ("00:00:00", "23:59:59", "24:00:00", "12:60:00", "12:00:60")
    ]
    assert [_outcome(parse_instant.__wrapped__, t) for t in texts] == [
        _outcome(isotime._parse_instant, t) for t in texts
    ]
