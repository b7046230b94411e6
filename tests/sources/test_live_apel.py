"""APEL's numbers from a real HTCondor pool: jobs submitted with VOMS-like attributes in their
ads (``+x509UserProxyVOName``, ``+x509UserProxyFirstFQAN``, ``+x509userproxysubject``) and
accounting groups, on
startds that advertise a benchmark per core (``HEPSCORE23``, which the jobs copy as
``MachineAttrHEPSCORE230`` through ``job_machine_attrs``), read from the pool's own
``condor_history -long``, stored, grouped by the store and rendered as a v0.4 normalised
summary: its numbers are the sums of ``condor_history`` itself, VO by VO.

The schedd keeps the x509 attributes for itself (it sets them from a job's proxy and drops
what a submit file says: the history has none of them, seen on HTCondor 25), so without a
VOMS proxy the VO comes from the configured mapping of the accounting group
(``[apel] vo_attribute``, ``vo_map``); the VOMS path is proven on the real glidein job ad of
../shared/fixtures (tests/collector/apel).

A pool of its own (tests/htcondor_pool.py): the session's pool counts its history's jobs.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from collector.apel import KINDS, ApelOptions, apel_months, render
from collector.sinks.sqlite import EmbeddedStore
from probes.pipeline.records import job_docs
from probes.sources.history import read_history
from probes.sources.settings import JobReading
from tests.collector.apel.test_apel import parse
from tests.conftest import SHARED
from tests.htcondor_pool import HTCondorPool, own_pool

BENCHMARK = 11.5
POOL_CONFIG = f"HEPSCORE23 = {BENCHMARK}\nSTARTD_ATTRS = $(STARTD_ATTRS) HEPSCORE23\n"
DN = "/DC=ch/DC=cern/OU=Organic Units/OU=Users/CN=tester/CN=123456/CN=Test User"
JOBS = {  # name: (VO, FQAN, jobs, seconds each sleeps)
    "cms_prod": ("cms", "/cms/Role=production/Capability=NULL", 2, 2),
    "atlas_user": ("atlas", "/atlas/Role=NULL/Capability=NULL", 1, 3),
}


@pytest.fixture(scope="module")
def apel_pool() -> Iterator[HTCondorPool]:
    with own_pool(SHARED) as pool:
        pool.reconfigure(POOL_CONFIG)
        yield pool


def test_apel_numbers_are_the_sums_of_condor_history(apel_pool: HTCondorPool, tmp_path: Path) -> None:
    pool = apel_pool
    pool.wait_for(
        "the startds advertise HEPSCORE23",
        lambda: pool.tool("condor_status", "-af", "HEPSCORE23").split().count(str(BENCHMARK)) > 0,
    )
    total = 0
    for name, (vo, fqan, n, seconds) in JOBS.items():
        pool.submit(
            "\n".join([
                "executable = /bin/sleep", f"arguments = {seconds}", "request_cpus = 1", "request_memory = 128",
                "job_machine_attrs = HEPSCORE23", f"accounting_group = group_{vo}", "accounting_group_user = tester",
                f'+x509UserProxyVOName = "{vo}"',
                f'+x509UserProxyFirstFQAN = "{fqan}"', f'+x509userproxysubject = "{DN}"', f"queue {n}", "",
            ]),
            f"apel_{name}",
        )  # fmt: skip
        total += n
    pool.wait_for(
        f"{total} jobs in the history",
        lambda: len(pool.tool("condor_history", "-af", "GlobalJobId").split()) == total,
        timeout=120,
    )
    dump = tmp_path / "history.ads"
    dump.write_text(pool.tool("condor_history", "-long"))
    rows = [
        line.split()
        for line in pool.tool(
            "condor_history", "-af", "AcctGroup", "RemoteWallClockTime", "RemoteUserCpu", "RemoteSysCpu",
            "MachineAttrHEPSCORE230", "CompletionDate",
        ).splitlines()
    ]  # fmt: skip
    jobs, _ = read_history([dump], JobReading(speed_attribute="HEPSCORE23"))
    store = EmbeddedStore(tmp_path / "store.sqlite")
    assert len(store.send_encoded("job", job_docs(jobs, probe="t")["job"]).acked) == total
    ends = {datetime.fromtimestamp(float(r[5]), UTC) for r in rows}
    months = sorted({(t.year, t.month) for t in ends})
    vo_map = {f"group_{vo}": vo for vo, *_ in JOBS.values()}
    options = ApelOptions(site="T2_TEST", benchmark_type="HEPscore23", vo_attribute="group", vo_map=vo_map)
    result = apel_months(store, months, options)
    store.close()
    records = []
    for month in result.months:
        _, parsed = parse(render(KINDS["normalised"], month.summaries, benchmark_type="HEPscore23"))
        records += parsed
    for vo in ("cms", "atlas"):
        mine = [r for r in rows if r[0] == f"group_{vo}"]
        got = [r for r in records if r["VO"] == vo]
        assert {r["SubmitHost"] for r in got} == {jobs["schedd"][0]} and mine
        assert sum(r["NumberOfJobs"] for r in got) == len(mine)
        assert sum(r["WallDuration"] for r in got) == sum(round(float(r[1])) for r in mine)
        assert sum(r["CpuDuration"] for r in got) == round(sum(float(r[2]) + float(r[3]) for r in mine))
        assert all(float(r[4]) == BENCHMARK for r in mine)
        assert sum(r["NormalisedWallDuration"] for r in got) == round(BENCHMARK * sum(float(r[1]) for r in mine))
        assert min(r["EarliestEndTime"] for r in got) == min(int(r[5]) for r in mine)
        assert max(r["LatestEndTime"] for r in got) == max(int(r[5]) for r in mine)
    assert sum(m.unbenchmarked_jobs for m in result.months) == 0
