"""Exports for allocation committees, read back with pandas and compared with sums of the raw
records of the same period, from both stores and both roads (summaries, raw records)."""

from __future__ import annotations

import os
from datetime import date
from pathlib import Path

import pandas as pd
import pytest

from collector.errors import ConfigError
from collector.exports import FORMATS, Period, usage_table, write_export
from collector.sinks import Sink
from collector.sinks.sqlite import EmbeddedStore

from .generated import generated_frames

PERIOD = Period(date(2026, 1, 3), date(2026, 1, 7))  # a part of the generated ten days


@pytest.fixture
def store(generated_store: Sink) -> Sink:
    return generated_store


def _in_period(frame: pd.DataFrame, time: str) -> pd.DataFrame:
    day = pd.to_datetime(frame[time], unit="s").dt.date
    return frame[(day >= PERIOD.first) & (day <= PERIOD.last)]


def expected_by_project() -> pd.DataFrame:
    frames = generated_frames()
    jobs = _in_period(frames["job"], "end")
    bills = _in_period(frames["allocation"], "observed_at")
    out = pd.DataFrame(
        {
            "n_jobs": jobs.groupby("project").size(),
            "core_hours": (jobs["cpus"] * jobs["walltime_s"] / 3600).groupby(jobs["project"]).sum(),
            "memory_gib_hours": (jobs["memory"] / 1024 * jobs["walltime_s"] / 3600).groupby(jobs["project"]).sum(),
            "penalty_hours": (jobs["penalty_usage"].fillna(0) / 3600).groupby(jobs["project"]).sum(),
            "held_core_hours": (bills["cpus"] * bills["interval_s"] / 3600).groupby(bills["project"]).sum(),
            "billed_core_hours": bills.groupby("project")["billed_cpus_hours"].sum(),
        }
    )
    out["billed_over_held"] = out["billed_core_hours"] / out["held_core_hours"]
    out["penalty_share"] = 100 * out["penalty_hours"] / out["penalty_hours"].sum()
    return out


def _read(path: Path, fmt: str) -> pd.DataFrame:
    if fmt == "csv":
        return pd.read_csv(path, encoding="utf-8")
    if fmt == "csv-excel":
        return pd.read_csv(path, encoding="utf-8-sig")
    if fmt == "xlsx":
        return pd.read_excel(path, sheet_name="usage")
    if fmt == "parquet":
        return pd.read_parquet(path)
    return pd.DataFrame(pd.read_json(path, typ="series")["rows"])


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_an_export_by_project_equals_the_raw_sums(store: Sink, tmp_path: Path, fmt: str) -> None:
    path = write_export(usage_table(store, PERIOD, ["project"]), tmp_path / f"usage.{fmt}", fmt, PERIOD)
    got = _read(path, fmt)
    want = expected_by_project()
    got = got[got["project"].notna()].set_index("project").loc[want.index]
    for column in want.columns:
        assert got[column].to_numpy(dtype=float) == pytest.approx(want[column].to_numpy(dtype=float), rel=1e-5), column
    # the slots have no project: their overhead is one row of its own, the whole pool's (in the XLSX, the
    # capacity sheet's, beside the usage: a committee reads projects on one sheet, the pool on the other)
    slots = _in_period(generated_frames()["slot"], "observed_at")
    rest = _read(path, fmt)
    if fmt == "xlsx":
        assert "overhead_cu_hours" not in rest and rest["project"].tolist()[-1] == "TOTAL"
        assert rest["n_jobs"].tolist()[-1] == rest["n_jobs"].iloc[:-1].sum() > 0
        rest = pd.read_excel(path, sheet_name="capacity").assign(project=None)
    assert rest.loc[rest["project"].isna(), "overhead_cu_hours"].sum() == pytest.approx(
        slots["overhead_cu_hours"].sum(), rel=1e-5
    )


def test_summaries_and_raw_records_give_the_same_export(store: Sink) -> None:
    by = ["project", "user", "site", "month"]
    from_summaries = usage_table(store, PERIOD, by)
    from_raw = usage_table(store, PERIOD, by, raw=True)
    assert list(from_summaries.columns) == list(from_raw.columns)
    assert from_summaries["month"].unique().tolist() == ["2026-01"]
    pd.testing.assert_frame_equal(from_summaries, from_raw, check_exact=False, rtol=1e-9)


def test_the_xlsx_explains_every_column_and_its_unit(store: Sink, tmp_path: Path) -> None:
    table = usage_table(store, PERIOD, ["site", "month"])
    path = write_export(table, tmp_path / "usage.xlsx", "xlsx", PERIOD)
    notes = pd.read_excel(path, sheet_name="columns")
    explained = notes.dropna(subset=["meaning"]).set_index("column")
    assert set(table.columns) <= set(explained.index)
    assert explained.loc["core_hours", "unit"] == "core-hours"
    assert explained.loc["overhead_cu_hours", "unit"] == "CU-hours"


def test_the_excel_csv_opens_without_a_wizard(store: Sink, tmp_path: Path) -> None:
    path = write_export(usage_table(store, PERIOD, ["user"]), tmp_path / "usage.csv", "csv-excel", PERIOD)
    raw = path.read_bytes()
    assert raw.startswith(b"\xef\xbb\xbf") and b"\r\n" in raw  # UTF-8 marked, as Excel expects
    assert raw.split(b"\r\n")[0].decode("utf-8-sig").startswith("user,n_jobs,")


def test_the_csv_has_no_byte_order_mark(store: Sink, tmp_path: Path) -> None:
    """Python's csv reads a marked file's first column as '\\ufeffuser' (issue 25 item 9)."""
    import csv

    path = write_export(usage_table(store, PERIOD, ["user"]), tmp_path / "usage.csv", "csv", PERIOD)
    assert not path.read_bytes().startswith(b"\xef\xbb\xbf")
    with path.open(newline="", encoding="utf-8") as f:
        header = next(csv.reader(f))
    assert header[:2] == ["user", "n_jobs"]


@pytest.mark.parametrize("umask", [0o022, 0o027])
@pytest.mark.parametrize("fmt", list(FORMATS))
def test_exports_get_the_mode_the_umask_gives(store: Sink, tmp_path: Path, fmt: str, umask: int) -> None:
    """Not 0600 from mkstemp: a committee's group or a web server reads them (issue 25 item 4)."""
    old = os.umask(umask)
    try:
        path = write_export(usage_table(store, PERIOD, ["user"]), tmp_path / f"usage.{fmt}", fmt, PERIOD)
    finally:
        os.umask(old)
    assert path.stat().st_mode & 0o777 == 0o666 & ~umask


@pytest.mark.parametrize(
    ("by", "match"), [(["project", "colour"], "--by: expected some of"), (["month", "day"], "month or day, not both")]
)
def test_bad_groupings_are_named(by: list[str], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        usage_table(EmbeddedStore(":memory:"), PERIOD, by)
