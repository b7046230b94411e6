"""The record layer under attack, against the collector as a process (issue 35): a batch of
many distinct field names, times in every form, a Gratia sender replacing another's record, a
probe reporting for another site, a record nested a thousand deep, a full outbox disk and a
summarizer that meets what an earlier collector stored."""

from __future__ import annotations

import json
import socket
import statistics
import threading
import time
from datetime import date
from typing import Any

import httpx
import orjson
import pytest

from collector.exports.table import Period, usage_table
from collector.sinks.sqlite import EmbeddedStore

from .conftest import Collector, record
from .test_gratia import form, senders
from .test_gratia import post as post_rmi

JSON = {"Content-Type": "application/json"}


def post(c: Collector, docs: Any, probe: str = "p1", **headers: str) -> httpx.Response:
    body = docs if isinstance(docs, bytes) else orjson.dumps(docs)
    return httpx.post(f"{c.url}/v1/records", content=body, headers=JSON | c.auth(probe) | headers, timeout=120)


def health(c: Collector) -> httpx.Response:
    return httpx.get(f"{c.url}/healthz", timeout=30)


def stored(c: Collector, kind: str, until: Any, timeout_s: float = 20) -> list[dict[str, Any]]:
    """The store's records of ``kind`` once ``until(records)`` holds (or the time is up)."""
    deadline = time.monotonic() + timeout_s
    while True:
        path = c.root / "collector" / "store.sqlite"
        docs = EmbeddedStore(path).query(kind, limit=100_000) if path.exists() else []
        if until(docs) or time.monotonic() > deadline:
            return docs
        time.sleep(0.1)


# -- 2: many distinct field names --------------------------------------------------------------


def wide_batch(records: int, fields: int) -> bytes:
    """``records`` records of ``fields`` extra fields each, every name distinct in the batch."""
    docs = [record(f"wide-{i}", "p2", **{f"F{i}_{j}": j for j in range(fields)}) for i in range(records)]
    return orjson.dumps(docs)


def test_a_batch_of_distinct_field_names_costs_its_size_and_other_probes_keep_landing(start_collector: Any) -> None:
    """500 records of 240 fields each, all names distinct (2 MiB): once a minute of the event
    loop and a gigabyte, now judged in a thread in time linear in the body, while another
    probe's batches get their 202s."""
    c = start_collector()
    body = wide_batch(500, 240)
    request = (
        f"POST /v1/records HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {c.tokens['p2']}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode() + body
    heavy = socket.create_connection(("127.0.0.1", c.port))
    heavy.settimeout(120)
    heavy.sendall(request)  # all of it: the collector reads it, then judges it
    answer: list[bytes] = []

    def read() -> None:  # the reply, to the end (Connection: close)
        while chunk := heavy.recv(65536):
            answer.append(chunk)

    reader = threading.Thread(target=read)
    reader.start()
    latencies, codes = [], []
    with httpx.Client(base_url=c.url, headers=JSON | c.auth("p1"), timeout=120) as client:
        batch = 0
        while reader.is_alive() or batch < 5:
            start = time.perf_counter()
            reply = client.post("/v1/records", content=orjson.dumps([record(f"b{batch}-{i}", "p1") for i in range(20)]))
            latencies.append(time.perf_counter() - start)
            codes.append((reply.status_code, reader.is_alive()))
            batch += 1
    reader.join()
    heavy.close()
    reply = b"".join(answer)
    assert reply.startswith(b"HTTP/1.1 202 ") and reply.endswith(b'\r\n\r\n{"accepted":500,"rejected":[]}'), reply
    assert {code for code, _ in codes} == {202}
    during = [code for code, alive in codes if alive]
    # answered while the heavy batch was being judged: judged in the event loop, none would be past
    # the one that may race ahead of it (two at a load of 15, more on a quiet machine)
    assert len(during) >= 2, codes
    p99 = statistics.quantiles(latencies, n=100)[98] if len(latencies) > 1 else latencies[0]
    print(f"\nprobe p1 while a 2 MiB batch of 120,000 distinct names was judged: {len(during)} batches of 20 "
          f"answered meanwhile, {len(latencies)} in all; p50 {statistics.median(latencies) * 1000:.0f} ms, "
          f"p99 {p99 * 1000:.0f} ms")  # fmt: skip


def test_a_record_of_more_fields_than_the_setting_is_refused_by_itself(start_collector: Any) -> None:
    c = start_collector(max_fields_per_record=64)
    docs = [
        record("narrow", "p1", **{f"F{j}": j for j in range(50)}),
        record("wide", "p1", **{f"F{j}": j for j in range(60)}),
    ]
    reply = post(c, docs)
    assert reply.status_code == 400 and reply.json()["accepted"] == 1
    [refused] = reply.json()["rejected"]
    assert refused == {
        "index": 1, "id": "p1-job-wide",
        "reason": "a record has at most 64 fields (collector.max_fields_per_record), this one 68",
    }  # fmt: skip


# -- 3: times in one form ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sent", "kept"),
    [
        ("20251231T000000Z", "2025-12-31T00:00:00Z"),  # ISO 8601's basic form
        ("2025-12-31T14:00:00+14:00", "2025-12-31T00:00:00Z"),  # an offset
        ("2025-12-30T20:00:00.75-04:00", "2025-12-31T00:00:00Z"),  # a fraction, dropped
        ("2026-W47-6T00:00:00Z", "2026-11-21T00:00:00Z"),  # a week date with a time
    ],
)  # fmt: skip
def test_times_are_kept_in_one_form_and_summarized(shared_times: Collector, sent: str, kept: str) -> None:
    c = shared_times
    doc = record(f"t-{sent}", "p1", walltime_s=3600.0, end_iso=sent)
    doc["timestamp"] = sent
    assert post(c, [doc]).status_code == 202
    docs = stored(c, "job", lambda docs: any(d["source_id"] == doc["id"] for d in docs))
    back = next(d for d in docs if d["source_id"] == doc["id"])
    assert (back["timestamp"], back["end_iso"]) == (kept, kept)


@pytest.mark.parametrize(
    ("sent", "why"),
    [
        ("0001-01-01T00:00:00Z", "outside the times this collector takes: from 1990-01-01T00:00:00Z"),
        ("9999-12-31T23:59:59Z", "outside the times this collector takes"),
        ("1989-12-31T23:59:59Z", "outside the times this collector takes"),
        ("2026-W47-6", "(no UTC offset ('Z' or '+hh:mm'))"),
        ("2025-12-31T00:00:00", "(no UTC offset ('Z' or '+hh:mm'))"),
        ("2025-02-30T00:00:00Z", "(day is out of range for month)"),
        ("0001-01-01T00:00:00+01:00", "(outside the years 1 to 9999 in UTC)"),
    ],
)
def test_times_out_of_range_or_without_an_offset_are_refused(shared_times: Collector, sent: str, why: str) -> None:
    reply = post(shared_times, [dict(record("bad-time", "p1"), timestamp=sent), record("good-time", "p1")])
    assert reply.status_code == 400 and reply.json()["accepted"] == 1
    [refused] = reply.json()["rejected"]
    assert refused["index"] == 0 and why in refused["reason"], refused


@pytest.fixture(scope="module")
def shared_times(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from .conftest import free_port

    c = Collector(tmp_path_factory.mktemp("times"), free_port(), {"p1": "token-one"},
                  {"flush_every_s": 0.2, "summaries_every_s": 1, "summaries_recent_days": 400})  # fmt: skip
    yield c.start()
    c.stop()


def test_the_summaries_count_a_time_sent_in_basic_form(shared_times: Collector) -> None:
    """``20251231T000000Z`` once stopped the summaries for good (its day read as ``20251231T0``)."""
    c = shared_times
    doc = dict(record("basic", "p1", user="basic-user", walltime_s=7200.0, cpus=2.0), timestamp="20251231T000000Z")
    assert post(c, [doc]).status_code == 202

    def summarized(docs: list[dict[str, Any]]) -> bool:
        return any(d.get("user") == "basic-user" and d["record_kind"] == "job" for d in docs)

    [summary] = [d for d in stored(c, "summary", summarized, 30) if d.get("user") == "basic-user"]
    assert (summary["day_iso"], summary["n_jobs"], summary["core_hours"]) == ("2025-12-31T00:00:00Z", 1, 4.0)
    reply = health(c)
    assert reply.status_code == 200 and reply.json()["summaries"]["crashes"] == 0, reply.json()
    metrics = httpx.get(f"{c.url}/metrics").text
    assert "fairacct_collector_summarizer_up 1\n" in metrics
    assert 'fairacct_collector_summary_runs_total{outcome="crashed"} 0\n' in metrics


def test_what_an_earlier_collector_stored_cannot_stop_the_summaries(start_collector: Any, tmp_path: Any) -> None:
    """A store holding a record an earlier collector took as it came (``20251231T000000Z``):
    the summarizer leaves its group out and summarizes the rest."""
    (tmp_path / "c1" / "collector").mkdir(parents=True)
    with EmbeddedStore(tmp_path / "c1" / "collector" / "store.sqlite") as store:
        store.send("job", [
            dict(record("old", "p1", user="old-user", walltime_s=3600.0), id="old", timestamp="20251231T000000Z"),
            dict(record("good", "p1", user="good-user", walltime_s=3600.0), id="good",
                 timestamp="2025-12-30T10:00:00Z"),
        ])  # fmt: skip
    c = start_collector(summaries_every_s=1, summaries_recent_days=400)

    def summarized(docs: list[dict[str, Any]]) -> bool:
        return any(d.get("user") == "good-user" for d in docs)

    summaries = [d for d in stored(c, "summary", summarized, 30) if d["record_kind"] == "job"]
    assert [(d["user"], d["day_iso"], d["n_jobs"]) for d in summaries] == [("good-user", "2025-12-30T00:00:00Z", 1)]
    reply = health(c)
    assert reply.status_code == 200 and reply.json()["summaries"]["crashes"] == 0, reply.json()
    deadline = time.monotonic() + 10  # logged once the run's summaries are stored
    while "left out groups of records whose timestamp names no day" not in c.log:
        assert time.monotonic() < deadline, c.log
        time.sleep(0.05)


# -- 5: a Gratia sender owns its records ------------------------------------------------------


RECORD = """<JobUsageRecord xmlns="http://www.gridforum.org/2003/ur-wg">
  <RecordIdentity urwg:recordId="ce01:1.0" urwg:createTime="2026-11-21T14:00:00Z"
      xmlns:urwg="http://www.gridforum.org/2003/ur-wg"/>
  <JobIdentity><GlobalJobId>ce01.example.org#1.0#1795269600</GlobalJobId><LocalJobId>1.0</LocalJobId></JobIdentity>
  <UserIdentity><LocalUserId>alice</LocalUserId><VOName>VO-A</VOName><ReportableVOName>VO-A</ReportableVOName></UserIdentity>
  <WallDuration>PT1H</WallDuration><Processors>4</Processors>
  <StartTime>2026-11-21T13:00:00Z</StartTime><EndTime>2026-11-21T14:00:00Z</EndTime>
  <SiteName>SiteA</SiteName><ProbeName>condor:ce01.example.org</ProbeName>
</JobUsageRecord>"""


def test_a_gratia_sender_replaces_only_what_it_sent(start_collector: Any) -> None:
    ce01, ce02 = "condor:ce01.example.org", "condor:ce02.example.org"
    c = start_collector(gratia_senders=senders(ce01, ce02, sites=["SiteA", "SiteB"]))
    from ..gratia.conftest import envelope

    forged = RECORD.replace("SiteA", "SiteB").replace("VO-A", "VO-B").replace("alice", "mallory")
    # under ce01's ProbeName, ce02 is refused outright (issue 54: test_gratia_scopes.py)
    refused = post_rmi(c, form(envelope([forged.encode()]), ce02))
    assert refused.status_code == 403 and f"is for ProbeName '{ce01}', which sender '{ce02}'" in refused.text
    # a record that names no probe is the same content whoever sends it: each sender's is its own
    nameless = f"<ProbeName>{ce01}</ProbeName>"
    mine = envelope([RECORD.replace(nameless, "").encode()])
    assert post_rmi(c, form(mine, ce01)).text == "OK"
    assert post_rmi(c, form(envelope([forged.replace(nameless, "").encode()]), ce02)).text == "OK"
    assert post_rmi(c, form(mine, ce01)).text == "OK"  # ce01 sends again: its own record, once
    stored(c, "gratia", lambda docs: len(docs) >= 2)
    time.sleep(0.5)  # the flusher's next round: nothing more comes
    docs = stored(c, "gratia", lambda _: True)
    by_probe = {d["probe"]: d for d in docs}
    assert len(docs) == 2 and set(by_probe) == {ce01, ce02}
    assert (by_probe[ce01]["SiteName"], by_probe[ce01]["VOName"], by_probe[ce01]["LocalUserId"]) == (
        "SiteA",
        "VO-A",
        "alice",
    )
    assert by_probe[ce02]["SiteName"] == "SiteB" and by_probe[ce01]["id"] != by_probe[ce02]["id"]


# -- 6: a probe reports for its own sites and pools ------------------------------------------


def test_a_probe_cannot_move_another_sites_totals(start_collector: Any) -> None:
    scopes = [{"probe": "pa", "sites": ["SiteA"], "pools": ["pool-a"]},
              {"probe": "pb", "sites": ["SiteB"], "pools": ["pool-b"]}]  # fmt: skip
    c = start_collector(tokens={"pa": "token-a", "pb": "token-b", "pc": "token-c"}, probes=scopes)
    alice = record("alice-1", "pa", site="SiteA", pool="pool-a", cpus=4.0, walltime_s=3600.0)
    assert post(c, [alice], "pa").status_code == 202
    # probe B: six copies of site A's job and an invented user there, among records of its own
    copies = [dict(alice, id=f"copy-{i}", probe="pb") for i in range(6)]
    invented = record("mallory", "pb", site="SiteA", pool="pool-b", user="mallory", cpus=1111.0, walltime_s=3600.0)
    own = record("bob-1", "pb", site="SiteB", pool="pool-b", user="bob", cpus=2.0, walltime_s=3600.0)
    reply = post(c, [own, *copies, invented], "pb")
    assert (reply.status_code, reply.json()) == (403, {"error": (
        "record 1 is for site 'SiteA', which probe 'pb' may not report for (its sites: SiteB); "
        "the collector's operator lists them in collector.probes"
    )})  # fmt: skip
    reply = post(c, [dict(own, pool="pool-a")], "pb")
    assert reply.status_code == 403 and "record 0 is for pool 'pool-a'" in reply.json()["error"]
    assert post(c, [own], "pb").status_code == 202
    # a probe the list does not name reports for no site and no pool
    reply = post(c, [record("c-1", "pc", site="SiteA")], "pc")
    assert reply.status_code == 403 and "(its sites: none)" in reply.json()["error"]
    listed = post(c, [record("b-2", "pb", site=["SiteB"])], "pb")  # not a name: was a 500 (unhashable)
    assert listed.status_code == 403 and "record 0 is for site ['SiteB']" in listed.json()["error"]
    assert post(c, [record("c-2", "pc", walltime_s=3600.0)], "pc").status_code == 202
    stored(c, "job", lambda docs: len(docs) >= 3)
    time.sleep(0.5)  # the flusher's next round: nothing more comes
    with EmbeddedStore(c.root / "collector" / "store.sqlite") as store:
        table = usage_table(store, Period(date(2026, 11, 21), date(2026, 11, 21)), ["site", "user"], raw=True)
    rows = {(r["site"] if isinstance(r["site"], str) else None, r["user"]): (r["n_jobs"], r["core_hours"])
            for r in table.to_dict("records")}  # fmt: skip
    assert rows == {("SiteA", "alice"): (1, 4.0), ("SiteB", "bob"): (1, 2.0), (None, "alice"): (1, 1.0)}


# -- 7: nesting ----------------------------------------------------------------------------------


def test_a_record_nested_a_thousand_deep_is_refused_by_itself(start_collector: Any) -> None:
    c = start_collector()
    deep = b'{"a":' * 1000 + b"1" + b"}" * 1000
    good = [orjson.dumps(record(f"beside-{i}", "p1")) for i in range(2)]
    bad = orjson.dumps(record("deep", "p1"))[:-1] + b',"Deep":' + deep + b"}"
    for body, media in ((b"[" + b",".join([good[0], bad, good[1]]) + b"]", "application/json"),
                        (b"\n".join([good[0], bad, good[1]]), "application/x-ndjson")):  # fmt: skip
        reply = post(c, body, **{"Content-Type": media})
        assert reply.status_code == 400, reply.text
        assert reply.json()["accepted"] == 2 and reply.json()["rejected"] == [{
            "index": 1, "id": "p1-job-deep",
            "reason": "field 'Deep': expected a scalar (records are flat: no arrays or objects), "
                      "got {'a': {'a': {...}}}",
        }]  # fmt: skip
    listed = b"[" + good[0] + b"," + b"[" * 1000 + b"]" * 1000 + b"]"
    reply = post(c, listed)
    assert reply.status_code == 400 and reply.json()["rejected"][0]["reason"] == (
        "expected a JSON object (a record), got [[[...]]]"
    )
    ids = {"p1-job-beside-0", "p1-job-beside-1"}
    docs = stored(c, "job", lambda docs: ids <= {d["source_id"] for d in docs})
    assert {d["source_id"] for d in docs} == ids
    assert health(c).json()["status"] == "ok"


# -- 9: /healthz tells a full outbox disk ------------------------------------------------------


def test_healthz_fails_while_the_outbox_disk_is_full(start_collector: Any) -> None:
    c = start_collector(max_file_bytes=2 * 2**20)  # every file of the process stops at 2 MiB
    assert health(c).status_code == 200
    codes = []
    for batch in range(40):
        docs = [record(f"fill-{batch}-{i}", "p1", Padding="x" * 2000) for i in range(100)]
        codes.append(post(c, docs).status_code)
        if codes[-1] == 503:
            break
    assert codes[-1] == 503 and set(codes) == {202, 503}, codes
    reply = health(c)
    assert reply.status_code == 503, reply.json()
    assert reply.json()["status"].startswith("outbox failing: the last commit failed, every request gets 503")
    json.dumps(reply.json())
