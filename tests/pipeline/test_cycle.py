"""One probe cycle end to end: nothing lost, nothing counted twice, whatever happens."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from collector.outbox import Outbox
from collector.records import KINDS
from collector.sinks.sqlite import EmbeddedStore
from probes.config import load_config
from probes.pipeline.cycle import ProbeCycle, snapshot_step
from probes.pipeline.reading import Reading
from probes.pipeline.usage import price_jobs, slot_machines
from probes.sources.history import read_history

from ..conftest import DEMO, ROOT


def demo_config(tmp_path: Path, history: str | None = None) -> Path:
    path = tmp_path / "probe.toml"
    path.write_text(
        f"""
[pool]
name = "demo"
[sources]
status_files = ["{DEMO / "status.ads"}"]
idle_files = ["{DEMO / "queue.ads"}"]
history = ["{history or DEMO / "history.ads"}"]
[probe]
state_dir = "state"
"""
    )
    return path


def stored(state: Path) -> dict[str, dict[str, str]]:
    """Every stored document, by kind and id."""
    with sqlite3.connect(state / "fairacct.sqlite") as db:
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        kinds = [t for t in tables if t in KINDS]  # the record tables (not the store's leases)
        return {k: dict(db.execute(f'SELECT id, doc FROM "{k}"').fetchall()) for k in kinds}


def probe_once(config: Path, crash_at: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "FAIRACCT_CRASH_AT"}
    if crash_at:
        env["FAIRACCT_CRASH_AT"] = crash_at
    return subprocess.run(
        [sys.executable, "-m", "probes", "probe", "once", "--config", str(config)],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


@pytest.fixture(scope="module")
def clean_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, str]]:
    tmp = tmp_path_factory.mktemp("clean")
    assert probe_once(demo_config(tmp)).returncode == 0
    return stored(tmp / "state")


@pytest.mark.parametrize("point", ["before-commit", "during-commit", "after-commit", "during-flush", "after-flush"])
def test_a_crash_anywhere_loses_nothing_and_duplicates_nothing(
    tmp_path: Path, clean_run: dict[str, dict[str, str]], point: str
) -> None:
    config = demo_config(tmp_path)
    crashed = probe_once(config, crash_at=point)
    assert crashed.returncode == -9, crashed.stderr  # SIGKILL: no cleanup, no last flush
    again = probe_once(config)
    assert again.returncode == 0, again.stderr
    assert stored(tmp_path / "state") == clean_run
    with Outbox(tmp_path / "state/outbox.sqlite") as outbox:
        assert outbox.status().depth == {}


def test_the_clean_run(clean_run: dict[str, dict[str, str]]) -> None:
    # the summaries `probe once` makes too (of the days within summaries.nightly_days of today: derived, not records)
    records = {k: len(v) for k, v in clean_run.items() if k != "summary"}
    assert records == {"slot": 36, "allocation": 72, "job": 60, "fairness": 4}
    slot = next(json.loads(d) for d in clean_run["slot"].values() if "cabinet-7-7-44" in d)
    assert (slot["overhead_cu"], slot["phase"], slot["fits_idle"], slot["kind"]) == (3, "active", True, "slot")
    assert slot["timestamp"] == "2026-11-21T22:26:40Z" == slot["observed_at_iso"]


def test_history_is_read_once_and_new_jobs_are_added(tmp_path: Path) -> None:
    """The checkpoint advances with the records: a second cycle sends no job again, and jobs
    that appear later (a longer history) are sent then, once."""
    lines = (DEMO / "history.ads").read_text().split("\n\n")
    history = tmp_path / "history.ads"
    history.write_text("\n\n".join(lines[30:]))  # the older half (the dump is newest first)
    config = load_config(demo_config(tmp_path, str(history)))
    with Outbox(tmp_path / "outbox.sqlite") as outbox, EmbeddedStore(tmp_path / "store.sqlite") as store:
        first, _ = ProbeCycle(config, probe="test").once(outbox, store)
        second, _ = ProbeCycle(config, probe="test").once(outbox, store)
        history.write_text("\n\n".join(lines))  # the whole history now
        third, _ = ProbeCycle(config, probe="test").once(outbox, store)
        assert (first.enqueued["job"], "job" in second.enqueued, third.enqueued["job"]) == (30, False, 30)
        assert store.count("job") == 60


def test_a_replayed_snapshot_is_reported_and_skipped_and_intervals_come_from_observed_at() -> None:
    from probes.sources.checkpoints import SNAPSHOT_KEY
    from probes.sources.status import read_status

    config = load_config(ROOT / "config/demo.toml")
    snapshot, _ = read_status(config.sources.status_files, config.slot_reading())
    observed = float(snapshot.slots["observed_at"].max())
    reading = Reading(snapshot=snapshot)

    def step(last: dict[str, float] | None) -> Any:
        return snapshot_step(reading, {SNAPSHOT_KEY: last}.get, config, probe="test")

    first = step(None)
    assert first.batch.checkpoints[SNAPSHOT_KEY] == {"at": observed}
    assert set(first.snapshot.slots["interval_s"]) == {300.0}  # the nominal one, for the first
    assert set(first.batch.records) == {"slot", "allocation"}  # no idle demand read: no fairness records

    later = step({"at": observed - 270})  # observed 270 s after the last one accounted, whenever the probe ran
    assert later.batch.checkpoints[SNAPSHOT_KEY] == {"at": observed}
    assert set(later.snapshot.slots["interval_s"]) == {270.0} and later.replayed is None
    assert {d["interval_s"] for d in later.batch.records["slot"].decoded()} == {270.0}
    assert "interval_s" not in snapshot.slots or set(snapshot.slots["interval_s"]) != {270.0}  # the reading unchanged

    again = step({"at": observed})
    assert again.batch.checkpoints == {} and again.batch.records == {} and again.overhead is None
    assert again.replayed is not None and "is not after the last one accounted" in again.replayed


def test_job_records_carry_the_penalty_where_the_probe_priced_them(tmp_path: Path) -> None:
    """With a priced fairshare metric (mrpe), each job record carries its penalty usage and
    the CPU-only usage it replaces (PE-seconds): what `priority compare` and the summaries sum."""
    path = demo_config(tmp_path)
    path.write_text(path.read_text() + '[fairshare]\nmetric = "mrpe"\n')
    config = load_config(path)
    with Outbox(tmp_path / "outbox.sqlite") as outbox, EmbeddedStore(tmp_path / "store.sqlite") as store:
        cycle, _ = ProbeCycle(config, probe="test").once(outbox, store)
        docs = [d for d in store.query("job") if d["walltime_s"]]
    snapshot = cycle.reading.snapshot
    assert snapshot is not None and cycle.reading.jobs is not None
    assert len(docs) == 59 and len(cycle.reading.jobs) == 60  # one removed job never ran
    priced = price_jobs(
        read_history([DEMO / "history.ads"])[0],
        slot_machines(snapshot.slots, snapshot.ads, config),
        config,
    ).jobs
    want = dict(zip(priced["job_id"], priced["usage"], strict=True))
    assert all(d["penalty_usage"] == pytest.approx(want[d["job_id"]], rel=1e-12) for d in docs)
    # the demo's jobs ask no more memory per core than their nodes have (and node costs are 1):
    # the penalty is their cores, so both usages agree, speed (HEPSPEC) included
    assert all(d["penalty_usage"] == pytest.approx(d["cpu_only_usage"], rel=1e-12) for d in docs)
    assert sum(d["cpu_only_usage"] for d in docs) > 0


def test_job_records_carry_their_penalty_and_cpu_only_usage(clean_run: dict[str, dict[str, str]]) -> None:
    """Priced against the classes of the cycle's snapshot (demo: no speed configured, so 1.0):
    CPU-only usage is cores x walltime, and the penalty at least that much of a class's cores."""
    jobs = [json.loads(doc) for doc in clean_run["job"].values()]
    assert jobs and all({"penalty_usage", "cpu_only_usage"} <= set(j) for j in jobs)
    for j in jobs:
        assert j["cpu_only_usage"] == pytest.approx(j["cpus"] * (j["walltime_s"] or 0.0))
    assert sum(j["penalty_usage"] for j in jobs) >= sum(j["cpu_only_usage"] for j in jobs) > 0
