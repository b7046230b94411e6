"""What GRACC's raw pipeline adds (numbers, CoreHours, the dedup id, the record's times), what
it quarantines, and fairacct's record fields."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from collector.gratia.envelope import envelope_docs
from collector.gratia.rawdoc import (
    DEDUP_EXCLUDED,
    QUARANTINE,
    content_id,
    core_hours,
    logstash_float,
    logstash_integer,
    raw_doc,
)
from collector.records import SCHEMA_VERSION, owned_id, table_docs

from .conftest import PAIRS, fields, jur, pair

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
    assert doc["id"] == owned_id("probe-a", content_id({**fields(xml), "CoreHours": doc["CoreHours"]}))
    assert len(doc["id"]) == 32 and int(doc["id"], 16) >= 0


def test_the_conformance_records_have_distinct_ids(gracc: Path) -> None:
    assert len({one_doc(pair(gracc, name)[0])["id"] for name in PAIRS}) == len(PAIRS)


@pytest.mark.parametrize(
    ("processors", "wall", "expected"),
    [
        (None, 3600.0, 1.0),  # no Processors: 1, as GRACC's pipeline
        ("8", 1800.0, 4.0),
        (" 8", 1800.0, 4.0),
        ("2.7", 3600.0, 2.0),  # Logstash's integer conversion keeps the leading digits
        ("1,024", 3600.0, 1024.0),  # and drops commas
        ("four", 3600.0, 0.0),
        ("0", 3600.0, 0.0),
        ("8", 0.0, 0.0),
        (8, 1800.0, 4.0),  # already converted
    ],
)
def test_core_hours(processors: str | int | None, wall: float, expected: float) -> None:
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


def test_a_record_is_its_senders_and_two_senders_never_share_an_id() -> None:
    # The same content from two senders (the form's `from`), the second with another site and
    # VO (the fields the content hash leaves out): two records, so that one listed sender can
    # never replace another's. From one sender, the VO rewritten on the way (a VO mapping) is
    # the same record, as Gratia's and GRACC's duplicate checks allow.
    a = one_doc(jur(RECORD), probe="condor:submit-3")
    moved = RECORD.replace("<VOName>GLOW</VOName>", "<VOName>osg</VOName>")
    b = one_doc(jur(moved), probe="gratia-collector")
    assert (a["probe"], b["probe"], a["VOName"], b["VOName"]) == ("condor:submit-3", "gratia-collector", "GLOW", "osg")
    assert a["id"] != b["id"] and a["id"] == one_doc(jur(moved), probe="condor:submit-3")["id"]
    assert a["id"] == owned_id("condor:submit-3", content_id({**fields(jur(RECORD)), "CoreHours": a["CoreHours"]}))


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
    sent = {**fields(jur(RECORD)), "CoreHours": doc["CoreHours"], "RawXML": doc["RawXML"]}
    changed = {**sent, **{k: "changed" for k in DEDUP_EXCLUDED}}
    assert owned_id("probe-a", content_id(sent)) == owned_id("probe-a", content_id(changed)) == doc["id"]
    assert {"RecordId", "CreateTime", "GlobalUsername", "LocalUserId", "VOName", "RawXML", "probe"} <= DEDUP_EXCLUDED


def test_the_timestamp_is_end_time_in_utc() -> None:
    offset = jur(RECORD.replace("2016-05-27T22:36:42Z", "2016-05-31T22:36:42-05:00"))
    doc = one_doc(offset)
    assert (doc["EndTime"], doc["timestamp"]) == ("2016-05-31T22:36:42-05:00", "2016-06-01T03:36:42Z")
    # GRACC's raw pipeline starts it WallDuration (5 s) earlier, written as Ruby's iso8601(3)
    assert doc["StartTime"] == "2016-05-31T22:36:37.000-05:00"


def test_without_end_time_it_ends_wall_duration_after_it_started() -> None:
    # GRACC's raw pipeline (gracc-stash-raw/logstash.conf in opensciencegrid/gracc-docker):
    # EndTime = StartTime + the whole seconds of WallDuration, and the record is dated by it.
    started = RECORD.replace("EndTime", "StartTime").replace("2016-05-27T22:36:42Z", "2016-05-27T23:59:58Z")
    doc = one_doc(jur(started.replace("PT5.0S", "PT5.9S")))
    assert (doc["StartTime"], doc["EndTime"], doc["timestamp"]) == (
        "2016-05-27T23:59:58Z",
        "2016-05-28T00:00:03.000Z",  # 5.9 s is 5 whole seconds, as Ruby's Float#to_i
        "2016-05-28T00:00:03Z",
    )
    offset = one_doc(jur(started.replace("2016-05-27T23:59:58Z", "2016-05-27T23:59:58+02:00")))
    assert (offset["EndTime"], offset["timestamp"]) == ("2016-05-28T00:00:03.000+02:00", "2016-05-27T22:00:03Z")


def test_a_derived_end_time_is_no_later_than_the_arrival() -> None:
    # It started at 22:36:42 and would end 5 s later, 3 s after it arrived: it ends when it
    # arrived, and started WallDuration before that (Logstash's @received has milliseconds).
    started = RECORD.replace("EndTime", "StartTime")
    arrival = 1464388604.1239  # 2016-05-27T22:36:44.123Z
    [doc] = envelope_docs(jur(started), probe="p", received=arrival).docs
    assert (doc["StartTime"], doc["EndTime"], doc["timestamp"]) == (
        "2016-05-27T22:36:39.123Z",
        "2016-05-27T22:36:44.123Z",
        "2016-05-27T22:36:44Z",
    )
    [later] = envelope_docs(jur(started), probe="p", received=arrival + 3).docs  # it ended before it arrived
    assert later["EndTime"] == "2016-05-27T22:36:47.000Z"


@pytest.mark.parametrize(
    ("record", "reason"),
    [
        (RECORD.replace("<EndTime>2016-05-27T22:36:42Z</EndTime>", ""), "MissingEndTime"),
        (RECORD.replace("EndTime", "StartTime").replace("2016-05-27T22:36:42Z", "1970-01-02T00:00:00Z"),
         "EpochStartTime"),  # at 86,400 s, the first day of 1970: a time never set
        (RECORD + "<StartTime>1969-12-31T20:00:00-05:00</StartTime>", "EpochStartTime"),
        (RECORD + "<StartTime>0001-01-01T00:00:01Z</StartTime>", "EpochStartTime"),
        (RECORD + "<Quarantine>NoVO</Quarantine>", "NoVO"),  # the record's own, which GRACC keeps
        (RECORD.replace("<Processors>1</Processors>", "<Processors>2147483648</Processors>"),
         "Processors 2147483648 is outside the range of GRACC's Processors field"),  # an int32
        (RECORD + "<Njobs>9223372036854775808</Njobs>",
         "Njobs 9223372036854775808 is outside the range of GRACC's Njobs field"),  # an int64
        (RECORD + "<Memory>1e400</Memory>", "Memory '1e400' is not a finite number"),
        (RECORD.replace("2016-05-27T22:36:42Z", "0001-01-01T00:30:00+01:00"),
         "a time outside the years 1 to 9999 ('0001-01-01T00:30:00+01:00' is outside the years 1 to 9999 in UTC"),
    ],
)  # fmt: skip
def test_what_gracc_sets_aside_is_quarantined_with_its_reason(record: str, reason: str) -> None:
    doc = raw_doc(fields(jur(record)), probe="p")
    assert doc[QUARANTINE].startswith(reason)
    assert "id" not in doc and "timestamp" not in doc
    result = envelope_docs(jur(record), probe="p")
    assert (result.docs, result.errors, [i for i, _ in result.quarantined]) == ([], [], [0])


@pytest.mark.parametrize(
    ("record", "reason"),
    [
        (RECORD.replace("2016-05-27T22:36:42Z", "1989-12-31T23:59:59Z"),
         "an EndTime (1989-12-31T23:59:59Z) outside the times this collector takes: 1990-01-01T00:00:00Z to "
         "2016-05-29T00:00:00Z"),
        (RECORD.replace("2016-05-27T22:36:42Z", "2016-05-29T00:00:01Z"),
         "an EndTime (2016-05-29T00:00:01Z) outside the times this collector takes"),  # a day after it arrived
        (RECORD + "".join(f'<Resource urwg:description="r{i}">{i}</Resource>' for i in range(300)),
         "more than 256 fields"),
    ],
)  # fmt: skip
def test_what_a_collector_sets_aside_beyond_gracc(record: str, reason: str) -> None:
    """GRACC stores these; one envelope of them would stand in the summaries for years to come,
    or grow an index's mapping by thousands of fields."""
    arrived = 1464393600.0  # 2016-05-28T00:00:00Z
    doc = raw_doc(fields(jur(record)), probe="p", received=arrived)
    assert doc[QUARANTINE].startswith(reason), doc[QUARANTINE]
    assert "id" not in doc
    result = envelope_docs(jur(record), probe="p", received=arrived)
    assert (result.docs, result.errors, [i for i, _ in result.quarantined]) == ([], [], [0])
    assert raw_doc(fields(jur(RECORD)), probe="p", received=arrived)["timestamp"] == "2016-05-27T22:36:42Z"


def test_a_start_time_after_the_first_day_of_1970_is_kept() -> None:
    doc = one_doc(jur(RECORD + "<StartTime>1970-01-02T00:00:01Z</StartTime>"))
    assert QUARANTINE not in doc and doc["StartTime"] == "1970-01-02T00:00:01Z"


def test_gracc_numbers_are_numbers(gracc: Path) -> None:
    # GRACC's collector sends these as text (its conformance documents); its raw pipeline
    # converts them (mutate convert): Processors, Njobs, NodeCount integers, Memory, Swap,
    # Network floats.
    xml, collector_json = pair(gracc, "JobUsageRecord01")
    assert (collector_json["Processors"], collector_json["NodeCount"], collector_json["Memory"]) == ("1", "1", "3.75")
    doc = one_doc(xml)
    assert (doc["Processors"], doc["NodeCount"], doc["Memory"]) == (1, 1, 3.75)
    assert all(type(doc[k]) is t for k, t in (("Processors", int), ("NodeCount", int), ("Memory", float)))
    doc = one_doc(pair(gracc, "JobUsageRecord04")[0])
    assert (doc["Njobs"], type(doc["Njobs"])) == (1, int)
    doc = one_doc(pair(gracc, "JobUsageRecord06")[0])
    assert (doc["Network"], doc["Network_phaseUnit"]) == (0.0, 617.0)
    three = one_doc(pair(gracc, "JobUsageRecord03")[0])
    assert (three["Processors"], three["Memory"], "Njobs" in three) == (32, 1060991.0, False)


def test_the_ids_are_of_the_fields_as_gracc_sent_them(gracc: Path) -> None:
    # Records stored before the numbers were converted keep their ids: a re-sent envelope
    # stores nothing new.
    xml, _ = pair(gracc, "JobUsageRecord01")
    doc = one_doc(xml)
    sent = {**doc, "Processors": "1", "NodeCount": "1", "Memory": "3.75"}
    assert owned_id("probe-a", content_id(sent)) == doc["id"] != owned_id("probe-a", content_id(doc))
    started = one_doc(jur(RECORD.replace("EndTime", "StartTime")))  # its EndTime is GRACC's, not the record's
    sent = {k: v for k, v in started.items() if k != "EndTime"}
    assert owned_id("probe-a", content_id({**sent, "Processors": "1"})) == started["id"]


@pytest.mark.parametrize(
    ("text", "integer", "real"),
    [
        ("8", 8, 8.0), (" 8 ", 8, 8.0), ("2.7", 2, 2.7), ("1,024", 1024, 1024.0), ("1_000", 1000, 1000.0),
        ("-3", -3, -3.0), ("+4", 4, 4.0), ("four", 0, 0.0), ("", 0, 0.0), ("12abc", 12, 12.0),
        (".5", 0, 0.5), ("1e3", 1, 1000.0), ("1.e3", 1, 1.0), ("0x1A", 0, 0.0), ("1__0", 1, 1.0),
    ],
)  # fmt: skip
def test_logstash_conversions(text: str, integer: int, real: float) -> None:
    # Logstash 6's lenient mutate convert: commas dropped, then Ruby's String#to_i / #to_f
    assert (logstash_integer(text), logstash_float(text)) == (integer, real)


def test_a_payload_record_names_its_payload_site() -> None:
    payload = RECORD + '<Resource urwg:description="ResourceType">BatchPilot</Resource>'
    assert "PayloadSiteName" not in one_doc(jur(RECORD))
    assert one_doc(jur(payload))["PayloadSiteName"] == "%{Host_description}"  # Logstash's, when it has none
    described = payload + '<Host urwg:description="wisc.edu">c220g2</Host>'
    assert one_doc(jur(described))["PayloadSiteName"] == "wisc.edu"


def test_a_wrapped_duration_is_stored_as_gracc_stores_it() -> None:
    started = RECORD + "<StartTime>2016-05-27T22:36:37Z</StartTime>"
    doc = one_doc(jur(started.replace("PT5.0S", "PT999999999999S")))
    assert doc["WallDuration"] == 3_875_820_018 + 0.684212736
    assert doc["CoreHours"] == pytest.approx(3_875_820_018.684212736 / 3600, rel=1e-15)
    # Without a StartTime it would start 122 years before it ended: GRACC quarantines that.
    alone = envelope_docs(jur(RECORD.replace("PT5.0S", "PT999999999999S")))
    assert (alone.docs, alone.quarantined) == ([], [(0, "EpochStartTime")])


def test_without_a_sender_the_probe_is_the_records_probe_name() -> None:
    assert one_doc(jur(RECORD), probe=None)["probe"] == "condor:submit-3"
    assert one_doc(jur(RECORD.replace("<ProbeName>condor:submit-3</ProbeName>", "")), probe=None)["probe"] is None


def test_gratia_records_are_not_made_from_tables() -> None:
    with pytest.raises(ValueError, match=r"^gratia records are not made from tables \(see collector/gratia/\)$"):
        table_docs("gratia", pd.DataFrame({"EndTime": ["2016-05-27T22:36:42Z"]}), probe="p")
