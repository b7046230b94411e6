"""One document per record id, and never an older copy over a newer one (issue 54, points 7
and 11), in both stores: the embedded store and Elasticsearch (osmem-server's real HTTP server,
through the ``elasticsearch`` client; :mod:`collector.sinks.elasticsearch.bulk`).

A job sent again with its time moved from 30 November to 1 December was two documents in
Elasticsearch (one a month, 3.0 core-hours in the export) and one in the embedded store (2.0);
a copy taken earlier by one collector and flushed after a correction another flushed replaced
the correction in both."""

from __future__ import annotations

from datetime import date
from typing import Any

import pytest

from collector.exports import Period
from collector.exports.table import usage_table
from collector.records import VERSION, encode_docs
from collector.sinks.base import Sink
from collector.sinks.elasticsearch import ElasticsearchSink
from collector.sinks.sqlite import EmbeddedStore

NOV_30, DEC_1 = "2026-11-30T23:00:00Z", "2026-12-01T01:00:00Z"
PERIOD = Period(date(2026, 11, 1), date(2026, 12, 31))


def job(id_: str, timestamp: str, cpus: float, **extra: Any) -> dict[str, Any]:
    """A job record of an hour on ``cpus`` cores, as a collector stores one."""
    return {
        "id": id_, "kind": "job", "schema_version": 1, "probe": "p", "timestamp": timestamp, "job_id": id_,
        "end": 0, "user": "alice", "group": "cms", "project": "CMS", "site": "FNAL", "pool": "pool",
        "cpus": cpus, "walltime_s": 3600.0, "memory": 2048.0, "gpus": 0.0, **extra,
    }  # fmt: skip


def send(store: Sink, docs: list[dict[str, Any]], version: int | None) -> Any:
    """Send ``docs`` as a collector flushes them: encoded, each carrying ``version`` (None: none)."""
    records = encode_docs("job", docs)
    return store.send_encoded("job", records if version is None else records.carrying(VERSION, version))


def core_hours(store: Sink) -> float:
    """What ``fairacct export --raw`` counts: the core-hours of the job records of the period."""
    table = usage_table(store, PERIOD, ["user"], raw=True)
    return float(table["core_hours"].sum())


def months(store: Sink) -> list[str]:
    """The month of each stored copy of a job: of its timestamp (the embedded store), of the
    monthly index holding it (Elasticsearch)."""
    if isinstance(store, EmbeddedStore):
        return sorted(d["timestamp"][:7] for d in store.query("job"))
    assert isinstance(store, ElasticsearchSink)
    hits = store._search("job", {"size": 100, "_source": False}, "listing job documents")["hits"]["hits"]
    return sorted(h["_index"].removeprefix("fairacct-job-").replace(".", "-") for h in hits)


@pytest.mark.parametrize("version", [None, 5], ids=["without-versions", "with-versions"])
def test_a_job_sent_again_in_another_month_is_one_document(empty_store: Sink, version: int | None) -> None:
    store = empty_store
    first = send(store, [job("j1", NOV_30, 1.0)], version)
    moved = send(store, [job("j1", DEC_1, 2.0)], None if version is None else version + 1)
    assert (first.created, moved.existed, moved.superseded) == (["j1"], ["j1"], [])
    assert store.count("job") == 1 and months(store) == ["2026-12"]
    assert [d["cpus"] for d in store.query("job")] == [2.0]
    assert core_hours(store) == 2.0  # not 3.0: the November copy is gone
    back = send(store, [job("j1", NOV_30, 4.0)], None if version is None else version + 2)  # and back again
    assert back.existed == ["j1"] and months(store) == ["2026-11"] and core_hours(store) == 4.0


def test_an_older_copy_flushed_later_is_acknowledged_and_not_stored(empty_store: Sink) -> None:
    """A job taken by one collector (version 10), corrected through another (version 20, its time
    moved to the next month) and stored; the first collector flushes its copy after."""
    store = empty_store
    send(store, [job("j1", NOV_30, 1.0), job("j2", NOV_30, 1.0)], 10)
    corrected = send(store, [job("j1", DEC_1, 2.0), job("j2", NOV_30, 3.0)], 20)
    assert sorted(corrected.existed) == ["j1", "j2"] and corrected.superseded == []
    late = send(store, [job("j1", NOV_30, 1.0), job("j2", NOV_30, 1.0), job("j3", NOV_30, 8.0)], 10)
    assert sorted(late.acked) == ["j1", "j2", "j3"] and not late.retry and not late.rejected
    assert sorted(late.superseded) == ["j1", "j2"] and late.created == ["j3"]
    stored = {d["id"]: (d["timestamp"], d["cpus"]) for d in store.query("job")}
    assert stored == {"j1": (DEC_1, 2.0), "j2": (NOV_30, 3.0), "j3": (NOV_30, 8.0)}
    assert core_hours(store) == 13.0
    again = send(store, [job("j1", DEC_1, 2.5)], 20)  # the same version again: the same copy, replaced
    assert again.superseded == [] and [d["cpus"] for d in store.query("job") if d["id"] == "j1"] == [2.5]
    plain = send(store, [job("j1", NOV_30, 6.0)], None)  # no version (a probe on its own store): replaces
    assert plain.superseded == [] and store.count("job") == 3 and core_hours(store) == 17.0


def test_copies_in_two_months_before_the_upgrade_become_one(osmem_url: str) -> None:
    """A store an earlier release filled holds an id in two monthly indices: the next write of
    the id leaves one document, and a write older than the newest copy leaves the newest."""
    with ElasticsearchSink(osmem_url) as store:
        store.install_templates()
        lines = "".join(
            f'{{"index":{{"_index":"fairacct-job-{m}","_id":"j1"}}}}\n{{"id":"j1","timestamp":"{t}","cpus":{c},'
            '"walltime_s":3600.0,"user":"alice"}\n'
            for m, t, c in (("2026.11", NOV_30, 1.0), ("2026.12", DEC_1, 2.0))
        )
        store._client.request("POST", "/_bulk?refresh=true", lines, what="the earlier release's writes", ndjson=True)
        assert store.count("job") == 2 and core_hours(store) == 3.0
        result = send(store, [job("j1", DEC_1, 2.0)], 7)
        assert result.existed == ["j1"] and store.count("job") == 1 and core_hours(store) == 2.0


def test_leases_are_granted_one_holder_at_a_time(empty_store: Sink) -> None:
    store = empty_store
    a = store.take_lease("summaries", "a", 60.0, now=1000.0)
    assert (a.holder, a.expires) == ("a", 1060.0) and a.held_by("a", 1000.0)
    assert a.token >= 1000 * 10**6  # the microsecond of the grant
    held = store.take_lease("summaries", "b", 60.0, now=1010.0)
    assert (held.holder, held.token, held.expires) == ("a", a.token, 1060.0)  # b finds it a's
    renewed = store.take_lease("summaries", "a", 60.0, now=1030.0)
    assert (renewed.token, renewed.expires) == (a.token, 1090.0)  # renewed: the same token
    b = store.take_lease("summaries", "b", 60.0, now=1090.0)  # run out: b's, with a token of its own
    assert b.holder == "b" and b.token > a.token
    store.release_lease(renewed)  # a's is not a's any more: nothing changes
    assert store.take_lease("summaries", "a", 60.0, now=1100.0).holder == "b"
    store.release_lease(b)
    again = store.take_lease("summaries", "b", 60.0, now=1100.0)  # let go: the next run gets a new token
    assert again.holder == "b" and again.token > b.token
    c = store.take_lease("other", "c", 60.0, now=1.0)
    store.release_lease(c)
    behind = store.take_lease("other", "d", 60.0, now=0.5)  # a clock behind c's: a token above c's all the same
    assert (c.token, behind.holder, behind.token) == (10**6, "d", 10**6 + 1)


def test_a_stale_delete_leaves_what_a_later_run_wrote(empty_store: Sink) -> None:
    """Summaries of one day from a run of token 10 (g1, g2) and one of token 20 (g3): a delete of
    version 15 keeping g1 deletes g2, the older run's, and leaves g3, the later run's."""
    store = empty_store

    def summary(group: str) -> dict[str, Any]:
        return {"id": group, "kind": "summary", "record_kind": "job", "timestamp": "2026-11-30T00:00:00Z",
                "user": group, "n_jobs": 1}  # fmt: skip

    store.send_encoded("summary", encode_docs("summary", [summary("g1"), summary("g2")]).carrying(VERSION, 10))
    store.send_encoded("summary", encode_docs("summary", [summary("g3")]).carrying(VERSION, 20))
    since, until = "2026-11-30T00:00:00Z", "2026-12-01T00:00:00Z"
    deleted = store.delete_stale("summary", since, until, field="record_kind", value="job", keep=["g1"], version=15)
    assert deleted == 1 and sorted(d["id"] for d in store.query("summary")) == ["g1", "g3"]
    assert store.delete_stale("summary", since, until, field="record_kind", value="job", keep=["g1"]) == 1
    assert [d["id"] for d in store.query("summary")] == ["g1"]  # without a version, as before
