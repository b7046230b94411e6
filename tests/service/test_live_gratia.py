"""fairacct as a Gratia sender on the real pool (issue 37): ``fairacct probe run`` reads the
history of a pool of its own (twelve short jobs of four users, 1 to 3 cores) and sends the
job records as JobUsageRecords, three to a bundle, to a ``fairacct collector serve`` process
taking Gratia records from it (``/gratia-servlets/rmi``, its embedded store): as its store,
or as its ``[upstream]`` beside its own embedded store (which then holds every job too).

The collector is SIGKILLed mid-bundle twice, at the worst moment: a bundle durable in its
outbox, the ``OK`` not yet sent (the test-only fault point ``gratia-after-commit`` of
collector/faults.py, armed through the environment of the process this test starts), so
the probe never hears that the collector has it and must send it again. Restarted each time,
the collector ends with every job ``condor_history`` lists, once, with the wall time, CPU time
(user + system), cores, start and end times, exit code and user ``condor_history`` gives:
nothing lost, nothing doubled by the resends. (This pool's starter reports no CPU time,
``RemoteUserCpu = RemoteSysCpu = 0.0`` even for a busy loop, so CPU is compared at 0 here;
tests/collector/server/test_gratia_sink.py compares it on the condor25 history.)
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
           "JobStartDate", "CompletionDate", "ExitCode", "Owner"]  # fmt: skip


@pytest.fixture(scope="module")
def pool() -> Iterator[HTCondorPool]:
    """A pool of the module's own whose history holds the jobs of USERS, all finished."""
    with own_pool(SHARED) as pool:
        for code, (user, (cpus, n)) in enumerate(USERS.items(), start=2):  # exit codes 2..5: Status
            pool.submit(
                f"executable = /bin/sh\narguments = \"-c 'sleep 2; exit {code}'\"\nrequest_cpus = {cpus}\n"
                f"request_memory = 256\naccounting_group_user = {user}\nqueue {n}\n",
                f"gratia_{user}",
            )
        pool.wait_for(
            f"{JOBS} jobs in the history",
            lambda: len(history(pool)) == JOBS and not pool.tool("condor_q", "-allusers", "-af", "ClusterId").split(),
            timeout=240,
        )
        yield pool


def history(pool: HTCondorPool) -> dict[str, dict[str, Any]]:
    """Every job ``condor_history`` lists, by GlobalJobId: the attributes of HISTORY."""
    ads = json.loads(pool.tool("condor_history", "-json", "-attributes", ",".join(HISTORY)) or "[]")
    return {ad["GlobalJobId"]: ad for ad in ads}


def stored(c: Collector) -> dict[str, dict[str, Any]]:
    """The Gratia records in the collector's store, by id."""
    path = c.root / "collector" / "store.sqlite"
    if not path.exists():
        return {}
    with EmbeddedStore(path) as store:
        return {d["id"]: d for d in store.query("gratia")}


def durable(c: Collector) -> dict[str, dict[str, Any]]:
    """The Gratia records a stopped collector holds, in its store or still in its outbox, by id."""
    path = c.root / "collector" / "outbox.sqlite"
    if not path.exists():
        return stored(c)
    with Outbox(path) as outbox:
        return {d["id"]: d for d in outbox.waiting("gratia")} | stored(c)


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


@pytest.mark.parametrize("section", ["store", "upstream"])
def test_every_job_of_the_history_arrives_once_through_two_collector_crashes(
    pool: HTCondorPool, tmp_path: Path, section: str
) -> None:
    """The collector as the probe's store (``[store] url = "gratia+..."``), or as its
    ``[upstream]`` beside its own embedded store."""
    jobs = history(pool)

    sender = {"probe": PROBE, "networks": ["127.0.0.1/32"], "sites": ["FAIRACCT_TEST"]}
    settings = {"flush_every_s": 0.2, "gratia_senders": [sender]}
    c = Collector(tmp_path / "collector", free_port(), {"p1": "token-one"}, settings, env={"FAIRACCT_CRASH_AT": CRASH})
    c.start()
    state = tmp_path / "state"
    config = tmp_path / "probe.toml"
    config.write_text(
        f'[pool]\nname = "gratia"\ncondor_config = "{pool.condor_config}"\ntimeout_s = 30\ninterval_s = 5\n'
        f"[sources]\nlive = true\n"
        f'[probe]\nstate_dir = "{state}"\nhistory_every_s = 2\nflush_every_s = 1\n'
        f'[{section}]\nurl = "gratia+{c.url}/gratia-servlets/rmi"\ngratia_probe_name = "{PROBE}"\n'
        f'gratia_site = "FAIRACCT_TEST"\ngratia_bundle_size = {BUNDLE}\n',
        encoding="utf-8",
    )
    with open(tmp_path / "probe.log", "wb") as log:
        probe = subprocess.Popen([FAIRACCT, "probe", "run", "--config", str(config)], stdout=log, stderr=log)
    held: list[int] = []  # records durable at each crash
    try:
        killed(c)  # its 2nd bundle durable, no OK sent
        held.append(len(durable(c)))
        start(c)  # still armed: it takes the bundle it died on again and the next, and dies
        killed(c)
        held.append(len(durable(c)))
        c.env = {}
        c.start()
        deadline = time.monotonic() + 180
        while len(stored(c)) < JOBS or httpx.get(f"{c.url}/healthz", timeout=10).json()["outbox"]["depth"]:
            assert probe.poll() is None, (tmp_path / "probe.log").read_text()
            assert time.monotonic() < deadline, f"{len(stored(c))} of {JOBS} records stored within 180 s:\n{c.log}"
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
    assert not {"job", "upstream:job"} & set(status.depth) and not status.dead_letters, status
    if section == "upstream":  # and the probe's own store has every job too
        with EmbeddedStore(state / "fairacct.sqlite") as own:
            assert sorted(j["job_id"] for j in own.query("job")) == sorted(jobs)
    # each crash came mid-stream, a bundle durable that the probe never heard OK for: the 2nd; then,
    # the 1st settled, the 2nd sent again and the 3rd
    assert held == [2 * BUNDLE, 3 * BUNDLE], held
    # read back as an operator would
    store = c.root / "collector" / "store.sqlite"
    read = subprocess.run(
        [FAIRACCT, "records", "gratia", "--store", f"sqlite:///{store}", "--json", "--limit", "1000"],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    docs = json.loads(read.stdout)
    # every job of the history, once, under condor-ap's GlobalJobId
    assert sorted(d["GlobalJobId"] for d in docs) == sorted(f"condor.{j}" for j in jobs)
    for d in docs:
        ad = jobs[d["GlobalJobId"].removeprefix("condor.")]
        assert (d["WallDuration"], d["CpuDuration"], d["Processors"]) == (
            ad["RemoteWallClockTime"], ad["RemoteUserCpu"] + ad["RemoteSysCpu"], ad["CpusProvisioned"]
        ), d["GlobalJobId"]  # fmt: skip
        assert (seconds(d["StartTime"]), seconds(d["EndTime"])) == (ad["JobStartDate"], ad["CompletionDate"])
        # condor-ap's LocalUserId is the Owner (the accounting group's user is fairacct's own user)
        assert (d["Status"], d["LocalUserId"], d["ProbeName"]) == (str(ad["ExitCode"]), ad["Owner"], PROBE)
        assert d["SiteName"] == "FAIRACCT_TEST"
    print(
        f"\n{JOBS} jobs, bundles of {BUNDLE}; records durable at the two crashes: {held}; "
        f"wall {sum(d['WallDuration'] for d in docs):g} s, CPU {sum(d['CpuDuration'] for d in docs):g} s, "
        f"{sum(d['Processors'] for d in docs):g} cores"
    )
