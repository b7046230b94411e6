"""Gratia records summarized with GRACC's dimensions: GRACC's conformance records
(../shared/fixtures/gracc) converted as the collector converts them, stored in the embedded
store and in osmem-server, summarized by day; the sums checked against the records' own
numbers, added up by hand below."""

from __future__ import annotations

import re
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pytest

from collector.gratia import envelope_docs
from collector.sinks import Sink
from collector.sinks.base import Aggregation
from collector.sinks.elasticsearch.composite import composite_body
from collector.summaries import SOURCES, summarize
from collector.summaries.run import last_days, source_rows
from collector.summaries.spec import GRATIA_DIMENSIONS

from .conftest import PAIRS, copies, envelope, pair

# WallDuration, Processors, CpuDuration (user, system) in seconds, of JobUsageRecord01..06:
#   01  3600 x 1   65.32 (65.32, 0)      02     1 x 4   0    (-, -)
#   03  2748 x 32  15    (-, -)          04    21 x 1   0.81 (0.55, 0.26)
#   05     5 x 1   0     (0, 0)          06   617 x 1   18   (0, 18)
# and three copies of 05 with WallDuration 60, 61 and 62 (one group with 05: same dimensions)
WALL_S = 3600 + 1 + 2748 + 21 + 5 + 617 + 60 + 61 + 62
CORE_S = 3600 + 1 * 4 + 2748 * 32 + 21 + 5 + 617 + 60 + 61 + 62
CPU_S, USER_S, SYSTEM_S = 65.32 + 15 + 0.81 + 18, 65.32 + 0.55, 0.26 + 18


@pytest.fixture
def store(empty_store: Sink, gracc: Path) -> Sink:
    records = [pair(gracc, name)[0] for name in PAIRS]
    docs = envelope_docs(envelope([*records, *copies(records[4], 3)]), probe="gratia-test").docs
    sink = empty_store
    assert sink.send("gratia", docs).acked and len(docs) == 9
    return sink


def summaries(sink: Sink) -> list[dict[str, Any]]:
    return [d for d in sink.query("summary", limit=1000) if d["record_kind"] == "gratia"]


def test_gratia_records_are_summarized_by_day_and_gracc_dimensions(store: Sink) -> None:
    done = summarize(store, date(2003, 6, 16), date(2016, 5, 27), probe="test", kinds=["gratia"], chunk_days=5000)
    got = summaries(store)
    assert done.records == {"gratia": 6} and len(got) == 6  # 05 and its copies are one group
    assert sum(d["Count"] for d in got) == sum(d["Njobs"] for d in got) == 9
    assert sum(d["WallHours"] for d in got) == pytest.approx(WALL_S / 3600)
    assert sum(d["CoreHours"] for d in got) == pytest.approx(CORE_S / 3600)
    assert sum(d["CpuHours"] for d in got) == pytest.approx(CPU_S / 3600)
    assert sum(d["CpuUserHours"] for d in got) == pytest.approx(USER_S / 3600)
    assert sum(d["CpuSystemHours"] for d in got) == pytest.approx(SYSTEM_S / 3600)
    day = sorted((d for d in got if d["day_iso"].startswith("2016-05-27")), key=lambda d: d["Count"])
    assert [d["Count"] for d in day] == [1, 4]
    ucsd, chtc = day
    # GRACC's summary terms: "N/A", 0 GPUs for what the record lacks, the VOName for a missing
    # ProjectName, Processors and Resource_ExitCode as numbers.
    assert {k: chtc[k] for k in GRATIA_DIMENSIONS} == {
        "VOName": "GLOW", "ReportableVOName": "GLOW", "ProjectName": "GLOW", "SiteName": "CHTC",
        "ProbeName": "condor:submit-3.chtc.wisc.edu", "ResourceType": "Payload", "Processors": 1, "GPUs": 0,
        "Grid": "OSG", "DN": "N/A", "CommonName": "N/A", "Host_description": "wisc.edu", "Resource_ExitCode": 1,
    }  # fmt: skip
    assert (chtc["Count"], chtc["Njobs"]) == (4, 4)
    assert chtc["WallHours"] == pytest.approx((5 + 60 + 61 + 62) / 3600)
    assert chtc["CoreHours"] == pytest.approx((5 + 60 + 61 + 62) / 3600)
    assert (ucsd["SiteName"], ucsd["VOName"], ucsd["CpuSystemHours"]) == (
        "UCSDT2-D",
        "/cms/Role=production/Capability=NULL",
        pytest.approx(18 / 3600),
    )
    [lomax] = [d for d in got if d["day_iso"].startswith("2003-06-16")]
    assert (lomax["ProjectName"], lomax["Processors"], lomax["CoreHours"]) == (
        "g13563",
        32,
        pytest.approx(2748 * 32 / 3600),
    )
    assert (lomax["VOName"], lomax["Resource_ExitCode"], lomax["Njobs"]) == ("N/A", 0, 1)  # no Njobs: one job
    assert all(d["pool"] is None and d["user"] is None for d in got)  # fairacct's dimensions are not Gratia's
    again = summarize(store, date(2003, 6, 16), date(2016, 5, 27), probe="test", kinds=["gratia"], chunk_days=5000)
    assert again.deleted == {"gratia": 0} and sorted(d["id"] for d in summaries(store)) == sorted(d["id"] for d in got)


# -- GRACC's summary query (opensciencegrid/gracc-request, src/graccreq/summary_replayer.py) -----


def _no_end_time(record: bytes, start: bytes) -> bytes:
    without = re.sub(rb"\s*<EndTime\b[^>]*>[^<]*</EndTime>", b"", record)
    return re.sub(rb"(<StartTime\b[^>]*>)[^<]*<", rb"\g<1>" + start + b"<", without)


def test_a_record_without_end_time_counts_on_the_day_gracc_ends_it(empty_store: Sink, gracc: Path) -> None:
    # JobUsageRecord06 without its EndTime, started at 23:55:00: GRACC's raw pipeline ends it
    # WallDuration (10 min 17 s) later, at 00:05:17 the next day, and its summary counts it
    # there (it filters on EndTime), not on the day it started.
    record = _no_end_time(pair(gracc, "JobUsageRecord06")[0], b"2016-05-27T23:55:00Z")
    [doc] = envelope_docs(record, probe="p").docs
    assert (doc["EndTime"], doc["timestamp"]) == ("2016-05-28T00:05:17.000Z", "2016-05-28T00:05:17Z")
    assert empty_store.send("gratia", [doc]).acked
    summarize(empty_store, date(2016, 5, 27), date(2016, 5, 28), probe="test", kinds=["gratia"])
    [got] = summaries(empty_store)
    assert (got["day_iso"], got["Count"], got["WallHours"]) == ("2016-05-28T00:00:00Z", 1, pytest.approx(617 / 3600))


def test_a_stored_record_without_end_time_is_not_counted(empty_store: Sink, gracc: Path) -> None:
    # A document stored by an earlier version, dated by its StartTime for want of an EndTime:
    # GRACC's summary range is on EndTime, so it leaves it out.
    records = [pair(gracc, name)[0] for name in ("JobUsageRecord05", "JobUsageRecord06")]
    kept, old = envelope_docs(envelope(records), probe="p").docs
    del old["EndTime"]
    old["timestamp"] = old["StartTime"]
    assert empty_store.send("gratia", [kept, old]).acked
    summarize(empty_store, date(2016, 5, 27), date(2016, 5, 27), probe="test", kinds=["gratia"])
    [got] = summaries(empty_store)
    assert (got["SiteName"], got["Count"], got["WallHours"]) == ("CHTC", 1, pytest.approx(5 / 3600))


def test_njobs_is_the_sum_of_njobs_and_count_the_records(empty_store: Sink, gracc: Path) -> None:
    # An aggregated record (as the dCache probe sends: one record for many transfers or jobs)
    # counts its Njobs; a record without Njobs counts one job (GRACC's `missing`); Count is
    # the number of records, as GRACC's doc_count.
    record = pair(gracc, "JobUsageRecord04")[0]
    aggregated, plain = copies(record, 2)
    aggregated = aggregated.replace(b"<Njobs>1</Njobs>", b"<Njobs>250</Njobs>")
    plain = re.sub(rb"\s*<Njobs>1</Njobs>", b"", plain)
    docs = envelope_docs(envelope([aggregated, plain]), probe="p").docs
    assert [d.get("Njobs") for d in docs] == [250, None]
    assert empty_store.send("gratia", docs).acked
    summarize(empty_store, date(2016, 5, 2), date(2016, 5, 2), probe="test", kinds=["gratia"])
    [got] = summaries(empty_store)
    assert (got["Count"], got["Njobs"]) == (2, 251)
    assert got["WallHours"] == pytest.approx((60 + 61) / 3600)


def test_wall_hours_sum_whole_seconds_as_gracc_indexes_them(empty_store: Sink, gracc: Path) -> None:
    # GRACC's raw template maps WallDuration as a long: 3600.6 s and 1800.9 s are indexed as
    # 3600 and 1800, and its summaries sum 5400 s. CpuDuration_user/_system are doubles there
    # and keep their fractions; CoreHours, computed by the raw pipeline from the record's own
    # WallDuration, keeps its fraction too.
    record = pair(gracc, "JobUsageRecord04")[0]
    first, second = (
        re.sub(rb"<WallDuration>[^<]*<", b"<WallDuration>PT" + wall + b"S<", c)
        for c, wall in zip(copies(record, 2), (b"3600.6", b"1800.9"), strict=True)
    )
    docs = envelope_docs(envelope([first, second]), probe="p").docs
    assert [d["WallDuration"] for d in docs] == pytest.approx([3600.6, 1800.9])  # the documents keep the fraction
    assert empty_store.send("gratia", docs).acked
    summarize(empty_store, date(2016, 5, 2), date(2016, 5, 2), probe="test", kinds=["gratia"])
    [got] = summaries(empty_store)
    assert got["WallHours"] == (3600 + 1800) / 3600 == 1.5
    assert got["CoreHours"] == pytest.approx((3600.6 + 1800.9) / 3600)
    assert got["CpuUserHours"] == pytest.approx(2 * 0.55 / 3600)
    assert got["CpuSystemHours"] == pytest.approx(2 * 0.26 / 3600)


def test_records_long_ago_are_summarized_when_their_days_are(empty_store: Sink, gracc: Path) -> None:
    # GRACC's summarizer leaves no record out for its age: it sums every raw record whose
    # EndTime falls in the days asked for (gracc-request's summary_replayer.py), and its
    # periodic runs ask for the last 7 days every 15 minutes and the last 365 once a year
    # (gracc-summary's periodic_summarizer.py and its timers), as the collector's summarizer
    # asks for its recent and nightly days. A record 100 days old at `now` is in the year.
    [doc] = envelope_docs(pair(gracc, "JobUsageRecord06")[0], probe="p").docs
    assert empty_store.send("gratia", [doc]).acked
    now = datetime(2016, 9, 4, 12, tzinfo=UTC).timestamp()  # 100 days after its EndTime
    assert summarize(empty_store, *last_days(now, 7), probe="test", kinds=["gratia"]).records == {"gratia": 0}
    first, last = last_days(now, 365)
    assert summarize(empty_store, first, last, probe="test", kinds=["gratia"], chunk_days=400).records == {"gratia": 1}
    assert [d["day_iso"] for d in summaries(empty_store)] == ["2016-05-27T00:00:00Z"]


def test_groups_are_made_gracc_s_and_those_made_equal_merged() -> None:
    # gracc-request's summary_replayer.py: a missing term takes GRACC's value (nested terms'
    # `missing`, or "N/A" for the composite's), then addProperties gives a ProjectName that is
    # missing, N/A or unknown the VOName.
    source = SOURCES["gratia"]
    base = dict.fromkeys(GRATIA_DIMENSIONS) | {"period": "2016-05-27", "VOName": "cms"}
    sums = {"Count": 1, "Njobs": 2.0, "WallHours": 0.5, "CoreHours": 1.0, "CpuHours": 0.25, "CpuUserHours": 0.0,
            "CpuSystemHours": 0.25}  # fmt: skip
    rows = [
        {**base, **sums},
        {**base, **sums, "Processors": 1, "Resource_ExitCode": "0", "ProjectName": "Unknown", "GPUs": 0},
        {**base, **sums, "ProjectName": "N/A", "DN": "N/A", "Resource_ExitCode": 0.0},
        {**base, **sums, "Processors": 8, "Resource_ExitCode": "137", "ProjectName": "cms.production"},
        {**base, **sums, "Resource_ExitCode": "not a code"},
    ]
    got = source_rows(source, rows)
    assert [(r["Processors"], r["Resource_ExitCode"], r["ProjectName"], r["Count"], r["Njobs"]) for r in got] == [
        (1, 0, "cms", 3, 6.0), (8, 137, "cms.production", 1, 2.0), (1, "not a code", "cms", 1, 2.0),
    ]  # fmt: skip
    assert {(r["DN"], r["Grid"], r["GPUs"]) for r in got} == {("N/A", "N/A", 0)}
    assert got[0]["WallHours"] == 1.5 and rows[0]["Processors"] is None  # the rows given are left as they were


def test_the_gratia_query_in_elasticsearch_terms() -> None:
    source = SOURCES["gratia"]
    query = Aggregation("gratia", source.dimensions, source.totals, "day", "2016-05-27T00:00:00Z",
                        "2016-05-28T00:00:00Z", source.requires)  # fmt: skip
    body = composite_body(query)
    assert body["query"] == {
        "bool": {
            "filter": [
                {"range": {"timestamp": {"gte": "2016-05-27T00:00:00Z", "lt": "2016-05-28T00:00:00Z"}}},
                {"exists": {"field": "EndTime"}},
            ]
        }
    }
    assert body["aggs"]["groups"]["aggs"]["t1"] == {"sum": {"field": "Njobs", "missing": 1.0}}
