"""The priority sync against a real negotiator (a pool of its own, from tests/htcondor_pool.py,
skipped with its reason where the machine cannot run one; not the session's ``htcondor_pool``,
whose history other tests count): jobs of accounting users of different shapes,
``probe once`` reads them into the fairshare ledger, ``priority sync`` sets the factors through
the bindings' worker, ``getPriorities`` (``condor_userprio``) shows them, ``priority restore``
puts them back."""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import htcondor2
import pytest

from probes.cli import main
from tests.conftest import SHARED
from tests.htcondor_pool import HTCondorPool, own_pool

JOBS = {
    # alice: 4 cores x 2 jobs; bob: 1 core x 1 job; the same walltime
    "alice": "executable = /bin/sleep\narguments = 4\nrequest_cpus = 4\nrequest_memory = 512\n"
    "accounting_group_user = alice\nqueue 2\n",
    "bob": "executable = /bin/sleep\narguments = 4\nrequest_cpus = 1\nrequest_memory = 512\n"
    "accounting_group_user = bob\nqueue 1\n",
    # carol is outside the pattern: never touched
    "carol": "executable = /bin/sleep\narguments = 4\nrequest_cpus = 1\nrequest_memory = 512\n"
    "accounting_group_user = carol\nqueue 1\n",
}


@pytest.fixture(scope="module")
def negotiator_pool() -> Iterator[HTCondorPool]:
    with own_pool(SHARED) as pool:
        yield pool


def factors(htc: HTCondorPool) -> dict[str, float]:
    """The negotiator's factor per submitter, read in the test process (CONDOR_CONFIG set)."""

    return {a["Name"]: float(a["PriorityFactor"]) for a in htcondor2.Negotiator().getPriorities() if "@" in a["Name"]}


def pool_config(htc: HTCondorPool, tmp_path: Path, targets: dict[str, str]) -> str:
    """A live probe's configuration on ``htc`` with fairshare ``targets`` per user, up to its
    ``[priority]`` header: the test adds the section's keys."""
    listed = ", ".join(f'{u} = "{t}"' for u, t in targets.items())
    return f"""
[pool]
name = "real"
condor_config = "{htc.condor_config}"
timeout_s = 20
[sources]
live = true
[credentials]
user = ["AcctGroupUser", "Owner"]
[probe]
state_dir = "{tmp_path / "state"}"
[fairshare]
interval_s = 86400
depth = 2
targets = {{ user = {{ {listed} }} }}
[priority]
"""


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert code in (0, 3), err  # 3: probe once queued its records (no store needed here)
    return code, out


def test_sync_sets_factors_and_restore_puts_them_back(
    negotiator_pool: HTCondorPool, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    htc = negotiator_pool
    monkeypatch.setenv("CONDOR_CONFIG", str(htc.condor_config))
    htcondor2.reload_config()  # the test process reads the negotiator too, to check the sync
    for name, description in JOBS.items():
        htc.submit(description, f"priority_{name}")

    def finished() -> bool:
        users = htc.tool("condor_history", "-af", "AcctGroupUser").split()
        return users.count("alice") == 2 and users.count("bob") == 1 and users.count("carol") == 1

    htc.wait_for("the jobs of alice, bob and carol finished", finished, timeout=180)
    known = {"alice", "bob", "carol"}
    htc.wait_for("the negotiator knows alice, bob and carol", lambda: known <= {n.split("@")[0] for n in factors(htc)})
    config = tmp_path / "fairacct.toml"
    config.write_text(
        pool_config(htc, tmp_path, {"alice": "50", "bob": "50"})
        + 'mode = "factor"\npattern = "(alice|bob)@.*"\nmax_factor_ratio = 4.0\npriority_at_target = 500.0\n',
        encoding="utf-8",
    )
    run(capsys, "probe", "once", "--config", str(config))
    before = factors(htc)

    _, dry = run(capsys, "priority", "sync", "--config", str(config), "--dry-run")
    assert factors(htc) == before  # a dry run changes nothing
    alice = next(n for n in before if n.startswith("alice@"))
    bob = next(n for n in before if n.startswith("bob@"))
    # usage 8 : 1 : 1 core-walltimes (equal walltimes, up to the seconds HTCondor rounds): alice
    # ~ 80 % and bob ~ 10 % of a 50 % target -> effective priorities 500 * 1.6 and 500 * 0.2,
    # over real priorities of about 0.5: factors ~ 1600 and ~ 200, the latter bounded by
    # max_factor_ratio to 1000 / 4
    lines = dry.splitlines()
    assert [line.split()[:3] for line in lines] == [
        ["condor_userprio", "-setfactor", alice],
        ["condor_userprio", "-setfactor", bob],
    ], dry
    want = {line.split()[2]: float(line.split()[3]) for line in lines}
    assert 1200 < want[alice] < 2000 and want[bob] == 250

    _, out = run(capsys, "priority", "sync", "--config", str(config), "--json")
    synced = json.loads(out)
    assert sorted(synced["applied"]) == sorted([alice, bob])
    after = factors(htc)
    assert after[alice] == pytest.approx(want[alice], rel=1e-5) and after[bob] == pytest.approx(want[bob], rel=1e-5)
    assert {n: f for n, f in after.items() if n not in (alice, bob)} == {
        n: f for n, f in before.items() if n not in (alice, bob)
    }  # carol does not match the pattern: untouched
    records = tmp_path / "sync.json"
    records.write_text(out, encoding="utf-8")
    _, compared = run(capsys, "priority", "compare", "--config", str(config))
    assert alice in compared and "fairacct_factor" in compared
    assert "shares of the pool (%)" in compared
    _, compared = run(capsys, "priority", "compare", "--config", str(config), "--json")
    shares = {r["submitter"]: r for r in json.loads(compared)}
    # the store's core-hours (job records) are the ledger's core-seconds: the same jobs, once
    for row in shares.values():
        if row["dedicated_ps_s"] is None:  # a submitter the negotiator knows and no completed job names
            assert not row["cpu_only_h"], row
        else:
            assert row["cpu_only_h"] * 3600 == pytest.approx(row["dedicated_ps_s"], rel=1e-9), compared
    assert 75 < shares[alice]["cpu_only_share"] < 90  # 8 : 1 : 1 core-walltimes, up to HTCondor's seconds
    # the negotiator's share is its weighted usage's, whatever its SLOT_WEIGHT made of the same jobs
    # a credential the negotiator does not list yet (carol's job may still be running) has its own
    # row, with no submitter and no negotiator usage
    assert all(r["usage_s"] is None and r["negotiator_share"] is None for n, r in shares.items() if n is None)
    total = sum(r["usage_s"] for n, r in shares.items() if n is not None)
    assert shares[alice]["negotiator_share"] == pytest.approx(100 * shares[alice]["usage_s"] / total)

    run(capsys, "priority", "restore", "--config", str(config), "--from", str(records))
    assert factors(htc) == before


# the most under-served first: carol (~10 % of the usage for a 40 % target), then bob (~10 % for
# 20 %), then alice (~80 % for 40 %)
TARGETS = {"alice": "40", "bob": "20", "carol": "40"}
FAIRSHARE_ORDER = ["carol", "bob", "alice"]


def effective(htc: HTCondorPool) -> dict[str, float]:
    """The negotiator's effective priority (what orders its service) per user of JOBS."""
    return {
        a["Name"].split("@")[0]: float(a["Priority"])
        for a in htcondor2.Negotiator().getPriorities()
        if a["Name"].split("@")[0] in JOBS
    }


def running_users(htc: HTCondorPool) -> list[str]:
    return htc.tool(
        "condor_q", "-allusers", "-constraint", "JobStatus == 2 && AcctGroupUser isnt undefined", "-af", "AcctGroupUser"
    ).split()


def test_each_mode_orders_the_negotiator_as_the_fairshare_and_a_freed_core_goes_to_the_most_under_served(
    negotiator_pool: HTCondorPool, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """After a sync in either mode, condor_userprio's effective priorities of alice, bob and
    carol are fairacct's (priority_at_target x usage / target) and in its order; then, with the
    pool full and one idle job of each waiting, the one core that frees goes to carol."""
    htc = negotiator_pool
    monkeypatch.setenv("CONDOR_CONFIG", str(htc.condor_config))
    htcondor2.reload_config()
    if not {"alice", "bob", "carol"} <= set(effective(htc)):  # run alone: the jobs of the first test
        for name, description in JOBS.items():
            htc.submit(description, f"priority_{name}")
        htc.wait_for("the negotiator knows them", lambda: {"alice", "bob", "carol"} <= set(effective(htc)))
    # all of them: a job still running moves its submitter's real priority at every negotiation
    # cycle (0.25 % seen at load 6), where a finished one only decays it (half-life a day)
    htc.wait_for(
        "the jobs of alice, bob and carol finished",
        lambda: Counter(htc.tool("condor_history", "-af", "AcctGroupUser").split()) >= Counter(alice=2, bob=1, carol=1),
        timeout=180,
    )
    # and their claims released: the accountant charges a claimed slot whether or not a job runs
    # on it (a claim the schedd kept a while after its job, on a loaded machine, moved carol's
    # real priority 0.25 % between the sync and the read)
    htc.wait_for(
        "the claims of alice, bob and carol released",
        lambda: (
            not any(
                float(a.get("WeightedResourcesUsed", a.get("ResourcesUsed", 0)) or 0)
                for a in htcondor2.Negotiator().getPriorities()
                if a["Name"].split("@")[0] in JOBS
            )
        ),
        timeout=180,
    )
    config = tmp_path / "fairacct.toml"
    body = pool_config(htc, tmp_path, TARGETS) + (
        'pattern = "(alice|bob|carol)@.*"\nmax_factor_ratio = 1e9\nmax_priority_ratio = 1e9\nfactor_max = 1e12\n'
    )
    for mode in ("factor", "priority"):
        config.write_text(body + f'mode = "{mode}"\n', encoding="utf-8")
        if mode == "factor":
            run(capsys, "probe", "once", "--config", str(config))
        _, out = run(capsys, "priority", "sync", "--config", str(config), "--json")
        wanted = {
            r["credential"]: 1e5 * 100 * r["effective"] / r["target"]
            for r in json.loads(out)["records"]
            if r["status"] in ("set", "unchanged")
        }
        assert set(wanted) == {"alice", "bob", "carol"}, out
        assert sorted(wanted, key=wanted.__getitem__) == FAIRSHARE_ORDER
        now = effective(htc)
        assert sorted(now, key=now.__getitem__) == FAIRSHARE_ORDER, (mode, now)
        for user, value in wanted.items():  # the negotiator's half-life decays a real priority a little
            assert now[user] == pytest.approx(value, rel=1e-3), (mode, user)

    # fill the 32 cores: 16 and 15 for a while, 1 for a few seconds
    filler = "executable = /bin/sleep\narguments = {}\nrequest_cpus = {}\nrequest_memory = 64\nqueue 1\n"
    for seconds, cpus in ((90, 16), (90, 15), (8, 1)):
        htc.submit(filler.format(seconds, cpus), f"filler_{cpus}")
    htc.wait_for(
        "the fillers hold every core",
        lambda: (
            htc.tool("condor_q", "-allusers", "-constraint", "JobStatus == 2", "-af", "RequestCpus").split()
            == ["16", "15", "1"]
        ),
        timeout=120,
    )
    for user in ("alice", "bob", "carol"):
        htc.submit(
            "executable = /bin/sleep\narguments = 60\nrequest_cpus = 1\nrequest_memory = 64\n"
            f"accounting_group_user = {user}\nqueue 2\n",
            f"waiting_{user}",
        )
    try:
        htc.wait_for("a core freed and matched", lambda: bool(running_users(htc)), timeout=120)
        time.sleep(3)  # a second match in the same cycle would show now
        assert running_users(htc) == ["carol"]
    finally:
        htc.tool("condor_rm", "-all")
