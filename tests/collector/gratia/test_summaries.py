"""Gratia records summarized with GRACC's dimensions: GRACC's conformance records
(../shared/fixtures/gracc) converted as the collector converts them, stored in the embedded
store and in osmem-server, summarized by day; the sums checked against the records' own
numbers, added up by hand below."""

from __future__ import annotations

from datetime import date
from pathlib import Path
from typing import Any

import pytest

from collector.gratia import envelope_docs
from collector.sinks import Sink
from collector.summaries import summarize
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
    assert sum(d["Count"] for d in got) == 9
    assert sum(d["WallHours"] for d in got) == pytest.approx(WALL_S / 3600)
    assert sum(d["CoreHours"] for d in got) == pytest.approx(CORE_S / 3600)
    assert sum(d["CpuHours"] for d in got) == pytest.approx(CPU_S / 3600)
    assert sum(d["CpuUserHours"] for d in got) == pytest.approx(USER_S / 3600)
    assert sum(d["CpuSystemHours"] for d in got) == pytest.approx(SYSTEM_S / 3600)
    day = sorted((d for d in got if d["day_iso"].startswith("2016-05-27")), key=lambda d: d["Count"])
    assert [d["Count"] for d in day] == [1, 4]
    ucsd, chtc = day
    assert {k: chtc[k] for k in GRATIA_DIMENSIONS} == {
        "VOName": "GLOW", "ReportableVOName": "GLOW", "ProjectName": None, "SiteName": "CHTC",
        "ProbeName": "condor:submit-3.chtc.wisc.edu", "ResourceType": "Payload", "Processors": 1, "GPUs": None,
        "Grid": "OSG", "DN": None, "CommonName": None, "Host_description": "wisc.edu", "Resource_ExitCode": "1",
    }  # fmt: skip
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
    assert all(d["pool"] is None and d["user"] is None for d in got)  # fairacct's dimensions are not Gratia's
    again = summarize(store, date(2003, 6, 16), date(2016, 5, 27), probe="test", kinds=["gratia"], chunk_days=5000)
    assert again.deleted == {"gratia": 0} and sorted(d["id"] for d in summaries(store)) == sorted(d["id"] for d in got)
