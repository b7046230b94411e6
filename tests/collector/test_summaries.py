"""Daily summaries computed in the store: the same sums from SQLite's GROUP BY and from a
composite aggregation in osmem-server, equal to pandas' sums of the raw records."""

from __future__ import annotations

from datetime import date
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from collector.exports.table import BY_CHOICES
from collector.records import SUMMARY_DIMENSIONS
from collector.sinks import Sink
from collector.sinks.base import Aggregation, Total
from collector.sinks.sqlite import EmbeddedStore
from collector.summaries import SOURCES, summarize
from collector.summaries.spec import COLUMNS, EXPORTED, GRATIA_DIMENSIONS

from .conftest import opened_at_once
from .generated import generated_docs, generated_frames

FIRST, LAST = date(2026, 1, 1), date(2026, 1, 10)


@pytest.fixture
def store(generated_store: Sink) -> Sink:
    return generated_store


@pytest.fixture
def fresh_store(empty_store: Sink) -> Sink:
    sink = empty_store
    for kind, docs in generated_docs().items():
        sink.send(kind, docs)
    return sink


def expected_daily(kind: str) -> pd.DataFrame:
    """The daily sums of one source kind, computed by pandas from the raw table."""
    frame = generated_frames()[kind]
    time = {"job": "end", "allocation": "observed_at", "slot": "observed_at"}[kind]
    frame = frame.assign(period=pd.to_datetime(frame[time], unit="s").dt.strftime("%Y-%m-%d"))
    out = {}
    for t in SOURCES[kind].totals:
        if not t.fields:
            values = pd.Series(1.0, index=frame.index)
        else:
            values = frame[t.fields[0]].fillna(0.0).astype(float)
            if len(t.fields) == 2:
                values = values * frame[t.fields[1]].astype(float)
        if t.where:
            values = values.where(frame[t.where], 0.0)
        out[t.name] = values * t.scale
    sums = pd.DataFrame(out).join(frame[["period", *SOURCES[kind].dimensions]])
    return sums.groupby(["period", *SOURCES[kind].dimensions]).sum().reset_index()


def stored_summaries(sink: Sink, kind: str) -> pd.DataFrame:
    docs = [d for d in sink.query("summary", limit=10_000) if d["record_kind"] == kind]
    frame = pd.DataFrame(docs)
    return frame.assign(period=frame["day_iso"].str[:10])


@pytest.mark.parametrize("kind", EXPORTED)  # gratia: tests/collector/gratia/test_summaries.py
def test_summaries_equal_the_sums_of_the_raw_records(store: Sink, kind: str) -> None:
    done = summarize(store, FIRST, LAST, probe="test", kinds=[kind])
    want = expected_daily(kind)
    got = stored_summaries(store, kind)
    assert done.records[kind] == len(want) == len(got)
    keys = ["period", *SOURCES[kind].dimensions]
    merged = want.merge(got, on=keys, suffixes=("", "_got"), validate="one_to_one")
    assert len(merged) == len(want)
    for t in SOURCES[kind].totals:
        assert merged[f"{t.name}_got"].to_numpy() == pytest.approx(merged[t.name].to_numpy(), rel=1e-9, abs=1e-9), (
            t.name
        )
    assert set(got.columns) >= {*SUMMARY_DIMENSIONS, "day", "record_kind", "id", "timestamp"}


def test_resummarizing_overwrites_and_counts_late_records(fresh_store: Sink) -> None:
    store = fresh_store
    summarize(store, FIRST, LAST, probe="test", kinds=["job"])
    before = store.count("summary")
    again = summarize(store, FIRST, LAST, probe="test", kinds=["job"])
    assert store.count("summary") == before == again.records["job"]  # ids from the dimensions
    late = dict(generated_docs()["job"][0])
    late.update(id="late", job_id="late", walltime_s=7200.0)
    store.send("job", [late])
    summarize(store, FIRST, LAST, probe="test", kinds=["job"])
    got = stored_summaries(store, "job")
    assert got["n_jobs"].sum() == len(generated_frames()["job"]) + 1
    assert store.count("summary") == before  # the late job joined an existing day and group


@pytest.fixture
def one_day_store(empty_store: Sink) -> Sink:
    """A store holding the job and slot records of the first generated job's day only."""
    sink = empty_store
    day = generated_docs()["job"][0]["timestamp"][:10]
    for kind in ("job", "slot"):
        sink.send(kind, [d for d in generated_docs()[kind] if d["timestamp"].startswith(day)])
    return sink


def test_resummarizing_deletes_the_groups_that_vanished(one_day_store: Sink) -> None:
    """A job corrected to another user after its day was summarized: the summary of the group
    it left (it was that group's only job) goes, in both stores; other kinds' stay."""
    store = one_day_store
    ghost = dict(generated_docs()["job"][0])
    ghost.update(id="ghost", job_id="ghost", user="ghost", walltime_s=3600.0)
    day = date.fromisoformat(ghost["timestamp"][:10])

    def summaries(kind: str = "job") -> dict[str, dict[str, Any]]:
        return {d["id"]: d for d in store.query("summary", limit=10_000) if d["record_kind"] == kind}

    summarize(store, day, day, probe="test", kinds=["job", "slot"])
    before, slots = summaries(), summaries("slot")
    store.send("job", [ghost])
    assert summarize(store, day, day, probe="test", kinds=["job"]).deleted == {"job": 0}
    [new] = [d for i, d in summaries().items() if i not in before]
    assert (new["user"], new["n_jobs"], new["walltime_hours"]) == ("ghost", 1, 1.0)
    store.send("job", [dict(ghost, user=generated_docs()["job"][0]["user"])])  # the same job (id), its real user's
    done = summarize(store, day, day, probe="test", kinds=["job"])
    after = summaries()
    assert done.deleted == {"job": 1} and set(after) == set(before)  # the ghost's group is gone
    assert sum(d["n_jobs"] for d in after.values()) == sum(d["n_jobs"] for d in before.values()) + 1
    assert summaries("slot").keys() == slots.keys() and slots  # the other kinds' summaries of the day stay


def test_aggregate_by_month_and_filtered_products(store: Sink) -> None:
    query = Aggregation(
        "slot", ("partition",),
        (Total("n"), Total("cu", ("overhead_cu_hours",), where="fits_idle"),
         Total("cap", ("total_cpus", "interval_s"), 1 / 3600)),
        period="month", since="2026-01-01T00:00:00Z", until="2026-02-01T00:00:00Z",
    )  # fmt: skip
    rows = sorted(store.aggregate(query), key=lambda r: r["partition"])
    slots = generated_frames()["slot"]
    want = slots.groupby("partition").agg(n=("name", "size"), cap=("interval_s", "sum"))
    fitting = slots[slots["fits_idle"]].groupby("partition")["overhead_cu_hours"].sum()
    assert [r["period"] for r in rows] == ["2026-01", "2026-01"]
    assert [r["n"] for r in rows] == list(want["n"])
    assert [r["cu"] for r in rows] == pytest.approx(list(fitting))
    assert [r["cap"] for r in rows] == pytest.approx(list(want["cap"] * 16 / 3600))


def test_aggregate_of_an_empty_range_is_empty(store: Sink) -> None:
    query = Aggregation("job", (), (Total("n"),), period=None, since="2030-01-01T00:00:00Z")
    assert store.aggregate(query) == []


def test_every_summed_column_is_explained() -> None:
    names = {t.name for s in SOURCES.values() for t in s.totals} | set(BY_CHOICES) - {"month", "day"}
    assert names <= set(COLUMNS)
    # every dimension of fairacct's own kinds can be exported by; the submitter is theirs alone
    assert all(set(SOURCES[k].dimensions) <= set(BY_CHOICES) for k in EXPORTED)
    assert set(BY_CHOICES) - set(SUMMARY_DIMENSIONS) == {"submitter", "month", "day"}
    assert SOURCES["gratia"].dimensions == GRATIA_DIMENSIONS and set(GRATIA_DIMENSIONS) <= set(COLUMNS)


def test_last_days_include_today() -> None:
    from collector.summaries.run import last_days

    assert last_days(1_767_268_800.0, 7) == (date(2025, 12, 26), date(2026, 1, 1))  # 2026-01-01T12:00Z


def test_a_store_made_before_the_measured_columns_gets_them(tmp_path: Path) -> None:
    """A table of an earlier version (no measured columns) is completed from its documents."""
    import sqlite3

    import orjson

    path = tmp_path / "old.sqlite"
    doc = generated_docs()["job"][0]
    with sqlite3.connect(path) as db:
        db.execute(
            'CREATE TABLE "job" (id TEXT PRIMARY KEY, timestamp TEXT, "user" TEXT, "group" TEXT, "project" TEXT, '
            '"site" TEXT, doc TEXT NOT NULL)'
        )
        db.execute(
            'INSERT INTO "job" VALUES (?, ?, ?, ?, ?, ?, ?)',
            (
                doc["id"],
                doc["timestamp"],
                doc["user"],
                doc["group"],
                doc["project"],
                doc["site"],
                orjson.dumps(doc).decode(),
            ),
        )
    with EmbeddedStore(path) as store:
        [row] = store.aggregate(
            Aggregation("job", ("pool",), (Total("n"), Total("wall", ("walltime_s",))), period=None)
        )
        assert row == {"pool": doc["pool"], "n": 1, "wall": pytest.approx(doc["walltime_s"])}
        cols = [r[1] for r in store._db.execute('PRAGMA table_info("job")')]
        assert {"pool", "walltime_s", "penalty_usage"} <= set(cols)


def test_stores_opened_at_once_make_the_tables_once(tmp_path: Path) -> None:
    """The service's flush and summaries open the store at the same time: one makes each table.
    Opening a new file in WAL mode from four connections at once failed ~7 % of the time
    ("database is locked", which SQLite gives at once there instead of waiting): 50 tries."""

    def use(path: Path) -> None:
        with EmbeddedStore(path) as store:
            for kind in ("job", "allocation", "slot"):
                assert store.count(kind) == 0

    assert opened_at_once(use, tmp_path) == []
