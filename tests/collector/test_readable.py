"""Numbers as a reader takes them in (collector.readable), and the books with the jobs still
running set apart (collector.books.set_open_apart): hand-computed values."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from collector.books import set_open_apart
from collector.readable import counted, duration, round_significant, shorten, utc_time


@pytest.mark.parametrize(
    ("seconds", "said"),
    [(2, "2 s"), (119, "119 s"), (300, "5 min"), (5400, "90 min"), (7200, "2 h"), (27000, "7.5 h"),
     (1_808_500, "20.9 days"), (783_200, "9.06 days")],
)  # fmt: skip
def test_durations_read_in_seconds_minutes_hours_or_days(seconds: float, said: str) -> None:
    assert duration(seconds) == said


def test_times_read_as_utc() -> None:
    assert utc_time(1_793_491_200) == "2026-11-01 00:00 UTC"
    assert utc_time(1_795_299_700) == "2026-11-21 22:21:40 UTC"


def test_a_long_label_keeps_its_head_and_tail() -> None:
    assert shorten("group_atlas.bob @ CIT_CMS_T2", 30) == "group_atlas.bob @ CIT_CMS_T2"
    assert (
        shorten("group_atlas.bob@demo.fairacct @ CIT_CMS_T2", 26) == "group_atlas.b\N{HORIZONTAL ELLIPSIS}@ CIT_CMS_T2"
    )
    assert len(shorten("x" * 100, 26)) == 26


def test_values_round_to_six_significant_digits() -> None:
    assert round_significant(0.9999999999999989) == 1.0
    assert round_significant(61.73777777777778) == 61.7378
    assert round_significant(1_795_300_123.0) == 1_795_300_000.0
    assert round_significant(-0.000123456789) == -0.000123457
    assert round_significant(0.0) == 0.0 and math.isnan(round_significant(math.nan))


def test_the_core_hours_of_jobs_still_running_are_set_apart_not_compared() -> None:
    # alice: 3 core-hours held, 1 used, bound 0.5: beyond; 2 of the held are of a job still running
    books = pd.DataFrame(
        {"submitter": ["alice@p", "bob@p"], "site": ["A", None], "held_core_hours": [3.0, 1.0],
         "claimed_core_hours": [0.0, 0.0], "used_core_hours": [1.0, 0.0], "difference_core_hours": [2.0, 1.0],
         "jobs": [1, 0], "runs": [1, 0], "bound_core_hours": [0.5, 0.0], "beyond": [True, True]}
    )  # fmt: skip
    running = pd.DataFrame({"submitter": ["alice@p", "alice@p"], "site": ["A", "A"], "core_s": [3600.0, 3600.0]})
    got = set_open_apart(books, running)
    assert got["open_core_hours"].tolist() == [2.0, 0.0]
    assert got["held_core_hours"].tolist() == [1.0, 1.0]
    assert got["difference_core_hours"].tolist() == [0.0, 1.0]
    assert got["beyond"].tolist() == [False, True]  # bob's core-hour of no job record and not running stays a fault


def test_a_count_says_its_noun_in_the_number_it_has() -> None:
    assert [counted(n, "row") for n in (0, 1, 2, 1234)] == ["0 rows", "1 row", "2 rows", "1,234 rows"]
    assert counted(1, "query", "queries") == "1 query"
    assert counted(3, "query", "queries") == "3 queries"
