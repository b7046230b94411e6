"""The probe service: cadence, intervals, faults, health and metrics, and clean stops.

In-process tests drive :class:`ProbeService` with a clock passed in and the fake daemons of
``tests/sources/test_live.py`` (the only fakes: the objects at the network call). The
process tests run ``fairacct probe run`` for real, on the demo pool's dumps, with intervals
of a second, and stop it with SIGTERM, ``--for`` and SIGKILL.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from collector.errors import ConfigError
from collector.outbox import Outbox
from collector.records import KINDS
from collector.sinks.sqlite import EmbeddedStore
from probes.accounting.fairshare import job_usage, window_usage
from probes.cli import main
from probes.config import ProbeConfig, load_config, parse_config
from probes.service.health import Metrics
from probes.service.scheduler import ProbeService
from probes.sources.checkpoints import LEDGER_KEY, ROLLED_KEY, SNAPSHOT_KEY
from probes.sources.history import read_history

from ..conftest import DEMO, ROOT
from ..sources.test_live import FakeCollector, FakePool, FakeSchedd, parse

LINE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ [\w.]+ (INFO|WARNING|ERROR) \S.*$")


class Clock:
    """The service's clock, set by the test."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def live_config(tmp_path: Path, **sections: dict[str, Any]) -> ProbeConfig:
    raw: dict[str, Any] = {
        # the fake collector answers the dump's LastHeardFrom while the tests' clocks run days on:
        # its startds are taken as heard from (tests/service/test_unheard_metrics.py: when not)
        "pool": {"name": "test", "update_interval_s": 1e7},
        "sources": {"live": True},
        "machines": {"speed_attribute": "HEPSPEC"},
        "probe": {"state_dir": str(tmp_path / "state")},
    }
    for name, values in sections.items():
        raw[name] = {**raw.get(name, {}), **values}
    return parse_config(raw)


@pytest.fixture
def daemons(condor25: Path) -> Iterator[tuple[FakeCollector, FakeSchedd, FakeSchedd]]:
    vm = FakeSchedd("vm", parse(condor25 / "queue.ads"), parse(condor25 / "history.ads"))
    bad = FakeSchedd("bad")
    collector = FakeCollector(parse(condor25 / "status.ads"), [vm.location(), bad.location()])
    yield collector, vm, bad
    for d in (collector, vm, bad):
        d.released.set()


def service(
    config: ProbeConfig, daemons: tuple[FakeCollector, FakeSchedd, FakeSchedd], clock: Clock | None = None
) -> ProbeService:
    collector, vm, bad = daemons
    pool = FakePool({None: collector}, [vm, bad]).live(config)
    return ProbeService(config, probe="test", clock=clock or time.time, pool=pool)


def wait_until(ready: Callable[[], bool], what: str, timeout_s: float = 120) -> None:
    """Poll ``ready`` until it holds; fail naming ``what`` after ``timeout_s`` (a deadline
    against a hang, generous for a loaded machine)."""
    deadline = time.monotonic() + timeout_s
    while not ready():
        assert time.monotonic() < deadline, f"{what}: not within {timeout_s:g} s"
        time.sleep(0.02)


def outbox_docs(state: Path, kind: str) -> list[dict[str, Any]]:
    with Outbox(state / "outbox.sqlite") as outbox:
        return outbox.waiting(kind)


def test_a_snapshot_stands_for_the_real_time_since_the_last_successful_one(
    tmp_path: Path, daemons: tuple[FakeCollector, FakeSchedd, FakeSchedd]
) -> None:
    clock = Clock(1795269000.0)
    config = live_config(tmp_path)
    svc = service(config, daemons, clock)
    collector = daemons[0]
    for now, fails in [
        (1795269000.0, False),
        (1795269450.0, False),
        (1795269700.0, True),
        (1795270000.0, False),
        (1795275000.0, False),
    ]:
        clock.now = now
        collector.fail = "Failed communication with collector." if fails else None
        svc._run("snapshot")
    slots = [d for d in outbox_docs(config.probe.state_dir, "slot") if d["name"] == "slot1@gpu-node1@vm"]
    # a snapshot never stands for longer than the cadence (300 s): the late one at 1795269450, the
    # one after the failed cycle and the one after 5000 s of silence stand for 300 s, the rest is
    # unobserved, and a gap of every node the last snapshot had
    assert [(d["observed_at"], d["interval_s"]) for d in slots] == [
        (1795269000, 300), (1795269450, 300), (1795270000, 300), (1795275000, 300)
    ]  # fmt: skip
    assert [d["overhead_cu_hours"] for d in slots] == pytest.approx([0.25] * 4)  # 3 GPUs idle
    assert svc.metrics.unobserved_s == 5100 and "fairacct_unobserved_seconds_total 5100" in svc.metrics.render()
    gaps = [d for d in outbox_docs(config.probe.state_dir, "gap") if d["name"] == "slot1@gpu-node1@vm"]
    assert [(d["reason"], d["start"], d["end"]) for d in gaps] == [
        ("unobserved", 1795269000, 1795269150), ("unobserved", 1795269450, 1795269700),
        ("unobserved", 1795270000, 1795274700),
    ]  # fmt: skip
    with Outbox(config.probe.state_dir / "outbox.sqlite") as outbox:
        assert outbox.checkpoint(SNAPSHOT_KEY) == {"at": 1795275000.0}
    state = svc.metrics.jobs["snapshot"]
    assert (state.runs, state.failures, state.last_error) == (
        5,
        1,
        "collector COLLECTOR_HOST: startd ads: Failed communication with collector.",
    )
    assert svc.metrics.source_failures == {"collector": 1}
    assert "fairacct_snapshot_interval_seconds 300" in svc.metrics.render()


def test_a_schedd_that_fails_costs_only_its_part(
    tmp_path: Path,
    daemons: tuple[FakeCollector, FakeSchedd, FakeSchedd],
    caplog: pytest.LogCaptureFixture,
    condor25: Path,
) -> None:
    clock = Clock(1795269500.0)
    config = live_config(tmp_path, pool={"history_match": 15})
    _, vm, bad = daemons
    bad.fail = "Failed to connect to <10.0.0.9:9618>"
    svc = service(config, daemons, clock)
    with caplog.at_level("INFO", logger="fairacct"):
        svc._run("snapshot")  # the history prices its jobs against the snapshot's machines
        svc._run("history")
    assert len(outbox_docs(config.probe.state_dir, "job")) == 42  # in one history call, 15 jobs converted at a time
    assert [c["call"] for c in vm.calls].count("history") == 1
    assert "schedd:bad skipped: schedd bad: history: Failed to connect to <10.0.0.9:9618>" in caplog.text
    assert "schedd:bad skipped: schedd bad: idle jobs: Failed to connect to <10.0.0.9:9618>" in caplog.text
    assert re.search(r"history: 42 new jobs, 1 source\(s\) skipped in \d+\.\d\d s", caplog.text)
    assert re.search(
        r"snapshot: 2 slots, 6 allocations, 3 idle jobs in 3 autoclusters, 8 records standing for 300 s", caplog.text
    )
    assert svc.metrics.source_failures == {"schedd:bad": 2}
    assert 'fairacct_source_failures_total{source="schedd:bad"} 2' in svc.metrics.render()
    with Outbox(config.probe.state_dir / "outbox.sqlite") as outbox:
        assert (
            outbox.checkpoint("history:schedd:vm")["end"] == 1795269401
            and outbox.checkpoint("history:schedd:bad") is None
        )
        ledger = outbox.checkpoint(LEDGER_KEY)
    # the fairshare ledger holds the jobs' dedicated core-seconds, spread over the windows they ran in
    jobs, _ = read_history([condor25 / "history.ads"], config.job_reading())
    _, contrib = window_usage(jobs, job_usage(jobs, "dedicated_ps"), at=clock.now, interval_s=86400, depth=8)
    assert sum(row[-1] for row in ledger) == pytest.approx(contrib.sum()) and contrib.sum() > 0


def test_a_hung_daemon_does_not_hold_the_stop(
    tmp_path: Path, daemons: tuple[FakeCollector, FakeSchedd, FakeSchedd], caplog: pytest.LogCaptureFixture
) -> None:
    config = live_config(tmp_path, pool={"timeout_s": 60})
    collector = daemons[0]
    collector.hang = True
    svc = service(config, daemons)
    with caplog.at_level("INFO", logger="fairacct"):
        svc.start()
        wait_until(lambda: collector.active["query"] == 1, "the snapshot's query reached the hung collector")
        svc.stop()
    # the stop returned while the query still hangs (it does for 30 s, or until the test ends): it
    # abandoned the call instead of waiting for it (no bound on the stop's wall time under load)
    assert collector.active["query"] == 1
    assert "snapshot: interrupted by the stop, nothing was committed" in caplog.text
    assert outbox_docs(config.probe.state_dir, "slot") == []
    assert svc.metrics.source_failures == {}  # a stop is not a failure of the pool
    assert svc.metrics.jobs["snapshot"].failures == 0  # nor of the job it interrupted


def test_a_slow_cycle_is_never_run_twice_at_once(
    tmp_path: Path, daemons: tuple[FakeCollector, FakeSchedd, FakeSchedd], caplog: pytest.LogCaptureFixture
) -> None:
    config = live_config(tmp_path, pool={"interval_s": 0.2, "max_interval_s": 5},
                         probe={"history_every_s": 3600, "flush_every_s": 0.3, "misfire_grace_s": 5})  # fmt: skip
    collector = daemons[0]
    collector.delay = 0.3
    svc = service(config, daemons)
    enough = threading.Event()

    def watch() -> None:  # stop once two snapshots ran and a third was refused, however long that takes
        try:
            wait_until(
                lambda: (
                    "snapshot" in svc.metrics.jobs
                    and svc.metrics.jobs["snapshot"].runs >= 2
                    and "maximum number of running instances" in caplog.text
                ),
                "two snapshots and one refused while another ran",
            )
        finally:  # the asserts below say what was missing
            enough.set()

    watcher = threading.Thread(target=watch, daemon=True)
    with caplog.at_level("WARNING", logger="apscheduler"):
        watcher.start()
        assert svc.run(stop=enough) == "stopped"
    assert collector.most_active["query"] == 1
    assert svc.metrics.jobs["snapshot"].runs >= 2 and svc.metrics.jobs["snapshot"].failures == 0
    assert "maximum number of running instances reached (1)" in caplog.text
    with EmbeddedStore(config.probe.state_dir / "fairacct.sqlite") as store:
        intervals = sorted({d["interval_s"] for d in store.query("slot")})
    # a query of 0.3 s each 0.2 s: a snapshot stands for the cadence at most, the rest is unobserved
    # (no bound on how late: a loaded machine only makes the holes longer)
    assert intervals == [0.2] and svc.metrics.unobserved_s > 0


# -- the fairshare ledger and window roll ---------------------------------------------------------------------


def test_windows_roll_once_each_as_they_close(
    tmp_path: Path, daemons: tuple[FakeCollector, FakeSchedd, FakeSchedd], condor25: Path
) -> None:
    clock = Clock(1795269500.0)  # window 1795266000 .. 1795269600
    config = live_config(tmp_path, fairshare={"interval_s": 3600, "depth": 4})
    svc = service(config, daemons, clock)
    assert svc.run_job("fairshare") is None  # the first start: nothing closed yet
    svc.run_job("snapshot")  # the history prices its jobs against the latest snapshot's machines
    svc.run_job("history")
    clock.now = 1795269600.0 + 5
    summary = svc.run_job("fairshare")
    assert summary == "rolled window(s) 2026-11-21T13:00:00Z: 12 records"
    docs = {(d["type"], d["name"]): d for d in outbox_docs(config.probe.state_dir, "fairshare")}
    jobs, _ = read_history([condor25 / "history.ads"], config.job_reading())
    _, contrib = window_usage(jobs, job_usage(jobs, "dedicated_ps"), at=1795269500.0, interval_s=3600, depth=4)
    total = docs["user", "condoruser"]["total"]
    assert docs["user", "condoruser"]["usage"] == total == pytest.approx(contrib[:, 0].sum())  # one user ran everything
    assert {n: d["usage"] for (t, n), d in docs.items() if t == "group"} == {
        "group_cms": 307,
        "group_atlas": 54,
        "group_osg": 33,
    }
    assert docs["account", "CMS-Tier2"]["effective"] == pytest.approx(307 / total)
    # and per submitter, as the negotiator names them (one account, a submitter per group)
    assert {n: d["usage"] for (t, n), d in docs.items() if t == "submitter"} == {
        "group_cms.condoruser@localpool": 307,
        "group_atlas.condoruser@localpool": 54,
        "group_osg.condoruser@localpool": 33,
        "condoruser@localpool": total - 307 - 54 - 33,
    }
    assert svc.run_job("fairshare") is None  # the same window is not rolled twice
    clock.now += 3 * 3600  # three more windows closed while nobody looked
    assert svc.run_job("fairshare") == (
        "rolled window(s) 2026-11-21T14:00:00Z, 2026-11-21T15:00:00Z, 2026-11-21T16:00:00Z: 36 records"
    )  # the 12 credentials, whose usage still counts (decayed) within the depth of 4 windows
    with Outbox(config.probe.state_dir / "outbox.sqlite") as outbox:
        assert outbox.checkpoint(ROLLED_KEY) == {"window_start": 1795276800.0}
        assert outbox.checkpoint(LEDGER_KEY) == []  # 13:00 is out of the depth of the next window (17:00)


# -- health and metrics -------------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def file_config(tmp_path: Path, **probe: Any) -> Path:
    path = tmp_path / "probe.toml"
    settings = {"state_dir": '"state"', "history_every_s": 1, "flush_every_s": 0.5, "misfire_grace_s": 5, **probe}
    path.write_text(
        f"""
[pool]
name = "demo"
interval_s = 1
max_interval_s = 5
[sources]
status_files = ["{DEMO / "status.ads"}"]
idle_files = ["{DEMO / "queue.ads"}"]
history = ["{DEMO / "history.ads"}"]
[machines]
speed_attribute = "HEPSPEC"
[probe]
"""
        + "".join(f"{k} = {v}\n" for k, v in settings.items())
    )
    return path


def test_healthz_and_metrics(tmp_path: Path) -> None:
    port = free_port()
    config = load_config(file_config(tmp_path, health_port=port))
    svc = ProbeService(config, probe="test")
    svc.start()
    try:
        deadline = time.monotonic() + 10
        while svc.metrics.jobs["snapshot"].last_success is None or svc.metrics.jobs["history"].last_success is None:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        status, body = get(f"http://127.0.0.1:{port}/healthz")
        assert status == 200, body
        doc = json.loads(body)
        assert doc["status"] == "ok" and set(doc["jobs"]) == {
            "snapshot",
            "history",
            "flush",
            "fairshare",
            "summaries",
            "summaries_nightly",
        }
        assert doc["jobs"]["snapshot"]["last_success"].endswith("Z") and doc["jobs"]["snapshot"]["every_s"] == 1
        assert isinstance(doc["outbox"]["depth"], int)
        status, text = get(f"http://127.0.0.1:{port}/metrics")
        assert status == 200
        for line in text.splitlines():
            assert re.match(r'^(# (HELP|TYPE) \w+ .+|\w+(\{(\w+="[^"]*",?)+\})? (-?[0-9.e+]+|NaN))$', line), line
        assert re.search(r'^fairacct_cycles_total\{job="snapshot",outcome="ok"\} [1-9]', text, re.MULTILINE)
        assert re.search(r'^fairacct_records_total\{kind="slot"\} [1-9]\d*$', text, re.MULTILINE)
        assert re.search(r'^fairacct_records_total\{kind="job"\} 60$', text, re.MULTILINE)
        assert re.search(r'^fairacct_job_duration_seconds_count\{job="history"\} [1-9]', text, re.MULTILINE)
        assert "# TYPE fairacct_outbox_depth gauge" in text
        assert get(f"http://127.0.0.1:{port}/other")[0] == 404
    finally:
        svc.stop()
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2)


def test_a_job_that_has_not_succeeded_for_three_periods_makes_health_fail() -> None:
    clock = Clock(1000.0)
    metrics = Metrics(clock)
    metrics.register("snapshot", 10)
    metrics.finished("snapshot", ok=True, duration_s=0.5)
    clock.now = 1025.0
    metrics.finished("snapshot", ok=False, duration_s=0.5, error="collector cm: no answer within 60 s (pool.timeout_s)")
    assert metrics.health()[0]
    clock.now = 1031.0
    healthy, doc = metrics.health()
    assert not healthy and doc["status"] == "failing" and doc["jobs"]["snapshot"]["stale"]
    assert doc["jobs"]["snapshot"]["last_error"] == "collector cm: no answer within 60 s (pool.timeout_s)"
    assert 'fairacct_cycles_total{job="snapshot",outcome="failed"} 1' in metrics.render()


def test_a_port_in_use_is_a_configuration_error(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        config = load_config(file_config(tmp_path, health_port=busy.getsockname()[1]))
        svc = ProbeService(config, probe="test")
        with pytest.raises(
            ConfigError, match=r"probe.health_port: cannot listen on 127.0.0.1:\d+ .*choose another port"
        ):
            svc.start()
        svc.stop()


def test_no_sources_is_a_configuration_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "empty.toml"
    path.write_text(f'[probe]\nstate_dir = "{tmp_path}"\n')
    assert main(["probe", "run", "--config", str(path), "--for", "1"]) == 2
    assert "no sources: set sources.status_files or sources.history, or sources.live = true" in capsys.readouterr().err


# -- the real process -----------------------------------------------------------------------------------------------


def stored_ids(state: Path) -> dict[str, set[str]]:
    with sqlite3.connect(state / "fairacct.sqlite") as db:
        # summaries are derived from the records (and re-made on a cadence): not records to lose
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        kinds = [t for t in tables if t in KINDS and t != "summary"]  # the records (not the store's leases)
        return {k: {r[0] for r in db.execute(f'SELECT id FROM "{k}"')} for k in kinds}


def probe_run(config: Path, *args: str, crash_at: str | None = None) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k != "FAIRACCT_CRASH_AT"}
    if crash_at:
        env["FAIRACCT_CRASH_AT"] = crash_at
    return subprocess.Popen(
        [sys.executable, "-m", "probes", "probe", "run", "--config", str(config), *args],
        env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def finish(proc: subprocess.Popen[str]) -> tuple[int, str]:
    _, err = proc.communicate(timeout=30)
    return proc.returncode, err


def until_history_read(proc: subprocess.Popen[str]) -> tuple[int, str]:
    """Stop the service with SIGTERM once its history job has run (its log says so), not after a
    fixed time: on a loaded machine two seconds ended some runs before the history was read. The
    stop's final flush sends what the cycle committed."""
    lines = Lines(proc)
    lines.wait_for(r" fairacct.service INFO history: ", timeout=120)
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=60)
    return proc.returncode, lines.text()


class Lines:
    """The lines a process writes to stderr, as they come."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.lines: list[str] = []
        assert proc.stderr is not None
        stream = self._stream = proc.stderr
        self._thread = threading.Thread(target=lambda: self.lines.extend(iter(stream.readline, "")), daemon=True)
        self._thread.start()

    def wait_for(self, pattern: str, count: int = 1, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while sum(bool(re.search(pattern, line)) for line in list(self.lines)) < count:
            assert time.monotonic() < deadline, f"no {count} x {pattern!r} in:\n" + "".join(self.lines)
            time.sleep(0.05)

    def text(self) -> str:
        self._thread.join(timeout=10)
        if self._stream is not None:
            self._stream.close()
        return "".join(self.lines)


def test_the_service_runs_at_its_cadence_stops_on_sigterm_and_restarts_without_loss(tmp_path: Path) -> None:
    config = file_config(tmp_path)
    state = tmp_path / "state"
    proc = probe_run(config)
    lines = Lines(proc)
    lines.wait_for(r" fairacct.service INFO snapshot: ", count=3)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=120) == 0  # a deadline against a hang, not a bound: the log says it stopped on SIGTERM
    text = lines.text()
    assert all(LINE.match(line) for line in text.splitlines()), text
    assert "fairacct.service INFO stopping (SIGTERM)" in text and text.rstrip().endswith(
        "fairacct.service INFO stopped"
    )
    stamps = [
        time.mktime(time.strptime(line[:20], "%Y-%m-%dT%H:%M:%SZ"))
        for line in text.splitlines()
        if " snapshot: " in line
    ]
    assert 1 <= stamps[2] - stamps[0] <= 4  # every second (stamps are to the second)
    # the same dump again and again: accounted once, then reported and skipped
    snapshots = [line for line in text.splitlines() if " snapshot: " in line]
    assert "snapshot: 36 slots, 72 allocations, 15 idle jobs in 6 autoclusters" in snapshots[0]
    assert all("is not after the last one accounted" in line and "skipped" in line for line in snapshots[1:])
    assert re.search(r"history: 60 new jobs in", text) and len(re.findall(r"history: 0 new jobs in", text)) >= 1
    first = stored_ids(state)
    assert {k: len(v) for k, v in first.items()} == {"slot": 36, "allocation": 72, "job": 60, "fairness": 4}

    again = probe_run(config)
    lines = Lines(again)
    lines.wait_for(r" fairacct.service INFO snapshot: ", count=2)
    again.send_signal(signal.SIGINT)
    assert again.wait(timeout=10) == 0
    assert "stopping (SIGINT)" in lines.text()
    assert stored_ids(state) == first  # nothing duplicated, nothing missing
    with Outbox(state / "outbox.sqlite") as outbox:
        assert outbox.status().depth == {}
    with EmbeddedStore(state / "fairacct.sqlite") as store:
        slot = store.query("slot")[0]
    assert slot["interval_s"] == 1  # the first snapshot's (pool.interval_s): the replays did not rewrite it


@pytest.mark.parametrize("point", ["after-commit", "after-flush"])
def test_a_killed_service_loses_nothing_when_started_again(tmp_path: Path, point: str) -> None:
    """Killed at its first commit, or once its first flush was sent (the service's delivery is
    ``probe once``'s, fault points included)."""
    config = file_config(tmp_path)
    state = tmp_path / "state"
    code, err = finish(probe_run(config, crash_at=point))
    assert code == -signal.SIGKILL, err  # then no cleanup, no last flush
    code, err = until_history_read(probe_run(config))
    assert code == 0, err
    assert {k: len(v) for k, v in stored_ids(state).items()} == {"slot": 36, "allocation": 72, "job": 60, "fairness": 4}


def test_probe_run_on_the_demo_configuration_works_out_of_the_box(tmp_path: Path) -> None:
    """config/demo.toml as shipped (its state goes to ../.demo, here beside the copy)."""
    shutil.copytree(ROOT / "config" / "demo", tmp_path / "config" / "demo")
    shutil.copy(ROOT / "config" / "demo.toml", tmp_path / "config" / "demo.toml")
    code, text = until_history_read(probe_run(tmp_path / "config" / "demo.toml"))
    assert code == 0, text
    assert "snapshot: 36 slots, 72 allocations, 15 idle jobs in 6 autoclusters, 108 records standing for 300 s" in text
    assert "history: 60 new jobs" in text and "final flush: sent" in text
    assert {k: len(v) for k, v in stored_ids(tmp_path / ".demo").items()} == {
        "slot": 36,
        "allocation": 72,
        "job": 60,
        "fairness": 4,
    }


def test_log_level_debug_adds_what_each_job_did(tmp_path: Path) -> None:
    """Issue 50, point 5: ``--log-level DEBUG`` added no line to the probe's log; now each job's
    start, a run with nothing to say and each commit are said at DEBUG, and INFO stays quiet."""
    shutil.copytree(ROOT / "config" / "demo", tmp_path / "config" / "demo")
    shutil.copy(ROOT / "config" / "demo.toml", tmp_path / "config" / "demo.toml")
    config = tmp_path / "config" / "demo.toml"
    code, debug = until_history_read(probe_run(config, "--log-level", "DEBUG"))
    assert code == 0, debug
    assert " fairacct.service DEBUG snapshot: started" in debug and " fairacct.service DEBUG history: started" in debug
    assert re.search(r" fairacct\.service DEBUG committed .*60 job; the outbox holds ", debug), debug
    code, info = until_history_read(probe_run(config))
    assert code == 0 and " DEBUG " not in info, info


def test_both_systemd_units_create_the_same_account() -> None:
    """Issue 50, point 5: the units' comments made the one ``fairacct`` user with two homes."""
    said = {
        name: [line for line in (ROOT / "config" / name).read_text().splitlines() if "useradd" in line]
        for name in ("fairacct-probe.service", "fairacct-collector.service")
    }
    (probe,), (collector,) = said.values()
    assert probe.split("#")[1].strip() == collector.split("#")[1].strip(), said
    assert "--home-dir /var/lib/fairacct " in probe


def test_the_systemd_unit_runs_the_service_unprivileged() -> None:
    import configparser

    unit = configparser.ConfigParser(strict=False, interpolation=None)
    unit.optionxform = str  # type: ignore[assignment,method-assign]
    unit.read(ROOT / "config" / "fairacct-probe.service")
    service = unit["Service"]
    assert service["ExecStart"].split()[1:4] == ["probe", "run", "--config"]
    assert (
        service["User"] == "fairacct" and service["NoNewPrivileges"] == "yes" and service["ProtectSystem"] == "strict"
    )
    assert service["KillSignal"] == "SIGTERM" and service["RestartPreventExitStatus"] == "2"
    assert unit["Install"]["WantedBy"] == "multi-user.target"


def test_fairshare_windows_roll_on_their_boundaries_whenever_the_service_started(
    tmp_path: Path, daemons: tuple[FakeCollector, FakeSchedd, FakeSchedd]
) -> None:
    from datetime import UTC, datetime, timedelta

    config = live_config(
        tmp_path,
        fairshare={"interval_s": 7},
        pool={"interval_s": 3600, "max_interval_s": 3600},
        probe={"history_every_s": 3600},
    )
    svc = service(config, daemons)
    svc.start()
    try:
        trigger = svc._scheduler.get_job("fairshare").trigger  # type: ignore[union-attr]
        now = datetime.now(UTC)
        fires = [trigger.get_next_fire_time(None, now)]
        for _ in range(3):
            fires.append(trigger.get_next_fire_time(fires[-1], fires[-1] + timedelta(microseconds=1)))
    finally:
        svc.stop()
    times = [f.timestamp() for f in fires]
    assert all(t % 7 == 0 for t in times), times  # multiples of the window width since the epoch
    assert 0 < times[0] - now.timestamp() <= 7 and [b - a for a, b in pairwise(times)] == [7, 7, 7]
