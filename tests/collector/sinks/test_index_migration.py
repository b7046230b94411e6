"""Elasticsearch indices behind their template are moved by themselves (issue 39, point 1):
``fairacct mappings install`` and the collector at start see an index whose mapping is behind
(``_meta.fairacct_mapping_version``), make ``<name>-v<N>``, ``_reindex``, compare the counts
and swap an alias in one ``_aliases`` request; nothing lost, nothing doubled, one line each.
On osmem-server (a real HTTP server), from indices made by the previous release's templates."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from collector.records import VERSION, encode_docs
from collector.sinks.elasticsearch import ElasticsearchSink
from collector.sinks.elasticsearch.migration import Move, behind, swap_actions
from collector.sinks.elasticsearch.templates import load_templates

from ...conftest import ROOT
from ..server.conftest import Collector

PREVIOUS_RELEASE = "909f578"


def previous_template(kind: str) -> dict[str, Any]:
    """``mappings/<kind>.json`` as the previous release installed it (from the project's history)."""
    git = shutil.which("git")
    if git is None or not (ROOT / ".git").exists():
        pytest.skip("needs git and the project's history to read the previous release's mappings")
    shown = subprocess.run([git, "-C", str(ROOT), "show", f"{PREVIOUS_RELEASE}:mappings/{kind}.json"],
                           capture_output=True, text=True)  # fmt: skip
    if shown.returncode:
        pytest.skip(f"revision {PREVIOUS_RELEASE} (the previous release) is not in this checkout's history")
    template: dict[str, Any] = json.loads(shown.stdout)
    return template


def job(i: int, month: str) -> dict[str, Any]:
    return {"id": f"job-{i}", "kind": "job", "schema_version": 1, "probe": "p",
            "timestamp": f"2026-{month}-05T10:00:00Z", "user": f"user{i % 3}", "cpus": float(i),
            "end": 1795269600 + i}  # fmt: skip


def written_the_old_way(url: str) -> list[dict[str, Any]]:
    """The previous release's job template installed, and 30 job records in October and 20 in
    November written through it: two monthly indices with no mapping version."""
    old = previous_template("job")
    assert old["version"] == 3 and "_meta" not in old["template"]["mappings"]
    httpx.put(f"{url}/_index_template/fairacct-job", json=old).raise_for_status()
    docs = [job(i, "10") for i in range(30)] + [job(i, "11") for i in range(30, 50)]
    with ElasticsearchSink.from_url(url) as es:
        assert len(es.send("job", docs).acked) == 50
    return docs


def stored(url: str) -> dict[str, dict[str, Any]]:
    httpx.post(f"{url}/fairacct-job-*/_refresh")
    hits = httpx.post(f"{url}/fairacct-job-*/_search", json={"size": 1000}).json()["hits"]["hits"]
    assert len(hits) == len({h["_id"] for h in hits})  # no document twice
    return {h["_id"]: h["_source"] for h in hits}


def test_the_indices_behind_are_named_and_moved_in_one_request() -> None:
    answer = {
        "fairacct-job-2026.10": {"mappings": {"properties": {}}},  # before versions were recorded
        "fairacct-job-2026.11-v2": {"mappings": {"_meta": {"fairacct_mapping_version": 2}}},
        "fairacct-job-2026.12": {"mappings": {"_meta": {"fairacct_mapping_version": 3}}},  # current
        "fairacct-job-archive": {"mappings": {}},  # not one of fairacct's names: left alone
    }
    assert behind(answer, "fairacct", "job", 3) == [
        Move("fairacct-job-2026.10", 0, "fairacct-job-2026.10", "fairacct-job-2026.10-v3", 3),
        Move("fairacct-job-2026.11-v2", 2, "fairacct-job-2026.11", "fairacct-job-2026.11-v3", 3),
    ]
    assert swap_actions(behind(answer, "fairacct", "job", 3)[1]) == {"actions": [
        {"remove": {"index": "fairacct-job-2026.11-v2", "alias": "fairacct-job-2026.11"}},
        {"add": {"index": "fairacct-job-2026.11-v3", "alias": "fairacct-job-2026.11"}},
        {"remove_index": {"index": "fairacct-job-2026.11-v2"}},
    ]}  # fmt: skip


def test_mappings_install_moves_the_indices_made_by_the_previous_template(osmem_url: str) -> None:
    docs = written_the_old_way(osmem_url)
    before = stored(osmem_url)
    assert len(before) == 50
    with ElasticsearchSink.from_url(osmem_url) as es:
        assert load_templates()["job"]["version"] == 6
        es.install_templates()
        done = es.upgrade_indices()
        assert done == [
            "fairacct-job-2026.10: mapping v0 behind v6: 30 documents reindexed into fairacct-job-2026.10-v6, counts "
            "equal; fairacct-job-2026.10 is now an alias of fairacct-job-2026.10-v6, fairacct-job-2026.10 removed",
            "fairacct-job-2026.11: mapping v0 behind v6: 20 documents reindexed into fairacct-job-2026.11-v6, counts "
            "equal; fairacct-job-2026.11 is now an alias of fairacct-job-2026.11-v6, fairacct-job-2026.11 removed",
        ]
        assert stored(osmem_url) == before  # every document, once, as it was
        assert es.count("job") == 50
        mappings = httpx.get(f"{osmem_url}/fairacct-job-*/_mapping").json()
        assert {i: m["mappings"]["_meta"]["fairacct_mapping_version"] for i, m in mappings.items()} == {
            "fairacct-job-2026.10-v6": 6, "fairacct-job-2026.11-v6": 6
        }  # fmt: skip
        assert httpx.get(f"{osmem_url}/_alias/fairacct-job-*").json() == {
            "fairacct-job-2026.10-v6": {"aliases": {"fairacct-job-2026.10": {}}},
            "fairacct-job-2026.11-v6": {"aliases": {"fairacct-job-2026.11": {}}},
        }
        assert es.upgrade_indices() == []  # nothing behind any more
        # the writers go on under the monthly names: a re-sent record replaces itself, a new one is added
        assert len(es.send("job", [dict(docs[0], cpus=99.0), job(50, "11")]).acked) == 2
        after = stored(osmem_url)
        assert len(after) == 51 and after["job-0"]["cpus"] == 99.0


def test_a_move_keeps_each_documents_version(osmem_url: str) -> None:
    """Records a collector stored (each with its version: issue 54, point 11) keep their versions
    through the reindex, so a copy older than the stored one, flushed late, is still not stored."""
    httpx.put(f"{osmem_url}/_index_template/fairacct-job", json=previous_template("job")).raise_for_status()
    with ElasticsearchSink.from_url(osmem_url) as es:
        es.send_encoded("job", encode_docs("job", [job(i, "10") for i in range(3)]).carrying(VERSION, 2000))
        es.install_templates()
        [moved] = es.upgrade_indices()
        assert moved.startswith("fairacct-job-2026.10: mapping v0 behind v6: 3 documents reindexed")
        hits = httpx.post(f"{osmem_url}/fairacct-job-*/_search", json={"version": True}).json()["hits"]["hits"]
        assert {h["_index"]: 0 for h in hits} == {"fairacct-job-2026.10-v6": 0}
        assert {h["_id"]: h["_version"] for h in hits} == {"job-0": 2000, "job-1": 2000, "job-2": 2000}
        late = es.send_encoded("job", encode_docs("job", [dict(job(0, "10"), cpus=-1.0)]).carrying(VERSION, 1000))
        assert late.superseded == ["job-0"] and stored(osmem_url)["job-0"]["cpus"] == 0.0


def test_the_collector_moves_them_at_start_and_logs_each(osmem_url: str, tmp_path: Path) -> None:
    written_the_old_way(osmem_url)
    before = stored(osmem_url)
    with ElasticsearchSink.from_url(osmem_url) as es:
        es.install_templates()  # this release's (or store.install_templates = true)
    from ..server.conftest import free_port

    c = Collector(tmp_path, free_port(), {"p1": "token-one"}, {"flush_every_s": 0.2}, osmem_url)
    try:
        c.start()
        deadline = time.monotonic() + 60
        while len(re.findall(r"WARNING store migrated: ", c.log)) < 2:
            assert time.monotonic() < deadline, c.log
            time.sleep(0.1)
    finally:
        c.stop()
    lines = re.findall(r"fairacct\.store WARNING store migrated: (.*)", c.log)
    assert [line.split(":")[0] for line in lines] == ["fairacct-job-2026.10", "fairacct-job-2026.11"]
    assert "30 documents reindexed into fairacct-job-2026.10-v6, counts equal" in lines[0]
    assert stored(osmem_url) == before


def test_mappings_install_says_what_it_moved(osmem_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    from probes.cli import main

    written_the_old_way(osmem_url)
    assert main(["mappings", "install", "--store", osmem_url, "--json"]) == 0
    said = json.loads(capsys.readouterr().out)
    assert "fairacct-job" in said["installed"] and [m.split(":")[0] for m in said["migrated"]] == [
        "fairacct-job-2026.10", "fairacct-job-2026.11"
    ]  # fmt: skip
    assert main(["mappings", "install", "--store", osmem_url]) == 0
    assert "migrated" not in capsys.readouterr().out  # done once
