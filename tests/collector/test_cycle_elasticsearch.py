"""A probe cycle into Elasticsearch (osmem-server, a real HTTP server), through the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from collector.sinks.elasticsearch import ElasticsearchSink
from probes.cli import main

from ..conftest import ROOT


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("scheme", ["http", "opensearch+http"])
def test_the_demo_cycle_lands_in_elasticsearch(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, osmem_url: str, scheme: str
) -> None:
    url = osmem_url.replace("http", scheme, 1)
    config = tmp_path / "probe.toml"
    config.write_text(
        (ROOT / "config/demo.toml")
        .read_text()
        .replace('"demo/', f'"{ROOT}/config/demo/')
        .replace('"../.demo"', '"state"')
    )
    common = ["--config", str(config), "--store", url]
    # without fairacct's templates, Elasticsearch would guess the types: not sent, queued (exit 3)
    code, _, err = run(capsys, "probe", "once", *common)
    kinds = "slot, allocation, job, fairshare, fairness, gap, priority, summary"
    assert code == 3 and f"index templates missing for {kinds}" in err
    assert "172 record(s) queued in the outbox, not sent" in err
    assert "run `fairacct mappings install` first" in err
    code, out, err = run(capsys, "mappings", "install", *common)
    assert code == 0 and out.startswith("installed templates: ")
    sent = []
    for _ in range(2):  # the queued cycle is sent; the same dump again is a replay, skipped
        code, out, err = run(capsys, "probe", "once", *common, "--json")
        assert code == 0, err
        sent.append(json.loads(out)["sent"])
    assert sent == [{"slot": 36, "allocation": 72, "job": 60, "fairness": 4}, {}] and json.loads(out)["dead"] == {}
    with ElasticsearchSink.from_url(url) as sink:
        assert (sink.count("slot"), sink.count("allocation"), sink.count("job")) == (36, 72, 60)
        assert set(sink.field_types("slot")) == {"fairacct-slot-2026.11"}
        # the overhead histogram from the stored records is the one `fairacct overhead` prints
        stored = sink.search_counts("slot", "overhead_cu")
    code, out, _ = run(capsys, "overhead", "--config", str(config), "--json")
    assert {str(k): v for k, v in stored.items()} == json.loads(out)["histogram"]
    code, out, _ = run(capsys, "records", "job", *common, "--since", "2026-11-21T14:00:00Z", "--json")
    jobs = json.loads(out)
    assert jobs and all(j["timestamp"] >= "2026-11-21T14:00:00Z" for j in jobs)
    assert [j["timestamp"] for j in jobs] == sorted(j["timestamp"] for j in jobs)


def test_a_rejected_record_goes_to_the_dead_letters_and_its_batch_is_delivered(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, osmem_url: str
) -> None:
    from collector.outbox import Outbox
    from collector.records import table_docs
    from probes.config import load_config
    from probes.pipeline.overhead import overhead_report
    from probes.sources.status import read_status

    config = load_config(ROOT / "config/demo.toml")
    snapshot, _ = read_status(config.sources.status_files, config.slot_reading())
    docs = table_docs("slot", overhead_report(snapshot, config).slots, probe="test")
    docs[5]["overhead_cu"] = "lots"  # a mapping conflict: overhead_cu is an integer field
    with ElasticsearchSink.from_url(osmem_url) as sink, Outbox(tmp_path / "state/outbox.sqlite") as outbox:
        sink.install_templates()
        outbox.commit({"slot": docs}, {})
        result = outbox.flush(sink)
        assert (result.sent["slot"], result.dead["slot"]) == (35, 1)
        assert sink.count("slot") == 35
        (dead,) = outbox.dead_letters()
        assert dead["id"] == docs[5]["id"] and "overhead_cu" in dead["error"]
        assert outbox.status().depth == {} and outbox.status().dead_letters == {"slot": 1}
    (tmp_path / "probe.toml").write_text('[probe]\nstate_dir = "state"\n')
    code, out, _ = run(capsys, "outbox", "--config", str(tmp_path / "probe.toml"))
    assert code == 0 and "dead letters: 1" in out and docs[5]["id"] in out


def test_fairness_records_land_with_their_template(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, osmem_url: str
) -> None:
    config = tmp_path / "probe.toml"
    config.write_text(
        (ROOT / "config/demo.toml")
        .read_text()
        .replace('"demo/', f'"{ROOT}/config/demo/')
        .replace('"../.demo"', '"state"')
    )
    common = ["--config", str(config), "--store", osmem_url]
    code, _, err = run(capsys, "mappings", "install", *common)
    assert code == 0, err
    code, _, err = run(capsys, "fairness", *common, "--store-records")
    assert code == 0, err
    with ElasticsearchSink.from_url(osmem_url) as sink:
        assert sink.count("fairness") == 4  # the demo pool's four users, one bucket
        types = next(iter(sink.field_types("fairness").values()))
    assert types["starved"] == "boolean" and types["bucket_start_iso"] == "date" and types["jain_served"] == "double"
