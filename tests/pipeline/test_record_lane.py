"""Issue 52, point 3: the cycle's jobs are objects that ``probe once`` runs as the service does
(the priority sync and the summaries too, when configured); every command that stores records
goes through one record lane (its commit lock and fault points, the store's templates, the
``[upstream]`` lane); one verdict of a delivery gives both paths the same outcome and exit status.

Real parts: the embedded store, osmem-server (a real HTTP Elasticsearch), the fake negotiator
of tests/pipeline/test_priority_sync.py (the bindings' methods), the demo pool's dumps."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import urllib.request
from pathlib import Path

import pytest

from collector.errors import SinkError
from collector.outbox import Outbox
from collector.sinks.sqlite import EmbeddedStore
from probes.cli import main
from probes.config import ProbeConfig, parse_config
from probes.pipeline.cycle import ProbeCycle
from probes.service.scheduler import ProbeService
from probes.sources.checkpoints import LEDGER_KEY
from tests.htcondor_pool import refusing_port
from tests.pipeline.test_priority_sync import LEDGER, NOW, FakeNegotiator

from ..collector.conftest import start_server, stop_server
from ..conftest import DEMO, ROOT

TARGETS = {"user": {"alice": "25", "bob": "25", "carol": "50"}}
SYNC = {"sync": True, "pattern": ".*@pool", "priority_at_target": 1000.0}


def sync_config(state: Path) -> ProbeConfig:
    """The priority sync of tests/pipeline/test_priority_sync.py, turned on, no pool to read."""
    return parse_config({
        "fairshare": {"interval_s": 3600, "depth": 2, "targets": TARGETS},
        "priority": SYNC,
        "summaries": {"recent_days": 0, "nightly_days": 0},
        "probe": {"state_dir": str(state)},
    })  # fmt: skip


def demo_config(path: Path, extra: str = "") -> Path:
    """The demo pool's configuration, its state beside it in ``state``."""
    path.write_text(
        (ROOT / "config/demo.toml")
        .read_text()
        .replace('"demo/', f'"{ROOT}/config/demo/')
        .replace('"../.demo"', '"state"')
        + extra
    )
    return path


def test_probe_once_runs_the_priority_sync_when_configured(tmp_path: Path) -> None:
    config = sync_config(tmp_path)
    negotiator = FakeNegotiator()
    with Outbox(tmp_path / "outbox.sqlite") as outbox, EmbeddedStore(tmp_path / "store.sqlite") as store:
        outbox.commit({}, {LEDGER_KEY: LEDGER})  # alice 60 %, bob 30 %, carol 10 %
        cycle = ProbeCycle(config, probe="test", negotiator=negotiator)
        assert list(cycle.jobs) == ["fairshare", "priority", "flush"]  # no sources, no summaries
        done, delivery = cycle.once(outbox, store, now=NOW)
        stored = sorted((d["credential"], d["before"], d["after"], d["applied"]) for d in store.query("priority"))
    # the service's sync (tests/service/test_priority_job.py): alice above her 25 % target, bob above his
    assert negotiator.calls == [("setFactor", "alice@pool", 2000.0), ("setFactor", "bob@pool", 600.0)]
    assert done.done == {"priority": "set 2 submitter(s)"} and done.enqueued == {"priority": 3}
    # committed before the delivery, so sent by the same `probe once`
    assert stored == [("alice", 1000, 2000, True), ("bob", 1000, 600, True), ("carol", None, None, False)]
    assert delivery.flushed is not None and delivery.flushed.sent == {"priority": 3}


def test_probe_once_runs_the_summaries_when_configured(tmp_path: Path) -> None:
    config = parse_config({
        "pool": {"name": "demo", "interval_s": 300},
        "sources": {"status_files": [str(DEMO / "status.ads")], "idle_files": [str(DEMO / "queue.ads")],
                    "history": [str(DEMO / "history.ads")]},
        "machines": {"speed_attribute": "HEPSPEC"},
        "summaries": {"recent_days": 1, "nightly_days": 3},
        "probe": {"state_dir": str(tmp_path)},
    })  # fmt: skip
    now = 1795356000.0  # 2026-11-22T14:00:00Z: the last 3 days are 2026-11-20 .. 2026-11-22
    with Outbox(tmp_path / "outbox.sqlite") as outbox, EmbeddedStore(tmp_path / "store.sqlite") as store:
        cycle = ProbeCycle(config, probe="test")
        assert list(cycle.jobs) == ["snapshot", "history", "fairshare", "flush", "summaries", "summaries_nightly"]
        done, _ = cycle.once(outbox, store, now=now)
        summaries = store.query("summary")
        ended = [j["timestamp"][:10] for j in store.query("job")]
    assert done.done == {
        "summaries": "0 summaries of 2026-11-22 .. 2026-11-22",  # no record of that day yet
        "summaries_nightly": "68 summaries of 2026-11-20 .. 2026-11-22",
    }
    # the demo's 60 jobs ended 2 on 2026-11-19 (out of the 3 days), 28 on 11-20 and 30 on 11-21
    assert sorted(ended.count(day) for day in ("2026-11-19", "2026-11-20", "2026-11-21")) == [2, 28, 30]
    jobs_summed = sum(s["n_jobs"] for s in summaries if s["record_kind"] == "job")
    assert jobs_summed == 28 + 30 and len(summaries) == 68
    assert {s["day_iso"] for s in summaries} == {"2026-11-20T00:00:00Z", "2026-11-21T00:00:00Z"}


def test_probe_once_leaves_the_summaries_while_records_wait(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The store down: the cycle is queued (exit 3, as before), the summaries are not run (they
    would fail on the store, or count without the records that wait) and said so."""
    config = demo_config(tmp_path / "probe.toml")
    with refusing_port() as port:
        assert main(["probe", "once", "--config", str(config), "--store", f"http://127.0.0.1:{port}", "--json"]) == 3
    out, err = capsys.readouterr()
    why = "not run, records wait in the outbox: the store would not count them"
    assert f"fairacct: summaries: {why}" in err and f"fairacct: summaries_nightly: {why}" in err
    assert json.loads(out)["jobs"] == {
        "summaries": {"skipped": "records wait in the outbox: the store would not count them"},
        "summaries_nightly": {"skipped": "records wait in the outbox: the store would not count them"},
    }


def test_the_priority_commit_waits_for_the_commit_lock(tmp_path: Path) -> None:
    """The priority sync's records are committed as every other job's: under the lane's lock
    (before, ``priority sync`` committed with a bare ``outbox.commit``)."""
    config = sync_config(tmp_path)
    cycle = ProbeCycle(config, probe="test", negotiator=FakeNegotiator())
    with Outbox(tmp_path / "outbox.sqlite") as outbox:
        outbox.commit({}, {LEDGER_KEY: LEDGER})
    committed = threading.Event()

    def sync() -> None:
        with cycle.lane.open() as outbox:
            cycle.jobs["priority"].run(outbox, NOW)
        committed.set()

    with cycle.lane._commits:  # another job's commit under way
        worker = threading.Thread(target=sync, daemon=True)
        worker.start()
        assert not committed.wait(1.0)  # the negotiator was set; the commit waits
        with Outbox(tmp_path / "outbox.sqlite") as outbox:
            assert outbox.status().depth == {}
    assert committed.wait(60)
    worker.join(60)
    with Outbox(tmp_path / "outbox.sqlite") as outbox:
        assert outbox.status().depth == {"priority": 3}


def test_the_priority_commit_passes_the_commit_fault_points(tmp_path: Path) -> None:
    """Killed at ``before-commit`` (FAIRACCT_CRASH_AT), a priority sync commits nothing, as a
    snapshot's commit killed there; ``after-commit``, its records are in the outbox."""
    script = (
        "import sys; from pathlib import Path\n"
        "from collector.outbox import Outbox\n"
        "from probes.pipeline.cycle import ProbeCycle\n"
        "from tests.pipeline.test_priority_sync import NOW, FakeNegotiator\n"
        "from tests.pipeline.test_record_lane import sync_config\n"
        "cycle = ProbeCycle(sync_config(Path(sys.argv[1])), probe='test', negotiator=FakeNegotiator())\n"
        "with cycle.lane.open() as outbox:\n"
        "    cycle.jobs['priority'].run(outbox, NOW)\n"
    )
    for point, depth in (("before-commit", {}), ("after-commit", {"priority": 3})):
        state = tmp_path / point
        state.mkdir()
        with Outbox(state / "outbox.sqlite") as outbox:
            outbox.commit({}, {LEDGER_KEY: LEDGER})
        env = {**os.environ, "FAIRACCT_CRASH_AT": point}
        done = subprocess.run([sys.executable, "-c", script, str(state)], cwd=ROOT, env=env, capture_output=True,
                              text=True, timeout=120)  # fmt: skip
        assert done.returncode == -signal.SIGKILL, done.stderr
        with Outbox(state / "outbox.sqlite") as outbox:
            assert outbox.status().depth == depth


def _indices(url: str) -> list[str]:
    with urllib.request.urlopen(f"{url}/_cat/indices?format=json", timeout=30) as reply:
        return sorted(i["index"] for i in json.loads(reply.read()) if i["index"].startswith("fairacct-"))


def test_fairness_store_records_checks_the_store_templates(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Before, ``fairness --store-records`` sent its records to an Elasticsearch without
    fairacct's templates, which guessed their types; now they wait, as ``probe once``'s do."""
    server = start_server()
    try:
        config = demo_config(tmp_path / "probe.toml")
        code = main(["fairness", "--config", str(config), "--store", server.url, "--store-records", "--json"])
        out, err = capsys.readouterr()
        assert code == 3, err  # records wait, as `probe once` says it; the analysis is printed all the same
        assert json.loads(out)["shares"]
        assert (
            f"fairacct: 4 record(s) queued in the outbox, not sent: {server.url}: index templates missing for " in err
        )
        assert "run `fairacct mappings install` first" in err
        assert _indices(server.url) == []  # nothing written with guessed types
        with Outbox(tmp_path / "state/outbox.sqlite") as outbox:
            assert outbox.status().depth == {"fairness": 4}
    finally:
        stop_server(server)


def test_fairness_store_records_sends_the_upstream_lane(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The job records waiting for ``[upstream]`` are tried by every delivery, that of
    ``fairness --store-records`` too (before, it flushed the store alone)."""
    with refusing_port() as port:
        up = f"gratia+http://127.0.0.1:{port}/gratia-servlets/rmi"
        config = demo_config(tmp_path / "probe.toml", f'\n[upstream]\nurl = "{up}"\ngratia_site = "EXAMPLE_AP"\n')
        assert main(["probe", "once", "--config", str(config)]) == 3
        capsys.readouterr()
        assert main(["fairness", "--config", str(config), "--store-records"]) == 3  # [upstream]'s records wait
        _, err = capsys.readouterr()
        assert "fairacct: [upstream] did not take every job record: " in err and "59 wait in the outbox" in err
        with Outbox(tmp_path / "state/outbox.sqlite") as outbox:  # the fairness records went to the store
            assert outbox.status().depth == {"upstream:job": 59}


def _service_flush(config: Path) -> tuple[str | None, SinkError | None]:
    """The service's jobs on ``config`` once each, then its flush: its line, or its error."""
    from probes.config import load_config

    service = ProbeService(load_config(config), probe="test")
    for name in ("snapshot", "history", "fairshare"):
        service.run_job(name)
    try:
        return service.run_job("flush"), None
    except SinkError as exc:
        return None, exc


@pytest.mark.parametrize("store", ["down", "up"])
def test_one_verdict_for_probe_once_and_the_service(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], request: pytest.FixtureRequest, store: str
) -> None:
    """The same cycle into the same store: ``probe once`` exits with the verdict's status and
    says its reasons; the service's flush fails with the same reasons (before, it said "the store
    did not take every record" where ``probe once`` said the records were queued)."""
    held = contextlib.ExitStack()  # a port that refuses for the whole test: no other test's server takes it
    request.addfinalizer(held.close)
    url = f"http://127.0.0.1:{held.enter_context(refusing_port())}" if store == "down" else "sqlite:///fairacct.sqlite"
    extra = f'\n[store]\nurl = "{url}"\n[summaries]\nrecent_days = 0\nnightly_days = 0\n'
    once = demo_config(tmp_path / "once.toml", extra)
    code = main(["probe", "once", "--config", str(once)])
    _, err = capsys.readouterr()
    (tmp_path / "run").mkdir()
    run = demo_config(tmp_path / "run" / "run.toml", extra)
    line, error = _service_flush(run)
    with Outbox(tmp_path / "state/outbox.sqlite") as outbox:
        waiting = outbox.status()
    if store == "down":
        assert code == 3 and error is not None and line is None
        reason = str(error)
        assert reason.startswith("172 record(s) queued in the outbox, not sent: ") and f"fairacct: {reason}\n" in err
        assert waiting.depth == {"allocation": 72, "fairness": 4, "job": 60, "slot": 36}
    else:
        assert code == 0 and error is None and err == ""
        assert (
            line
            == "sent 172 records (72 allocation, 4 fairness, 60 job, 36 slot; 172 new, 0 already stored), 0 waiting"
        )
        assert waiting.depth == {}


def test_the_verdicts_exit_statuses_are_the_commands(tmp_path: Path) -> None:
    """The verdict's statuses are the command line's exit codes: 0, 1 refused for good, 3 queued."""
    from probes.cli.common import EXIT_FAILED, EXIT_OK, EXIT_QUEUED
    from probes.pipeline import verdict
    from probes.pipeline.verdict import judge

    assert (verdict.DELIVERED, verdict.FAILED, verdict.PARTLY) == (EXIT_OK, EXIT_FAILED, EXIT_QUEUED)
    config = parse_config({"probe": {"state_dir": str(tmp_path)}})
    cycle = ProbeCycle(config, probe="test")
    with cycle.lane.open() as outbox:
        assert judge(cycle.lane.deliver(outbox)).outcome == "delivered"  # nothing to send: delivered
