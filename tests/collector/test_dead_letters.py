"""Dead letters are visible and replayable: the store's reason, a degraded /healthz, a retry.

Against osmem-server (a real HTTP server): an index created by hand with a conflicting type for
``user`` makes the store refuse every job record for good, as a conflicting template did at a
site; once the cause is fixed (the index removed), ``fairacct outbox retry`` and the next cycle
deliver them, each once.
"""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pytest

from collector.sinks.elasticsearch import ElasticsearchSink
from probes.cli import main
from probes.service.health import Metrics

from ..conftest import ROOT

JOBS_INDEX = "fairacct-job-2026.11"  # the demo pool's jobs ended in November 2026


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def http(method: str, url: str, body: dict[str, object] | None = None) -> None:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as reply:
        reply.read()


def test_dead_letters_are_listed_with_the_reason_and_sent_again_once_fixed(
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
    assert run(capsys, "mappings", "install", *common)[0] == 0
    http("PUT", f"{osmem_url}/{JOBS_INDEX}", {"mappings": {"properties": {"user": {"type": "long"}}}})

    code, _, err = run(capsys, "probe", "once", *common)
    assert code == 1, err
    assert "fairacct: the store refused 60 record(s) for good, now dead letters (60 job), e.g. job " in err
    assert "see `fairacct outbox --dead-letters`, fix the cause, then `fairacct outbox retry`" in err

    code, out, _ = run(capsys, "outbox", *common, "--dead-letters", "--json")
    listed = json.loads(out)
    assert code == 0 and listed["dead_letters"] == {"job": 60} and len(listed["recent_dead_letters"]) == 60
    assert all("user" in d["error"] for d in listed["recent_dead_letters"])  # the store's own reason

    http("DELETE", f"{osmem_url}/{JOBS_INDEX}")  # the cause, fixed
    code, out, _ = run(capsys, "outbox", "retry", *common, "--kind", "slot")
    assert code == 0 and out.strip() == "no dead letters of kind slot"
    code, out, _ = run(capsys, "outbox", "retry", *common, "--kind", "job")
    assert code == 0 and out.startswith("put back in the outbox: 60 job;")
    code, _, err = run(capsys, "probe", "once", *common)
    assert code == 0, err
    with ElasticsearchSink.from_url(osmem_url) as sink:
        assert (sink.count("slot"), sink.count("job")) == (36, 60)
    code, out, _ = run(capsys, "outbox", *common, "--json")
    assert json.loads(out)["dead_letters"] == {}


def test_healthz_is_degraded_while_dead_letters_wait() -> None:
    metrics = Metrics(clock=lambda: 1000.0)
    metrics.register("flush", 60)
    metrics.finished("flush", ok=True, duration_s=0.1)
    assert metrics.health()[1]["status"] == "ok"
    metrics.set_outbox({}, None, {"job": 60})
    healthy, doc = metrics.health()
    assert not healthy and doc["status"] == "degraded" and doc["outbox"]["dead_letters"] == 60
    assert doc["problems"] == [
        "60 record(s) refused by the store for good (60 job): see `fairacct outbox --dead-letters`, "
        "fix the cause, then `fairacct outbox retry`"
    ]
    metrics.set_outbox({"job": 60}, 999.0, {})  # retried: waiting again, nothing dead
    assert metrics.health()[1]["status"] == "ok"
