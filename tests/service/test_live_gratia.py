"""fairacct as a Gratia sender on the real pool (issue 37): ``fairacct probe run`` reads the
history of a pool of its own (twelve short jobs of four users, 1 to 3 cores) and sends the
job records as JobUsageRecords, three to a bundle, to a ``fairacct collector serve`` process
taking Gratia records from it (``/gratia-servlets/rmi``, its embedded store).

The collector is SIGKILLed mid-bundle twice, at the worst moment: a bundle durable in its
outbox, the ``OK`` not yet sent (the test-only fault point ``gratia-after-commit`` of
collector/faults.py, armed through the environment of the process this test starts), so
the probe never hears that the collector has it and must send it again. Restarted each time,
the collector ends with every job ``condor_history`` lists, once, with the wall time, CPU time
(user + system), cores and start and end times ``condor_history`` gives: nothing lost,
nothing doubled by the resends.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from collector.outbox import Outbox
from collector.sinks.sqlite import EmbeddedStore
from tests.collector.server.conftest import FAIRACCT, Collector, free_port
from tests.conftest import SHARED
from tests.htcondor_pool import HTCondorPool, own_pool

pytestmark = pytest.mark.slow

PROBE = "condor:ap.fairacct.test"
BUNDLE = 3
# accounting-group user: (cores, jobs); 12 jobs, 4 bundles, 22 cores: all run at once
USERS = {"alice": (1, 4), "bob": (2, 4), "carol": (3, 3), "dave": (1, 1)}
JOBS = sum(n for _, n in USERS.values())
CRASH = "gratia-after-commit:2"  # each collector started with it dies after storing its 2nd bundle
HISTORY = ["GlobalJobId", "RemoteWallClockTime", "RemoteUserCpu", "RemoteSysCpu", "CpusProvisioned",
           "JobStartDate", "CompletionDate"]  # fmt: skip


@pytest.fixture(scope="module")
def pool() -> Iterator[HTCondorPool]:
    with own_pool(SHARED) as pool:
        yield pool


def history(pool: HTCondorPool) -> dict[str, dict[str, Any]]:
    """Every job ``condor_history`` lists, by GlobalJobId: the attributes of HISTORY."""
    ads = json.loads(pool.tool("condor_history", "-json", "-attributes", ",".join(HISTORY)) or "[]")
    return {ad["GlobalJobId"]: ad for ad in ads}


def durable(c: Collector) -> dict[str, dict[str, Any]]:
    """The Gratia records the collector holds, in its store or still in its outbox, by id."""
    folder = c.root / "collector"
    docs: dict[str, dict[str, Any]] = {}
    if (folder / "outbox.sqlite").exists():
        with Outbox(folder / "outbox.sqlite") as outbox:
            docs |= {d["id"]: d for d in outbox.waiting("gratia")}
    if (folder / "store.sqlite").exists():
        with EmbeddedStore(folder / "store.sqlite") as store:
            docs |= {d["id"]: d for d in store.query("gratia")}
    return docs


def start(c: Collector) -> None:
    """Start the collector; one armed to crash may do so before it was seen answering."""
    try:
        c.start()
    except AssertionError:
        if c.process is None or c.process.returncode != -signal.SIGKILL:
            raise


def killed(c: Collector, timeout_s: float = 180) -> None:
    """Wait until the collector (armed with CRASH) has killed itself."""
    assert c.process is not None
    try:
        code = c.process.wait(timeout_s)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"the collector did not reach its fault point within {timeout_s:g} s:\n{c.log}") from None
    assert code == -signal.SIGKILL, f"the collector exited with {code}:\n{c.log}"
    c.process = None


def seconds(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC).timestamp()


def test_every_job_of_the_history_arrives_once_through_two_collector_crashes(pool: HTCondorPool, tmp_path: Path) -> None:
    for user, (cpus, n) in USERS.items():
        pool.submit(
            f"executable = /bin/sleep\narguments = 2\nrequest_cpus = {cpus}\nrequest_memory = 256\n"
            f"accounting_group_user = {user}\nqueue {n}\n",
            f"gratia_{user}",
        )
    pool.wait_for(
        f"{JOBS} jobs in the history",
        lambda: len(history(pool)) == JOBS and not pool.tool("condor_q", "-allusers", "-af", "ClusterId").split(),
        timeout=240,
    )
    jobs = history(pool)

    c = Collector(tmp_path / "collector", free_port(), {}, {"flush_every_s": 0.2,
                  "gratia_senders": [{"probe": PROBE, "networks": ["127.0.0.1/32"]}]},  # fmt: skip
                  env={"FAIRACCT_CRASH_AT": CRASH})  # fmt: skip
    c.start()
    state = tmp_path / "state"
    config = tmp_path / "probe.toml"
    config.write_text(
        f'[pool]\nname = "gratia"\ncondor_config = "{pool.condor_config}"\ntimeout_s = 30\ninterval_s = 5\n'
        f'[sources]\nlive = true\n'
        f'[probe]\nstate_dir = "{state}"\nhistory_every_s = 2\nflush_every_s = 1\n'
        f'[store]\nurl = "gratia+{c.url}/gratia-servlets/rmi"\ngratia_probe_name = "{PROBE}"\n'
        f"gratia_bundle_size = {BUNDLE}\n",
        encoding="utf-8",
    )
    with open(tmp_path / "probe.log", "wb") as log:
        probe = subprocess.Popen([FAIRACCT, "probe", "run", "--config", str(config)], stdout=log, stderr=log)
    held: list[int] = []  # records durable at each crash
    try:
        killed(c)  # its 2nd bundle durable, no OK sent
        held.append(len(durable(c)))
        start(c)  # still armed: the resends and what follows, then it dies again
        if c.process is not None:
            killed(c)
        held.append(len(durable(c)))
        c.env = {}
        c.start()
        deadline = time.monotonic() + 180
        while len(durable(c)) < JOBS or httpx.get(f"{c.url}/healthz", timeout=10).json()["outbox"]["depth"]:
            assert probe.poll() is None, (tmp_path / "probe.log").read_text()
            assert time.monotonic() < deadline, f"{len(durable(c))} of {JOBS} records stored within 180 s:\n{c.log}"
            time.sleep(0.5)
    finally:
        probe.send_signal(signal.SIGTERM)
        code = probe.wait(120)
        if c.process is not None:
            c.stop()
    assert code == 0, (tmp_path / "probe.log").read_text()

    # the probe holds nothing back, and refused nothing
    with Outbox(state / "outbox.sqlite") as outbox:
        status = outbox.status()
    assert "job" not in status.depth and not status.dead_letters, status
    # each crash came mid-stream: bundles durable that the probe never heard OK for
    assert held[0] == 2 * BUNDLE, held
    assert BUNDLE < held[1] < JOBS, held
    # read back as an operator would
    store = c.root / "collector" / "store.sqlite"
    read = subprocess.run(
        [FAIRACCT, "records", "gratia", "--store", f"sqlite:///{store}", "--json", "--limit", "1000"],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    docs = json.loads(read.stdout)
    assert sorted(d["GlobalJobId"] for d in docs) == sorted(jobs)  # every job of the history, once
    for d in docs:
        ad = jobs[d["GlobalJobId"]]
        assert (d["WallDuration"], d["CpuDuration"], d["Processors"]) == (
            ad["RemoteWallClockTime"], ad["RemoteUserCpu"] + ad["RemoteSysCpu"], ad["CpusProvisioned"]
        ), d["GlobalJobId"]  # fmt: skip
        assert (seconds(d["StartTime"]), seconds(d["EndTime"])) == (ad["JobStartDate"], ad["CompletionDate"])
        assert d["ProbeName"] == PROBE
    print(f"\n{JOBS} jobs, bundles of {BUNDLE}; records durable at the two crashes: {held}")
