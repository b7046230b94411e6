"""A startd killed mid-claim, on a real pool of the module's own (tests/htcondor_pool.py): the
collector keeps its ads, ``LastHeardFrom`` frozen, until ``CLASSAD_LIFETIME``; its jobs run again
elsewhere meanwhile. The probe's own reader snapshots the pool every second, and each snapshot is
compared with the collector's answer it was made of (kept beside it through ``on_slot_ads``):

- no allocation is billed from an ad heard from longer ago than twice the update interval, nor
  from a dynamic slot of the killed startd's previous run (``DaemonStartTime``);
- no ``GlobalJobId`` is billed on two slots of one snapshot;
- a startd that stays dead (``condor_off -daemon STARTD``) is an unheard node of every snapshot
  once its ads are stale, ``since`` its p-slot's frozen ``LastHeardFrom``.

Killed: ``glidein_cpu``, the startd started without ``-local-name`` (start-pool.sh), whose jobs
are first held on it by a job attribute (``WantCpu``) and then let run anywhere.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import classad2
import pytest

from probes.config import ProbeConfig, parse_config
from probes.pipeline.overhead import overhead_report
from probes.pipeline.reading import live_pool
from probes.sources.live import LivePool
from probes.sources.unheard import UNHEARD
from tests.conftest import SHARED
from tests.htcondor_pool import HTCondorPool, own_pool

UPDATE_INTERVAL_S = 5
LIMIT_S = 2 * UPDATE_INTERVAL_S  # the rule's (probes.sources.unheard.MARGIN)
NODE = "slot1@glidein_cpu@vm"
JOBS = 6  # of 2 cores each, on glidein_cpu
SETTINGS = f"""
COLLECTOR.CLASSAD_LIFETIME = 180
JOB_DEFAULT_LEASE_DURATION = 40
UPDATE_INTERVAL = {UPDATE_INTERVAL_S}
"""


@pytest.fixture(scope="module")
def pool() -> Iterator[HTCondorPool]:
    with own_pool(SHARED) as pool:
        pool.reconfigure(SETTINGS)
        yield pool


@dataclass
class Ad:
    """A dynamic slot's ad as the collector answered it."""

    job: str | None
    heard: float
    started: float
    step: float = float("nan")  # its startd's mean step between updates, s (unheard.observed_interval)

    @property
    def limit_s(self) -> float:
        """How long after it was last heard from it may be billed: the rule's MARGIN times the
        pool's interval, or its startd's own mean step when longer (a loaded machine's startd
        updates late, and the rule gives it its own interval: issue 50)."""
        return 2 * max(UPDATE_INTERVAL_S, self.step) if self.step == self.step else LIMIT_S


@dataclass
class Sample:
    now: float
    ads: dict[str, Ad] = field(default_factory=dict)  # the collector's dynamic-slot ads, by name
    node_started: dict[str, float] = field(default_factory=dict)  # each p-slot's DaemonStartTime
    billed: list[tuple[str, str, str | None]] = field(default_factory=list)  # (name, parent, job_id)
    unheard: list[tuple[str, float]] = field(default_factory=list)  # (name, since)
    unheard_count: int = 0


def number(ad: classad2.ClassAd, attr: str) -> float:
    value = ad.get(attr)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else float("nan")


def config(pool: HTCondorPool) -> ProbeConfig:
    return parse_config(
        {
            "pool": {"name": "real", "condor_config": str(pool.condor_config), "timeout_s": 20,
                     "update_interval_s": UPDATE_INTERVAL_S},
            # DaemonStartTime asked for: a dynamic slot of a startd's previous run is known at once
            "sources": {"live": True, "slot_attributes": ["DaemonStartTime"]},
        }
    )  # fmt: skip


def run_on_cpu(pool: HTCondorPool) -> None:
    """JOBS jobs of 2 cores running on glidein_cpu, free to run anywhere once evicted (the pool's
    install has no condor_qedit: their requirements say glidein_cpu only for their first 40 s)."""
    pool.tool("condor_rm", "-all")
    pool.wait_for("an empty queue", lambda: not pool.tool("condor_q", "-allusers", "-af", "ClusterId").split(), 90)
    until = int(time.time()) + 40
    pool.submit(
        "executable = /bin/sleep\narguments = 3600\nrequest_cpus = 2\nrequest_memory = 1024\n"
        f'requirements = regexp("glidein_cpu", TARGET.Name) || time() > {until}\nqueue {JOBS}\n',
        "on_cpu",
    )

    def on_cpu() -> bool:
        hosts = pool.tool("condor_q", "-allusers", "-const", "JobStatus == 2", "-af", "RemoteHost").split()
        return len(hosts) == JOBS and all("glidein_cpu" in h for h in hosts)

    pool.wait_for(f"{JOBS} jobs running on glidein_cpu", on_cpu, 40)
    while time.time() <= until + 1:
        time.sleep(0.5)


def condor_off_startd(pool: HTCondorPool) -> None:
    subprocess.run(
        [str(pool.release / "sbin" / "condor_off"), "-daemon", "STARTD"],
        env=pool.env(), capture_output=True, timeout=60, check=True,
    )  # fmt: skip


def sample(live: LivePool, cfg: ProbeConfig, answer: list[classad2.ClassAd]) -> Sample:
    answer.clear()
    now = time.time()
    snap, report = live.snapshot(now=now)
    out = Sample(now)
    for ad in answer:
        if ad.get("SlotType") == "Dynamic":
            job = ad.get("GlobalJobId")
            heard, started = number(ad, "LastHeardFrom"), number(ad, "DaemonStartTime")
            updates = number(ad, "UpdateSequenceNumber")
            step = (heard - started) / updates if updates > 0 else float("nan")
            out.ads[str(ad["Name"])] = Ad(job if isinstance(job, str) else None, heard, started, step)
        elif ad.get("SlotType") == "Partitionable":
            out.node_started[str(ad["Name"])] = number(ad, "DaemonStartTime")
    bills = overhead_report(snap, cfg).bills
    claims = bills[bills["name"] != bills["parent"]] if "parent" in bills else bills
    jobs = snap.allocations.set_index("name")["job_id"].to_dict()
    out.billed = [(n, p, jobs.get(n)) for n, p in zip(claims["name"], claims["parent"], strict=True)]
    unheard = getattr(snap, "unheard", None)
    if unheard is not None:
        out.unheard = list(zip(unheard["name"], unheard["since"], strict=True))
    out.unheard_count = report.rejects[UNHEARD]
    return out


def watch(pool: HTCondorPool, seconds: float, until: Any = None) -> list[Sample]:
    """Snapshots about every second for ``seconds`` (or until ``until(samples)`` holds)."""
    cfg = config(pool)
    live = live_pool(cfg)
    answer: list[classad2.ClassAd] = []
    live.on_slot_ads = lambda source, ads: answer.extend(ads)
    samples: list[Sample] = []
    start = time.monotonic()
    while time.monotonic() - start < seconds and not (until and until(samples)):
        tick = time.monotonic()
        samples.append(sample(live, cfg, answer))
        time.sleep(max(0.0, 1.0 - (time.monotonic() - tick)))
    return samples


def rerun(started_before: float, since: float) -> Any:
    """Whether the last of the samples, ``since`` seconds after the kill, bills every job again
    on a slot other than the killed run's (the new run of glidein_cpu, or glidein_gpu)."""

    def done(samples: list[Sample]) -> bool:
        if not samples or time.time() < since:
            return False
        s = samples[-1]
        elsewhere = {j for n, p, j in s.billed if p != NODE or (n in s.ads and s.ads[n].started > started_before)}
        return len(elsewhere) >= JOBS

    return done


def wrongly_billed(samples: list[Sample]) -> list[str]:
    """Allocations billed from a stale dynamic-slot ad or one of its startd's previous run."""
    out = []
    for s in samples:
        for name, parent, _ in s.billed:
            ad = s.ads.get(name)
            if ad is None:
                continue
            if s.now - ad.heard > ad.limit_s + 1:  # + 1: LastHeardFrom is in whole seconds
                out.append(f"{name} at +{s.now - ad.heard:.0f} s since heard")
            elif ad.started < s.node_started.get(parent, ad.started):
                out.append(f"{name} of a previous run ({ad.started:.0f} < {s.node_started[parent]:.0f})")
    return out


def twice(samples: list[Sample]) -> list[str]:
    out = []
    for s in samples:
        jobs = [j for _, _, j in s.billed if isinstance(j, str)]
        out += sorted({f"{j} at {s.now:.0f}" for j in jobs if jobs.count(j) > 1})
    return out


def test_a_startd_killed_and_restarted_by_its_master_is_not_billed_twice(pool: HTCondorPool) -> None:
    run_on_cpu(pool)
    started_before = float(pool.tool("condor_status", "-af", "DaemonStartTime", "-const", f'Name == "{NODE}"'))
    os.kill(pool.cpu_startd(), signal.SIGKILL)
    killed = time.time()
    # until its jobs run again (each 2 cores: on the new glidein_cpu or on glidein_gpu)
    samples = watch(pool, 100, rerun(started_before, killed + 20))
    restarted = [s for s in samples if s.node_started.get(NODE, 0) > started_before]
    summary = (
        f"{len(samples)} snapshots over {samples[-1].now - killed:.0f} s after the kill; restarted "
        f"{restarted[0].now - killed if restarted else float('nan'):.0f} s after it; billed "
        f"{[len(s.billed) for s in samples]}"
    )
    print(summary)
    assert restarted, f"the master did not restart glidein_cpu's startd: {summary}"
    assert not wrongly_billed(samples), f"{wrongly_billed(samples)[:5]}: {summary}"
    assert not twice(samples), f"{twice(samples)[:5]}: {summary}"
    # the old run's claims are never billed once the new one is heard from
    old = [n for s in restarted for n, p, _ in s.billed if p == NODE and s.ads[n].started <= started_before]
    assert not old, f"{old[:5]}: {summary}"


def test_a_startd_killed_for_good_is_reported_unheard(pool: HTCondorPool) -> None:
    run_on_cpu(pool)
    started_before = float(pool.tool("condor_status", "-af", "DaemonStartTime", "-const", f'Name == "{NODE}"'))
    os.kill(pool.cpu_startd(), signal.SIGKILL)
    killed = time.time()
    condor_off_startd(pool)
    # its jobs are idle once their lease (40 s) ran out, and run again on glidein_gpu
    samples = watch(pool, 100, rerun(started_before, killed + 20))
    frozen = float(pool.tool("condor_status", "-af", "LastHeardFrom", "-const", f'Name == "{NODE}"'))
    late = [s for s in samples if s.now - frozen > LIMIT_S + 1]
    on_dead = [n for s in late for n, p, _ in s.billed if p == NODE]
    summary = (
        f"{len(samples)} snapshots over {samples[-1].now - killed:.0f} s after the kill, {len(late)} of them "
        f"over {LIMIT_S} s after glidein_cpu was last heard from ({frozen:.0f}); billed on it then: {len(on_dead)}; "
        f"jobs billed {[len(s.billed) for s in samples]}"
    )
    print(summary)
    assert len(late) >= 20, summary
    assert not on_dead, f"{on_dead[:5]}: {summary}"
    assert not wrongly_billed(samples), f"{wrongly_billed(samples)[:5]}: {summary}"
    assert not twice(samples), f"{twice(samples)[:5]}: {summary}"
    assert len(samples[-1].billed) >= JOBS and all(p != NODE for _, p, _ in samples[-1].billed), summary
    for s in late:
        assert s.unheard == [(NODE, frozen)] and s.unheard_count == 1, f"{s.unheard}: {summary}"
    # while glidein_cpu was still within its interval, it was billed and not unheard
    assert all(not s.unheard for s in samples if s.now - frozen < LIMIT_S - 1), summary
