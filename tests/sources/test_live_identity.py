"""Who is billed, on a real HTCondor pool: every record kind names each submitter exactly as
``condor_userprio -allusers`` does, and its user, group and project as they were submitted.

A pool of its own (tests/htcondor_pool.py; not the session's ``htcondor_pool``, whose jobs and
history other tests count), configured as glideinWMS and OSG pools are: nested accounting
groups (``GROUP_NAMES``) and startds that copy a job's ``AcctGroup``, ``AcctGroupUser`` and
``ProjectName`` into its dynamic slot (``STARTD_JOB_ATTRS``). One Unix account, the pool's,
submits for several ``accounting_group_user``s (alice in two groups, a user with a dot in his
name in a nested group, carol without a group) and plainly; a second Unix account that exists
on every Linux machine (``nobody``; none is created) submits plainly too, when the test runs
as root. The jobs run until the test lets them finish, so a live ``probe once`` sees them all
running (allocation and fairness records), and a second one reads them from the history (job
records, the fairshare ledger). One more job asks for more cores than any slot has: idle
demand, in the fairness records only.
"""

from __future__ import annotations

import json
import os
import pwd
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from collector.outbox import Outbox
from collector.sinks.sqlite import EmbeddedStore
from probes.accounting.ledger import LEDGER_COLUMNS
from probes.cli import main
from probes.sources.checkpoints import LEDGER_KEY
from tests.conftest import SHARED
from tests.htcondor_pool import POOL_USER, HTCondorPool, own_pool

POOL_CONFIG = """
GROUP_NAMES = group_physics, group_physics.cms, group_bio
GROUP_QUOTA_DYNAMIC_group_physics = 0.5
GROUP_QUOTA_DYNAMIC_group_physics.cms = 0.5
GROUP_QUOTA_DYNAMIC_group_bio = 0.3
GROUP_ACCEPT_SURPLUS = True
STARTD_JOB_ATTRS = $(STARTD_JOB_ATTRS) AcctGroup AcctGroupUser ProjectName
"""

SECOND_ACCOUNT = "nobody"

# name: (Unix account, accounting group, accounting group user, project, jobs); each job holds
# a core until the file ``done`` appears
JOBS: dict[str, tuple[str, str | None, str | None, str | None, int]] = {
    "cms_alice": (POOL_USER, "group_physics.cms", "alice", "CMS-Higgs", 2),
    "cms_john": (POOL_USER, "group_physics.cms", "john.smith", "CMS-Top", 1),
    "physics_bob": (POOL_USER, "group_physics", "bob", "Physics", 1),
    "bio_alice": (POOL_USER, "group_bio", "alice", "Bio", 1),
    "carol": (POOL_USER, None, "carol", "Staff", 1),
    "plain": (POOL_USER, None, None, None, 1),
    "second_account": (SECOND_ACCOUNT, None, None, None, 1),
}
WAITING = (POOL_USER, "group_bio", "dave", "Bio")  # 64 cores: fits no slot, stays idle


def description(group: str | None, user: str | None, project: str | None, done: Path, cpus: int, n: int) -> str:
    lines = [
        "executable = /bin/sh",
        f"arguments = \"-c 'while [ ! -e {done} ]; do sleep 1; done'\"",
        f"request_cpus = {cpus}",
        "request_memory = 256",
    ]
    lines += [f"accounting_group = {group}"] if group else []
    lines += [f"accounting_group_user = {user}"] if user else []
    lines += [f'+ProjectName = "{project}"'] if project else []
    return "\n".join([*lines, f"queue {n}", ""])


def expected(domain: str, account: str, group: str | None, user: str | None, project: str | None) -> tuple[Any, ...]:
    """(submitter, user, group, project) as the negotiator and the submit file name them: the
    groups submitted here are all the negotiator's, and a submitter in none is in ``<none>``."""
    charged = f"{group}.{user}" if group and user else user or account
    return f"{charged}@{domain}", user or account, group or "<none>", project


@pytest.fixture(scope="module")
def identity_pool() -> Iterator[HTCondorPool]:
    with own_pool(SHARED) as pool:
        pool.reconfigure(POOL_CONFIG)
        yield pool


def second_account() -> bool:
    """Whether jobs can be submitted as a second Unix account: run as root, and it exists."""
    try:
        pwd.getpwnam(SECOND_ACCOUNT)
    except KeyError:
        return False
    return os.geteuid() == 0


def userprio_submitters(pool: HTCondorPool) -> set[str]:
    """The submitters of ``condor_userprio -allusers -flat``: its rows, less the groups'."""
    rows = pool.tool("condor_userprio", "-allusers", "-flat").splitlines()
    return {line.split()[0] for line in rows if line.strip() and "@" in line.split()[0]}


def stored(state: Path, kind: str) -> list[dict[str, Any]]:
    with EmbeddedStore(state / "fairacct.sqlite") as store:
        return store.query(kind)


def names(docs: list[dict[str, Any]], key: str = "submitter") -> dict[str, tuple[Any, ...]]:
    """Each submitter's (submitter, user, group, project) in ``docs``, which must agree."""
    out: dict[str, tuple[Any, ...]] = {}
    for d in docs:
        four = (d[key], d.get("user"), d.get("group"), d.get("project"))
        assert out.setdefault(d[key], four) == four, f"{d[key]} is named two ways: {out[d[key]]} and {four}"
    return out


def test_every_record_kind_names_each_submitter_as_the_negotiator_does(
    identity_pool: HTCondorPool, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pool = identity_pool
    domain = pool.tool("condor_config_val", "UID_DOMAIN").strip()
    done = pool.work / "submit" / "done"
    jobs = {k: v for k, v in JOBS.items() if v[0] != SECOND_ACCOUNT or second_account()}
    for name, (account, group, user, project, n) in jobs.items():
        pool.submit(description(group, user, project, done, 1, n), f"identity_{name}", user=account)
    pool.submit(description(*WAITING[1:], done, 64, 1), "identity_waiting")
    want = {expected(domain, *spec[:4])[0]: expected(domain, *spec[:4]) for spec in jobs.values()}
    waiting = expected(domain, *WAITING)
    running = sum(spec[4] for spec in jobs.values())

    def all_running() -> bool:
        status = pool.tool("condor_q", "-allusers", "-af", "JobStatus").split()
        dynamic = pool.tool("condor_status", "-const", "DynamicSlot =?= true", "-af", "Name").split()
        listed = pool.tool("condor_status", "-const", "PartitionableSlot =?= true", "-af", "size(ChildName)").split()
        return (
            status.count("2") == running and status.count("1") == 1 and len(dynamic) == running
            and sum(int(n) for n in listed if n.isdigit()) == running
        )  # fmt: skip

    pool.wait_for(f"{running} jobs running, one idle", all_running, timeout=240)
    state = tmp_path / "state"
    config = tmp_path / "fairacct.toml"
    config.write_text(
        f'[pool]\nname = "identity"\ncondor_config = "{pool.condor_config}"\ntimeout_s = 30\n'
        f'[sources]\nlive = true\n[probe]\nstate_dir = "{state}"\n',
        encoding="utf-8",
    )
    assert main(["probe", "once", "--config", str(config)]) == 0, capsys.readouterr().err

    # the bills: one per running job, each named as its job was submitted, where its job ran
    allocations = stored(state, "allocation")
    assert len(allocations) == running
    assert names(allocations) == want
    assert {(a["site"], a["resource_name"]) for a in allocations} == {("TestSite", "TestCE")}
    # fairness: per submitter, the negotiator's unit, with its user and group; the idle job's too
    fairness = {d["name"]: d for d in stored(state, "fairness")}
    assert {d["type"] for d in fairness.values()} == {"submitter"}
    assert set(fairness) == {*want, waiting[0]}
    assert all((d["user"], d["group"]) == (want | {waiting[0]: waiting})[n][1:3] for n, d in fairness.items())
    assert (fairness[waiting[0]]["demand_cpus"], fairness[waiting[0]]["allocation_cpus"]) == (64, 0)

    done.touch()  # the jobs finish

    def finished() -> bool:
        history = pool.tool("condor_history", "-af", "GlobalJobId").split()
        dynamic = pool.tool("condor_status", "-const", "DynamicSlot =?= true", "-af", "Name").split()
        # and the p-slots no longer list them: until their next update the collector still holds
        # child lists of released claims, which this reader bills (issue 23's other part)
        listed = pool.tool("condor_status", "-const", "PartitionableSlot =?= true", "-af", "size(ChildName)").split()
        return len(history) == running and not dynamic and not any(n.isdigit() and int(n) > 0 for n in listed)

    pool.wait_for(f"{running} jobs in the history, their claims released", finished, timeout=180)
    assert main(["probe", "once", "--config", str(config)]) == 0, capsys.readouterr().err
    assert len(stored(state, "allocation")) == running  # nothing is held any more: no bill more
    job_docs = stored(state, "job")
    assert len(job_docs) == running and names(job_docs) == want
    assert {(j["site"], j["resource_name"]) for j in job_docs} == {("TestSite", "TestCE")}
    # the fairshare ledger counts each submitter, and each user, group and project as submitted
    with Outbox(state / "outbox.sqlite") as outbox:
        ledger = outbox.checkpoint(LEDGER_KEY)
    rows = [dict(zip(LEDGER_COLUMNS, r, strict=True)) for r in ledger]
    assert names(rows) == want

    # and the negotiator: the same names, every one
    negotiator = userprio_submitters(pool)
    assert set(want) <= negotiator and waiting[0] in negotiator
    assert negotiator <= {*want, waiting[0]}, "the negotiator charges a submitter no record names"
    # the export by project, user and site: jobs and bills of a user together, on one row
    export = tmp_path / "usage.json"
    days = sorted({j["end_iso"][:10] for j in job_docs} | {a["observed_at_iso"][:10] for a in allocations})
    code = main(
        ["export", "--config", str(config), "--from", days[0], "--to", days[-1], "--by", "project,user,site", "--raw",
         "--format", "json", "--out", str(export)]
    )  # fmt: skip
    assert code == 0, capsys.readouterr().err
    rows_out = json.loads(export.read_text())["rows"]
    alice_higgs = [r for r in rows_out if (r["project"], r["user"], r["site"]) == ("CMS-Higgs", "alice", "TestSite")]
    assert len(alice_higgs) == 1 and alice_higgs[0]["n_jobs"] == 2 and alice_higgs[0]["n_bills"] == 2
    assert alice_higgs[0]["core_hours"] > 0 and alice_higgs[0]["held_core_hours"] > 0
