"""The daily books balance as summaries (``audit`` per submitter and site, ``gap`` per pool), in
both stores, on the synthetic timeline of tests/pipeline/test_audit.py moved to straddle a
midnight: each day's summaries are ``fairacct audit`` of that day, the days add up to the
books of the whole timeline (worked out by hand below), re-summarizing replaces them, and a
late record re-makes its day."""

from __future__ import annotations

from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from collector.exports.table import Period, audit_table, usage_table
from collector.records import table_docs
from collector.schema import records_faults
from collector.server.summarizer import Schedule, Summarizer
from collector.sinks.sqlite import EmbeddedStore
from collector.summaries import summarize
from collector.summaries.audit import AUDIT_COLUMNS
from probes.pipeline.audit import audit
from tests.collector.conftest import osmem_server  # noqa: F401 - the session's server, its pipe closed at the end
from tests.pipeline import test_audit as timeline
from tests.pipeline.test_audit import INTERVAL_S, config, fill, records

store = timeline.store  # the timeline's stores: the embedded one and osmem-server

MIDNIGHT = 1_800_057_600.0  # 2027-01-16T00:00:00Z
T1 = MIDNIGHT - 1800.0  # the timeline's hour runs 23:30 .. 00:30
DAYS = (date(2027, 1, 15), date(2027, 1, 16))
DROPPED = frozenset({20})  # the sample at T1 + 1200 (23:50): a gap (23:49, 23:50]


def day_start(day: date) -> float:
    return datetime(day.year, day.month, day.day, tzinfo=UTC).timestamp()


def summaries(sink: Any, kind: str) -> pd.DataFrame:
    docs = [d for d in sink.query("summary", limit=10_000) if d["record_kind"] == kind]
    return pd.DataFrame(docs).assign(period=lambda f: f["day_iso"].str[:10]) if docs else pd.DataFrame()


def summarize_days(sink: Any) -> Any:
    return summarize(sink, *DAYS, probe="test", kinds=["audit"], reach_s=2 * INTERVAL_S, lag_s=0.0)


def test_each_days_audit_summaries_are_the_audit_of_that_day(store: Any) -> None:
    fill(store, DROPPED, T1)
    done = summarize_days(store)
    got = summaries(store, "audit")
    assert done.records == {"audit": len(got), "gap": 2}
    for day in DAYS:
        report = audit(store, config(), day_start(day), day_start(day) + 86400, lag_s=0.0)
        mine = got[got["period"] == str(day)].set_index("submitter").sort_index()
        want = report.submitters.set_index("submitter").sort_index()
        assert list(mine.index) == list(want.index) and len(want) >= 3, day
        assert list(mine["site"]) == list(want["site"])
        for column in AUDIT_COLUMNS:
            if want[column].dtype == bool:
                assert list(mine[f"audit_{column}"].astype(bool)) == list(want[column]), (day, column)
            else:
                assert list(mine[f"audit_{column}"]) == pytest.approx(list(want[column]), abs=1e-9), (day, column)
        assert (mine["audit_interval_s"] == report.interval_s).all() and (mine["audit_lag_s"] == 0.0).all()
        gap = summaries(store, "gap").query("period == @day.isoformat()")
        assert gap["pool"].tolist() == ["synthetic"]
        assert gap["n_gaps"].tolist() == [len(report.gaps)]
        assert gap["gap_seconds"].tolist() == pytest.approx([report.gaps["seconds"].sum()])
    # day 1: before the first sample (it stands for (23:29, 23:30]) and the dropped one; day 2: after 00:30
    gap = summaries(store, "gap").set_index("period")
    assert gap.loc["2027-01-15", "n_gaps"] == 2 and gap.loc["2027-01-16", "n_gaps"] == 1
    assert gap.loc["2027-01-15", "gap_seconds"] == pytest.approx(86400 - 1860 + 60)
    assert gap.loc["2027-01-16", "gap_seconds"] == pytest.approx(86400 - 1800)
    # the days add up to the whole timeline's books: bob, 4 cores over [250, 3300] s, seen by the
    # samples 300 .. 3300 but the dropped one: held 50 x 60 s x 4 cores; used 3050 s less the 60 s unobserved
    bob = got[got["submitter"] == "bob@pool"]
    assert len(bob) == 2 and bob["audit_held_core_hours"].sum() == pytest.approx(4 * 50 * 60 / 3600, abs=1e-9)
    assert bob["audit_used_core_hours"].sum() == pytest.approx(4 * (3050 - 60) / 3600, abs=1e-9)
    assert not got["audit_beyond"].astype(bool).any()
    # each summary is a record the collector's own check takes
    assert not records_faults("summary", store.query("summary", limit=10_000))


def test_resummarizing_replaces_the_days_books_and_a_late_record_remakes_them(store: Any) -> None:
    fill(store, DROPPED, T1)
    summarize_days(store)
    before = {d["id"]: d for d in store.query("summary", limit=10_000)}
    again = summarize_days(store)
    after = {d["id"]: d for d in store.query("summary", limit=10_000)}
    assert set(after) == set(before) and again.records["audit"] + again.records["gap"] == len(before)
    assert again.deleted == {"audit": 0, "gap": 0}
    # a late job record: 2 cores over 00:05 .. 00:15 that no allocation record holds
    late = {"job_id": "s#9.0#1", "submitter": "erin@pool", "user": "erin", "site": "SiteA", "cpus": 2.0,
            "start": MIDNIGHT + 300, "end": MIDNIGHT + 900, "walltime_s": 600.0}  # fmt: skip
    assert not store.send("job", table_docs("job", pd.DataFrame([late]), probe="p")).rejected
    summarize_days(store)
    got = summaries(store, "audit").set_index(["period", "submitter"])
    erin = got.loc[("2027-01-16", "erin@pool")]
    assert erin["audit_used_core_hours"] == pytest.approx(2 * 600 / 3600) and erin["audit_held_core_hours"] == 0.0
    assert erin["audit_bound_core_hours"] == pytest.approx(2 * INTERVAL_S / 3600)  # 2 cores x the longest interval
    assert bool(erin["audit_beyond"]) and ("2027-01-15", "erin@pool") not in got.index
    assert (
        len(got) == len(summaries(store, "audit")) == sum(1 for d in before.values() if d["record_kind"] == "audit") + 1
    )


def test_the_collectors_summarizer_writes_the_days_books(tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite"
    with EmbeddedStore(path) as sink:
        for kind, docs in records(DROPPED, T1).items():
            assert not sink.send(kind, docs).rejected
    summarizer = Summarizer(
        lambda: EmbeddedStore(path), (Schedule("recent", 2, 900.0),), probe="test", clock=lambda: MIDNIGHT + 3600
    )
    assert summarizer.run_due() == ["recent"]
    with EmbeddedStore(path) as sink:
        got = summaries(sink, "audit")
        report = audit(sink, config(), MIDNIGHT, MIDNIGHT + 86400)  # the collector's default lag: 2 s
    mine = got[got["period"] == "2027-01-16"].set_index("submitter").sort_index()
    want = report.submitters.set_index("submitter").sort_index()
    assert list(mine["audit_held_core_hours"]) == pytest.approx(list(want["held_core_hours"]), abs=1e-9)
    assert list(mine["audit_bound_core_hours"]) == pytest.approx(list(want["bound_core_hours"]), abs=1e-9)
    assert (mine["audit_lag_s"] == 2.0).all() and set(got["period"]) == {"2027-01-15", "2027-01-16"}


def test_the_books_never_add_into_the_usage_an_export_sums(store: Any) -> None:
    fill(store, DROPPED, T1)
    summarize(store, *DAYS, probe="test", kinds=["job", "allocation", "slot"])
    by = ["submitter", "site", "day"]
    before = usage_table(store, Period(*DAYS), by)
    summarize_days(store)
    after = usage_table(store, Period(*DAYS), by)
    pd.testing.assert_frame_equal(after, before)
    # and the allocation summaries' held core-hours are every record's (claims too): bob's 50 samples
    bob = after[after["submitter"] == "bob@pool"]
    assert bob["held_core_hours"].sum() == pytest.approx(4 * 50 * 60 / 3600)


def test_the_exports_audit_sheet_is_the_days_books(store: Any) -> None:
    fill(store, DROPPED, T1)
    summarize_days(store)
    table, meanings = audit_table(store, Period(*DAYS))
    got = summaries(store, "audit").sort_values(["period", "submitter"]).reset_index(drop=True)
    assert list(table["day"]) == list(got["period"]) and list(table["submitter"]) == list(got["submitter"])
    for column in ("audit_held_core_hours", "audit_used_core_hours", "audit_bound_core_hours"):
        assert list(table[column]) == pytest.approx(list(got[column]), abs=1e-12), column
    assert list(table["audit_beyond"]) == [0] * len(got) and set(meanings) == set(table.columns)
    bob = table[table["submitter"] == "bob@pool"]
    assert bob["audit_held_core_hours"].sum() == pytest.approx(4 * 50 * 60 / 3600)
