"""One identity for a job all its life, and no bill for a claim whose job is not running (issue
34, points 5 and 6 and "idle jobs are never billed"), on a real HTCondor pool of this module's
own.

The pool names its groups (``GROUP_NAMES``) and its startds copy nothing of a job into its
dynamic slot (no ``STARTD_JOB_ATTRS``), so a slot's ad names its job only through
``AccountingGroup``: ``group_phys.cms.alice.smith@domain``. Four jobs run on ``glidein_cpu``:
alice.smith's in ``group_phys.cms`` with a project, bob's in ``group_other`` (which the
negotiator does not know: ``condor_userprio`` lists him under ``<none>``), carol.jones' named
only by ``+AccountingGroup``, and one that will be held. Then ``glidein_cpu``'s startd is
stopped (SIGSTOP: its ads stay in the collector as they were, as they do for the seconds between
a job's end and the startd's next update), alice's job finishes and the fourth is held: the
schedd no longer lists the one as running and lists the other as held, while their slots' ads
still claim them. Each ``probe once`` bills what the collector shows; the job records come from
the history at the end. Every bill of a job, before and after, and its job record name it as
``condor_history`` and ``condor_userprio -allusers`` do, and the held job's claim is not billed.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from collector.sinks.sqlite import EmbeddedStore
from probes.cli import main
from probes.config import load_config
from probes.pipeline.reading import NOT_BILLED, live_pool, read_live_snapshot
from tests.conftest import SHARED
from tests.htcondor_pool import HTCondorPool, own_pool

pytestmark = pytest.mark.slow

# the startds' periodic updates far apart: a stopped startd's ads are not yet stale for any rule
# that judges them by their UpdateInterval, only frozen
POOL_CONFIG = """
GROUP_NAMES = group_phys, group_phys.cms
GROUP_ACCEPT_SURPLUS = True
STARTD.UPDATE_INTERVAL = 120
"""

# name: submit lines; every job waits for its file, on glidein_cpu
JOBS = {
    "alice": 'accounting_group = group_phys.cms\naccounting_group_user = alice.smith\n+ProjectName = "ProjX"\n',
    "bob": "accounting_group = group_other\naccounting_group_user = bob\n",
    "carol": '+AccountingGroup = "group_phys.cms.carol.jones"\n+ProjectName = "ProjY"\n',
    "held": "accounting_group = group_phys\naccounting_group_user = dan\n",
}


@pytest.fixture(scope="module")
def life_pool() -> Iterator[HTCondorPool]:
    with own_pool(SHARED) as pool:
        pool.reconfigure(POOL_CONFIG)
        yield pool


def userprio_groups(pool: HTCondorPool) -> dict[str, str]:
    """Each submitter's group as ``condor_userprio -allusers -l`` names it."""
    attrs = {}
    for line in pool.tool("condor_userprio", "-allusers", "-l").splitlines():
        key, _, value = line.partition(" = ")
        attrs[key.strip()] = value.strip().strip('"')
    return {
        attrs[f"Name{i}"]: attrs[f"AccountingGroup{i}"]
        for i in range(1, 1000)
        if f"Name{i}" in attrs and attrs.get(f"IsAccountingGroup{i}") == "false"
    }


def stored(state: Path, kind: str) -> list[dict[str, Any]]:
    with EmbeddedStore(state / "fairacct.sqlite") as store:
        return store.query(kind)


def four(doc: dict[str, Any]) -> tuple[Any, ...]:
    return doc["submitter"], doc.get("user"), doc.get("group"), doc.get("project")


def test_a_jobs_bills_and_record_name_it_as_the_negotiator_does_all_its_life(
    life_pool: HTCondorPool, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pool = life_pool
    assert "STARTD_JOB_ATTRS" not in pool.condor_config.read_text()  # the slots name their jobs only by AccountingGroup
    domain = pool.tool("condor_config_val", "UID_DOMAIN").strip()
    folder = pool.work / "submit"
    clusters = {}
    for name, lines in JOBS.items():
        done = folder / f"done_{name}"
        clusters[name] = pool.submit(
            "executable = /bin/sh\n"
            f"arguments = \"-c 'while [ ! -e {done} ]; do sleep 0.2; done'\"\n"
            'requirements = regexp("glidein_cpu", TARGET.Name)\n'
            f"request_cpus = 2\nrequest_memory = 256\n{lines}queue 1\n",
            f"life_{name}",
        )
    job_ids = {
        int(c.split("#")[1].split(".")[0]): c for c in pool.tool("condor_q", "-allusers", "-af", "GlobalJobId").split()
    }
    ids = {name: job_ids[cluster] for name, cluster in clusters.items()}

    def all_running() -> bool:
        dynamic = pool.tool("condor_status", "-const", "DynamicSlot =?= true", "-af", "GlobalJobId").split()
        status = pool.tool("condor_q", "-allusers", "-af", "JobStatus").split()
        return sorted(dynamic) == sorted(ids.values()) and status == ["2"] * 4

    pool.wait_for("4 jobs running in dynamic slots of glidein_cpu", all_running, timeout=240)
    state = tmp_path / "state"
    config = tmp_path / "fairacct.toml"
    config.write_text(
        f'[pool]\nname = "life"\ncondor_config = "{pool.condor_config}"\ntimeout_s = 30\n'
        f'[sources]\nlive = true\n[probe]\nstate_dir = "{state}"\n',
        encoding="utf-8",
    )
    assert main(["probe", "once", "--config", str(config)]) == 0, capsys.readouterr().err

    pid = pool.cpu_startd()
    os.kill(pid, signal.SIGSTOP)  # its ads stay as they are: every slot still claims its job
    try:
        (folder / "done_alice").touch()
        pool.tool("condor_hold", ids["held"].split("#")[1])

        def moved_on() -> bool:
            queue = dict(
                line.split()
                for line in pool.tool("condor_q", "-allusers", "-af", "GlobalJobId", "JobStatus").splitlines()
                if line.strip()
            )
            return queue.get(ids["alice"]) != "2" and queue.get(ids["held"]) == "5"

        pool.wait_for("alice's job no longer running, the fourth held", moved_on, timeout=60)
        claimed = pool.tool("condor_status", "-const", "DynamicSlot =?= true", "-af", "GlobalJobId").split()
        assert sorted(claimed) == sorted(ids.values())  # the collector still shows all four claims
        reading = read_live_snapshot(live_pool(load_config(config)), now=time.time())
        assert reading.snapshot is not None
        billed = {a["job_id"]: four(a) for a in reading.snapshot.allocations.to_dict("records")}
        assert billed == {
            ids["alice"]: (f"group_phys.cms.alice.smith@{domain}", "alice.smith", "group_phys.cms", "ProjX"),
            ids["bob"]: (f"group_other.bob@{domain}", "bob", "<none>", None),
            ids["carol"]: (f"group_phys.cms.carol.jones@{domain}", "condorpool", "group_phys.cms", "ProjY"),
        }  # alice's job has ended: named as it was; the held job's claim is not billed
        assert reading.reports["status"].rejects[NOT_BILLED.format("held")] == 1
        assert main(["probe", "once", "--config", str(config)]) == 0, capsys.readouterr().err
    finally:
        os.kill(pid, signal.SIGCONT)

    for name in ("bob", "carol", "held"):
        (folder / f"done_{name}").touch()
    pool.tool("condor_rm", ids["held"].split("#")[1])

    def finished() -> bool:
        history = pool.tool("condor_history", "-af", "GlobalJobId").split()
        dynamic = pool.tool("condor_status", "-const", "DynamicSlot =?= true", "-af", "Name").split()
        return sorted(history) == sorted(ids.values()) and not dynamic

    pool.wait_for("the jobs in the history, their claims released", finished, timeout=180)
    assert main(["probe", "once", "--config", str(config)]) == 0, capsys.readouterr().err

    # what the pool's own tools say of each job: condor_history's names, condor_userprio's group
    negotiator = userprio_groups(pool)
    history = {}
    for line in pool.tool(
        "condor_history", "-af:,", "GlobalJobId", "AccountingGroup", "AcctGroupUser", "Owner", "ProjectName"
    ).splitlines():
        job, group_name, group_user, owner, project = (f.strip() for f in line.split(","))
        submitter = f"{group_name}@{domain}"
        history[job] = (submitter, owner if group_user == "undefined" else group_user, negotiator[submitter],
                        None if project == "undefined" else project)  # fmt: skip
    assert history[ids["alice"]] == (f"group_phys.cms.alice.smith@{domain}", "alice.smith", "group_phys.cms", "ProjX")
    assert history[ids["bob"]] == (f"group_other.bob@{domain}", "bob", "<none>", None)
    assert history[ids["carol"]][2:] == ("group_phys.cms", "ProjY")

    bills: dict[str, list[tuple[Any, ...]]] = {}
    for doc in stored(state, "allocation"):
        bills.setdefault(doc["job_id"], []).append(four(doc))
    # two bills of each job that ran, one of the held job: its claim was billed only while it ran
    assert {j: len(b) for j, b in bills.items()} == {ids["alice"]: 2, ids["bob"]: 2, ids["carol"]: 2, ids["held"]: 1}
    records = {doc["job_id"]: four(doc) for doc in stored(state, "job")}
    assert set(records) >= {ids["alice"], ids["bob"], ids["carol"]}
    for job, named in bills.items():
        assert named == [history[job]] * len(named), f"{job}: billed as {named}, its history says {history[job]}"
        if job in records:
            assert records[job] == history[job], f"{job}: its record says {records[job]}, its history {history[job]}"
