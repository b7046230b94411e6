"""Losses named on the real pool: the collector SIGSTOPped then killed (the master restarts it),
then ``condor_restart -daemon collector``, under ``probe run`` snapshotting every 2 s with jobs
on both startds. The nodes the snapshots lack (glidein_cpu, glidein_gpu: each startd
re-advertises within its UPDATE_INTERVAL of 10 s) are ``gap`` records covering the missed time
with their running cores, no snapshot stands for longer than the cadence, and ``audit`` names
them. A module-private pool (its collector is killed)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from collector.outbox import Outbox
from collector.sinks.sqlite import EmbeddedStore
from probes.cli.common import opened_store
from probes.config import parse_config
from probes.pipeline.audit import audit
from probes.service.scheduler import ProbeService
from tests.conftest import SHARED
from tests.htcondor_pool import HTCondorPool, own_pool

CADENCE_S = 2.0
CPU, GPU = "slot1@glidein_cpu@vm", "slot1@glidein_gpu@vm"
JOBS = {CPU: 4, GPU: 2}  # jobs of 2 cores on each startd


@pytest.fixture(scope="module")
def pool() -> Iterator[HTCondorPool]:
    with own_pool(SHARED) as pool:
        yield pool


def listed(pool: HTCondorPool) -> set[str]:
    """The partitionable slots the collector lists now (condor_status); none while it is down."""
    try:
        out = pool.tool("condor_status", "-const", "PartitionableSlot =?= true", "-af", "Name", timeout=10)
    except (RuntimeError, OSError, subprocess.TimeoutExpired):  # a collector down or restarting
        return set()
    return set(out.split())


def running(pool: HTCondorPool) -> int:
    return pool.tool("condor_q", "-allusers", "-af", "JobStatus").split().count("2")


def snapshots_after(service: ProbeService, count: int, timeout: float = 60) -> None:
    """Wait until the service has made ``count`` more successful snapshots."""
    state = service.metrics.jobs["snapshot"]
    deadline, want = time.monotonic() + timeout, state.runs - state.failures + count
    while state.runs - state.failures < want:
        assert time.monotonic() < deadline, f"no {count} snapshots within {timeout:g} s"
        time.sleep(0.2)


def test_a_collector_restart_is_a_gap_of_each_missing_node(pool: HTCondorPool, tmp_path: Path) -> None:
    description = "".join(
        f"executable = /bin/sleep\narguments = 3600\nrequest_cpus = 2\nrequest_memory = 512\n"
        f'requirements = TARGET.Name == "{slot}" || regexp("^slot1_[0-9]+@{slot.split("@")[1]}@", TARGET.Name)\n'
        f"queue {n}\n"
        for slot, n in JOBS.items()
    )
    pool.submit(description, "gaps")
    pool.wait_for("the jobs run on both startds", lambda: running(pool) == sum(JOBS.values()), 120)
    cfg = parse_config(
        {
            "pool": {"name": "real", "condor_config": str(pool.condor_config), "timeout_s": 3,
                     "interval_s": CADENCE_S},
            "sources": {"live": True},
            "probe": {"state_dir": str(tmp_path / "state"), "flush_every_s": 1, "history_every_s": 3600},
        }
    )  # fmt: skip
    service = ProbeService(cfg, probe="test")
    back: dict[str, float] = {}  # when condor_status listed both startds again, per outage
    service.start()
    try:
        snapshots_after(service, 3)
        began = time.time()
        # (a) SIGSTOP, SIGKILL 3 s later; the master restarts it
        pid = pool.pause_collector()
        time.sleep(3)
        os.kill(pid, signal.SIGKILL)
        pool.wait_for("the master restarts the collector", lambda: _collector_pid(pool) not in (None, pid), 90)
        pool.wait_for("both startds listed again", lambda: listed(pool) == {CPU, GPU}, 90)
        back["kill"] = time.time()
        snapshots_after(service, 4)
        # (b) condor_restart -daemon collector
        old = _collector_pid(pool)
        subprocess.run(
            [str(pool.release / "sbin" / "condor_restart"), "-daemon", "collector"],
            env=pool.env(), capture_output=True, timeout=60, check=True,
        )  # fmt: skip
        pool.wait_for("the collector restarted", lambda: _collector_pid(pool) not in (None, old), 90)
        pool.wait_for("both startds listed again", lambda: listed(pool) == {CPU, GPU}, 90)
        back["restart"] = time.time()
        snapshots_after(service, 4)
        ended = time.time()
    finally:
        service.stop()
        pool.tool("condor_rm", "-all")

    # what the service recorded: in the store, or still waiting in the outbox
    with Outbox(cfg.probe.state_dir / "outbox.sqlite") as outbox:
        slots = outbox.waiting("slot")
    with EmbeddedStore(cfg.probe.state_dir / "fairacct.sqlite", create=False) as store:
        slots = list({d["id"]: d for d in [*store.query("slot"), *slots]}.values())
    # no snapshot stands for longer than the cadence (within the scheduler's lateness)
    assert max(d["interval_s"] for d in slots) <= CADENCE_S * 1.1, sorted(d["interval_s"] for d in slots)[-5:]
    with Outbox(cfg.probe.state_dir / "outbox.sqlite") as outbox:
        gaps = outbox.waiting("gap")
    with EmbeddedStore(cfg.probe.state_dir / "fairacct.sqlite", create=False) as store:
        gaps = list({d["id"]: d for d in [*store.query("gap"), *gaps]}.values())
    # each node's time from its first snapshot to its last is billed or named, exactly once
    for node in (CPU, GPU):
        mine = sorted((d for d in slots if d["name"] == node), key=lambda d: d["observed_at"])
        billed = sum(d["interval_s"] for d in mine[1:])
        named = sum(g["seconds"] for g in gaps if g["name"] == node and g["end"] <= mine[-1]["observed_at"])
        span = mine[-1]["observed_at"] - mine[0]["observed_at"]
        assert billed + named == pytest.approx(span, abs=1.5), (node, billed, named, span)  # observed_at in seconds
    # glidein_cpu went missing in both outages, with its 4 jobs of 2 cores running
    cpu_gaps = [g for g in gaps if g["name"] == CPU]
    assert cpu_gaps and {g["running_cpus"] for g in cpu_gaps} == {2.0 * JOBS[CPU]}
    assert {g["reason"] for g in cpu_gaps} <= {"missing", "unobserved"}
    for outage, at in back.items():
        # the gap ends where a snapshot listed the node again: after condor_status saw it back at
        # the latest one cadence (and the snapshot's own query) later
        within = [
            g for g in cpu_gaps if (began if outage == "kill" else back["kill"]) <= g["end"] <= at + 2 * CADENCE_S + 3
        ]
        assert within, f"no gap of glidein_cpu in the {outage} outage"
        missed = sum(g["seconds"] for g in within)
        assert missed >= 3, f"glidein_cpu missing {missed:.1f} s in the {outage} outage"
    with opened_store(cfg.store, cfg.probe.state_dir, create=False) as sink:
        books = audit(sink, cfg, began - 10, ended + 10)
    named = books.node_gaps[books.node_gaps["name"] == CPU]
    assert len(named) and named["running_core_hours"].sum() == pytest.approx(
        sum(g["seconds"] * g["running_cpus"] for g in cpu_gaps if began - 10 <= g["end"] < ended + 10) / 3600, rel=1e-6
    )
    print(
        f"\nglidein_cpu unbilled: {sum(g['seconds'] for g in cpu_gaps):.1f} s in {len(cpu_gaps)} gaps, "
        f"{books.running_unbilled:.5f} running core-hours in all; back at {back}; "
        f"longest interval {max(d['interval_s'] for d in slots):.3f} s\n"
        + "\n".join(
            f"  {g['name']} {g['reason']} {g['start'] - began:+.1f}..{g['end'] - began:+.1f} s, "
            f"{g['running_cpus']:g} cores running"
            for g in sorted(gaps, key=lambda g: (g["start"], g["name"]))
        )
        + f"\nback (condor_status) at {', '.join(f'{k} {v - began:+.1f} s' for k, v in back.items())}"
    )


def _collector_pid(pool: HTCondorPool) -> int | None:
    try:
        return pool.daemon_pid("condor_collector")
    except LookupError:
        return None
