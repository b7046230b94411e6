"""Every submitter the negotiator has, on a real pool of 25 (a pool of this module's own, from
tests/htcondor_pool.py): the reading, ``priority compare`` and ``priority sync`` see each of
them with the factor and priority ``condor_userprio -allusers`` shows, where the htcondor2
wheel's ``getPriorities`` gives entries 1..9 of the negotiator's answer only."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from probes.sources.bindings import Bindings
from probes.sources.negotiator import read_negotiator
from tests.cli.test_priority_pool import pool_config, run
from tests.conftest import SHARED
from tests.htcondor_pool import HTCondorPool, own_pool

USERS = [f"u{i:02d}" for i in range(25)]


def userprio(htc: HTCondorPool) -> dict[str, tuple[float, float]]:
    """``condor_userprio -allusers``: (factor, effective priority) per submitter (groups left out)."""
    rows = [line.split() for line in htc.tool("condor_userprio", "-allusers", "-af", "Name", "PriorityFactor",
                                                "Priority").splitlines()]  # fmt: skip
    return {name: (float(factor), float(priority)) for name, factor, priority in rows if "@" in name}


@pytest.fixture(scope="module")
def many_submitters() -> Iterator[HTCondorPool]:
    """A pool whose negotiator accounts the 25 USERS (one finished 1-core job each, a factor of
    100 x (i + 1) each, so that no two submitters look alike) and the group ``<none>``."""
    with own_pool(SHARED) as htc:
        # a negotiation cycle gives each partitionable slot to one submitter: 13 cycles for the
        # 25, 125 s at the pool's 10 s
        htc.reconfigure("NEGOTIATOR_INTERVAL = 1\nNEGOTIATOR_MIN_INTERVAL = 1\nNEGOTIATOR_CYCLE_DELAY = 1")
        jobs = "".join(f"accounting_group_user = {user}\nqueue 1\n" for user in USERS)
        htc.submit("executable = /bin/sleep\narguments = 1\nrequest_cpus = 1\nrequest_memory = 64\n" + jobs, "many")
        htc.wait_for(
            "condor_userprio -allusers lists the 25 submitters and their jobs finished",
            lambda: (
                {n.split("@")[0] for n in userprio(htc)} >= set(USERS)
                and len(htc.tool("condor_history", "-af", "AcctGroupUser").split()) == len(USERS)
            ),
            timeout=180,
        )
        domain = next(iter(userprio(htc))).split("@")[1]
        for i, user in enumerate(USERS):
            htc.tool("condor_userprio", "-setfactor", f"{user}@{domain}", str(100.0 * (i + 1)))
        yield htc


def assert_as_userprio(seen: dict[str, tuple[float, float]], htc: HTCondorPool) -> None:
    """``seen`` (factor, effective priority per submitter) is what condor_userprio says: the
    same submitters, the same factors, the same priorities up to what a negotiation cycle
    between the two reads decays (a real priority's half-life is a day: 1e-4 in 10 s)."""
    shown = userprio(htc)
    assert sorted(seen) == sorted(shown) and len(seen) == len(USERS), sorted(seen)
    for name, (factor, priority) in shown.items():
        assert seen[name][0] == factor, name
        assert seen[name][1] == pytest.approx(priority, rel=1e-3), name
    assert len({f for f, _ in seen.values()}) == len(USERS)  # each its own entry, not another's


def test_the_reading_sees_every_submitter_as_condor_userprio(many_submitters: HTCondorPool) -> None:
    htc = many_submitters
    bindings = Bindings(str(htc.condor_config), 20)
    try:
        table = read_negotiator(bindings.negotiator())
    finally:
        bindings.close()
    seen = {s: (f, p) for s, f, p in table[["submitter", "factor", "priority"]].itertuples(index=False)}
    assert_as_userprio(seen, htc)


def config_file(htc: HTCondorPool, tmp_path: Path) -> Path:
    config = tmp_path / "fairacct.toml"
    config.write_text(
        pool_config(htc, tmp_path, dict.fromkeys(USERS, "4"))
        + 'mode = "factor"\npattern = "u[0-9]+@.*"\nmax_factor_ratio = 1e9\nfactor_max = 1e12\n',
        encoding="utf-8",
    )
    return config


def test_compare_and_sync_see_every_submitter(
    many_submitters: HTCondorPool, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``priority sync`` plans each of the 25 from the ledger ``probe once`` counted, none
    "unknown" to the negotiator; ``priority compare`` lists them with condor_userprio's values."""
    htc = many_submitters
    config = config_file(htc, tmp_path)
    run(capsys, "probe", "once", "--config", str(config))

    _, out = run(capsys, "priority", "sync", "--config", str(config), "--dry-run", "--json")
    records = json.loads(out)["records"]
    statuses = {r["credential"]: r["status"] for r in records}
    assert statuses == dict.fromkeys(USERS, "set"), statuses  # 1 % of the usage each against 4 %
    assert len(json.loads(out)["commands"]) == len(USERS)

    _, out = run(capsys, "priority", "compare", "--config", str(config), "--json")
    rows = [r for r in json.loads(out) if r["submitter"] is not None]
    assert_as_userprio({r["submitter"]: (r["factor"], r["priority"]) for r in rows}, htc)
    assert sorted(r["credential"] for r in rows) == USERS  # each beside its own fairshare
