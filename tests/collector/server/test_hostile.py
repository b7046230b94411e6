"""A careless or hostile probe against a real collector process: what it sends is refused by
itself, it cannot touch another probe's records, and it cannot stop or slow anyone's delivery.
Each case is one that a token holder could do to the collector before these rules."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import httpx
import orjson
import pytest

from collector.records import owned_id

from .conftest import Collector, record
from .test_ingest import post, stored

HUGE = 18446744073709551615  # 2**64 - 1: past what SQLite or Elasticsearch hold as an integer


@pytest.fixture(scope="module")
def collector(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from .conftest import free_port

    c = Collector(
        tmp_path_factory.mktemp("hostile"),
        free_port(),
        {"p1": "token-one", "p2": "token-two"},
        {"flush_every_s": 0.2, "max_body_size": "4 MiB"},
    )
    yield c.start()
    c.stop()


def send(c: Collector, docs: list[Any], probe: str = "p1") -> httpx.Response:
    return post(c, orjson.dumps(docs), probe)


def delivered(c: Collector, probe: str, ids: set[str], kind: str = "job") -> set[str]:
    """The ``source_id``s of ``probe``'s stored records, once all of ``ids`` are there (or 20 s passed)."""
    deadline = time.monotonic() + 20
    while True:
        have = {d["source_id"] for d in stored(c, kind) if d["probe"] == probe}
        if ids <= have or time.monotonic() > deadline:
            return have
        time.sleep(0.1)


def health(c: Collector) -> dict[str, Any]:
    reply = httpx.get(f"{c.url}/healthz", timeout=10)
    doc: dict[str, Any] = reply.json()
    doc["http"] = reply.status_code
    return doc


def test_an_integer_the_store_cannot_hold_is_refused_and_delivery_goes_on(collector: Collector) -> None:
    """Once answered 202 and then fatal to the flusher at every start: now refused at the door."""
    reply = send(collector, [record("big", "p1", cpus=HUGE), record("fine-1", "p1"), record("x1", "p1", Extra=HUGE)])
    assert reply.status_code == 400
    body = reply.json()
    assert body["accepted"] == 1
    assert [(r["index"], r["id"]) for r in body["rejected"]] == [(0, "p1-job-big"), (2, "p1-job-x1")]
    assert body["rejected"][0]["reason"].startswith("field 'cpus': expected a whole number from -9223372036854775808")
    assert body["rejected"][1]["reason"].startswith("field 'Extra': expected a whole number")
    assert send(collector, [record("fine-2", "p1")]).status_code == 202  # and the next requests flow
    ids = delivered(collector, "p1", {"p1-job-fine-1", "p1-job-fine-2"})
    assert {"p1-job-fine-1", "p1-job-fine-2"} <= ids and not {"p1-job-big", "p1-job-x1"} & ids
    assert health(collector)["status"] == "ok"


@pytest.mark.parametrize(
    ("field", "value", "reason"),
    [
        ("user", "u" * 40_000, "field 'user': expected a string of at most 32766 bytes"),
        ("user", ["alice"], "field 'user': expected a keyword (records are flat: no arrays or objects)"),
        ("cpus", "many", "field 'cpus': expected a double, got 'many'"),
        ("provisioned", 1.5, "field 'provisioned': expected a boolean"),
        ("end_iso", "yesterday", "field 'end_iso': expected an ISO-8601 time"),
        ("_id", "x", "field name '_id': expected a letter then letters"),
        ("a.b", 1, "field name 'a.b': expected a letter then letters"),
        ("source_id", "p2-job-1", "'source_id' is the collector's to set"),
    ],
)
def test_every_field_is_checked_against_what_the_store_holds(
    collector: Collector, field: str, value: object, reason: str
) -> None:
    reply = send(collector, [record("f", "p1", **{field: value})])
    assert reply.status_code == 400 and reply.json()["accepted"] == 0
    assert reply.json()["rejected"][0]["reason"].startswith(reason)


def test_a_record_of_too_many_fields_is_refused(collector: Collector) -> None:
    reply = send(collector, [record("wide", "p1", **{f"F{i}": i for i in range(300)})])
    assert reply.status_code == 400 and "at most 256 fields" in reply.json()["rejected"][0]["reason"]


def test_a_probe_cannot_overwrite_or_shadow_another_probes_record(collector: Collector) -> None:
    """p2 sends a record under p1's id (ids are predictable): both are stored, each under its
    sender's id, and p1's is as p1 sent it. Each probe's re-send replaces only its own."""
    assert send(collector, [record("shared", "p1", user="alice", cpus=4.0)]).status_code == 202
    forged = dict(record("shared", "p2", user="mallory", cpus=64.0), id="p1-job-shared")
    assert send(collector, [forged], "p2").status_code == 202
    assert send(collector, [dict(forged, cpus=128.0)], "p2").status_code == 202  # p2 re-sends: its own replaced
    in_p1s_name = dict(forged, probe="p1")
    assert send(collector, [in_p1s_name], "p2").status_code == 403  # the token is p2's
    docs = [d for d in stored(collector, expect=None) if d["source_id"] == "p1-job-shared"]
    deadline = time.monotonic() + 20
    while len(docs) < 2 or {d["cpus"] for d in docs} != {4.0, 128.0}:
        assert time.monotonic() < deadline, docs
        time.sleep(0.1)
        docs = [d for d in stored(collector) if d["source_id"] == "p1-job-shared"]
    by_probe = {d["probe"]: d for d in docs}
    assert (by_probe["p1"]["user"], by_probe["p1"]["cpus"]) == ("alice", 4.0)
    assert (by_probe["p2"]["user"], by_probe["p2"]["cpus"]) == ("mallory", 128.0)
    assert by_probe["p1"]["id"] == owned_id("p1", "p1-job-shared") != by_probe["p2"]["id"]


@pytest.mark.parametrize("kind", ["gratia", "summary"])
def test_records_takes_only_the_kinds_a_probe_makes(collector: Collector, kind: str) -> None:
    """Gratia usage forged through /v1/records would skip gratia_senders; summaries are the
    collector's own."""
    forged = record("forged", "p1", kind=kind, SiteName="SomeoneElse", WallDuration=1e9)
    reply = send(collector, [forged])
    assert reply.status_code == 400 and reply.json()["accepted"] == 0
    assert reply.json()["rejected"][0]["reason"].startswith("'kind' must be one of slot, allocation, job")
    assert not [d for d in stored(collector, kind) if d.get("source_id") == "p1-job-forged"]


def nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


def test_a_deep_record_fails_alone_and_another_probes_requests_all_land(collector: Collector) -> None:
    """A record nested 300 deep once failed the whole group commit it shared with others (500
    for 69 % of another probe's requests): now it is refused by itself, in its own request."""
    stop = threading.Event()
    hostile: list[int] = []

    def attack() -> None:
        while not stop.is_set():
            body = json.dumps([record("deep", "p2", Deep=nested(300))]).encode()  # deeper than orjson writes
            hostile.append(post(collector, body, "p2").status_code)

    thread = threading.Thread(target=attack)
    thread.start()
    try:
        replies = [send(collector, [record(f"legit-{b}-{i}", "p1") for i in range(20)]) for b in range(30)]
    finally:
        stop.set()
        thread.join()
    assert [r.status_code for r in replies] == [202] * 30
    assert hostile and set(hostile) == {400}
    legit = {f"p1-job-legit-{b}-{i}" for b in range(30) for i in range(20)}
    assert legit <= delivered(collector, "p1", legit)
    assert health(collector)["status"] == "ok"
