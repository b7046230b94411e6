"""Reconciliation on a real pool whose dynamic slots churn (a pool of its own, from
tests/htcondor_pool.py, skipped with its reason where the machine cannot run one; not the
session's ``htcondor_pool``, whose history and running jobs other tests count).

Short ``/bin/sleep`` jobs of several sizes keep claims coming and going. Cycle after cycle, the
probe's own reader takes a live snapshot from the collector while ``condor_status -direct`` asks
each startd for its own slots just before and just after (the startd's view is authoritative),
and each node is compared: no allocation billed for a dynamic slot the startd no longer has, no
dynamic slot both allocated and unallocated, every allocation carrying its ad's ``GlobalJobId``
as ``job_id`` (a claim between two jobs has none to carry), and unallocated amounts equal to the
startd's ``TotalSlot<r>`` minus its own dynamic slots. The ads the snapshot was made of are kept
too, to tell the collector's lag from the reader's rule.

The only disagreements allowed are the collector's own lag, which no rule on its ads can see:
a dynamic slot the startd created but the collector has not heard of yet, or one the startd
released whose ad the collector has not dropped yet. Each is named and its lag measured (from
the startd's ``EnteredCurrentState`` for a new slot; from the last direct view that still held
it for a released one), and must be within :data:`COLLECTOR_LAG_S`.
"""

from __future__ import annotations

import json
import math
import subprocess
import time
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import classad2
import numpy as np
import pandas as pd
import pytest

from collector.outbox import Outbox
from collector.sinks.sqlite import EmbeddedStore
from probes.cli import main
from probes.config import ProbeConfig, parse_config
from probes.pipeline.cycle import ProbeCycle
from probes.pipeline.overhead import overhead_report
from probes.pipeline.reading import live_pool
from probes.sources.live import LivePool
from probes.sources.status import Snapshot
from tests.conftest import SHARED
from tests.htcondor_pool import HTCondorPool, own_pool

STARTDS = ("glidein_cpu@vm", "glidein_gpu@vm")
RESOURCES = ("cpus", "memory", "gpus")  # compared exactly; disk is measured by the startd as it goes
OWN = {"cpus": "Cpus", "memory": "Memory", "gpus": "GPUs"}
CHURN_S = 40.0  # how long jobs are submitted and the pool sampled
PAUSE_S = 0.3  # between cycles: some fifty cycles in CHURN_S on a loaded 2-core machine
#: How far the collector may lag behind a startd. A startd sends a slot's ad, or the invalidation
#: of a released one, when the claim comes or goes, and re-advertises every slot each
#: UPDATE_INTERVAL (10 s in start-pool.sh, checked below) whatever happens; so no ad can be older
#: than that, and the bound adds the measurement's resolution: EnteredCurrentState is in whole
#: seconds, and a released slot is bounded by the last view that still held it (one cycle, under
#: a second). Measured on this pool, with the 2-core machine at loads of 2 to 9: a new claim was
#: missing from the collector in a tenth to a fifth of the cycles, for a median of 0.6-1 s and at
#: most 1.3 s; a released claim's ad was never seen still there. The lag only ever excuses a slot
#: the collector's own ads lack or still hold (kept beside each snapshot): the reader's rule
#: cannot hide behind it.
UPDATE_INTERVAL_S = 10.0
COLLECTOR_LAG_S = UPDATE_INTERVAL_S + 2.0
#: (cores, MiB, jobs) of each wave; sleeps of 2-6 s, so a claim lives a few seconds. Each wave is
#: submitted for an accounting user of its own, so that no claim of an earlier wave is reused for
#: it (a schedd runs the next job of the same submitter on an idle claim it fits): claims keep
#: coming and going.
SIZES = ((1, 512, 2), (2, 2048, 2), (3, 1024, 2), (4, 4096, 1), (1, 3072, 2), (2, 6144, 1))
WAVE_EVERY_S = 4.0


@pytest.fixture(scope="module")
def churn_pool() -> Iterator[HTCondorPool]:
    with own_pool(SHARED) as pool:
        yield pool


@dataclass(frozen=True)
class DSlot:
    """A dynamic slot as its startd advertises it."""

    name: str
    parent: str
    amounts: dict[str, float]
    job_id: str | None
    entered: float  # EnteredCurrentState: when the claim made it (UNIX seconds)


@dataclass
class StartdView:
    """What one ``condor_status -direct`` of every startd said: each p-slot's TotalSlot<r>, and
    its dynamic slots by name; ``asked``/``answered``: when (UNIX seconds)."""

    asked: float
    answered: float
    totals: dict[str, dict[str, float]] = field(default_factory=dict)
    dynamic: dict[str, DSlot] = field(default_factory=dict)


def number(ad: classad2.ClassAd, attr: str) -> float:
    value = ad.eval(attr) if attr in ad else 0
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0


def startd_view(pool: HTCondorPool) -> StartdView:
    """Every startd's own slots, asked of all at once (one process each) to keep the view narrow."""
    asked = time.time()
    tool = str(pool.release / "bin" / "condor_status")
    runs = [
        subprocess.Popen([tool, "-direct", s, "-long"], env=pool.env(), stdout=subprocess.PIPE, text=True)
        for s in STARTDS
    ]
    texts = [run.communicate(timeout=30)[0] for run in runs]
    view = StartdView(asked, time.time())
    for text in texts:
        for ad in classad2.parseAds(text, classad2.ParserType.Old):
            name = str(ad.eval("Name"))
            if ad.get("SlotType") == "Partitionable":
                view.totals[name] = {r: number(ad, f"TotalSlot{OWN[r]}") for r in RESOURCES}
            elif ad.get("SlotType") == "Dynamic":
                job = ad.get("GlobalJobId")
                view.dynamic[name] = DSlot(
                    name,
                    name.split("@", 1)[0].split("_")[0] + "@" + name.split("@", 1)[1],
                    {r: number(ad, OWN[r]) for r in RESOURCES},
                    str(job) if isinstance(job, str) else None,
                    number(ad, "EnteredCurrentState"),
                )
    return view


@dataclass
class Cycle:
    """One comparison: the discrepancies found, and the cores billed (each for the same interval)."""

    at: float
    released: list[tuple[str, bool, float]]  # (d-slot the startd no longer has, its ad in the collector, lag bound s)
    late: list[tuple[str, float]]  # (d-slot the startd has and the collector not yet, lag s)
    dropped: list[str]  # dynamic-slot ads of the collector that the tables left out
    both: list[str]  # nodes where some dynamic slot is both allocated and unallocated
    wrong_job_id: list[str]  # allocations whose job_id is not their ad's GlobalJobId
    idle_claims: list[str]  # allocations of claims with no job in their ad (between two jobs)
    unallocated_off: list[str]  # nodes whose unallocated amounts the named lags do not explain
    billed_cpus: float
    released_billed_cpus: float


def throughout(before: StartdView, after: StartdView) -> set[str]:
    """The dynamic slots the startds had both before and after, as the same claim (a name is
    reused by the next claim of its p-slot: a claim that went and one that came are not one)."""
    return {
        n for n in before.dynamic.keys() & after.dynamic.keys() if before.dynamic[n].entered == after.dynamic[n].entered
    }


def compare(
    before: StartdView,
    after: StartdView,
    collector: dict[str, str | None],
    snap: Snapshot,
    bills: pd.DataFrame,
    last_seen: dict[str, float],
) -> Cycle:
    """The snapshot's allocations and unallocated amounts against the startds' views around it
    and the collector's own dynamic-slot ads it was made of (name -> GlobalJobId)."""
    at = float(snap.slots["observed_at"].iloc[0])
    dyn = snap.allocations[snap.allocations["name"] != snap.allocations["parent"]]
    either = before.dynamic.keys() | after.dynamic.keys()
    held = set(dyn["name"])
    released = [(n, n in collector, at - last_seen.get(n, -np.inf)) for n in dyn["name"] if n not in either]
    late = [(n, at - before.dynamic[n].entered) for n in sorted(throughout(before, after) - collector.keys())]
    billed = bills.set_index("name")["billed_cpus"].fillna(0.0)
    released_cpus = float(billed.reindex([n for n, _, _ in released]).fillna(0.0).sum())
    # the collector's lag: a new slot it has no ad of, a released slot whose ad it still has
    gone = {n for n, in_collector, _ in released if in_collector}
    both, off = [], []
    for slot in snap.slots.to_dict("records"):
        mine = dyn[dyn["parent"] == slot["name"]]
        total = before.totals[slot["name"]]
        if any(slot[f"unallocated_{r}"] + mine[r].sum() > total[r] + 1e-6 for r in RESOURCES):
            both.append(slot["name"])
        off += unallocated_off(slot, mine, total, before, after, gone)
    jobs = [(n, j if isinstance(j, str) else None) for n, j in zip(dyn["name"], dyn["job_id"], strict=True)]
    return Cycle(
        at,
        released,
        late,
        dropped=sorted(collector.keys() - held),
        both=both,
        wrong_job_id=[n for n, j in jobs if n not in collector or j != collector[n]],
        idle_claims=[n for n, j in jobs if j is None and n in collector],
        unallocated_off=off,
        billed_cpus=float(billed.sum()),
        released_billed_cpus=released_cpus,
    )


def unallocated_off(
    slot: dict[str, Any],
    mine: pd.DataFrame,
    total: dict[str, float],
    before: StartdView,
    after: StartdView,
    gone: set[str],
) -> list[str]:
    """Whether a node's unallocated amounts (``slot``; ``mine``: its allocations) are what the
    startd says, up to the collector's lag.

    The startd's unallocated amounts at the snapshot are its TotalSlot<r> minus the claims it had
    before and after, and minus those that came or went between the two as the collector saw
    them. The collector's lag moves them by the amounts of the claims it does not have yet (the
    startd's), and of the released ones whose ads it still has (``gone``)."""
    kept = throughout(before, after)
    mine = mine.set_index("name")
    kids = [before.dynamic[n] for n in kept if before.dynamic[n].parent == slot["name"]]
    came_or_went = (before.dynamic.keys() | after.dynamic.keys()) - kept
    changing = mine[mine.index.isin(came_or_went)]
    out = []
    for r in RESOURCES:
        startd = total[r] - sum(d.amounts[r] for d in kids) - float(changing[r].sum())
        lag = sum(d.amounts[r] for d in kids if d.name not in mine.index) - float(
            mine.loc[mine.index.isin(gone), r].sum()
        )
        if abs(slot[f"unallocated_{r}"] - (startd + lag)) > 1e-6:
            out.append(f"{slot['name']} {r}: {slot[f'unallocated_{r}']:g}, the startd {startd:g}, lag {lag:+g}")
    return out


def submit_wave(pool: HTCondorPool, k: int) -> None:
    description = "".join(
        f"executable = /bin/sleep\narguments = $RANDOM_INTEGER(2, 6)\nrequest_cpus = {c}\n"
        f"request_memory = {m}\naccounting_group_user = wave{k}\nqueue {n}\n"
        for c, m, n in SIZES
    )
    pool.submit(description, f"churn{k}")


def collector_ads(live: LivePool, monkeypatch: pytest.MonkeyPatch) -> list[dict[str, str | None]]:
    """The dynamic slots of the collector's answer each of ``live``'s snapshots is made of (one
    dict appended per snapshot, filled chunk by chunk through ``on_slot_ads``: the answer itself
    is never kept whole)."""
    answers: list[dict[str, str | None]] = []
    snapshot = live.snapshot

    def recorded(*, now: float) -> Any:
        answers.append({})
        return snapshot(now=now)

    monkeypatch.setattr(live, "snapshot", recorded)
    live.on_slot_ads = lambda source, ads: answers[-1].update(dynamic_ads(ads))
    return answers


def dynamic_ads(ads: list[classad2.ClassAd]) -> dict[str, str | None]:
    """The dynamic slots of a collector's answer: name -> GlobalJobId (None between two jobs)."""
    out: dict[str, str | None] = {}
    for ad in ads:
        if ad.get("SlotType") == "Dynamic":
            job = ad.get("GlobalJobId")
            out[str(ad["Name"])] = job if isinstance(job, str) else None
    return out


def churn(
    pool: HTCondorPool, live: LivePool, config: ProbeConfig, monkeypatch: pytest.MonkeyPatch
) -> tuple[list[Cycle], int]:
    """Submit the waves and compare, cycle after cycle, for CHURN_S seconds; the cycles, and how
    many claims (dynamic slots) the startds showed in all."""
    # one job that runs throughout: a live query always holds dynamic-slot ads, as a pool in
    # production does (a query with none at all is the case the Child* lists serve)
    pool.submit("executable = /bin/sleep\narguments = 3600\nrequest_cpus = 1\nqueue 1\n", "holder")
    pool.wait_for("the holder job runs", lambda: "2" in pool.tool("condor_q", "-af", "JobStatus").split())
    live.snapshot(now=time.time())  # the bindings' worker starts once, before the clock matters
    answers = collector_ads(live, monkeypatch)
    start, waves, cycles = time.monotonic(), 0, []
    last_seen: dict[str, float] = {}
    claims: set[tuple[str, float]] = set()
    previous: StartdView | None = None
    while time.monotonic() - start < CHURN_S:
        if time.monotonic() - start >= waves * WAVE_EVERY_S:
            submit_wave(pool, waves)
            waves += 1
        before = startd_view(pool)
        for view in (previous, before):
            if view is not None:
                last_seen.update({n: view.answered for n in view.dynamic})
        snap, _ = live.snapshot(now=time.time())
        after = startd_view(pool)
        bills = overhead_report(snap, config).bills
        cycles.append(compare(before, after, answers[-1], snap, bills, last_seen))
        claims.update((d.name, d.entered) for v in (before, after) for d in v.dynamic.values())
        previous = after
        time.sleep(PAUSE_S)
    pool.tool("condor_rm", "-all")  # and the pool stops quickly once its starters are gone
    pool.wait_for("the jobs removed", lambda: not pool.tool("condor_q", "-allusers", "-af", "ClusterId").split(), 30)
    return cycles, len(claims)


def summary(cycles: list[Cycle], claims: int) -> str:
    """The measurement in one line (printed, and said by every failed assertion). Every cycle
    stands for the same interval, so shares of billed cores are shares of billed core-hours."""
    stale = [c for c in cycles if any(not in_collector for _, in_collector, _ in c.released)]
    gone = [lag for c in cycles for _, in_collector, lag in c.released if in_collector]
    late = [lag for c in cycles for _, lag in c.late]
    billed = sum(c.billed_cpus for c in cycles)
    share = sum(c.released_billed_cpus for c in cycles) / billed if billed else 0.0
    return (
        f"{len(cycles)} cycles, {claims} claims: released claims billed in {sum(bool(c.released) for c in cycles)} "
        f"cycles ({len(stale)} without an ad: from Child* lists), {share:.2%} of billed core-hours; "
        f"ads left out in {sum(bool(c.dropped) for c in cycles)}; "
        f"a slot both allocated and unallocated in {sum(bool(c.both) for c in cycles)}; "
        f"job_id not the ad's in {sum(bool(c.wrong_job_id) for c in cycles)} "
        f"(claims between two jobs, no job_id: {sum(len(c.idle_claims) for c in cycles)} allocations); "
        f"unallocated unexplained in {sum(bool(c.unallocated_off) for c in cycles)}; collector lag: "
        f"{len(gone)} released slot(s) still in it (max {max(gone, default=0.0):.2f} s), "
        f"{len(late)} new slot(s) not yet in it, in {sum(bool(c.late) for c in cycles)} cycles "
        f"(median {np.median(late) if late else 0.0:.2f} s, max {max(late, default=0.0):.2f} s)"
    )


@pytest.mark.slow
def test_a_churning_pool_is_billed_as_its_startds_say(
    churn_pool: HTCondorPool, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = parse_config(
        {
            "pool": {"name": "real", "condor_config": str(churn_pool.condor_config), "timeout_s": 20},
            "sources": {"live": True},
        }
    )
    assert float(churn_pool.tool("condor_config_val", "UPDATE_INTERVAL")) == UPDATE_INTERVAL_S
    cycles, claims = churn(churn_pool, live_pool(config), config, monkeypatch)
    report = summary(cycles, claims)
    print(report)
    assert len(cycles) >= 20 and claims >= 40, f"the pool did not churn enough to tell: {report}"
    for c in cycles:
        stale = [n for n, in_collector, _ in c.released if not in_collector]
        assert not stale, f"released claims billed without an ad (from Child* lists): {stale}: {report}"
        assert all(lag <= COLLECTOR_LAG_S for _, _, lag in c.released), f"{c.released}: {report}"
        assert all(lag <= COLLECTOR_LAG_S for _, lag in c.late), f"{c.late}: {report}"
        assert not c.dropped, f"dynamic-slot ads left out: {c.dropped}: {report}"
        assert not c.both, f"{c.both}: {report}"
        assert not c.wrong_job_id, f"job_id not the ad's GlobalJobId: {c.wrong_job_id}: {report}"
        assert not c.unallocated_off, f"{c.unallocated_off}: {report}"


#: The audit's churn, on the same pool after the test above: two accounting-group users submit
#: short jobs of several sizes while the probe runs every AUDIT_CADENCE_S seconds, until every
#: job is in the history.
AUDIT_CADENCE_S = 2.0
AUDIT_SUBMIT_S = 16.0
AUDIT_SIZES = ((1, 512, 2), (2, 1024, 1), (3, 2048, 1))  # (cores, MiB, jobs) of each user's wave


@pytest.mark.slow
def test_the_books_of_a_churning_pool_balance_within_the_sampling_bound(
    churn_pool: HTCondorPool, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pool = churn_pool
    state = tmp_path / "state"
    text = (
        f'[pool]\nname = "audit"\ncondor_config = "{pool.condor_config}"\ntimeout_s = 20\n'
        f"interval_s = {AUDIT_CADENCE_S}\nmax_interval_s = 30\n"
        f'[sources]\nlive = true\n[probe]\nstate_dir = "{state}"\n'
    )
    path = tmp_path / "audit.toml"
    path.write_text(text, encoding="utf-8")
    config = parse_config(tomllib.loads(text))
    pool.wait_for("an empty queue", lambda: not pool.tool("condor_q", "-allusers", "-af", "ClusterId").split(), 60)
    live = live_pool(config)
    submitted: dict[str, int] = {}
    with Outbox(state / "outbox.sqlite") as outbox, EmbeddedStore(state / "fairacct.sqlite") as store:
        ProbeCycle(config, probe="audit", pool=live).once(outbox, store)  # the history so far, and the first snapshot
        start = float(math.ceil(time.time()))
        begun, wave = time.monotonic(), 0
        while True:
            if time.monotonic() - begun < AUDIT_SUBMIT_S and time.monotonic() - begun >= wave * 5.0:
                for user in ("alice", "bob"):
                    pool.submit(
                        "".join(
                            f"executable = /bin/sleep\narguments = $RANDOM_INTEGER(3, 8)\nrequest_cpus = {c}\n"
                            f"request_memory = {m}\naccounting_group = group_audit\naccounting_group_user = {user}\n"
                            f"queue {n}\n"
                            for c, m, n in AUDIT_SIZES
                        ),
                        f"audit_{user}_{wave}",
                    )
                    submitted[user] = submitted.get(user, 0) + sum(n for _, _, n in AUDIT_SIZES)
                wave += 1
            tick = time.monotonic()
            ProbeCycle(config, probe="audit", pool=live).once(outbox, store)
            queued = pool.tool("condor_q", "-allusers", "-af", "ClusterId").split()
            if time.monotonic() - begun >= AUDIT_SUBMIT_S and not queued:
                break
            assert time.monotonic() - begun < 400, "the audit's jobs did not finish within 400 s"  # a loaded machine
            time.sleep(max(0.0, AUDIT_CADENCE_S - (time.monotonic() - tick)))
        end = float(math.floor(time.time()))
        time.sleep(1.0)
        ProbeCycle(config, probe="audit", pool=live).once(
            outbox, store
        )  # the last jobs' history, a snapshot past the end
    capsys.readouterr()
    assert main(["audit", "--config", str(path), "--from", str(start), "--to", str(end), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    report = json.dumps(doc["submitters"], indent=1) + f"\ngaps: {doc['gaps']}, interval {doc['interval_s']} s"
    print(report)
    # a claim the churn test's jobs left, idle until the startd drops it, is claimed time alone
    idle = [r for r in doc["submitters"] if not r["jobs"] and not r["held_core_hours"]]
    assert all(not r["used_core_hours"] and not r["beyond"] for r in idle), report
    rows = {r["submitter"].split("@")[0]: r for r in doc["submitters"] if r not in idle}
    unbilled = sum(g["running_core_hours"] for g in doc["node_gaps"])
    assert set(rows) == {"group_audit.alice", "group_audit.bob"}, report
    for user in ("alice", "bob"):
        row = rows[f"group_audit.{user}"]
        # each job once, however many gaps a loaded machine leaves across it (issue 51: 29 jobs for 16);
        # a job that ran inside a gap only is not compared, but named there (unobserved_jobs)
        assert row["jobs"] <= submitted[user] <= row["jobs"] + row["unobserved_jobs"], report
        assert row["jobs"] == submitted[user] or doc["gaps"], report
        assert row["held_core_hours"] > 0 and row["used_core_hours"] > 0, report
        # a late snapshot on a loaded machine is a gap the audit names: held may lack what ran unbilled there
        difference = row["difference_core_hours"]
        assert -unbilled - row["bound_core_hours"] <= difference <= row["bound_core_hours"], report
        assert not row["beyond"] or unbilled, report
    assert all(n["balanced"] for n in doc["nodes"]) or unbilled, doc["nodes"]
