"""``fairacct audit`` over every run of a job, on a real pool of its own (tests/htcondor_pool.py,
skipped with its reason where the machine cannot run one) that the test disturbs: jobs evicted
(``Vacate`` through the schedd, as ``condor_vacate_job`` does; ``condor_off -fast`` and then
``-graceful`` of a startd, each followed by ``condor_on``), held and released, held and removed,
and a job that fails to start, while the probe snapshots the pool every ~2 s.

Per submitter, the books must balance within the sampling bound, the used core-time must be
what ``condor_history`` says ran (cpus x ``RemoteWallClockTime``, every run), the runs what its
``NumJobStarts``/``JobRunCount`` say; and the evicted jobs must be beyond the bound the books had
before (their last run only, one run a job), as issue 34 measured.
"""

from __future__ import annotations

import json
import math
import sqlite3
import subprocess
import threading
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path

import htcondor2
import pytest

from collector.outbox import Outbox
from collector.sinks.sqlite import EmbeddedStore
from probes.cli import main
from probes.config import parse_config
from probes.pipeline.cycle import ProbeCycle
from probes.pipeline.reading import live_pool
from tests.conftest import SHARED
from tests.htcondor_pool import HTCondorPool, own_pool

CADENCE_S = 2.0
WAIT_S = 400.0  # what the pool's steps may take on a machine loaded by other tests (120 s timed out at a load of 8)
LAG_S = 2.0  # the audit's default (collector.summaries.audit.DEFAULT_LAG_S)
CPU = 'regexp("glidein_cpu", TARGET.Name)'
GPU = 'regexp("glidein_gpu", TARGET.Name)'
#: user: (executable, arguments, cores, jobs, requirements)
JOBS = {
    "evict": ("/bin/sleep", "30", 1, 6, GPU),  # issue 34's case: 6 jobs evicted and rerun
    "startd": ("/bin/sleep", "30", 2, 2, CPU),  # evicted by condor_off -fast, then by -graceful
    "holdrel": ("/bin/sleep", "45", 2, 1, GPU),  # held 8 s, released, run again to the end
    "holdrm": ("/bin/sleep", "300", 4, 1, GPU),  # held about 20 s, then removed
    "failed": ("/nonexistent/program", "", 1, 1, GPU),  # fails to start, held by the schedd, removed
}


@pytest.fixture(scope="module")
def runs_pool() -> Iterator[HTCondorPool]:
    with own_pool(SHARED) as pool:
        # a negotiation every 2 s rather than 20: each submitter's jobs start within seconds
        pool.reconfigure("NEGOTIATOR_INTERVAL = 2\nNEGOTIATOR_CYCLE_DELAY = 2\n")
        yield pool


def statuses(pool: HTCondorPool, user: str) -> list[int]:
    out = pool.tool("condor_q", "-allusers", "-const", f'AcctGroupUser == "{user}"', "-af", "JobStatus")
    return [int(s) for s in out.split()]


def daemon(pool: HTCondorPool, tool: str, *args: str) -> None:
    subprocess.run(
        [str(pool.release / "sbin" / tool), *args], env=pool.env(), capture_output=True, timeout=60, check=True
    )


def running_again(pool: HTCondorPool) -> None:
    """Wait for the startd's two jobs to run again after ``condor_on``: every 60 s the startd is
    asked on again and the schedd to reschedule, as an operator would (twice in fresh-clone runs
    at a load of 15 the jobs stayed idle for 400 s), and a timeout says the jobs' states."""
    deadline = time.monotonic() + WAIT_S
    while True:
        try:
            pool.wait_for("the startd's jobs running again", lambda: statuses(pool, "startd").count(2) == 2, 60.0)
            return
        except TimeoutError:
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"the startd's jobs not running again: JobStatus {statuses(pool, 'startd')}"
                ) from None
        daemon(pool, "condor_on", "-daemon", "STARTD")
        htcondor2.Schedd().reschedule()


@pytest.mark.slow
def test_every_run_balances_through_evictions_holds_and_failed_starts(
    runs_pool: HTCondorPool, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    pool = runs_pool
    state = tmp_path / "state"
    text = (
        f'[pool]\nname = "runs"\ncondor_config = "{pool.condor_config}"\ntimeout_s = 20\n'
        f"interval_s = {CADENCE_S}\nmax_interval_s = 30\n"
        f'[sources]\nlive = true\n[probe]\nstate_dir = "{state}"\n'
    )
    path = tmp_path / "runs.toml"
    path.write_text(text, encoding="utf-8")
    config = parse_config(tomllib.loads(text))
    live = live_pool(config)
    stop, failures = threading.Event(), []

    def probe() -> None:  # the probe's cycles, every CADENCE_S, until the test has its jobs' history
        try:
            with Outbox(state / "outbox.sqlite") as outbox, EmbeddedStore(state / "fairacct.sqlite") as store:
                while not stop.is_set():
                    tick = time.monotonic()
                    ProbeCycle(config, probe="runs", pool=live).once(outbox, store)
                    stop.wait(max(0.0, CADENCE_S - (time.monotonic() - tick)))
                ProbeCycle(config, probe="runs", pool=live).once(outbox, store)  # the last jobs' history
        except Exception as exc:  # noqa: BLE001 - reported by the test
            failures.append(exc)

    state.mkdir()
    worker = threading.Thread(target=probe)
    worker.start()
    try:
        time.sleep(CADENCE_S + 1.0)  # the first snapshot before the window
        start = float(math.ceil(time.time()))
        for user, (exe, args, cores, n, where) in JOBS.items():
            pool.submit(
                f"executable = {exe}\narguments = {args}\ntransfer_executable = false\nrequest_cpus = {cores}\n"
                f"request_memory = 256\nrequirements = {where}\naccounting_group = group_runs\n"
                f"accounting_group_user = {user}\nqueue {n}\n",
                user,
            )
        running = {u: n for u, (_, _, _, n, _) in JOBS.items() if u != "failed"}
        pool.wait_for(
            "the jobs running", lambda: all(statuses(pool, u).count(2) == n for u, n in running.items()), WAIT_S
        )
        time.sleep(12.0)  # each has run some samples: a first run the books before would miss
        # for this test only: a later test's subprocess must not inherit a pool removed by then
        monkeypatch.setenv("CONDOR_CONFIG", str(pool.condor_config))
        htcondor2.reload_config()
        htcondor2.Schedd().act(htcondor2.JobAction.Vacate, 'AcctGroupUser == "evict"')
        pool.tool("condor_hold", "-const", 'AcctGroupUser == "holdrel" || AcctGroupUser == "holdrm"')
        daemon(pool, "condor_off", "-fast", "-daemon", "STARTD")
        pool.wait_for("the startd's jobs evicted", lambda: 2 not in statuses(pool, "startd"), WAIT_S)
        pool.wait_for("the jobs held", lambda: statuses(pool, "holdrel") == statuses(pool, "holdrm") == [5], WAIT_S)
        time.sleep(8.0)
        pool.tool("condor_release", "-const", 'AcctGroupUser == "holdrel"')
        daemon(pool, "condor_on", "-daemon", "STARTD")
        running_again(pool)
        time.sleep(6.0)
        daemon(pool, "condor_off", "-graceful", "-daemon", "STARTD")
        pool.wait_for("the startd's jobs evicted again", lambda: 2 not in statuses(pool, "startd"), WAIT_S)
        pool.tool("condor_rm", "-const", 'AcctGroupUser == "holdrm"')  # held some 20 s
        daemon(pool, "condor_on", "-daemon", "STARTD")
        pool.wait_for("the failed start held", lambda: statuses(pool, "failed") == [5], WAIT_S)
        pool.tool("condor_rm", "-const", 'AcctGroupUser == "failed"')
        pool.wait_for(
            "an empty queue", lambda: not pool.tool("condor_q", "-allusers", "-af", "ClusterId").split(), WAIT_S
        )
        end = float(math.floor(time.time()))
        time.sleep(1.0)
    finally:
        stop.set()
        worker.join(120)
    assert not failures, failures

    attrs = ("AcctGroupUser", "CpusProvisioned", "RemoteWallClockTime", "NumJobStarts", "JobRunCount",
             "CompletionDate", "EnteredCurrentStatus", "JobCurrentStartDate")  # fmt: skip
    history: dict[str, list[list[float]]] = {}
    for line in pool.tool("condor_history", "-const", 'AcctGroup == "group_runs"', "-af", *attrs).splitlines():
        user, *values = line.split()
        history.setdefault(user, []).append([float(v) if v != "undefined" else 0.0 for v in values])
    capsys.readouterr()
    assert main(["audit", "--config", str(path), "--from", str(start), "--to", str(end), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    report = json.dumps(doc["submitters"], indent=1) + f"\ngaps: {doc['gaps']}, interval {doc['interval_s']} s"
    print(report, json.dumps(history))
    # On a loaded machine a snapshot can come late: the audit names it (a gap, issue 34 point 2),
    # and held may then lack what ran there unbilled, never more; on a quiet machine there is none.
    unbilled = sum(g["running_core_hours"] for g in doc["node_gaps"])
    rows = {r["submitter"].split("@")[0].removeprefix("group_runs."): r for r in doc["submitters"] if r["jobs"]}
    assert set(rows) == set(JOBS), report
    d = doc["interval_s"]
    for user, (_, _, cores, n, _) in JOBS.items():
        row, jobs = rows[user], history[user]
        assert row["jobs"] == len(jobs) == n, (user, report)
        assert row["runs"] == sum(max(s, r, 1) for _, _, s, r, *_ in jobs), (user, report, jobs)
        # used: every run, as condor_history says (all jobs ran inside the window), what ran in the
        # gaps a loaded machine leaves (late snapshots) named apart
        used = sum(c * w for c, w, *_ in jobs) / 3600
        assert row["used_core_hours"] + row["unobserved_core_hours"] == pytest.approx(used, abs=1e-9), (user, report)
        sampling = cores * row["runs"] * (d + LAG_S) / 3600
        if doc["gaps"]:  # a gap's edge inside an evicted job's earlier runs adds them to its bound
            assert row["bound_core_hours"] >= sampling - 1e-12, (user, report)
        else:
            assert row["unobserved_core_hours"] == 0 and row["bound_core_hours"] == pytest.approx(sampling), report
        held = row["held_core_hours"]
        if user == "failed":  # its claim is billed after its run ended (see below): not ours to count
            (ran_to,) = [began + w for _, w, _, _, _, _, began in jobs]
            after = billed_after(state / "fairacct.sqlite", "group_runs.failed", ran_to)
            print(f"failed start: held {held * 3600:.1f} core-s, {after * 3600:.1f} of them after its run ended")
            held -= after
        bound = row["bound_core_hours"]
        assert -unbilled - bound <= held - row["used_core_hours"] <= bound, (user, report)
        assert user == "failed" or not row["beyond"] or unbilled, (user, report)
    assert rows["evict"]["runs"] >= 12 and rows["startd"]["runs"] >= 6, report
    # the books before: the last run only (start -> completion or removal), a bound of one run a job
    for user in ("evict", "startd", "holdrm"):
        last_only = sum(c * ((done or left) - began) for c, _, _, _, done, left, began in history[user]) / 3600
        assert abs(rows[user]["held_core_hours"] - last_only) > cores_of(user) * len(history[user]) * (d + LAG_S) / 3600


def billed_after(store: Path, submitter: str, t: float) -> float:
    """Core-hours of ``submitter``'s allocation records that stand for time wholly after ``t``.

    A start that fails (the executable missing) leaves its dynamic slot claimed with the job's
    ``GlobalJobId`` after the schedd has held the job, and after its removal, until the claim
    goes (measured: some 30 s): the probe bills the job for that time. Those bills are the held
    side's to stop (a dynamic slot whose job the schedd lists as held, or not at all, is not
    billed: issue 34's points 1 and 5), not the used side's to count; the audit shows them
    beyond the bound until they are gone."""
    with sqlite3.connect(store) as db:
        (core_s,) = db.execute(
            """SELECT coalesce(sum(json_extract(doc, '$.cpus') * json_extract(doc, '$.interval_s')), 0)
               FROM allocation WHERE json_extract(doc, '$.submitter') LIKE ? || '@%'
               AND json_extract(doc, '$.observed_at') - json_extract(doc, '$.interval_s') >= ?""",
            (submitter, t),
        ).fetchone()
    return float(core_s) / 3600


def cores_of(user: str) -> int:
    return JOBS[user][2]
