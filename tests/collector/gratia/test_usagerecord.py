"""A JobUsageRecord's fields, as GRACC's collector makes them: GRACC's own conformance pairs,
then each rule on a small record."""

from __future__ import annotations

from pathlib import Path

import pytest

from collector.errors import RecordError
from collector.gratia.envelope import envelope_docs
from collector.gratia.rawdoc import META_FIELDS, logstash_float, logstash_integer

from .conftest import PAIRS, fields, jur, pair

# What fairacct adds to GRACC's JSON (collector/gratia/rawdoc.py, tested in test_rawdoc.py).
ADDED = {"CoreHours", *META_FIELDS}
# What GRACC's raw pipeline makes numbers (its mutate convert), and how.
CONVERTED = {
    "Processors": logstash_integer, "Njobs": logstash_integer, "NodeCount": logstash_integer,
    "Memory": logstash_float, "Swap": logstash_float, "Network": logstash_float,
}  # fmt: skip


@pytest.mark.parametrize("name", PAIRS)
def test_gracc_conformance_pairs_match_field_by_field(gracc: Path, name: str) -> None:
    xml, expected = pair(gracc, name)
    # GRACC's collector's JSON, exactly: every field, every type.
    ours = fields(xml)
    assert sorted(ours) == sorted(expected), "the same field names"
    for key, value in expected.items():
        assert ours[key] == value, key
        assert isinstance(ours[key], str) == isinstance(value, str), f"{key}: a string must stay a string"
    # The stored document, read from an envelope as it streams: the same JSON through GRACC's
    # raw pipeline, which makes some of its text numbers and gives a record without StartTime
    # (JobUsageRecord03) one, and a Payload record (05) its PayloadSiteName. Run-time fields:
    # GRACC's collector puts none in its JSON. Its raw pipeline adds @received (the arrival
    # time), @timestamp (EndTime) and checksum; the reference documents hold none of them, and
    # neither do ours: our `timestamp` is EndTime (never an arrival time), and it, CoreHours
    # and the id are fairacct's own fields, checked in test_rawdoc.py and left out here.
    # RawXML is not a run-time field but GRACC's own test deletes it before comparing, so the
    # references do not hold it: it is checked on its own below.
    result = envelope_docs(xml, probe="conformance")
    assert result.errors == [] and not result.skipped
    [doc] = result.docs
    stored = {k: v for k, v in doc.items() if k not in ADDED and k != "RawXML"}
    piped = {k: CONVERTED[k](v) if k in CONVERTED else v for k, v in expected.items()}
    derived = {"StartTime": "2003-06-16T07:38:44.000Z"} if name == "JobUsageRecord03" else {}
    if expected["ResourceType"] == "Payload":
        derived["PayloadSiteName"] = expected["Host_description"]
    assert stored == {**piped, **derived}
    for key, value in piped.items():
        assert isinstance(stored[key], str) == isinstance(value, str), f"{key}: a string only where GRACC has one"
    raw = doc["RawXML"]
    root = "JobUsageRecord"
    assert raw.startswith(f"<{root}>\n<RecordIdentity ") and raw.endswith(f"</{root}>")
    assert raw[len(root) + 2 : -len(root) - 3] in xml.decode(), "the inner XML, verbatim"


def test_fields_keep_their_text_verbatim_and_their_local_names() -> None:
    doc = fields(
        jur(
            '<urwg:JobIdentity><urwg:GlobalJobId> g#1 </urwg:GlobalJobId><LocalJobId>1</LocalJobId></urwg:JobIdentity>'
            "<UserIdentity><DN>/CN=a &amp; b</DN><VOName/></UserIdentity>"
            '<urwg:Status urwg:description="exit">0</urwg:Status><Queue> long </Queue><Empty urwg:metric="max"/>'
        )
    )  # fmt: skip
    assert doc["GlobalJobId"] == " g#1 " and doc["LocalJobId"] == "1" and doc["DN"] == "/CN=a & b"
    assert "VOName" not in doc  # empty: left out
    assert (doc["Status"], doc["Status_description"], doc["Queue"]) == ("0", "exit", " long ")
    assert "Empty" not in doc and doc["Empty_metric"] == "max"  # no text, but its attribute
    assert (doc["type"], doc["RecordId"], doc["CreateTime"]) == ("JobUsageRecord", "r-1", "2016-05-27T22:46:49Z")


def test_a_usage_record_is_a_job_usage_record() -> None:
    doc = fields(jur("<WallDuration>PT1H</WallDuration>", root="UsageRecord"))
    assert (doc["type"], doc["WallDuration"], doc["CpuDuration"]) == ("JobUsageRecord", 3600.0, 0.0)


@pytest.mark.parametrize(
    ("resource_type", "expected"),
    [(None, "Batch"), ("", "Batch"), ("Batch", "Batch"), ("BatchPilot", "Payload"), ("AWSVM", "AWSVM"),
     ("Payload", "Payload")],
)  # fmt: skip
def test_resource_type_as_gracc_renames_it(resource_type: str | None, expected: str) -> None:
    body = "" if resource_type is None else f'<Resource urwg:description="ResourceType">{resource_type}</Resource>'
    doc = fields(jur(body))
    assert doc["ResourceType"] == expected and "Resource_ResourceType" not in doc


def test_resources_are_named_by_their_description() -> None:
    doc = fields(
        jur(
            '<Resource urwg:description="condor.JobStatus">4</Resource>'
            '<Resource urwg:description="Exit Code" urwg:unit="int">1</Resource>'
            '<Resource urwg:phaseUnit="PT1M" urwg:storageUnit="MB">7</Resource>'
            '<ConsumableResource urwg:description="Disk">9</ConsumableResource>'
            '<VolumeResource urwg:description="Scratch"/>'
        )
    )  # fmt: skip
    assert {k: v for k, v in doc.items() if k.startswith("Resource_")} == {
        "Resource_condor-JobStatus": "4", "Resource_Exit-Code": "1", "Resource_Exit-Code_unit": "int",
        "Resource_unknown": "7", "Resource_unknown_phaseUnit": 60.0, "Resource_unknown_storageUnit": "MB",
        "Resource_Disk": "9", "Resource_Scratch": "",
    }  # fmt: skip


def test_other_resources_count_only_beside_a_resource() -> None:
    # GRACC flattens ConsumableResource, PhaseResource and VolumeResource only when the record
    # has at least one Resource.
    doc = fields(jur('<ConsumableResource urwg:description="Disk">9</ConsumableResource>'))
    assert not any(k.startswith("Resource_") for k in doc)


def test_cpu_and_wall_durations() -> None:
    doc = fields(
        jur(
            '<WallDuration urwg:description="w">PT10M17.0S</WallDuration>'
            '<CpuDuration urwg:usageType="user" urwg:description="u">PT1M</CpuDuration>'
            '<CpuDuration urwg:usageType="system">PT0.5S</CpuDuration>'
            '<CpuDuration urwg:description="no type">PT2S</CpuDuration>'
        )
    )  # fmt: skip
    assert (doc["WallDuration"], doc["WallDuration_description"]) == (617.0, "w")
    assert (doc["CpuDuration_user"], doc["CpuDuration_user_description"], doc["CpuDuration_system"]) == (60.0, "u", 0.5)
    assert doc["CpuDuration"] == 62.5  # every CpuDuration counts, typed or not
    assert doc["CpuDuration__description"] == "no type"  # GRACC's key for a description without a type


def test_time_durations_and_instants_by_type() -> None:
    doc = fields(
        jur(
            '<TimeDuration urwg:type="RemoteUserCpu">PT18.0S</TimeDuration>'
            '<TimeDuration urwg:type="a.b c" urwg:description="d">PT1S</TimeDuration>'
            "<TimeDuration>PT2S</TimeDuration>"
            '<TimeInstant urwg:type="submit" urwg:description="s">2016-05-27T22:30:00+02:00</TimeInstant>'
        )
    )  # fmt: skip
    assert doc["TimeDuration_RemoteUserCpu"] == 18.0
    assert (doc["TimeDuration_a-b-c"], doc["TimeDuration_a-b-c_description"]) == (1.0, "d")
    assert doc["TimeDuration_unknown"] == 2.0
    assert (doc["TimeInstant_submit"], doc["TimeInstant_submit_description"]) == ("2016-05-27T22:30:00+02:00", "s")


def test_times_and_the_zero_time() -> None:
    doc = fields(
        jur(
            '<StartTime urwg:description="dropped">2016-05-27T22:33:51.5Z</StartTime>'
            "<EndTime>2016-05-27T22:44:08+00:00</EndTime><QueueTime>0001-01-01T00:00:00Z</QueueTime>"
        )
    )  # fmt: skip
    assert (doc["StartTime"], doc["EndTime"]) == ("2016-05-27T22:33:51Z", "2016-05-27T22:44:08Z")
    assert "QueueTime" not in doc and "StartTime_description" not in doc


def test_process_ids() -> None:
    one = fields(jur("<JobIdentity><ProcessId>7</ProcessId></JobIdentity>"))
    two = fields(jur("<JobIdentity><ProcessId>7</ProcessId><ProcessId>8</ProcessId></JobIdentity>"))
    assert one["ProcessId"] == "7" and (two["ProcessId0"], two["ProcessId1"]) == ("7", "8") and "ProcessId" not in two


def test_origin() -> None:
    doc = fields(
        jur(
            '<Origin hop="2"><ServerDate>2012-10-30T00:26:59Z</ServerDate><Connection>'
            "<SenderHost>128.101.221.170</SenderHost><Sender>hadoop</Sender><Collector>gr12x0</Collector>"
            "</Connection></Origin>"
        )
    )  # fmt: skip
    assert {k: v for k, v in doc.items() if k.startswith("Origin")} == {
        "Origin_hop": 2, "OriginServerDate": "2012-10-30T00:26:59Z", "OriginSenderHost": "128.101.221.170",
        "OriginSender": "hadoop", "OriginCollector": "gr12x0",
    }  # fmt: skip
    assert "Origin_hop" not in fields(jur('<Origin hop="0"/>'))


def test_attributes_of_other_elements() -> None:
    doc = fields(
        jur(
            '<Host primary="true" urwg:primary="yes" urwg:description="d1" description="d2">h</Host>'
            '<Memory urwg:type="virtual" urwg:storageUnit="KB" xsi:nil="false" urwg:phaseUnit="PT5.0S">9</Memory>'
            '<Network unit="b" foo="bar">0</Network>'
        )
    )  # fmt: skip
    # The first attribute of a name wins, in any namespace; GRACC's six names are kept even
    # without one, other names only in a namespace (not xsi:).
    assert {k: v for k, v in doc.items() if k.split("_")[0] in ("Host", "Memory", "Network")} == {
        "Host": "h", "Host_primary": "yes", "Host_description": "d1",
        "Memory": "9", "Memory_type": "virtual", "Memory_storageUnit": "KB", "Memory_phaseUnit": 5.0,
        "Network": "0", "Network_unit": "b",
    }  # fmt: skip


def test_a_later_element_of_the_same_name_wins() -> None:
    doc = fields(jur("<Processors>1</Processors><Processors>8</Processors><EndTime>2016-05-27T22:44:08Z</EndTime>"))
    assert doc["Processors"] == "8"


def test_an_element_with_children_keeps_only_its_own_text() -> None:
    doc = fields(jur("<Extra>a<Inner>b</Inner>c</Extra>"))
    assert doc["Extra"] == "ac" and "Inner" not in doc


@pytest.mark.parametrize(
    ("body", "match"),
    [
        ("<EndTime>yesterday</EndTime>",
         r"^EndTime: expected an RFC 3339 time like '2016-05-27T22:44:08Z', got 'yesterday'$"),
        ("<StartTime/>", r"^StartTime: expected an RFC 3339 time"),
        ("<QueueTime>2016-02-30T00:00:00Z</QueueTime>", r"^QueueTime: day 30 out of range for 2016-02"),
        ("<TimeInstant>soon</TimeInstant>", r"^TimeInstant: expected an RFC 3339 time"),
        ('<Origin hop="two"/>', r"^Origin hop: expected a 64-bit integer, got 'two'$"),
        ('<Origin hop="99999999999999999999"/>', r"^Origin hop: expected a 64-bit integer"),
        ("<Origin><ServerDate>x</ServerDate></Origin>", r"^Origin ServerDate: expected an RFC 3339 time"),
    ],
)  # fmt: skip
def test_what_gracc_refuses_is_a_record_error(body: str, match: str) -> None:
    with pytest.raises(RecordError, match=match):
        fields(jur(body))


def test_a_bad_create_time_is_a_record_error() -> None:
    xml = jur("").replace(b'urwg:createTime="2016-05-27T22:46:49Z"', b'urwg:createTime="1464388571"')
    with pytest.raises(RecordError, match=r"^RecordIdentity createTime: expected an RFC 3339 time"):
        fields(xml)


def test_elements_with_the_same_attribute_names_keep_their_own_values() -> None:
    # What becomes of an element's attributes is worked out once per element and attribute
    # names and then reused: a second record, an element of another name and a first attribute
    # that is empty must still give their own values.
    body = (
        '<Memory urwg:metric="{m}" metric="second" urwg:phaseUnit="{p}">1</Memory>'
        '<Network urwg:metric="{m}" metric="second" urwg:phaseUnit="{p}">2</Network>'
        '<TimeDuration urwg:type="{t}" type="second">PT1S</TimeDuration>'
    )  # fmt: skip
    first = fields(jur(body.format(m="total", p="PT1M", t="a.b c")))
    again = fields(jur(body.format(m="max", p="", t="d e")))
    assert {k: v for k, v in first.items() if k.startswith(("Memory", "Network", "TimeDuration_"))} == {
        "Memory": "1", "Memory_phaseUnit": 60.0, "Memory_metric": "total",
        "Network": "2", "Network_phaseUnit": 60.0, "Network_metric": "total", "TimeDuration_a-b-c": 1.0,
    }  # fmt: skip
    assert {k: v for k, v in again.items() if k.startswith(("Memory", "Network", "TimeDuration_"))} == {
        "Memory": "1", "Memory_metric": "max", "Network": "2", "Network_metric": "max", "TimeDuration_d-e": 1.0,
    }  # fmt: skip
