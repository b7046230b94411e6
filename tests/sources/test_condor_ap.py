"""condor-ap's reading of a job ad (probes.sources.condor_ap) and the switch from condor-ap
(probes.sources.handoff), on hand-written ads whose values condor-ap's rules give by hand; the
real condor-ap beside fairacct's sender is tests/collector/gratia/test_gracc_parity.py."""

from __future__ import annotations

import os
import pwd
import tarfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from collector.errors import ConfigError
from probes.sources.condor_ap import LEFT_OUT, invalid_cpu, resolve_vos, unix_group
from probes.sources.handoff import SENT_BY_CONDOR_AP, load_handoff, mark_sent, read_handoff, save_handoff
from probes.sources.history import read_history
from probes.sources.settings import JobReading

BASE = """\
ClusterId = {cluster}
ProcId = 0
GlobalJobId = "ap.example.org#{cluster}.0#1790000000"
Owner = "{owner}"
User = "{owner}@example.org"
QDate = 1790000000
JobStartDate = 1790000100
CompletionDate = {completion}
EnteredCurrentStatus = 1795003700
JobStatus = {status}
RemoteWallClockTime = 3600.0
RemoteUserCpu = {user_cpu}
RemoteSysCpu = 20.0
LocalUserCpu = 1.0
LocalSysCpu = 2.0
CumulativeSlotTime = 3600.0
RequestCpus = 1
JobUniverse = {universe}
Cmd = "{cmd}"
"""


def _ad(cluster: int, *, owner: str = "alice", universe: int = 5, cmd: str = "/bin/sleep", completion: int = 1795003700,
        user_cpu: float = 100.0, extra: str = "") -> str:  # fmt: skip
    status = 4 if completion else 3
    return BASE.format(cluster=cluster, owner=owner, universe=universe, cmd=cmd, completion=completion,
                       status=status, user_cpu=user_cpu) + extra  # fmt: skip


def _jobs(tmp_path: Path, *ads: str) -> pd.DataFrame:
    path = tmp_path / "history"
    path.write_text("\n".join(ads))
    jobs, _ = read_history([path], JobReading(gratia=True))
    return jobs.set_index("cluster")


def test_the_jobs_condor_ap_leaves_out_and_why(tmp_path: Path) -> None:
    jobs = _jobs(
        tmp_path,
        _ad(1),
        _ad(2, universe=7),
        _ad(3, universe=12),
        _ad(4, cmd="/usr/bin/condor_dagman"),
        _ad(5, extra='RoutedToJobId = "6.0"\n'),
        _ad(6, extra='MATCH_EXP_JOBGLIDEIN_ResourceName = "Local Job"\n'),
        _ad(7, completion=0, user_cpu=0.0).replace("JobStartDate = 1790000100\n", "").replace("3600.0", "0.0"),
        _ad(11, completion=0),  # removed while it ran: sent, and GRACC ends it at StartTime + WallDuration
        _ad(8, extra='GratiaJobOrigin = "GRAM"\n'),
        _ad(9, extra='GratiaJobOrigin = "Local"\n'),
        _ad(10, universe=7, cmd="/usr/bin/condor_dagman"),  # DAGMan in the scheduler universe, as it runs
    )
    why = jobs["gratia_left_out"].to_dict()
    assert pd.isna(why[1]) and pd.isna(why[8]) and pd.isna(why[11])
    assert pd.isna(jobs.loc[11, "gratia_end"]) and jobs.loc[1, "gratia_end"] == 1795003700
    assert [why[k] for k in (2, 3, 4, 5, 6, 7, 9, 10)] == [
        LEFT_OUT[k] for k in ("scheduler", "local", "dagman", "routed", "local_job", "no_end", "origin", "dagman")
    ]
    assert jobs.loc[[2, 5, 6, 9], "gratia_grid"].tolist() == ["Local"] * 4
    assert jobs.loc[8, "gratia_grid"] == "OSG"


def test_cpu_user_and_system_apart_and_condor_aps_sanity_check(tmp_path: Path) -> None:
    jobs = _jobs(tmp_path, _ad(1), _ad(2, user_cpu=2.5e9))
    # user: Remote 100 + Local 1; system: Remote 20 + Local 2
    assert jobs.loc[1, ["gratia_cpu_user_s", "gratia_cpu_system_s"]].tolist() == [101.0, 22.0]
    # 2.5e9 s against a slot time of 3600 s: 'INVALID DATA', counted 0 (the local 1 s stays); no
    # job's CPU in one core's hour to fairacct's own reading either, which leaves it out (issue 51)
    assert jobs.loc[2, ["gratia_cpu_user_s", "gratia_cpu_system_s"]].tolist() == [1.0, 22.0]
    assert jobs.loc[2, "cpu_time_s"] == 0.0
    assert invalid_cpu(np.array([2e9, 2e9, 1.9e9]), np.array([1.0e6, 3.0e6, 0.0])).tolist() == [True, False, False]


def test_processors_as_condor_ap_takes_them(tmp_path: Path) -> None:
    jobs = _jobs(
        tmp_path,
        _ad(1, extra="MachineAttrCpus0 = 8\nCpusProvisioned = 2\n"),
        _ad(2, extra='MATCH_EXP_JOB_GLIDEIN_Cpus = "4"\nCpusProvisioned = 2\n'),
        _ad(3, extra="CpusProvisioned = 2\n"),
        _ad(4),
        _ad(5, extra="RequestGpus = 1\n"),
    )
    assert jobs["gratia_processors"].tolist() == [8.0, 4.0, 2.0, 1.0, 1.0]
    assert jobs.loc[1, "cpus"] == 2.0  # fairacct bills the cores the dynamic slot was given
    assert jobs.loc[5, "gratia_gpus"] == 1.0 and pd.isna(jobs.loc[4, "gratia_gpus"])


def test_the_vo_as_condor_ap_resolves_it(tmp_path: Path) -> None:
    account = pwd.getpwuid(os.getuid()).pw_name  # an account this host has, with a primary group
    proxy = 'x509UserProxyFirstFQAN = "/cms/Role=pilot/Capability=NULL"\nx509UserProxyVOName = "cms"\n'
    proxy += 'x509userproxysubject = "/DC=org/CN=Alice"\n'
    token = 'orig_AuthTokenIssuer = "https://cilogon.org/osg"\norig_AuthTokenSubject = "alice@osg"\n'
    jobs = _jobs(
        tmp_path,
        _ad(1, owner="mapped"),
        _ad(2, owner=account),
        _ad(3, owner="nosuchaccount"),
        _ad(4, extra=proxy),
        _ad(5, extra=token),
        _ad(6, owner="mapped", extra=token),
    )
    resolved = resolve_vos(jobs, {"mapped": ("osg", "OSG")}).set_index(jobs.index)
    got = resolved[["gratia_vo", "gratia_reportable_vo", "gratia_dn"]].astype(object).where(resolved.notna(), None)
    group = unix_group(account)
    assert group is not None
    assert got.to_dict("index") == {
        1: {"gratia_vo": "osg", "gratia_reportable_vo": "OSG", "gratia_dn": None},  # the user-vo-map's voi, VOc
        2: {"gratia_vo": group, "gratia_reportable_vo": group, "gratia_dn": None},  # MapUnknownToGroup
        3: {"gratia_vo": "nosuchaccount", "gratia_reportable_vo": "nosuchaccount", "gratia_dn": None},
        4: {"gratia_vo": "/cms/Role=pilot/Capability=NULL", "gratia_reportable_vo": "cms",
            "gratia_dn": "/DC=org/CN=Alice"},
        5: {"gratia_vo": "https://cilogon.org/osg", "gratia_reportable_vo": "https://cilogon.org/osg",
            "gratia_dn": "alice@osg"},
        6: {"gratia_vo": "https://cilogon.org/osg", "gratia_reportable_vo": "https://cilogon.org/osg",
            "gratia_dn": "alice@osg"},  # a token's issuer is kept, mapped or not
    }  # fmt: skip
    # without MapUnknownToGroup, an owner the map does not name has no VO: condor-ap quarantines it
    alone = resolve_vos(jobs, {}, unix_groups=False).set_index(jobs.index)
    assert alone.loc[3, "gratia_left_out"] == LEFT_OUT["no_vo"] and pd.isna(alone.loc[4, "gratia_left_out"])


def _condor_ap_site(root: Path) -> tuple[Path, Path, Path]:
    data, working, logs = root / "data", root / "tmp", root / "log"
    outbox = working / "gratiafiles" / "subdir.condor-ap_ap.example.org_gracc" / "outbox"
    for d in (data / "quarantine", outbox, working / "gratiafiles" / "subdir.x" / "staged" / "store", logs):
        d.mkdir(parents=True)
    (data / "history.21.0").write_text(_ad(21, completion=1795001000))  # written after its last listing
    (data / "quarantine" / "history.22.0").write_text(_ad(22, completion=1794000000))
    (data / "not-a-history-file").write_text(_ad(99))
    record = (
        '<JobUsageRecord xmlns="http://www.gridforum.org/2003/ur-wg"><JobIdentity><GlobalJobId>'
        "condor.ap.example.org#{c}.0#1790000000</GlobalJobId></JobIdentity>"
        '<EndTime urwg:description="Was entered in seconds">{end}</EndTime></JobUsageRecord>'
    )
    (outbox / "r.7501.gratia.xml__abc").write_text(record.format(c=23, end="2026-11-18T10:00:00Z"))
    bundle = working / "gratiafiles" / "subdir.x" / "staged" / "store" / "tz.1.tar"
    member = root / "r.1"
    member.write_text(record.format(c=24, end="2026-11-20T00:00:00Z"))
    with tarfile.open(bundle, "w") as tar:
        tar.add(member, arcname="r.1")
    (logs / "2026-11-20.log").write_text("End of execution summary\n")
    os.utime(logs / "2026-11-20.log", (1795002000, 1795002000))
    return data, working, logs


def test_the_handoff_reads_condor_aps_cutoff_from_what_it_left(tmp_path: Path) -> None:
    data, working, logs = _condor_ap_site(tmp_path)
    handoff = read_handoff(data, working, logs)
    assert handoff.cutoff == 1795002000  # its log's last write
    assert handoff.unsent == {f"ap.example.org#{c}.0#1790000000" for c in (21, 22, 23, 24)}
    assert handoff.found == {
        "history files in the data folder": 1, "history files in quarantine": 1, "records in the outbox": 2
    }  # fmt: skip
    assert handoff.since == 1794000000  # the quarantined job's end, the earliest fairacct must send
    assert read_handoff(data, working, logs, at=1795000000.0).cutoff == 1795000000.0
    save_handoff(handoff, tmp_path)
    assert load_handoff(tmp_path) == handoff
    assert load_handoff(tmp_path / "elsewhere") is None
    with pytest.raises(ConfigError, match=r"--data: .*nothing is not a folder \(condor-ap's DataFolder"):
        read_handoff(tmp_path / "nothing", working, logs)
    with pytest.raises(ConfigError, match=r"--logs: .* give its last run with --at"):
        read_handoff(data, working, tmp_path / "nothing")


def test_the_jobs_condor_ap_sent_are_marked_and_no_other(tmp_path: Path) -> None:
    data, working, logs = _condor_ap_site(tmp_path)
    ends = {20: 1795001999, 21: 1795001000, 22: 1794000000, 23: 1795000500, 25: 1795002000, 26: 1795002001, 27: 0}
    jobs = _jobs(tmp_path, *(_ad(c, completion=e) for c, e in ends.items()))
    marked = mark_sent(jobs, read_handoff(data, working, logs))
    why = marked["gratia_left_out"].astype(object).where(marked["gratia_left_out"].notna(), None).to_dict()
    # 20 and 25 ended by its last run and are not among its leftovers: condor-ap sent them; 21-23
    # it did not (a file left, a quarantined one, an outbox record); 26 ended after; 27 was removed
    # after it (EnteredCurrentStatus)
    assert why == {20: SENT_BY_CONDOR_AP, 21: None, 22: None, 23: None, 25: SENT_BY_CONDOR_AP, 26: None, 27: None}
    assert mark_sent(jobs, None) is jobs
