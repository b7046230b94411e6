"""The Elasticsearch / OpenSearch sink, against a real server: never a mock.

Every test that needs a cluster runs three times: against osmem-server (an in-memory
OpenSearch-compatible server on loopback) through the ``elasticsearch`` client (``http://``)
and through ``opensearch-py`` (``opensearch+http://``), and, marked ``elasticsearch``, against
a real cluster when ``FAIRACCT_ES_URL`` is set (skipped otherwise). For the real cluster,
``FAIRACCT_ES_API_KEY``, or ``FAIRACCT_ES_USERNAME`` with ``FAIRACCT_ES_PASSWORD``, and
``FAIRACCT_ES_CA_CERTS`` (a path) are used when set; each test writes under its own index
prefix and deletes what it wrote.
"""

from __future__ import annotations

import base64
import inspect
import json
import os
import re
import socket
import threading
import uuid
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import elastic_transport
import elasticsearch
import opensearchpy
import pandas as pd
import pytest

import collector.sinks.elasticsearch as es_module
from collector.errors import ConfigError, ElasticsearchError, SinkError
from collector.outbox import Outbox
from collector.records import KINDS, table_docs
from collector.schema import MAX_INDEX_FIELDS
from collector.sinks import open_sink
from collector.sinks.elasticsearch import ElasticsearchSink, load_templates, monthly_index, transport

from ..conftest import start_server, stop_server

ROOT = Path(__file__).resolve().parents[3]
MAPPINGS = ROOT / "mappings"

NOV = 1795300000  # 2026-11-21T22:26:40Z, the demo pool's clock
OCT = NOV - 30 * 86400  # 2026-10-22T22:26:40Z
OVERHEAD = [0, 0, 0, 1, 2, 2, 4, 4, 4, 8]
PARTITIONS = ["cpu", "cpu", "gpu", "cpu", "cpu", "gpu", "cpu", "cpu", "gpu", "cpu"]
FLAVOURS = [pytest.param("http", id="elasticsearch-client"), pytest.param("opensearch+http", id="opensearch-py")]
REAL_CLUSTER_REASON = "set FAIRACCT_ES_URL to run these tests against a real Elasticsearch or OpenSearch cluster"


# -- documents ------------------------------------------------------------------------------


def slot_docs(
    observed_at: int = NOV, overhead: Sequence[int] = OVERHEAD, partitions: Sequence[str] = PARTITIONS
) -> list[dict[str, Any]]:
    """Slot records as the probe makes them (``table_docs``), with the overhead columns and
    four configured extra attributes that no template names."""
    n = len(overhead)
    cu = pd.array(list(overhead), dtype="Int64")
    frame = pd.DataFrame(
        {
            "pool": "test",
            "name": [f"slot1@glidein_{i}@node{i:03d}.example.org" for i in range(n)],
            "machine": [f"node{i:03d}.example.org" for i in range(n)],
            "slot_type": "Partitionable",
            "state": "Unclaimed",
            "site": "Purdue",
            "resource_name": "Purdue-Bell",
            "partition": list(partitions),
            "total_cpus": 8.0,
            "total_memory": 16384.0,
            "total_disk": 248227960.0,
            "total_gpus": [1.0 if p == "gpu" else 0.0 for p in partitions],
            "unallocated_cpus": [float(c) for c in overhead],
            "unallocated_memory": [2048.0 * c for c in overhead],
            "unallocated_disk": 1e8,
            "unallocated_gpus": 0.0,
            "n_dynamic": [8 - c for c in overhead],
            "speed": 14.8,
            "node_cost": 1.0,
            "glidein_to_retire": float(observed_at + 86039),
            "glidein_to_die": float(observed_at + 172439),
            "observed_at": float(observed_at),
            "interval_s": 300.0,
            "source": "status.ads",
            "line": range(1, n + 1),
            "overhead_cu": cu,
            "unmatched": False,
            "overhead_cpus": [float(c) for c in overhead],
            "overhead_memory": [2048.0 * c for c in overhead],
            "overhead_disk": 0.0,
            "overhead_gpus": 0.0,
            "overhead_cu_hours": [c * 300 / 3600 for c in overhead],
            "phase": ["active" if c < 8 else "empty" for c in overhead],
            "fits_idle": [c >= 2 for c in overhead],
            # configured extra attributes (sources.slot_attributes): no explicit mapping
            "GLIDEIN_Entry_Name": "OSG_US_Purdue_Bell",
            "DetectedCpus": 8,
            "LoadAvg": 0.25,
            "benchmarked_iso": "2026-11-20T00:00:00Z",
        }
    )
    return table_docs("slot", frame, probe="test")


def docs_of_every_kind() -> dict[str, list[dict[str, Any]]]:
    """A few records of every kind, in November 2026."""
    allocations = pd.DataFrame(
        {
            "pool": "test",
            "name": ["slot1_1@node001.example.org", "slot1_2@node001.example.org"],
            "parent": "slot1@node001.example.org",
            "job_id": ["submit-1#4161.0#1795293975", "submit-1#4161.1#1795293975"],
            "user": ["carol@test", "dave@test"],
            "accounting_group": ["group_osg.carol@test", "group_cms.dave@test"],
            "group": ["group_osg", "group_cms"],
            "cpus": [1.0, 4.0],
            "memory": [3072.0, 8192.0],
            "disk": [50176.0, 1e6],
            "gpus": 0.0,
            "from_child_lists": False,
            "observed_at": float(NOV),
            "interval_s": 300.0,
            **{f"billed_{r}": [1.6, 6.4] for r in ("cpus", "memory", "disk", "gpus")},
            **{f"billed_{r}_hours": [0.13, 0.53] for r in ("cpus", "memory", "disk", "gpus")},
            "orphan": False,
        }
    )
    jobs = pd.DataFrame(
        {
            "job_id": ["submit-1#4143.3#1795265027"],
            "schedd": "submit-1",
            "cluster": 4143,
            "proc": 3,
            "user": "dave",
            "group": "group_cms",
            "project": "CMS_ML_Training",
            "queue": None,
            "qos": None,
            "cpus": 8.0,
            "memory": 32768.0,
            "disk": 5000192.0,
            "gpus": 1.0,
            "provisioned": True,
            "status": 4,
            "exit_code": 0,
            "qdate": float(NOV - 35000),
            "start": float(NOV - 17700),
            "end": float(NOV - 3529),
            "walltime_s": 14191.0,
            "cpu_time_s": 109471.0,
            "host": "slot1_1@gpu-1-26.example.org",
            "site": "CIT_CMS_T2",
            "resource_name": "CIT-GPU",
            "speed": 14.1,
            "n_hosts": 1,
        }
    )
    fairshare = pd.DataFrame(
        {
            "policy": "default",
            "type": ["user", "group"],
            "name": ["dave", "group_cms"],
            "window_start": float(NOV - NOV % 86400),
            "window_end": float(NOV - NOV % 86400 + 86400),
            "usage": [113528.0, 250000.0],
            "decayed": [90000.5, 200000.25],
            "effective": [0.2, 0.45],
            "target": [20.0, float("nan")],
            "target_mode": ["target", None],
            "priority": [0.0, float("nan")],
            "over_cap": False,
            "off_target": [False, False],
        }
    )
    summary = pd.DataFrame(
        {
            "day": float(NOV - NOV % 86400),
            "pool": "cms",
            "resource_name": None,
            "partition": None,
            "phase": None,
            "group": "cms",
            "user": ["dave", "carol"],
            "project": ["CMS_ML_Training", "OSG-Staff"],
            "site": ["CIT_CMS_T2", "Purdue"],
            "record_kind": "job",
            "n_jobs": [12, 3],
            "walltime_hours": [40.5, 2.25],
            "core_hours": [324.0, 2.25],
        }
    )
    return {
        "slot": slot_docs()[:3],
        "allocation": table_docs("allocation", allocations, probe="test"),
        "job": table_docs("job", jobs, probe="test"),
        "fairshare": table_docs("fairshare", fairshare, probe="test"),
        "summary": table_docs("summary", summary, probe="test"),
    }


@pytest.fixture(scope="session")
def demo_docs() -> dict[str, list[dict[str, Any]]]:
    """The records a probe cycle makes of the bundled demo pool: real slots with overhead,
    real bills, real jobs."""
    from probes.config import load_config
    from probes.pipeline.overhead import overhead_report, snapshot_bills
    from probes.pipeline.reading import read_sources

    config = load_config(ROOT / "config" / "demo.toml")
    sources = read_sources(config)
    assert sources.snapshot is not None and sources.jobs is not None
    slots = overhead_report(sources.snapshot, config, sources.idle).slots
    _, bills = snapshot_bills(sources.snapshot, config)
    return {
        "slot": table_docs("slot", slots, probe="demo"),
        "allocation": table_docs("allocation", bills, probe="demo"),
        "job": table_docs("job", sources.jobs, probe="demo"),
    }


# -- targets --------------------------------------------------------------------------------


@dataclass
class Target:
    """Where a test's sink writes: a URL, its auth options and the index prefix."""

    url: str
    prefix: str = "fairacct"
    options: dict[str, Any] = field(default_factory=dict)

    def sink(self, **overrides: Any) -> ElasticsearchSink:
        return ElasticsearchSink(self.url, prefix=self.prefix, **{**self.options, **overrides})


def _cluster_options() -> dict[str, Any]:
    options: dict[str, Any] = {}
    if "FAIRACCT_ES_API_KEY" in os.environ:
        options["api_key_env"] = "FAIRACCT_ES_API_KEY"
    if "FAIRACCT_ES_USERNAME" in os.environ:
        options.update(username=os.environ["FAIRACCT_ES_USERNAME"], password_env="FAIRACCT_ES_PASSWORD")
    if "FAIRACCT_ES_CA_CERTS" in os.environ:
        options["ca_certs_env"] = "FAIRACCT_ES_CA_CERTS"
    return options


def _drop_everything(target: Target) -> None:
    """Delete a real-cluster test's indices and templates (by name: wildcard deletes are
    usually refused)."""
    with target.sink() as sink:
        for kind in KINDS:
            for index in sink.field_types(kind):
                sink._client.request("DELETE", f"/{index}", None, what=f"deleting {index}")
            try:
                sink._client.request("DELETE", f"/_index_template/{target.prefix}-{kind}", None, what="cleanup")
            except ElasticsearchError as exc:
                if exc.status != 404:
                    raise


@pytest.fixture(
    params=[*FLAVOURS, pytest.param("cluster", id="real-cluster", marks=pytest.mark.elasticsearch)],
)
def target(request: pytest.FixtureRequest) -> Iterator[Target]:
    if request.param == "cluster":
        url = os.environ.get("FAIRACCT_ES_URL")
        if not url:
            pytest.skip(REAL_CLUSTER_REASON)
        cluster = Target(url, prefix=f"fairacct-test-{uuid.uuid4().hex[:8]}", options=_cluster_options())
        yield cluster
        _drop_everything(cluster)
    else:
        clone = request.getfixturevalue("osmem_clone")
        assert clone.url.startswith("http://127.0.0.1:"), "osmem must stay on loopback"
        yield Target(clone.url.replace("http", request.param, 1))


@pytest.fixture
def sink(target: Target) -> Iterator[ElasticsearchSink]:
    with target.sink(max_retries=1, backoff_s=0.001, backoff_max_s=0.001) as s:
        s.install_templates()
        yield s


# -- templates ------------------------------------------------------------------------------


def test_templates_are_installed_and_checked(target: Target) -> None:
    with target.sink() as sink:
        before = sink.check_templates()
        assert before.missing == list(KINDS) and not before.ok
        assert sink.install_templates() == [f"{target.prefix}-{k}" for k in KINDS]
        assert sink.check_templates().ok
        sink.install_templates()  # idempotent
        after = sink.check_templates()
        assert after.ok and after.missing == [] and after.differ == {}


def test_check_templates_names_what_differs(target: Target, tmp_path: Path) -> None:
    for path in MAPPINGS.glob("*.json"):
        template = json.loads(path.read_text())
        if path.stem == "slot":
            template["template"]["mappings"]["properties"]["overhead_cu"] = {"type": "long"}
        (tmp_path / path.name).write_text(json.dumps(template))
    with target.sink(mappings=tmp_path) as old, target.sink() as current:
        old.install_templates()
        check = current.check_templates()
        assert check.missing == [] and list(check.differ) == ["slot"]
        assert "field overhead_cu is long, expected integer" in check.differ["slot"]
        assert "another version of mappings/" in check.differ["slot"]
        current.install_templates()
        assert current.check_templates().ok


# -- where documents go and how they are typed ----------------------------------------------------


def test_each_kind_lands_in_its_monthly_index_with_the_mapped_types(sink: ElasticsearchSink) -> None:
    p = sink.prefix
    november, october = slot_docs(NOV), slot_docs(OCT)
    result = sink.send("slot", november + october)
    assert sorted(result.acked) == sorted(d["id"] for d in november + october)
    assert result.retry == {} and result.rejected == {}
    assert sink.search_counts("slot", "_index") == {f"{p}-slot-2026.11": 10, f"{p}-slot-2026.10": 10}

    for kind, docs in docs_of_every_kind().items():
        if kind != "slot":
            result = sink.send(kind, docs)
            assert len(result.acked) == len(docs) and not result.retry and not result.rejected, kind
            assert sink.search_counts(kind, "_index") == {f"{p}-{kind}-2026.11": len(docs)}

    slot = sink.field_types("slot")[f"{p}-slot-2026.11"]
    expected = {
        "overhead_cu": "integer", "phase": "keyword", "partition": "keyword", "site": "keyword", "name": "keyword",
        "id": "keyword", "kind": "keyword", "probe": "keyword", "fits_idle": "boolean", "unmatched": "boolean",
        "observed_at": "long", "glidein_to_die": "long", "n_dynamic": "long", "timestamp": "date",
        "observed_at_iso": "date", "glidein_to_retire_iso": "date", "total_cpus": "double",
        "overhead_memory": "double", "overhead_cu_hours": "double", "speed": "double",
    }  # fmt: skip
    assert {f: slot.get(f) for f in expected} == expected
    allocation = sink.field_types("allocation")[f"{p}-allocation-2026.11"]
    assert {f: allocation[f] for f in ("user", "group", "billed_cpus", "billed_memory_hours", "orphan")} == {
        "user": "keyword", "group": "keyword", "billed_cpus": "double", "billed_memory_hours": "double",
        "orphan": "boolean",
    }  # fmt: skip
    job = sink.field_types("job")[f"{p}-job-2026.11"]
    assert (job["end"], job["end_iso"], job["cluster"], job["walltime_s"], job["provisioned"]) == (
        "long", "date", "long", "double", "boolean",
    )  # fmt: skip
    fairshare = sink.field_types("fairshare")[f"{p}-fairshare-2026.11"]
    assert (fairshare["window_start_iso"], fairshare["effective"], fairshare["type"]) == ("date", "double", "keyword")
    summary = sink.field_types("summary")[f"{p}-summary-2026.11"]
    assert (summary["day"], summary["n_jobs"], summary["user"]) == ("long", "long", "keyword")


def test_columns_no_template_names_still_get_sane_types(sink: ElasticsearchSink) -> None:
    sink.send("slot", slot_docs())
    types = sink.field_types("slot")[f"{sink.prefix}-slot-2026.11"]
    assert types["GLIDEIN_Entry_Name"] == "keyword"  # other strings
    assert types["DetectedCpus"] == "double"  # other integers
    assert types["LoadAvg"] == "double"  # other floats
    assert types["benchmarked_iso"] == "date"  # other *_iso times


# -- idempotence and corrections -----------------------------------------------------------------


def test_resending_a_batch_creates_no_duplicates(sink: ElasticsearchSink) -> None:
    docs = slot_docs()
    assert len(sink.send("slot", docs).acked) == 10
    assert sink.count("slot") == 10
    again = sink.send("slot", docs)
    assert sorted(again.acked) == sorted(d["id"] for d in docs)
    assert sink.count("slot") == 10


def test_a_corrected_document_replaces_the_old_one(sink: ElasticsearchSink) -> None:
    docs = slot_docs()
    sink.send("slot", docs)
    corrected = {**docs[9], "overhead_cu": 6, "phase": "retiring"}
    assert sink.send("slot", [corrected]).acked == [corrected["id"]]
    assert sink.count("slot") == 10
    stored = sink.fetch("slot", [corrected["id"], docs[8]["id"]])
    assert stored[corrected["id"]].source["overhead_cu"] == 6
    assert stored[corrected["id"]].source["phase"] == "retiring"
    assert stored[corrected["id"]].index == f"{sink.prefix}-slot-2026.11"
    assert stored[docs[8]["id"]].source["overhead_cu"] == 4


def test_of_two_documents_with_one_id_in_a_batch_the_last_counts(sink: ElasticsearchSink) -> None:
    doc = slot_docs()[5]
    result = sink.send("slot", [{**doc, "overhead_cu": 1}, {**doc, "overhead_cu": 3}])
    assert result.acked == [doc["id"]]
    assert sink.fetch("slot", [doc["id"]])[doc["id"]].source["overhead_cu"] == 3


def test_a_large_batch_is_sent_in_several_requests(target: Target) -> None:
    docs = slot_docs(NOV) + slot_docs(OCT)
    with target.sink(batch_size=3) as sink:
        sink.install_templates()
        result = sink.send("slot", docs)
        assert sorted(result.acked) == sorted(d["id"] for d in docs)
        assert sink.count("slot") == 20


# -- per-item results --------------------------------------------------------------------------


def test_a_document_that_conflicts_with_the_mapping_is_rejected_and_the_rest_acked(sink: ElasticsearchSink) -> None:
    docs = slot_docs()
    bad = {**docs[4], "overhead_cu": "lots"}
    result = sink.send("slot", [*docs[:4], bad, *docs[5:]])
    assert list(result.rejected) == [bad["id"]]
    reason = result.rejected[bad["id"]]
    assert reason.startswith("mapper_parsing_exception") and "overhead_cu" in reason and "lots" in reason
    assert sorted(result.acked) == sorted(d["id"] for d in docs if d["id"] != bad["id"])
    assert result.retry == {}
    assert sink.count("slot") == 9


def test_an_index_maps_no_more_fields_than_its_template_allows(sink: ElasticsearchSink) -> None:
    # records of many shapes, each within a record's bound (250 fields of its own), add up in
    # one monthly index: the store refuses the documents that would map more than the limit
    docs = [
        {"id": f"wide-{i}", "kind": "job", "schema_version": 1, "probe": "p", "timestamp": "2026-11-21T14:00:00Z",
         **{f"Attr{i}_{j}": j for j in range(250)}}
        for i in range(6)
    ]  # fmt: skip
    result = sink.send("job", docs)
    assert sorted(result.acked) == ["wide-0", "wide-1", "wide-2"] and result.retry == {}
    assert sorted(result.rejected) == ["wide-3", "wide-4", "wide-5"]
    assert all("Limit of total fields [1000]" in reason for reason in result.rejected.values())
    assert len(sink.field_types("job")[f"{sink.prefix}-job-2026.11"]) <= MAX_INDEX_FIELDS


def test_documents_that_cannot_be_indexed_are_rejected_without_a_request(sink: ElasticsearchSink) -> None:
    docs = slot_docs()
    undated = {**docs[0], "timestamp": None}
    not_json = {**docs[1], "speed": float("nan")}
    result = sink.send("slot", [undated, not_json, *docs[2:]])
    assert set(result.rejected) == {undated["id"], not_json["id"]}
    assert "timestamp" in result.rejected[undated["id"]]
    assert "not JSON compliant" in result.rejected[not_json["id"]]
    assert len(result.acked) == 8 and sink.count("slot") == 8
    with pytest.raises(ValueError, match="document 0 has no string 'id'"):
        sink.send("slot", [{"timestamp": "2026-11-21T22:26:40Z"}])


# -- aggregations ------------------------------------------------------------------------------


def test_overhead_aggregations_count_the_stored_slots(sink: ElasticsearchSink) -> None:
    sink.send("slot", slot_docs(NOV) + slot_docs(OCT))
    assert sink.search_counts("slot", "overhead_cu") == {0: 6, 1: 2, 2: 4, 4: 6, 8: 2}
    assert sink.search_counts("slot", "overhead_cu", interval=4) == {0.0: 12, 4.0: 6, 8.0: 2}
    assert sink.search_counts("slot", "partition") == {"cpu": 14, "gpu": 6}
    assert sink.search_counts("slot", "phase") == {"active": 18, "empty": 2}
    assert sink.count("slot") == 20


def test_the_demo_pools_records_are_stored_whole(
    sink: ElasticsearchSink, demo_docs: dict[str, list[dict[str, Any]]]
) -> None:
    for kind, docs in demo_docs.items():
        result = sink.send(kind, docs)
        assert result.rejected == {} and result.retry == {}, kind
        assert len(result.acked) == len(docs) == sink.count(kind), kind
    expected = Counter(d["overhead_cu"] for d in demo_docs["slot"] if d["overhead_cu"] is not None)
    assert sink.search_counts("slot", "overhead_cu") == dict(expected)
    assert sink.search_counts("slot", "_index") == {f"{sink.prefix}-slot-2026.11": 36}


# -- outages -----------------------------------------------------------------------------------


@pytest.mark.parametrize("scheme", FLAVOURS)
def test_an_outage_leaves_documents_to_retry_and_nothing_is_acked_twice(scheme: str) -> None:
    sleeps: list[float] = []
    backoff = dict(max_retries=3, backoff_s=0.001, backoff_max_s=0.003, sleep=sleeps.append, jitter=lambda: 1.0)
    outbox = {d["id"]: d for d in slot_docs(NOV) + slot_docs(OCT)}
    acked: list[str] = []

    first = start_server()
    url = first.url.replace("http", scheme, 1)
    try:
        sink = ElasticsearchSink(url, **backoff)
        sink.install_templates()
        result = sink.send("slot", list(outbox.values())[:10])
        acked += result.acked
        assert len(result.acked) == 10 and sleeps == []
        for id_ in result.acked:
            del outbox[id_]
    finally:
        stop_server(first)

    result = sink.send("slot", list(outbox.values()))
    assert result.acked == [] and result.rejected == {}
    assert set(result.retry) == set(outbox)
    assert all(  # the lookup before the bulk write is the first to fail
        e.startswith(f"{sink.flavour} {url}: looking up 10 slot ids in every month failed")
        for e in result.retry.values()
    )
    assert sleeps == pytest.approx([0.001, 0.002, 0.003])  # exponential, capped at backoff_max_s
    with pytest.raises(ElasticsearchError, match=re.escape(f"{url}: refreshing fairacct-slot-* failed")) as info:
        sink.count("slot")
    assert info.value.transient and info.value.status is None
    assert isinstance(info.value.__cause__, (elastic_transport.TransportError, opensearchpy.exceptions.ConnectionError))
    sink.close()

    second = start_server()  # a new server at a new URL
    try:
        assert second.url != first.url
        with ElasticsearchSink(second.url.replace("http", scheme, 1), **backoff) as moved:
            moved.install_templates()
            result = moved.send("slot", list(outbox.values()))
            acked += result.acked
            for id_ in result.acked:
                del outbox[id_]
            assert outbox == {} and result.retry == {} and result.rejected == {}
            assert moved.count("slot") == 10
    finally:
        stop_server(second)
    assert len(acked) == len(set(acked)) == 20
    assert sleeps == pytest.approx([0.001, 0.002, 0.003])  # the second server never failed


@pytest.mark.parametrize("scheme", FLAVOURS)
def test_a_server_back_within_the_retry_budget_takes_the_batch(scheme: str) -> None:
    server = start_server()
    address = server.url.removeprefix("http://")
    sleeps: list[float] = []
    back: list[Any] = []

    def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        if len(sleeps) == 2:  # during the second wait, the server comes back at its address
            back.append(start_server(addr=address))

    url = server.url.replace("http", scheme, 1)
    try:
        with ElasticsearchSink(url, max_retries=5, backoff_s=0.001, sleep=sleep, jitter=lambda: 0.0) as sink:
            stop_server(server)
            result = sink.send("slot", slot_docs())
            assert len(back) == 1, "the server was not restarted"
            assert len(result.acked) == 10 and result.retry == {} and result.rejected == {}
            assert sleeps[:2] == pytest.approx([0.0005, 0.001])  # jitter 0 halves each delay
            assert sink.count("slot") == 10
    finally:
        for s in back:
            stop_server(s)


@pytest.mark.parametrize("scheme", FLAVOURS)
def test_the_outbox_keeps_what_an_outage_left_and_delivers_it_once(scheme: str, tmp_path: Path) -> None:
    docs = slot_docs(NOV) + slot_docs(OCT)
    server = start_server()
    address = server.url.removeprefix("http://")
    url = server.url.replace("http", scheme, 1)
    with Outbox(tmp_path / "outbox.sqlite") as outbox, ElasticsearchSink(url, max_retries=0) as sink:
        try:
            sink.install_templates()
            outbox.commit({"slot": docs[:10]}, {})
            assert outbox.flush(sink).sent["slot"] == 10
        finally:
            stop_server(server)
        outbox.commit({"slot": docs[10:]}, {})
        down = outbox.flush(sink)
        assert down.sent["slot"] == 0 and down.retried["slot"] == 10
        assert outbox.status().depth == {"slot": 10}
        again = start_server(addr=address)
        try:
            sink.install_templates()
            up = outbox.flush(sink)
            assert up.sent["slot"] == 10 and outbox.status().depth == {}
            assert sink.count("slot") == 10  # the new server got only what was waiting
        finally:
            stop_server(again)


# -- what goes on the wire -------------------------------------------------------------------


class RecordingPeer:
    """A loopback HTTP peer that records each request's head and answers a write with 503, as a
    node that is starting up does (a search, the lookup before a bulk write, finds nothing). It
    checks what the clients put on the wire; the behaviour of a real server is tested against
    osmem above."""

    ANSWER = b'{"error":{"type":"unavailable_shards_exception","reason":"primary shard is not active"},"status":503}'
    NOTHING = b'{"hits":{"hits":[]}}'

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.heads: list[dict[str, str]] = []
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            conn, _ = self.listener.accept()
            if self.stopping.is_set():
                conn.close()
                return
            with conn:
                data = b""
                while b"\r\n\r\n" not in data:
                    chunk = conn.recv(65536)
                    if not chunk:
                        break
                    data += chunk
                head, _, body = data.partition(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                fields = dict(line.split(": ", 1) for line in lines[1:] if ": " in line)
                headers = {k.lower(): v for k, v in fields.items()}
                length = int(headers.get("content-length", 0))
                while len(body) < length:
                    body += conn.recv(65536)
                self.heads.append({"request-line": lines[0], **headers})
                status, answer = (
                    (b"200 OK", self.NOTHING) if "/_search" in lines[0] else (b"503 Service Unavailable", self.ANSWER)
                )
                conn.sendall(
                    b"HTTP/1.1 "
                    + status
                    + b"\r\nContent-Type: application/json\r\nConnection: close\r\n"
                    + b"X-Elastic-Product: Elasticsearch\r\n"
                    + f"Content-Length: {len(answer)}\r\n\r\n".encode()
                    + answer
                )

    def close(self) -> None:
        self.stopping.set()
        socket.create_connection(self.listener.getsockname()).close()  # wakes accept()
        self.thread.join(timeout=5)
        self.listener.close()


@pytest.mark.parametrize("scheme", FLAVOURS)
@pytest.mark.parametrize("auth", ["api_key", "basic"])
def test_plain_json_and_the_credentials_go_on_the_wire(
    scheme: str, auth: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEST_ES_API_KEY", "VnVhQ2ZHY0JDZGJrUW0tZTVhT3g6dWkybHAyYXhUTm1zeWFrdzl0dk5udw==")
    (tmp_path / "password").write_text("correct horse battery staple\n")
    options: dict[str, Any] = (
        {"api_key_env": "TEST_ES_API_KEY"}
        if auth == "api_key"
        else {"username": "fairacct", "password_file": tmp_path / "password"}
    )
    peer = RecordingPeer()
    try:
        with ElasticsearchSink(peer.url.replace("http", scheme, 1), max_retries=0, **options) as sink:
            docs = slot_docs()[:2]
            result = sink.send("slot", docs)
    finally:
        peer.close()
    assert result.acked == [] and set(result.retry) == {d["id"] for d in docs}
    assert "503 unavailable_shards_exception: primary shard is not active" in result.retry[docs[0]["id"]]
    lookup, head = peer.heads  # the ids looked up in every month, then the bulk write
    assert lookup["request-line"].startswith("POST /fairacct-slot-*/_search?")
    assert lookup["content-type"] == "application/json"
    assert head["request-line"] == "POST /_bulk HTTP/1.1"
    assert head["content-type"] == "application/x-ndjson"  # not application/vnd.elasticsearch+...
    basic = "Basic " + base64.b64encode(b"fairacct:correct horse battery staple").decode()
    for sent in (lookup, head):
        assert "vnd.elasticsearch" not in sent.get("accept", "")
        if auth == "api_key":
            assert sent["authorization"] == "ApiKey VnVhQ2ZHY0JDZGJrUW0tZTVhT3g6dWkybHAyYXhUTm1zeWFrdzl0dk5udw=="
        else:
            assert sent["authorization"] == basic


# -- configuration and secrets -----------------------------------------------------------------


def test_secrets_come_from_files_or_the_environment_and_never_print(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEST_ES_API_KEY", "s3cr3t-api-key")
    with ElasticsearchSink("https://es.example.org:9200", api_key_env="TEST_ES_API_KEY") as sink:
        text = repr(sink)
    assert "s3cr3t" not in text and "api_key=*** (env TEST_ES_API_KEY)" in text
    assert text.startswith(
        "ElasticsearchSink('https://es.example.org:9200', flavour='elasticsearch', prefix='fairacct'"
    )

    secret = tmp_path / "es-password"
    secret.write_text("hunter2-long-password\n")
    with ElasticsearchSink("opensearch+http://127.0.0.1:9", username="fairacct", password_file=secret) as sink:
        text = repr(sink)
    assert "hunter2" not in text
    assert f"basic username='fairacct' password=*** (file {secret})" in text and "flavour='opensearch'" in text

    certifi = pytest.importorskip("certifi")
    monkeypatch.setenv("TEST_ES_CA", certifi.where())
    with ElasticsearchSink("https://es.example.org:9200", ca_certs_env="TEST_ES_CA") as sink:
        assert f"ca_certs={certifi.where()}" in repr(sink)


@pytest.mark.parametrize(
    ("url", "options", "match"),
    [
        ("ftp://es:9200", {}, "expected http\\(s\\)://HOST:PORT or opensearch\\+http\\(s\\)://HOST:PORT, got 'ftp://es:9200'"),
        ("http://elastic:s3cr3t@es:9200", {}, "^http://es:9200: credentials in the URL are not accepted"),
        ("http://es:9200", {"prefix": "Fair*"}, "prefix must be lowercase .* got 'Fair\\*'"),
        ("http://es:9200", {"batch_size": 0}, "batch_size must be a whole number >= 1, got 0"),
        ("http://es:9200", {"max_retries": -1}, "max_retries must be a whole number >= 0, got -1"),
        ("http://es:9200", {"backoff_s": 2.0, "backoff_max_s": 1.0}, "backoff_max_s must be a number >= 2.0, got 1.0"),
        ("http://es:9200", {"timeout_s": 0}, "timeout_s must be a number > 0.0, got 0"),
        ("http://es:9200", {"api_key_env": "TEST_UNSET_VARIABLE"},
         "api_key_env: the environment variable TEST_UNSET_VARIABLE is not set"),
        ("http://es:9200", {"api_key_env": "dGhlIGtleQ=="}, "api_key_env must be the name of an environment variable"),
        ("http://es:9200", {"api_key_env": "A", "api_key_file": "k"}, "give api_key_file or api_key_env, not both"),
        ("http://es:9200", {"api_key_file": "/nonexistent/key"},
         "api_key_file: cannot read '/nonexistent/key' \\(No such file"),
        ("http://es:9200", {"password_env": "TEST_ES_PASSWORD"}, "needs a username"),
        ("http://es:9200", {"username": "alice"}, "username 'alice' needs a password"),
        ("http://es:9200", {"ca_certs_file": __file__}, "is for https:// URLs only"),
        ("https://es:9200", {"ca_certs_file": "/nonexistent/ca.pem"},
         "the CA bundle '/nonexistent/ca.pem' is not a file"),
    ],
)  # fmt: skip
def test_bad_settings_raise_config_error_naming_them(
    url: str, options: dict[str, Any], match: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEST_ES_PASSWORD", "pw")
    monkeypatch.delenv("TEST_UNSET_VARIABLE", raising=False)
    with pytest.raises(ConfigError, match=match) as info:
        ElasticsearchSink(url, **options)
    assert "s3cr3t" not in str(info.value) and "dGhlIGtleQ" not in str(info.value)


def test_an_empty_secret_is_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "key").write_text("\n")
    with pytest.raises(ConfigError, match=r"api_key_file: the api_key in file .*key is empty"):
        ElasticsearchSink("http://es:9200", api_key_file=tmp_path / "key")
    monkeypatch.setenv("TEST_ES_EMPTY", "")
    with pytest.raises(ConfigError, match="password_env: the password in env TEST_ES_EMPTY is empty"):
        ElasticsearchSink("http://es:9200", username="u", password_env="TEST_ES_EMPTY")


def test_open_sink_chooses_the_flavour_by_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEST_ES_API_KEY", "k")
    for url, flavour in [("http://127.0.0.1:9", "elasticsearch"), ("opensearch+https://127.0.0.1:9", "opensearch")]:
        sink = open_sink(url, base=tmp_path, auth={"api_key_env": "TEST_ES_API_KEY", "prefix": "acct"})
        assert isinstance(sink, ElasticsearchSink)
        assert (sink.flavour, sink.prefix, sink.url) == (flavour, "acct", url)
        sink.close()


@pytest.mark.parametrize(
    ("timestamp", "index"),
    [
        ("2026-11-21T22:26:40Z", "fairacct-slot-2026.11"),
        ("2026-11-30T23:59:59Z", "fairacct-slot-2026.11"),
        ("2026-12-01T00:30:00+01:00", "fairacct-slot-2026.11"),  # UTC decides the month
        ("2027-01-01T00:00:00", "fairacct-slot-2027.01"),  # no zone: UTC by the schema
    ],
)
def test_the_monthly_index_is_the_records_own_utc_month(timestamp: str, index: str) -> None:
    assert monthly_index("fairacct", "slot", timestamp) == index


@pytest.mark.parametrize("timestamp", [None, "", "yesterday", 1795300000])
def test_a_record_without_a_usable_timestamp_has_no_index(timestamp: object) -> None:
    with pytest.raises(ValueError, match="expected an ISO-8601 UTC 'timestamp'"):
        monthly_index("fairacct", "slot", timestamp)


# -- the exception tree and the public surface ------------------------------------------------------


def _exception_classes(module: Any) -> dict[str, type[BaseException]]:
    return {
        name: value
        for name, value in vars(module).items()
        if inspect.isclass(value) and issubclass(value, Exception) and not issubclass(value, Warning)
    }


def test_every_client_exception_is_translated() -> None:
    roots = transport.ElasticsearchClient.caught()
    for module in (elasticsearch.exceptions, elastic_transport):
        for name, cls in _exception_classes(module).items():
            assert issubclass(cls, roots), f"{module.__name__}.{name} would escape untranslated"
    # Raised while building queries (the DSL) or the client (caught there), never by a request.
    not_from_requests = {"ImproperlyConfigured", "IllegalOperation", "UnknownDslObject", "ValidationException"}
    not_from_requests.add("OpenSearchDslException")
    for name, cls in _exception_classes(opensearchpy.exceptions).items():
        if name not in not_from_requests:
            assert issubclass(cls, transport.OpenSearchClient.caught()), f"opensearchpy.exceptions.{name} would escape"


@pytest.mark.parametrize("scheme", [p.values[0] for p in FLAVOURS], ids=[p.id for p in FLAVOURS])
def test_a_store_that_takes_the_connection_and_never_answers_may_pass(scheme: str) -> None:
    """A timeout is a failure that may pass, as a refused connection is, in both flavours: the
    elasticsearch client's ConnectionTimeout is no ConnectionError of elastic_transport's, and
    was taken for a refusal (a collector starting during such an outage did not start)."""
    with socket.create_server(("127.0.0.1", 0)) as hung:  # listens, never accepts nor answers
        url = f"{scheme}://127.0.0.1:{hung.getsockname()[1]}"
        with ElasticsearchSink(url, timeout_s=0.2) as sink, pytest.raises(ElasticsearchError) as info:
            sink.check_templates()
    assert info.value.transient and info.value.status is None
    assert str(info.value).startswith(f"{sink.flavour} {url}: reading index template fairacct-slot failed: ")


def test_elasticsearch_error_is_a_sink_error_with_status_and_transience() -> None:
    assert issubclass(ElasticsearchError, SinkError)
    err = ElasticsearchError("elasticsearch http://es:9200: bulk write failed: 429", status=429, transient=True)
    assert (err.status, err.transient, str(err)) == (429, True, "elasticsearch http://es:9200: bulk write failed: 429")
    assert (ElasticsearchError("x").status, ElasticsearchError("x").transient) == (None, False)


def test_all_lists_exactly_the_public_names() -> None:
    public = {
        name
        for name, value in vars(es_module).items()
        if not name.startswith("_")
        and (inspect.isclass(value) or inspect.isfunction(value))
        and value.__module__.startswith(es_module.__name__)
    }
    assert sorted(es_module.__all__) == sorted(public) == [
        "ElasticsearchSink", "StoredDocument", "load_templates", "monthly_index",
    ]  # fmt: skip


# -- the files in mappings/ ---------------------------------------------------------------------


def test_every_kind_has_a_template_with_explicit_types() -> None:
    templates = load_templates()
    assert list(templates) == list(KINDS)
    for kind, template in templates.items():
        assert template["index_patterns"] == [f"fairacct-{kind}-*"]
        mappings = template["template"]["mappings"]
        assert mappings["date_detection"] is False and mappings["numeric_detection"] is False
        # extra fields are mapped as they come (a site's ClassAd attributes), within a bound
        assert mappings["dynamic"] is True
        assert template["template"]["settings"]["index"]["mapping"]["total_fields"]["limit"] == MAX_INDEX_FIELDS
        props = {name: spec["type"] for name, spec in mappings["properties"].items()}
        assert {props[f] for f in ("id", "kind", "probe")} == {"keyword"} and props["timestamp"] == "date"
        assert all(t == "date" for f, t in props.items() if f.endswith("_iso")), kind
        assert all(props.get(f"{t}_iso") == "date" and props[t] == "long" for t in KINDS[kind].time_fields), kind
        assert all(props[f] in ("keyword", "long", "integer", "double") for f in KINDS[kind].id_fields), kind
        dynamic = [next(iter(t.values())) for t in mappings["dynamic_templates"]]
        own = {"gratia": [("TimeInstant_*", "string", "date")]}.get(kind, [])  # a kind's own come first
        assert [(d.get("match"), d["match_mapping_type"], d["mapping"]["type"]) for d in dynamic] == [
            *own,
            ("*_iso", "string", "date"), (None, "string", "keyword"), (None, "long", "double"),
            (None, "double", "double"),
        ]  # fmt: skip
    slot = templates["slot"]["template"]["mappings"]["properties"]
    assert slot["overhead_cu"] == {"type": "integer"} and slot["phase"] == {"type": "keyword"}
    assert slot["fits_idle"] == {"type": "boolean"} and slot["unmatched"] == {"type": "boolean"}
    assert load_templates("acct")["slot"]["index_patterns"] == ["acct-slot-*"]


def test_the_templates_name_every_column_of_the_tables() -> None:
    from probes.pipeline.gaps import GAP_COLUMNS
    from probes.sources.history import JOB_COLUMNS
    from probes.sources.status import ALLOCATION_COLUMNS, RESOURCES, SLOT_COLUMNS

    overhead = ["overhead_cu", *(f"overhead_{r}" for r in RESOURCES), "overhead_cu_hours"]
    overhead += ["unmatched", "phase", "fits_idle"]
    billing = [f"{c}_{r}" for r in RESOURCES for c in ("billed", "rate")]
    billing += [*(f"billed_{r}_hours" for r in RESOURCES), "orphan"]
    columns = {
        "slot": [*SLOT_COLUMNS, *overhead],
        "allocation": [*ALLOCATION_COLUMNS, *billing],
        "job": list(JOB_COLUMNS),
        "gap": list(GAP_COLUMNS),
    }
    templates = load_templates()
    for kind, names in columns.items():
        props = templates[kind]["template"]["mappings"]["properties"]
        missing = [c for c in names if c not in props and c not in ("source", "line")]
        assert missing == [], f"{kind} columns without an explicit type: {missing}"


def test_the_kibana_saved_objects_are_valid_ndjson() -> None:
    lines = (MAPPINGS / "kibana" / "overhead.ndjson").read_text().splitlines()
    objects = {o["type"]: o for o in map(json.loads, lines)}
    assert len(lines) == len(objects) == 2
    pattern = objects["index-pattern"]
    assert pattern["attributes"]["title"] == "fairacct-slot-*"
    assert pattern["attributes"]["timeFieldName"] == "timestamp"
    vis = objects["visualization"]
    state = json.loads(vis["attributes"]["visState"])
    fields = {a["type"]: a["params"].get("field") for a in state["aggs"]}
    assert (state["type"], fields["histogram"], fields["terms"]) == ("histogram", "overhead_cu", "partition")
    source = json.loads(vis["attributes"]["kibanaSavedObjectMeta"]["searchSourceJSON"])
    [reference] = vis["references"]
    assert reference == {"id": pattern["id"], "name": source["indexRefName"], "type": "index-pattern"}
