"""What GRACC's raw pipeline adds (CoreHours, the dedup id, the record's time) and fairacct's
record fields."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from collector.errors import RecordError
from collector.gratia.envelope import envelope_docs
from collector.gratia.rawdoc import DEDUP_EXCLUDED, content_id, core_hours, raw_doc
from collector.records import SCHEMA_VERSION, table_docs

from .conftest import PAIRS, jur, pair

# WallDuration (s) x Processors / 3600 of each conformance record, worked by hand.
CORE_HOURS = {
    "JobUsageRecord01": 3600 * 1 / 3600,
    "JobUsageRecord02": 1 * 4 / 3600,
    "JobUsageRecord03": 2748 * 32 / 3600,
    "JobUsageRecord04": 21 * 1 / 3600,
    "JobUsageRecord05": 5 * 1 / 3600,
    "JobUsageRecord06": 617 * 1 / 3600,
}
END_TIMES = {
    "JobUsageRecord01": "2015-11-03T20:34:32Z",
    "JobUsageRecord02": "2003-08-13T18:37:38Z",
    "JobUsageRecord03": "2003-06-16T08:24:32Z",
    "JobUsageRecord04": "2016-05-02T16:00:46Z",
    "JobUsageRecord05": "2016-05-27T22:36:42Z",
    "JobUsageRecord06": "2016-05-27T22:44:08Z",
}


def one_doc(xml: bytes, probe: str | None = "probe-a") -> dict[str, Any]:
    result = envelope_docs(xml, probe=probe)
    assert result.errors == [], result.errors
    [doc] = result.docs
    return doc


@pytest.mark.parametrize("name", PAIRS)
def test_the_added_fields_of_the_conformance_records(gracc: Path, name: str) -> None:
    xml, _ = pair(gracc, name)
    doc = one_doc(xml)
    assert doc["CoreHours"] == pytest.approx(CORE_HOURS[name], rel=1e-12)
    assert (doc["kind"], doc["schema_version"], doc["probe"]) == ("gratia", SCHEMA_VERSION, "probe-a")
    assert doc["timestamp"] == END_TIMES[name]
    assert doc["id"] == content_id(doc) and len(doc["id"]) == 32 and int(doc["id"], 16) >= 0


def test_the_conformance_records_have_distinct_ids(gracc: Path) -> None:
    assert len({one_doc(pair(gracc, name)[0])["id"] for name in PAIRS}) == len(PAIRS)


@pytest.mark.parametrize(
    ("processors", "wall", "expected"),
    [
        (None, 3600.0, 1.0),  # no Processors: 1, as GRACC's pipeline
        ("8", 1800.0, 4.0),
        (" 8", 1800.0, 4.0),
        ("2.7", 3600.0, 2.0),  # Logstash's integer conversion keeps the leading digits
        ("four", 3600.0, 0.0),
        ("0", 3600.0, 0.0),
        ("8", 0.0, 0.0),
    ],
)
def test_core_hours(processors: str | None, wall: float, expected: float) -> None:
    record: dict[str, Any] = {"WallDuration": wall}
    if processors is not None:
        record["Processors"] = processors
    assert core_hours(record) == expected


RECORD = (
    "<JobIdentity><GlobalJobId>condor.submit-3#60242911.0#1464388571</GlobalJobId></JobIdentity>"
    "<UserIdentity><LocalUserId>kav</LocalUserId><VOName>GLOW</VOName></UserIdentity>"
    "<WallDuration>PT5.0S</WallDuration><EndTime>2016-05-27T22:36:42Z</EndTime>"
    "<Processors>1</Processors><ProbeName>condor:submit-3</ProbeName><SiteName>CHTC</SiteName>"
)


def test_a_record_resent_by_its_probe_has_the_same_id() -> None:
    # gratia-probe re-sends a record from its outbox, or makes it again with a new RecordId and
    # CreateTime: the same fact, one document.
    first = one_doc(jur(RECORD, record_id="submit-3:1140965.8929"))
    again = one_doc(jur(RECORD, record_id="submit-3:1140965.8929"))
    remade = one_doc(
        jur(RECORD, record_id="submit-3:2222222.1").replace(b"2016-05-27T22:46:49Z", b"2016-05-28T01:00:00Z")
    )
    assert first["RecordId"] != remade["RecordId"] and first["CreateTime"] != remade["CreateTime"]
    assert first["RawXML"] != remade["RawXML"]
    assert first["id"] == again["id"] == remade["id"]


def test_a_record_sent_by_two_senders_has_the_same_id() -> None:
    # The same record from two senders (the form's `from`: a probe and a Gratia collector that
    # forwards it, or two hosts draining one outbox), and with the user's identity rewritten
    # on the way (a VO mapping), as Gratia's and GRACC's duplicate checks allow.
    a = one_doc(jur(RECORD), probe="condor:submit-3")
    b = one_doc(jur(RECORD.replace("<VOName>GLOW</VOName>", "<VOName>osg</VOName>")), probe="gratia-collector")
    assert (a["probe"], b["probe"], a["VOName"], b["VOName"]) == ("condor:submit-3", "gratia-collector", "GLOW", "osg")
    assert a["id"] == b["id"]


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("<WallDuration>PT5.0S</WallDuration>", "<WallDuration>PT6.0S</WallDuration>"),
        ("condor.submit-3#60242911.0#1464388571", "condor.submit-3#60242911.1#1464388571"),
        ("<ProbeName>condor:submit-3</ProbeName>", "<ProbeName>condor:submit-4</ProbeName>"),  # content, not sender
        ("<Processors>1</Processors>", "<Processors>2</Processors>"),
    ],
)
def test_another_fact_has_another_id(old: str, new: str) -> None:
    assert one_doc(jur(RECORD))["id"] != one_doc(jur(RECORD.replace(old, new)))["id"]


def test_the_id_leaves_out_what_gracc_leaves_out() -> None:
    doc = one_doc(jur(RECORD))
    changed = {**doc, **{k: "changed" for k in DEDUP_EXCLUDED if k in doc}}
    assert content_id(changed) == doc["id"]
    assert {"RecordId", "CreateTime", "GlobalUsername", "LocalUserId", "VOName", "RawXML", "probe"} <= DEDUP_EXCLUDED


def test_the_timestamp_is_end_time_in_utc_else_start_time() -> None:
    offset = jur(RECORD.replace("2016-05-27T22:36:42Z", "2016-05-31T22:36:42-05:00"))
    doc = one_doc(offset)
    assert (doc["EndTime"], doc["timestamp"]) == ("2016-05-31T22:36:42-05:00", "2016-06-01T03:36:42Z")
    started = one_doc(jur(RECORD.replace("EndTime", "StartTime")))
    assert "EndTime" not in started and started["timestamp"] == "2016-05-27T22:36:42Z"


def test_a_record_that_cannot_be_dated_is_refused() -> None:
    with pytest.raises(RecordError, match=r"^the record has neither EndTime nor StartTime: it cannot be dated$"):
        raw_doc({"WallDuration": 5.0}, probe="p")
    with pytest.raises(RecordError, match=r"^EndTime: '0001-01-01T00:30:00\+01:00' is outside the years 1 to 9999"):
        raw_doc({"EndTime": "0001-01-01T00:30:00+01:00"}, probe="p")


def test_without_a_sender_the_probe_is_the_records_probe_name() -> None:
    assert one_doc(jur(RECORD), probe=None)["probe"] == "condor:submit-3"
    assert one_doc(jur(RECORD.replace("<ProbeName>condor:submit-3</ProbeName>", "")), probe=None)["probe"] is None


def test_gratia_records_are_not_made_from_tables() -> None:
    with pytest.raises(ValueError, match=r"^gratia records are not made from tables \(see collector/gratia/\)$"):
        table_docs("gratia", pd.DataFrame({"EndTime": ["2016-05-27T22:36:42Z"]}), probe="p")
