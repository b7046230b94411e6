"""Envelopes as gratia-probe sends them, bare records, what is skipped and what is refused; and
the documents going into the stores the collector writes to."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape, quoteattr

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from osmem_server import OsmemServer

from collector.errors import RecordError
from collector.gratia import envelope_docs
from collector.gratia.safexml import XmlLimits
from collector.sinks.elasticsearch import ElasticsearchSink
from collector.sinks.sqlite import EmbeddedStore

from .conftest import PAIRS, copies, envelope, jur, pair, removed_before_it_started

STORAGE_ELEMENT = (
    b'<StorageElement xmlns:urwg="http://www.gridforum.org/2003/ur-wg"><UniqueID>SE</UniqueID></StorageElement>'
)
PROBE_DETAILS = b"<ProbeDetails><ProbeName>condor:x</ProbeName></ProbeDetails>"


def conformance_records(gracc: Path) -> list[bytes]:
    return [pair(gracc, name)[0] for name in PAIRS]


@pytest.fixture(scope="module")
def conformance_docs(gracc: Path) -> list[dict[str, Any]]:
    result = envelope_docs(envelope(conformance_records(gracc)), probe="conformance")
    assert len(result.docs) == len(PAIRS) and not result.errors
    return result.docs


def test_an_envelope_of_mixed_types(gracc: Path) -> None:
    records = conformance_records(gracc)
    xml = envelope(
        [records[0], STORAGE_ELEMENT, records[4], PROBE_DETAILS, STORAGE_ELEMENT, jur("", root="UsageRecord")]
    )
    result = envelope_docs(xml, probe="condor:submit-3")
    assert [d["RecordId"] for d in result.docs] == [
        "mac-126903.dhcp.fnal.gov:13842.1",
        "submit-3.chtc.wisc.edu:1140965.8929",
    ]
    assert result.skipped == Counter({"StorageElement": 2, "ProbeDetails": 1})
    assert (result.quarantined, result.errors) == ([(5, "MissingEndTime")], [])
    assert result.total == 6


def test_a_job_removed_before_it_started_is_set_aside_and_the_rest_kept(gracc: Path) -> None:
    # The real condor-ap probe reports a job removed before it started with neither EndTime nor
    # StartTime. GRACC's collector takes it (its converter needs neither) and its raw pipeline
    # quarantines it (MissingEndTime); the other records of the envelope are stored.
    records = [r for record in conformance_records(gracc) for r in copies(record, 5)]
    removed = removed_before_it_started(pair(gracc, "JobUsageRecord06")[0])
    assert b"EndTime" not in removed and b"StartTime" not in removed and b'JobStatus">3<' in removed
    result = envelope_docs(envelope([*records[:17], removed, *records[17:]]), probe="condor:osg-gw-7")
    assert (len(result.docs), result.quarantined, result.errors, result.total) == (30, [(17, "MissingEndTime")], [], 31)
    assert all(d["timestamp"] == d["EndTime"] for d in result.docs)


def test_a_hundred_records(gracc: Path) -> None:
    records = [r for record in conformance_records(gracc) for r in copies(record, 17)][:100]
    result = envelope_docs(envelope(records), probe="p")
    assert len(result.docs) == 100 and not result.errors and not result.skipped
    assert len({d["id"] for d in result.docs}) == 100
    assert sum(d["WallDuration"] for d in result.docs) == sum(60 + i % 17 for i in range(100))
    assert [d["LocalJobId"] for d in result.docs[:2]] == ["i-065c9ddf.0", "i-065c9ddf.1"]
    again = envelope_docs(envelope(records), probe="p")  # sent again: the same records
    assert [d["id"] for d in again.docs] == [d["id"] for d in result.docs]
    another = envelope_docs(envelope(records), probe="another")  # another sender's are its own
    assert not {d["id"] for d in another.docs} & {d["id"] for d in result.docs}


def test_bad_records_are_reported_by_index_and_the_rest_kept(gracc: Path) -> None:
    good = conformance_records(gracc)[5]
    late = good.replace(b"<EndTime", b"<TimeInstant urwg:type='x'>never</TimeInstant><EndTime")
    bad_hop = jur('<Origin hop="x"/><EndTime>2016-05-27T22:44:08Z</EndTime>')
    result = envelope_docs(envelope([good, late, STORAGE_ELEMENT, bad_hop, good]))
    assert len(result.docs) == 2 and result.skipped == Counter({"StorageElement": 1})
    assert result.errors == [
        (1, "TimeInstant: expected an RFC 3339 time like '2016-05-27T22:44:08Z', got 'never'"),
        (3, "Origin hop: expected a 64-bit integer, got 'x'"),
    ]


def test_a_bare_record_is_an_envelope_of_one(gracc: Path) -> None:
    xml, expected = pair(gracc, "JobUsageRecord06")
    result = envelope_docs(xml.decode(), probe="p")
    [doc] = result.docs
    assert doc["RecordId"] == expected["RecordId"] and result.total == 1
    assert doc["RawXML"].startswith("<JobUsageRecord>\n<RecordIdentity urwg:createTime=")
    bad = envelope_docs(jur("<EndTime>x</EndTime>"))
    assert bad.docs == [] and bad.errors == [
        (0, "EndTime: expected an RFC 3339 time like '2016-05-27T22:44:08Z', got 'x'")
    ]
    assert envelope_docs(STORAGE_ELEMENT).skipped == Counter({"StorageElement": 1})


def test_the_same_records_in_an_envelope_or_bare_give_the_same_documents(gracc: Path) -> None:
    records = conformance_records(gracc)
    bundled = envelope_docs(envelope(records), probe="p").docs
    assert bundled == [envelope_docs(r, probe="p").docs[0] for r in records]


def test_records_read_one_at_a_time_or_by_the_exact_parser_part_way_give_the_same_documents(gracc: Path) -> None:
    # An envelope is streamed; a record holding an element of its own name makes the plain path
    # give up there, and the exact parser reads the rest: the same documents either way.
    records = [copy for record in conformance_records(gracc) for copy in copies(record, 20)]
    odd = records[70].replace(b"</JobUsageRecord>", b"<Note><JobUsageRecord/></Note></JobUsageRecord>")
    assert odd != records[70]
    records[70] = odd
    bundled = envelope_docs(envelope(records), probe="p")
    assert len(bundled.docs) == 120 and bundled.docs == [envelope_docs(r, probe="p").docs[0] for r in records]


def test_an_envelope_found_bad_after_records_were_read_gives_none_of_them(gracc: Path) -> None:
    xml = envelope(copies(conformance_records(gracc)[0], 100))
    assert xml.endswith(b"</RecordEnvelope>")
    with pytest.raises(RecordError, match=r"not well-formed XML"):
        envelope_docs(xml[: -len(b"</RecordEnvelope>")] + b"</RecordEnvelop>")
    deep = envelope([*copies(conformance_records(gracc)[0], 50), jur("<a>" * 40 + "</a>" * 40)])
    with pytest.raises(RecordError, match=r"nested deeper than the limit of 32 levels"):
        envelope_docs(deep)


@pytest.mark.parametrize(
    ("xml", "match"),
    [
        (b"<html><body>502 Bad Gateway</body></html>",
         r"expected <RecordEnvelope> or a bare <JobUsageRecord>/<UsageRecord> at the root, got <html>"),
        (b"<Envelope/>", r"got <Envelope>"),
        (b"<RecordEnvelope><JobUsageRecord>", r"not well-formed XML"),
        (b"<!DOCTYPE RecordEnvelope><RecordEnvelope/>", r"DTDs are refused"),
    ],
)  # fmt: skip
def test_what_cannot_be_read_at_all_raises(xml: bytes, match: str) -> None:
    with pytest.raises(RecordError, match=match):
        envelope_docs(xml)


def test_the_limits_apply_to_the_envelope(gracc: Path) -> None:
    xml = envelope(conformance_records(gracc))
    with pytest.raises(RecordError, match=r"over the limit of 4,096 bytes"):
        envelope_docs(xml, limits=XmlLimits(max_bytes=4096))
    with pytest.raises(RecordError, match=r"nested deeper than the limit of 2 levels"):
        envelope_docs(xml, limits=XmlLimits(max_depth=2))


def test_an_empty_envelope_is_nothing() -> None:
    result = envelope_docs(envelope([]))
    assert (result.docs, result.skipped, result.errors, result.total) == ([], Counter(), [], 0)


# -- into the stores ---------------------------------------------------------------------------


def test_the_embedded_store_takes_and_gives_back_the_documents(
    conformance_docs: list[dict[str, Any]], tmp_path: Path
) -> None:
    with EmbeddedStore(tmp_path / "store.sqlite") as store:
        result = store.send("gratia", conformance_docs)
        assert sorted(result.acked) == sorted(d["id"] for d in conformance_docs)
        assert not result.retry and not result.rejected
        store.send("gratia", conformance_docs)  # a re-sent envelope: stored once
        assert store.count("gratia") == len(PAIRS)
        back = store.query("gratia")
        assert back == sorted(conformance_docs, key=lambda d: (d["timestamp"], d["id"]))
        assert [d["EndTime"] for d in store.query("gratia", since="2016-01-01T00:00:00Z")] == [
            "2016-05-02T16:00:46Z", "2016-05-27T22:36:42Z", "2016-05-27T22:44:08Z",
        ]  # fmt: skip


@pytest.fixture(params=["http", "opensearch+http"])
def es_sink(request: pytest.FixtureRequest, osmem_clone: OsmemServer) -> Iterator[ElasticsearchSink]:
    assert osmem_clone.url.startswith("http://127.0.0.1:"), "osmem must stay on loopback"
    with ElasticsearchSink(osmem_clone.url.replace("http", request.param, 1), max_retries=1, backoff_s=0.001) as sink:
        sink.install_templates()
        yield sink


def test_elasticsearch_indexes_them_by_end_time_with_gracc_types(
    conformance_docs: list[dict[str, Any]], es_sink: ElasticsearchSink
) -> None:
    instant = envelope_docs(
        jur('<EndTime>2016-05-27T22:44:08Z</EndTime><TimeInstant urwg:type="submit">2016-05-27T22:30:00Z</TimeInstant>')
    ).docs
    docs = conformance_docs + instant
    result = es_sink.send("gratia", docs)
    assert len(result.acked) == len(docs) and not result.retry and not result.rejected
    assert es_sink.search_counts("gratia", "_index") == {
        "fairacct-gratia-2003.06": 1, "fairacct-gratia-2003.08": 1, "fairacct-gratia-2015.11": 1,
        "fairacct-gratia-2016.05": 4,
    }  # fmt: skip
    types = es_sink.field_types("gratia")["fairacct-gratia-2016.05"]
    expected = {
        "EndTime": "date", "CreateTime": "date", "timestamp": "date", "TimeInstant_submit": "date",
        "WallDuration": "long", "CpuDuration": "double", "CpuDuration_user": "double", "CoreHours": "double",
        "TimeDuration_CommittedTime": "double", "Network_phaseUnit": "double",
        "VOName": "keyword", "ProbeName": "keyword", "Processors": "integer", "Resource_ExitCode": "keyword",
        "Njobs": "long", "NodeCount": "integer", "Network": "double",
        "Status_description": "keyword", "id": "keyword", "RawXML": "keyword", "schema_version": "integer",
    }  # fmt: skip
    assert {f: types.get(f) for f in expected} == expected
    assert es_sink.search_counts("gratia", "ReportableVOName") == {"CMS": 1, "GLOW": 1, "cms": 1, "nova": 1}
    back = {d["id"]: d for d in es_sink.query("gratia")}
    assert back == {d["id"]: d for d in docs}


# -- whatever arrives --------------------------------------------------------------------------


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=3000) | st.sampled_from([b"<RecordEnvelope>", b"<JobUsageRecord>", b"</a>"]).flatmap(
    lambda start: st.binary(max_size=500).map(lambda tail: start + tail)
))  # fmt: skip
def test_any_bytes_give_documents_or_a_record_error(data: bytes) -> None:
    try:
        result = envelope_docs(data)
    except RecordError:
        return
    assert result.total == len(result.docs) + sum(result.skipped.values()) + len(result.quarantined) + len(
        result.errors
    )


# What XML 1.0 may hold (its Char production): no surrogates, no controls, not U+FFFE or U+FFFF (Hypothesis
# found U+FFFE in an attribute: the whole envelope is then refused, rightly, which this test does not ask about).
_VALUE = st.text(
    st.characters(codec="utf-8", exclude_categories=["Cs", "Cc"], exclude_characters="\ufffe\uffff"), max_size=40
)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(
    end=_VALUE,
    wall=_VALUE,
    processors=_VALUE,
    description=_VALUE,
    hop=_VALUE,
    tag=st.from_regex(r"[A-Za-z_][A-Za-z0-9_.-]{0,12}", fullmatch=True),
)
def test_any_values_give_a_json_document_or_a_reason(
    end: str, wall: str, processors: str, description: str, hop: str, tag: str
) -> None:
    body = (
        f"<EndTime>{escape(end)}</EndTime><WallDuration>{escape(wall)}</WallDuration>"
        f"<Processors>{escape(processors)}</Processors><{tag} urwg:description={quoteattr(description)}>x</{tag}>"
        f'<Resource urwg:description={quoteattr(description)}>{escape(wall)}</Resource><Origin hop={quoteattr(hop)}/>'
    )  # fmt: skip
    result = envelope_docs(envelope([jur(body)]))
    assert len(result.docs) + len(result.quarantined) + len(result.errors) == 1
    for doc in result.docs:
        assert orjson.loads(orjson.dumps(doc)) == doc  # plain JSON: what every sink stores
        assert isinstance(doc["CoreHours"], float) and doc["timestamp"].endswith("Z")
