"""``probe once`` and the service (``probe run``) make the same records of the same inputs: every
record of every kind, field by field, and the same checkpoints (the cycle's steps are written
once, in probes.pipeline.cycle)."""

from __future__ import annotations

import json
import math
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from collector.outbox import Outbox
from collector.records import KINDS
from collector.sinks.sqlite import EmbeddedStore
from probes.config import ProbeConfig, load_config
from probes.pipeline.cycle import ProbeCycle
from probes.service.scheduler import ProbeService
from probes.sources.checkpoints import LEDGER_KEY, ROLLED_KEY

from ..conftest import DEMO, ROOT
from ..service.test_scheduler import Clock, Lines, probe_run


def write_config(path: Path, folder: Path, *, state: str, metric: str) -> Path:
    """A configuration of the dumps in ``folder`` whose state goes to ``state`` beside it."""
    path.write_text(
        f"""
[pool]
name = "same"
interval_s = 300
[sources]
status_files = ["{folder / "status.ads"}"]
idle_files = ["{folder / "queue.ads"}"]
history = ["{folder / "history.ads"}"]
[machines]
speed_attribute = "HEPSPEC"
[fairshare]
metric = "{metric}"
[summaries]
recent_days = 0
nightly_days = 0
[probe]
state_dir = "{state}"
health_port = 0
"""
    )
    return path


def stored(state: Path) -> dict[str, dict[str, dict[str, Any]]]:
    """Every stored document of the embedded store in ``state``, by kind and id."""
    with sqlite3.connect(state / "fairacct.sqlite") as db:
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        kinds = [t for t in tables if t in KINDS]  # the record tables (not the store's leases)
        return {k: {i: json.loads(d) for i, d in db.execute(f'SELECT id, doc FROM "{k}"')} for k in kinds}


def checkpoints(state: Path) -> dict[str, Any]:
    with sqlite3.connect(state / "outbox.sqlite") as db:
        return {k: json.loads(v) for k, v in db.execute("SELECT source, value FROM checkpoint")}


def assert_same(once: dict[str, dict[str, dict[str, Any]]], run: dict[str, dict[str, dict[str, Any]]]) -> None:
    """The same kinds, ids and documents, compared field by field so a failure names the field."""
    assert {k: len(v) for k, v in run.items()} == {k: len(v) for k, v in once.items()}
    for kind, docs in once.items():
        assert set(run[kind]) == set(docs), kind
        for id_, doc in docs.items():
            other = run[kind][id_]
            differ = {f: (doc.get(f), other.get(f)) for f in doc.keys() | other.keys() if doc.get(f) != other.get(f)}
            assert not differ, f"{kind} {id_}: (probe once, probe run) differ in {differ}"


@pytest.fixture(params=["demo", "condor25"])
def inputs(request: pytest.FixtureRequest) -> tuple[Path, str]:
    """The demo pool under the default metric; the real HTCondor 25 dumps under a priced one."""
    if request.param == "demo":
        return DEMO, "dedicated_ps"
    return request.getfixturevalue("condor25"), "mrpe"


@pytest.mark.slow
def test_probe_once_and_probe_run_make_the_same_records(tmp_path: Path, inputs: tuple[Path, str]) -> None:
    folder, metric = inputs
    once = write_config(tmp_path / "once.toml", folder, state="once", metric=metric)
    done = subprocess.run(
        [sys.executable, "-m", "probes", "probe", "once", "--config", str(once)],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr

    proc = probe_run(write_config(tmp_path / "run.toml", folder, state="run", metric=metric), "--for", "120")
    lines = Lines(proc)
    lines.wait_for(r"history: \d+ new jobs", timeout=90)
    lines.wait_for(r"snapshot: \d+ slots", timeout=90)
    proc.send_signal(signal.SIGTERM)  # the final flush sends what the cycle committed
    assert proc.wait(timeout=60) == 0, lines.text()
    assert "final flush: sent" in lines.text()

    records = stored(tmp_path / "once")
    assert set(records) == {"slot", "allocation", "job", "fairness"}
    assert all(len(docs) for docs in records.values())
    assert all({"penalty_usage", "cpu_only_usage"} <= set(doc) for doc in records["job"].values())
    assert_same(records, stored(tmp_path / "run"))

    a, b = checkpoints(tmp_path / "once"), checkpoints(tmp_path / "run")
    assert set(a) == set(b)
    if a[ROLLED_KEY] == b[ROLLED_KEY]:  # the same fairshare window (not one each side of a boundary)
        assert a == b
    else:
        assert sum(r[-1] for r in a[LEDGER_KEY]) == pytest.approx(sum(r[-1] for r in b[LEDGER_KEY]))
        assert {k: v for k, v in a.items() if k not in (ROLLED_KEY, LEDGER_KEY)} == {
            k: v for k, v in b.items() if k not in (ROLLED_KEY, LEDGER_KEY)
        }


def test_both_roll_the_same_fairshare_windows(tmp_path: Path, condor25: Path) -> None:
    """Across window boundaries, in process with one clock: ``ProbeCycle.once`` at two instants and the
    service's jobs at the same instants write the same fairshare records and ledger."""
    t0, width = 1795269500.0, 3600.0  # in the window 1795266000 .. 1795269600
    t1 = t0 + 3 * width  # three windows later
    config = write_config(tmp_path / "probe.toml", condor25, state="unused", metric="mrpe")
    settings = load_config(config).model_dump()
    settings["fairshare"] |= {"interval_s": width, "depth": 4}

    def made(state: Path) -> ProbeConfig:
        return ProbeConfig.model_validate(settings | {"probe": settings["probe"] | {"state_dir": state}})

    once = made(tmp_path / "once")
    once.probe.state_dir.mkdir()
    with Outbox(once.probe.state_dir / "outbox.sqlite") as outbox, EmbeddedStore(tmp_path / "once.sqlite") as store:
        for now in (t0, t1):
            ProbeCycle(once, probe="test").once(outbox, store, now=now)
        with_once = {k: {d["id"]: d for d in store.query(k)} for k in ("fairshare", "job", "slot", "fairness")}
        marks_once = {k: outbox.checkpoint(k) for k in (LEDGER_KEY, ROLLED_KEY)}

    run = made(tmp_path / "run")
    run.probe.state_dir.mkdir()
    clock = Clock(t0)
    service = ProbeService(run, probe="test", clock=clock)
    for now in (t0, t1):  # the jobs as the scheduler starts them: every one at once, at each instant
        clock.now = now
        service.run_job("fairshare")
        service.run_job("snapshot")
        service.run_job("history")
    with EmbeddedStore(tmp_path / "run.sqlite") as store:
        with Outbox(run.probe.state_dir / "outbox.sqlite") as outbox:
            outbox.flush(store)
            marks_run = {k: outbox.checkpoint(k) for k in (LEDGER_KEY, ROLLED_KEY)}
        with_run = {k: {d["id"]: d for d in store.query(k)} for k in ("fairshare", "job", "slot", "fairness")}

    # 12 credentials (a user, 3 groups, 4 projects, 4 submitters) in each of the three windows that closed
    assert len(with_once["fairshare"]) == 36
    assert_same(with_once, with_run)
    last_closed = math.floor(t1 / width) * width - width
    assert marks_once == marks_run and marks_once[ROLLED_KEY] == {"window_start": last_closed}
