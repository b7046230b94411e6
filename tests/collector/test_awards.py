"""The committee's awards file: CSV or TOML, its periods, and each wrong line named."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest

from collector.awards import Award, parse_period, read_awards
from collector.errors import ConfigError


@pytest.mark.parametrize(
    ("text", "first", "last"),
    [
        ("2026-11", date(2026, 11, 1), date(2026, 11, 30)),
        ("2024-02", date(2024, 2, 1), date(2024, 2, 29)),
        ("2026", date(2026, 1, 1), date(2026, 12, 31)),
        ("2026-Q4", date(2026, 10, 1), date(2026, 12, 31)),
        ("2026-11-15/2027-01-14", date(2026, 11, 15), date(2027, 1, 14)),
    ],
)
def test_periods(text: str, first: date, last: date) -> None:
    assert parse_period(text) == (first, last)


def test_a_csv_as_a_committee_keeps_it(tmp_path: Path) -> None:
    path = tmp_path / "awards.csv"
    # saved by Excel: a byte-order mark, thousands separators, a blank line at the end
    path.write_text(
        '\ufeffproject,resource,amount,period\nCMS_Production,core-hours,"1,500",2026-11\n'
        "CMS_ML_Training,GPU-hours,100,2026-Q4\n,,,\n",
        encoding="utf-8",
    )
    assert read_awards(path) == [
        Award("CMS_Production", "core_hours", 1500.0, date(2026, 11, 1), date(2026, 11, 30)),
        Award("CMS_ML_Training", "gpu_hours", 100.0, date(2026, 10, 1), date(2026, 12, 31)),
    ]
    assert read_awards(path)[1].days == 92


def test_a_toml_file_of_award_tables(tmp_path: Path) -> None:
    path = tmp_path / "awards.toml"
    path.write_text('[[award]]\nproject = "OSG_Chemistry"\nresource = "core_hours"\namount = 2e3\nperiod = "2026"\n')
    assert read_awards(path) == [Award("OSG_Chemistry", "core_hours", 2000.0, date(2026, 1, 1), date(2026, 12, 31))]


@pytest.mark.parametrize(
    ("line", "said"),
    [
        ("A,core_hours,-5,2026-11", "line 2: amount '-5': an award is a number of hours above 0"),
        ("A,disk_hours,5,2026-11", "line 2: resource 'disk_hours': expected core_hours or gpu_hours"),
        ("A,core_hours,lots,2026-11", "line 2: amount 'lots' is not a number of hours"),
        ("A,core_hours,5,November", "line 2: period 'November': expected YYYY, YYYY-MM, YYYY-Qn or"),
        ("A,core_hours,5,2026-12-01/2026-11-01", "line 2: period '2026-12-01/2026-11-01': 2026-11-01 is before"),
        ("A,core_hours,5,", "line 2: period missing"),
        ("A,core_hours,5,2026-11\nA,core_hours,6,2026-11", "A has two core_hours awards for 2026-11-01 to 2026-11-30"),
    ],
)
def test_a_wrong_award_is_named(tmp_path: Path, line: str, said: str) -> None:
    path = tmp_path / "awards.csv"
    path.write_text(f"project,resource,amount,period\n{line}\n")
    with pytest.raises(ConfigError, match="awards file") as info:
        read_awards(path)
    assert said in str(info.value)


def test_a_header_without_the_columns_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "awards.csv"
    path.write_text("name,hours\nA,5\n")
    with pytest.raises(ConfigError, match=r"the header lacks project, resource, amount, period"):
        read_awards(path)
