"""The probe's side against collector processes: the collector+http:// sink under Outbox.flush,
with osmem-server (Elasticsearch) behind the collector; two collectors sharing one store;
and SIGKILL at random moments while several probes stream batches."""

from __future__ import annotations

import random
import signal
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from collector.errors import ConfigError, SinkError
from collector.outbox import Outbox
from collector.records import owned_id
from collector.sinks import SendResult, open_sink
from collector.sinks.elasticsearch import ElasticsearchSink
from collector.sinks.http import CollectorSink
from collector.sinks.sqlite import EmbeddedStore

from .conftest import Collector, record, self_signed


def token_file(tmp_path: Path, c: Collector, probe: str) -> Path:
    path = tmp_path / f"{probe}.token"
    path.write_text(c.tokens[probe] + "\n")
    return path


def drain(*collectors: Collector, timeout_s: float = 60) -> None:
    """Wait until every collector's outbox is empty."""
    deadline = time.monotonic() + timeout_s
    for c in collectors:
        while httpx.get(f"{c.url}/healthz").json()["outbox"]["depth"]:
            assert time.monotonic() < deadline, c.log
            time.sleep(0.1)
    time.sleep(0.5)


def test_a_probe_outbox_flushes_through_the_collector_into_elasticsearch(
    start_collector: Any, tmp_path: Path, osmem_url: str
) -> None:
    with ElasticsearchSink.from_url(osmem_url) as es:
        es.install_templates()
    c = start_collector(store=osmem_url)
    docs = [record(i, "p1") for i in range(120)] + [dict(record("bad", "p1"), timestamp="never")]
    auth = {"token_file": str(token_file(tmp_path, c, "p1"))}
    with (
        Outbox(tmp_path / "probe-outbox.sqlite") as outbox,
        open_sink(f"collector+{c.url}", base=tmp_path, auth=auth) as sink,
    ):  # type: ignore[attr-defined]
        assert isinstance(sink, CollectorSink) and "token-one" not in repr(sink)
        outbox.commit({"job": docs}, {"history:x": 1})
        result = outbox.flush(sink, batch_size=50)
        assert (result.sent["job"], result.dead["job"]) == (120, 1)
        assert outbox.status().depth == {} and outbox.dead_letters()[0]["id"] == "p1-job-bad"
        assert "'timestamp' must be an ISO-8601 UTC time" in outbox.dead_letters()[0]["error"]
    drain(c)
    with ElasticsearchSink.from_url(osmem_url) as es:
        assert es.count("job") == 120


def test_a_wrong_token_keeps_the_records_at_the_probe(start_collector: Any, tmp_path: Path) -> None:
    c = start_collector()
    bad = tmp_path / "bad.token"
    bad.write_text("not-the-token")
    with Outbox(tmp_path / "o.sqlite") as outbox, CollectorSink(f"collector+{c.url}", token_file=bad) as sink:
        outbox.commit({"job": [record(1, "p1")]}, {})
        result = outbox.flush(sink)
        assert result.retried["job"] == 1 and outbox.status().depth == {"job": 1}
        assert (
            "the collector answered 401: the bearer token is not one this collector knows; check store.token_file"
            in result.errors[0]
        )
    with pytest.raises(ConfigError, match=r"store.token_file: .*/none: no such file"):
        CollectorSink(f"collector+{c.url}", token_file=tmp_path / "none")
    with pytest.raises(ConfigError, match="no credentials in a collector URL"):
        CollectorSink("collector+http://u:p@127.0.0.1:1", token_file=bad)


def test_a_batch_over_the_limit_is_split(start_collector: Any, tmp_path: Path) -> None:
    c = start_collector(max_body_size="20 KiB")
    docs = [record(i, "p1", pad="x" * 300) for i in range(200)] + [record("huge", "p1", pad="y" * 30_000)]
    with CollectorSink(f"collector+{c.url}", token_file=token_file(tmp_path, c, "p1")) as sink:
        sent = sink.send("job", docs)
    assert len(sent.acked) == 200 and list(sent.rejected) == ["p1-job-huge"] and not sent.retry


def test_the_collector_serves_https_and_the_probe_checks_its_certificate(start_collector: Any, tmp_path: Path) -> None:
    cert, key = self_signed(tmp_path)
    c = start_collector(tls_cert_file=str(cert), tls_key_file=str(key))
    assert c.url.startswith("https://")
    token = token_file(tmp_path, c, "p1")
    with CollectorSink(f"collector+{c.url}", token_file=token, ca_file=cert) as sink:
        assert sink.send("job", [record(1, "p1")]).acked == ["p1-job-1"]
    with (
        CollectorSink(f"collector+{c.url}", token_file=token) as sink,
        pytest.raises(SinkError, match="no answer from the collector"),
    ):
        sink.send("job", [record(2, "p1")])  # the system's CAs do not know a self-signed certificate


@pytest.mark.slow
def test_two_collectors_share_one_store_and_store_each_record_once(
    start_collector: Any, tmp_path: Path, osmem_url: str
) -> None:
    with ElasticsearchSink.from_url(osmem_url) as es:
        es.install_templates()
    a, b = start_collector("a", store=osmem_url), start_collector("b", store=osmem_url)
    docs = [record(i, "p1") for i in range(1000)]
    token = token_file(tmp_path, a, "p1")
    results: list[SendResult] = []

    def send(c: Collector, part: list[dict[str, Any]]) -> None:
        with CollectorSink(f"collector+{c.url}", token_file=token) as sink:
            for start in range(0, len(part), 100):
                results.append(sink.send("job", part[start : start + 100]))

    # overlapping: a takes 0..699, b takes 300..999, at the same time
    threads = [threading.Thread(target=send, args=(a, docs[:700])), threading.Thread(target=send, args=(b, docs[300:]))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(len(r.acked) for r in results) == 1400
    drain(a, b)
    with ElasticsearchSink.from_url(osmem_url) as es:
        assert es.count("job") == 1000
        stored_ids = [owned_id("p1", d["id"]) for d in docs]  # each record under its probe's id
        assert set(es.fetch("job", stored_ids)) == set(stored_ids)


class _Recording:
    """A collector sink that remembers which ids got 202 (acknowledged)."""

    def __init__(self, sink: CollectorSink, acked: set[str]) -> None:
        self.sink, self.acked = sink, acked

    def send_encoded(self, kind: str, records: Any) -> SendResult:
        result = self.sink.send_encoded(kind, records)
        self.acked.update(result.acked)
        return result

    def close(self) -> None:
        self.sink.close()


@pytest.mark.slow
def test_sigkill_at_random_moments_loses_nothing_and_stores_nothing_twice(start_collector: Any, tmp_path: Path) -> None:
    probes = {f"p{i}": f"token-{i}" for i in range(3)}
    c = start_collector(tokens=probes, flush_every_s=0.05, flush_batch_size=200)
    rng = random.Random(14)
    sent = {p: [record(i, p) for i in range(900)] for p in probes}
    acked: dict[str, set[str]] = {p: set() for p in probes}
    for p, docs in sent.items():
        with Outbox(tmp_path / f"{p}.sqlite") as outbox:
            outbox.commit({"job": docs}, {})
    stop = threading.Event()

    def stream(probe: str) -> None:
        with Outbox(tmp_path / f"{probe}.sqlite") as outbox:
            sink = _Recording(
                CollectorSink(f"collector+{c.url}", token_file=token_file(tmp_path, c, probe), timeout_s=5),
                acked[probe],
            )
            while not stop.is_set() and outbox.status().depth:
                outbox.flush(sink, batch_size=25, max_batches=1)  # type: ignore[arg-type]
                time.sleep(0.01)
            sink.close()

    threads = [threading.Thread(target=stream, args=(p,)) for p in probes]
    for t in threads:
        t.start()
    kills = 0
    while kills < 20:
        time.sleep(rng.uniform(0.05, 0.5))
        c.stop(signal.SIGKILL)
        kills += 1
        c.start()
    stop.set()
    for t in threads:
        t.join()
    # every record that got 202 is in the store or still in the collector's outbox; every one
    # that did not is still in its sender's outbox
    drain(c)
    store = EmbeddedStore(c.root / "collector" / "store.sqlite")
    stored = [(d["probe"], d["source_id"]) for d in store.query("job")]
    assert len(stored) == len(set(stored))
    for p, docs in sent.items():
        assert acked[p] <= {i for q, i in stored if q == p}, f"{p}: acknowledged but not stored"
        with Outbox(tmp_path / f"{p}.sqlite") as outbox:
            waiting = {d["id"] for d in outbox.waiting("job")}
        assert waiting == {d["id"] for d in docs} - acked[p], p
    assert kills >= 20 and sum(map(len, acked.values())) > 0
    # and once the probes have flushed the rest, everything is there, once
    for p in probes:
        with (
            Outbox(tmp_path / f"{p}.sqlite") as outbox,
            CollectorSink(f"collector+{c.url}", token_file=tmp_path / f"{p}.token") as sink,
        ):
            outbox.flush(sink)
            assert outbox.status().depth == {}
    drain(c)
    assert store.count("job") == sum(map(len, sent.values()))


def test_a_site_points_its_probe_at_the_collector_and_changes_nothing_else(
    start_collector: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json
    import socket

    from probes.cli import main

    from ...conftest import ROOT

    probe = f"fairacct@{socket.gethostname()}"  # the name a probe writes its records in
    # the demo pool's sites: what this probe may report for (collector.probes)
    sites = ["CIT_CMS_T2", "FNAL", "Nebraska", "Purdue", "UCSD", "unknown"]
    c = start_collector(tokens={probe: "site-token"}, probes=[{"probe": probe, "sites": sites, "pools": ["demo"]}])
    (tmp_path / "probe.token").write_text("site-token\n")
    config = tmp_path / "probe.toml"
    demo = (
        (ROOT / "config/demo.toml")
        .read_text()
        .replace('"demo/', f'"{ROOT}/config/demo/')
        .replace('"../.demo"', '"state"')
    )
    config.write_text(demo + f'\n[store]\nurl = "collector+{c.url}"\ntoken_file = "probe.token"\n')
    code = main(["probe", "once", "--config", str(config), "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert (
        json.loads(out)["sent"] == {"slot": 36, "allocation": 72, "job": 60, "fairness": 4}
        and json.loads(out)["dead"] == {}
    )
    drain(c)
    store = EmbeddedStore(c.root / "collector" / "store.sqlite")
    assert (store.count("slot"), store.count("allocation"), store.count("job")) == (36, 72, 60)
