"""An accounting_group_user pool billed right without configuring its execute nodes (issue 25
item 8): with no ``STARTD_JOB_ATTRS``, a dynamic slot names its job's user only through
``AccountingGroup``, whose last component cuts ``john.smith`` to ``smith``, and has no project;
the live probe asks the schedd for its running jobs' own names. A pool of its own (a job
submitted with an accounting group would change the session pool's counts)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from collector.sinks.sqlite import EmbeddedStore
from probes.cli import main
from tests.conftest import SHARED
from tests.htcondor_pool import HTCondorPool, own_pool

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def plain_pool() -> Iterator[HTCondorPool]:
    with own_pool(SHARED) as pool:
        yield pool


def test_bills_take_their_jobs_names_without_startd_job_attrs(
    plain_pool: HTCondorPool, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pool = plain_pool
    assert "STARTD_JOB_ATTRS" not in pool.condor_config.read_text()  # the point of the test
    domain = pool.tool("condor_config_val", "UID_DOMAIN").strip()
    done = pool.work / "submit" / "done"
    pool.submit(
        "executable = /bin/sh\n"
        f"arguments = \"-c 'while [ ! -e {done} ]; do sleep 1; done'\"\n"
        "request_cpus = 1\nrequest_memory = 256\n"
        "accounting_group = group_physics.cms\naccounting_group_user = john.smith\n"
        '+ProjectName = "CMS-Top"\nqueue 1\n',
        "john",
    )
    try:

        def claimed() -> bool:
            slots = pool.tool("condor_status", "-const", "DynamicSlot =?= true", "-af", "AccountingGroup").split()
            return slots == [f"group_physics.cms.john.smith@{domain}"]

        pool.wait_for("the job running in a dynamic slot", claimed, timeout=180)
        assert pool.tool("condor_status", "-const", "DynamicSlot =?= true", "-af", "AcctGroupUser").split() == [
            "undefined"
        ]  # the slot itself does not say it
        # a bill under its slot's names is said (issue 50, point 6: under load the schedd's answer came late and
        # the bill was smith's, without a word): said, it is the schedd's lateness, and a new cycle asks again
        for attempt in range(3):
            state = tmp_path / f"state{attempt}"
            config = tmp_path / "fairacct.toml"
            config.write_text(
                f'[pool]\nname = "plain"\ncondor_config = "{pool.condor_config}"\ntimeout_s = 30\n'
                f'[sources]\nlive = true\n[probe]\nstate_dir = "{state}"\n'
            )
            assert main(["probe", "once", "--config", str(config)]) == 0, capsys.readouterr().err
            if "billed under their slots' names" not in capsys.readouterr().err:
                break
        with EmbeddedStore(state / "fairacct.sqlite") as store:
            (bill,) = store.query("allocation")
        prio = dict(
            line.split(" = ", 1)
            for line in pool.tool("condor_userprio", "-allusers", "-l").splitlines()
            if " = " in line
        )
        (n,) = [k[4:] for k, v in prio.items() if k.startswith("Name") and v == f'"{bill["submitter"]}"']
        assert prio[f"AccountingGroup{n}"] == '"<none>"'  # the negotiator's group of the submitter
        assert (bill["submitter"], bill["user"], bill["group"], bill["project"]) == (
            f"group_physics.cms.john.smith@{domain}",
            "john.smith",
            "<none>",  # the negotiator's group: this pool has no GROUP_NAMES (condor_userprio agrees)
            "CMS-Top",
        )
    finally:
        done.touch()
