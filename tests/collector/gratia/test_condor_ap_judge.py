"""OSG's real condor-ap probe as the judge of what a Gratia sender reports: it runs on real job ads
made into every case it treats differently (parity_history.py), posts to a recording collector,
and GRACC's own collector code (graccjson) reads the posts. The assertions are facts checked by
hand against gratia-probe v2.8.4's source: which jobs it leaves out and why, the VO of each case,
CPU and processors; then what GRACC's raw pipeline and daily summary make of the records
(judges.py, after gracc-docker's gracc-stash-raw and gracc-request's summary_replayer).

The condor-ap tests skip, saying why, without ``make gratia-judges`` or ../shared/gratia; the
daily-summary test on hand-built records needs neither.
"""

from __future__ import annotations

import grp
import hashlib
import pwd
import time
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pytest

from .judges import (
    CaptureCollector,
    daily_summary,
    gracc_docs,
    raw_checksum,
    raw_documents,
    require_judges,
    run_condor_ap,
)
from .parity_history import TOKEN_ISSUERS, VO_MAP, HistoryCase, Job, write_history

# the cases condor-ap drops because the ProbeConfig its RPM builds says SuppressGridLocalRecords="1"
GRID_LOCAL = {"scheduler_universe", "local_universe", "routed", "local_job"}


def iso(epoch: int) -> str:
    """condor-ap's EndTime/StartTime text as GRACC's collector re-writes it (RFC 3339, UTC)."""
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class Run:
    """One run of condor-ap on the written history, and what the collector received."""

    case: HistoryCase
    counts: dict[str, int]
    out: Path
    docs: list[dict[str, Any]]

    def doc(self, job: Job) -> dict[str, Any]:
        [doc] = [d for d in self.docs if d["GlobalJobId"] == f"condor.{job.global_job_id}"]
        return doc


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> HistoryCase:
    """The per-job history files, ending over the week before an hour ago (condor-ap's 120-day
    window counts from its own run)."""
    return write_history(tmp_path_factory.mktemp("history"), base_end=int(time.time()) - 3600)


@pytest.fixture(scope="module")
def run(history: HistoryCase, tmp_path_factory: pytest.TempPathFactory) -> Run:
    require_judges()
    root = tmp_path_factory.mktemp("condor-ap")
    with CaptureCollector(root / "collector") as collector:
        counts = run_condor_ap(collector.port, history.folder, root / "ap", user_vo_map=history.user_vo_map)
        posts = collector.posts()
    return Run(history, counts, root / "ap", gracc_docs(posts))


def test_the_written_history_covers_every_case(history: HistoryCase) -> None:
    cases = history.cases()
    wanted = {
        "vo_map", "unix_group", "unknown_owner", "scitoken", "proxy", "scheduler_universe", "local_universe",
        "dagman", "routed", "removed_before_start", "removed_after_start", "glidein", "local_job",
        "cpu_user_system", "insane_cpu", "machine_cpus", "glidein_cpus", "request_gpus",
    }  # fmt: skip
    assert set(cases) == wanted and all(len(jobs) >= 2 for jobs in cases.values())
    assert sorted(p.name for p in history.files) == sorted(f"history.{j}" for j in history.jobs)
    ends = [j.end for j in history.jobs.values() if j.end]
    assert all(history.base_end - 120 * 86400 < e <= history.base_end for e in ends)
    assert len({datetime.fromtimestamp(e, UTC).date() for e in ends}) >= 3
    # every ad keeps the ids condor-ap reads, consistent with its file name
    for job in history.jobs.values():
        text = job.path.read_text()
        cluster, proc = job.job_id.split(".")
        assert f"ClusterId = {cluster}\n" in text and f"ProcId = {proc}\n" in text
        assert f'GlobalJobId = "{job.global_job_id}"\n' in text and f'Owner = "{job.owner}"\n' in text
        assert job.global_job_id.split("#")[1] == job.job_id and f"QDate = {job.global_job_id.split('#')[2]}\n" in text


@pytest.mark.slow
def test_condor_ap_sends_exactly_the_jobs_it_should(run: Run) -> None:
    sent = {f"condor.{j.global_job_id}" for j in run.case.sent().values()}
    assert Counter(d["GlobalJobId"] for d in run.docs) == Counter(sent)  # each sent job once, no other
    left_out = run.case.left_out()
    assert {j.case for j in left_out.values()} == GRID_LOCAL | {"dagman"}
    assert {j.case for j in run.case.sent().values()} & (GRID_LOCAL | {"dagman"}) == set()
    n, suppressed = len(run.case.jobs), sum(1 for j in left_out.values() if j.case in GRID_LOCAL)
    assert run.counts["probe_exit"] == 0 and run.counts["logfiles_with_errors"] == 0
    assert run.counts["logfiles_processed"] == run.counts["usage_records_found"] == n
    # a DAGMan ad and a suppressed record count as "submitted", though neither is sent
    assert run.counts["usage_records_submitted"] == n
    assert run.counts["new_records_sent_successfully"] == len(sent)
    assert run.counts["new_records_suppressed"] == suppressed
    # the suppressed records' history files are moved to the data folder's quarantine (kept 31
    # days); DAGMan's are deleted; the sent ones removed once acknowledged
    quarantined = (run.out / "quarantine.txt").read_text().split()
    assert sorted(Path(q).name for q in quarantined) == sorted(
        j.path.name for j in left_out.values() if j.case in GRID_LOCAL
    )
    assert sorted(p.name for p in (run.out / "data").glob("history.*")) == []
    assert (run.out / "outbox.txt").read_text() == ""


@pytest.mark.slow
def test_the_vo_of_each_case(run: Run) -> None:
    for job in run.case.sent().values():
        doc = run.doc(job)
        assert (doc.get("VOName"), doc.get("ReportableVOName")) == (job.vo_name, job.reportable_vo_name), job
        assert (doc["LocalUserId"], doc["GlobalUsername"].split("@")[0]) == (job.owner, job.owner)
    by_case = run.case.cases()
    # the user-vo-map: VOName the voi, ReportableVOName the VOc of the #voi/#VOc lines
    for job in by_case["vo_map"]:
        assert (run.doc(job)["VOName"], run.doc(job)["ReportableVOName"]) == VO_MAP[job.owner]
    # not in the map, an account here: MapUnknownToGroup gives its primary group (pwd, then grp)
    for job in by_case["unix_group"]:
        group = grp.getgrgid(pwd.getpwnam(job.owner).pw_gid).gr_name
        assert run.doc(job)["VOName"] == run.doc(job)["ReportableVOName"] == group
    # unknown everywhere: the owner itself
    for job in by_case["unknown_owner"]:
        assert run.doc(job)["VOName"] == run.doc(job)["ReportableVOName"] == job.owner
    # a token: the issuer, and the subject as DN, even when the owner is in the map (alice)
    assert {run.doc(j)["VOName"] for j in by_case["scitoken"]} == set(TOKEN_ISSUERS)
    assert any(j.owner in VO_MAP for j in by_case["scitoken"])
    for job in by_case["scitoken"]:
        doc = run.doc(job)
        assert doc["ReportableVOName"] == doc["VOName"] and doc["DN"] and not doc["DN"].startswith("/")
    # a proxy: the first FQAN and x509UserProxyVOName, over the map's line for vdtuser03
    assert {(run.doc(j)["VOName"], run.doc(j)["ReportableVOName"]) for j in by_case["proxy"]} == {
        ("/vdt/Role=NULL/Capability=NULL", "vdt"), ("/cms/Role=production/Capability=NULL", "cms"),
    }  # fmt: skip
    assert all(run.doc(j)["DN"].startswith("/DC=") for j in by_case["proxy"])


@pytest.mark.slow
def test_ids_times_and_the_job_fields(run: Run) -> None:
    for job in run.case.sent().values():
        doc = run.doc(job)
        assert doc["LocalJobId"] == job.local_job_id
        assert doc.get("EndTime") == (iso(job.end) if job.end else None), job
        assert doc.get("StartTime") == (iso(job.start) if job.start else None), job
        assert doc["WallDuration"] == job.wall
        assert doc.get("ProjectName") == job.project
        assert doc["ResourceType"] == job.resource_type and doc.get("Host_description") == job.host_description
        assert doc.get("GPUs") == (None if job.gpus is None else str(job.gpus))
        assert (doc["SiteName"], doc["ProbeName"], doc["Grid"]) == (
            "Harness Site",
            "condor-ap:harness.example.org",
            "OSG",
        )
    # removed before it started: neither EndTime nor StartTime, and no host
    for job in run.case.cases()["removed_before_start"]:
        assert {"EndTime", "StartTime", "Host"}.isdisjoint(run.doc(job))
        assert run.doc(job)["Resource_condor-JobStatus"] == "3" and run.doc(job)["WallDuration"] == 0
    # removed while it ran: a StartTime and a WallDuration, no EndTime
    for job in run.case.cases()["removed_after_start"]:
        assert "EndTime" not in run.doc(job) and run.doc(job)["StartTime"] == iso(job.start or 0)


@pytest.mark.slow
def test_cpu_and_processors(run: Run) -> None:
    sent = run.case.sent().values()
    for job in sent:
        doc = run.doc(job)
        assert (doc["CpuDuration_user"], doc["CpuDuration_system"]) == (job.cpu_user, job.cpu_system), job
        assert doc["CpuDuration"] == job.cpu_user + job.cpu_system
        assert doc["Processors"] == str(job.processors), job
    # user = RemoteUserCpu + LocalUserCpu, system = RemoteSysCpu + LocalSysCpu (by hand, from the ads)
    cases = run.case.cases()
    assert [run.doc(j)["CpuDuration_user"] for j in cases["cpu_user_system"]] == [3400.5 + 3.5, 7000.0 + 2.0]
    assert [run.doc(j)["CpuDuration_system"] for j in cases["cpu_user_system"]] == [120.25 + 1.25, 250.0 + 0.5]
    assert sum(run.doc(j)["CpuDuration_user"] for j in sent) == pytest.approx(3404 + 7002 + 2 + 300)
    assert sum(run.doc(j)["CpuDuration_system"] for j in sent) == pytest.approx(121.5 + 250.5 + 10 + 0.75)
    # over 2e9 s and over 1000 x (CumulativeSlotTime + 1): the remote part zeroed, the local kept
    insane_user, insane_sys = cases["insane_cpu"]
    assert run.doc(insane_user)["TimeDuration_RemoteUserCpu"] == 0 and run.doc(insane_user)["CpuDuration_user"] == 2.0
    assert run.doc(insane_sys)["TimeDuration_RemoteSysCpu"] == 0 and run.doc(insane_sys)["CpuDuration_system"] == 0.75
    assert run.doc(insane_sys)["CpuDuration_user"] == 300.0
    # MachineAttrCpus0 8 over RequestCpus 1 and CpusProvisioned 1; then MATCH_EXP_JOB_GLIDEIN_Cpus
    assert [run.doc(j)["Processors"] for j in cases["machine_cpus"]] == ["8", "8"]
    assert [run.doc(j)["Processors"] for j in cases["glidein_cpus"]] == ["4", "8"]
    assert [run.doc(j)["GPUs"] for j in cases["request_gpus"]] == ["1", "2"]


@pytest.mark.slow
def test_what_gracc_raw_pipeline_stores(run: Run) -> None:
    received = datetime.now(UTC)
    raw = raw_documents(run.docs, received=received)
    assert len(raw) == len(run.case.sent())  # one document per job
    by_job = {d["GlobalJobId"]: d for d in raw.values()}
    for job in run.case.sent().values():
        stored = by_job[f"condor.{job.global_job_id}"]
        assert stored["Processors"] == job.processors and stored["Njobs"] == 1
        assert stored["CoreHours"] == pytest.approx(job.wall * job.processors / 3600)
        assert stored.get("Quarantine") == job.quarantine, job
        if job.quarantine:  # removed before it started: no EndTime and no StartTime to derive it from
            assert stored["_index"] == "gracc.osg.raw3-quarantine" and "EndTime" not in stored
        else:
            end = datetime.fromtimestamp(job.gracc_end or 0, UTC)
            assert stored["_index"] == f"gracc.osg.raw3-{end:%Y.%m}"
            assert stored["EndTime"] in (iso(job.gracc_end or 0), end.strftime("%Y-%m-%dT%H:%M:%S.000Z"))
        if job.resource_type == "Payload":
            assert stored["PayloadSiteName"] == job.host_description
    # removed while running: EndTime = StartTime + WallDuration, with milliseconds (Ruby's iso8601(3))
    for job in run.case.cases()["removed_after_start"]:
        assert by_job[f"condor.{job.global_job_id}"]["EndTime"] == iso((job.start or 0) + int(job.wall))[:-1] + ".000Z"
    # identity: RecordId, CreateTime, the VO and user fields are left out of the id; any other field counts
    doc = run.docs[0]
    renamed = {**doc, "RecordId": "other:1.1", "CreateTime": "2030-01-01T00:00:00Z", "VOName": "x", "SiteName": "y"}
    longer = {**doc, "WallDuration": doc["WallDuration"] + 1}
    assert raw_checksum(renamed) == raw_checksum(doc) != raw_checksum(longer)
    twice = raw_documents([doc, renamed, longer], received=received)
    assert len(twice) == 2 and twice[raw_checksum(doc)]["VOName"] == "x"  # the later record replaced the first


@pytest.mark.slow
def test_gracc_daily_summary_of_condor_ap(run: Run) -> None:
    df = daily_summary(run.docs)
    counted = [j for j in run.case.sent().values() if not j.quarantine]
    assert df["Count"].sum() == df["Njobs"].sum() == len(counted) == len(run.case.sent()) - 2
    assert df["WallDuration"].sum() == sum(int(j.wall) for j in counted)
    assert df["CoreHours"].sum() == pytest.approx(sum(j.wall * j.processors for j in counted) / 3600)
    assert df["CpuDuration_user"].sum() == pytest.approx(sum(j.cpu_user for j in counted))
    assert df["CpuDuration_system"].sum() == pytest.approx(sum(j.cpu_system for j in counted))
    days = Counter(datetime.fromtimestamp(j.gracc_end or 0, UTC).strftime("%Y-%m-%dT00:00:00.000Z") for j in counted)
    assert len(days) >= 3 and df.groupby("EndTime")["Count"].sum().to_dict() == dict(days)
    # no project: the VO stands in (addProperties); no glidein: no Host_description
    no_project = df[df["RawProjectName"] == "N/A"]
    assert len(no_project) and (no_project["ProjectName"] == no_project["VOName"]).all()
    assert set(df.loc[df["ResourceType"] == "Batch", "Host_description"]) == {"N/A"}
    assert set(df["CommonName"]) == {"N/A"} and set(df["SiteName"]) == {"Harness Site"}


@pytest.mark.slow
def test_a_second_run_resends_the_same_documents(run: Run, tmp_path: Path) -> None:
    """condor-ap run again on the same history (new RecordIds and CreateTimes): GRACC's ids are
    the same, so the raw pipeline replaces the documents instead of counting the jobs twice."""
    with CaptureCollector(tmp_path / "collector") as collector:
        counts = run_condor_ap(collector.port, run.case.folder, tmp_path / "ap", user_vo_map=run.case.user_vo_map)
        again = gracc_docs(collector.posts())
    assert counts["new_records_sent_successfully"] == len(run.case.sent())
    assert {d["RecordId"] for d in again}.isdisjoint(d["RecordId"] for d in run.docs)
    assert set(raw_documents(again)) == set(raw_documents(run.docs))
    assert len(raw_documents([*run.docs, *again])) == len(run.case.sent())


# -- the daily summary on records written by hand -----------------------------------------------


def record(job: str, **fields: Any) -> dict[str, Any]:
    """A GRACC collector document of a condor-ap record (strings where the collector keeps the
    XML's text: Processors, Njobs, Resource_ExitCode, GPUs)."""
    return {
        "type": "JobUsageRecord", "RecordId": f"ap1:1.{job}", "CreateTime": "2026-11-22T08:00:00Z",
        "GlobalJobId": f"condor.ap1#{job}#1795000000", "LocalJobId": job, "LocalUserId": "alice",
        "GlobalUsername": "alice@ap1", "ProbeName": "condor-ap:ap1", "SiteName": "AP1", "Grid": "OSG",
        "ResourceType": "Batch", "Njobs": "1", "Resource_ExitCode": "0", **fields,
    }  # fmt: skip


def test_daily_summary_on_hand_built_records() -> None:
    a = record("1", VOName="lsst", ReportableVOName="LSST", ProjectName="P1", Processors="2", GPUs="0",
               WallDuration=3600, CpuDuration_user=3000, CpuDuration_system=100, CpuDuration=3100,
               StartTime="2026-11-20T09:00:00Z", EndTime="2026-11-20T10:00:00Z")  # fmt: skip
    b = record("2", VOName="lsst", ReportableVOName="LSST", ProjectName="P1", Processors="2", GPUs="0", Njobs="3",
               WallDuration=1800.9, CpuDuration_user=1000.5, CpuDuration_system=50.25, CpuDuration=1050.75,
               StartTime="2026-11-20T11:00:00Z", EndTime="2026-11-20T11:30:00Z")  # fmt: skip
    a_resent = {**a, "RecordId": "ap1:2.1", "CreateTime": "2026-11-23T08:00:00Z"}  # the same document as a
    a_revo = {**a, "RecordId": "ap1:3.1", "VOName": "osg"}  # VOName is not in the id: replaces a
    # no ProjectName, Processors, GPUs, Njobs, Resource_ExitCode: the rules' placeholders; ends at midnight
    e = record("5", VOName="ligo", ReportableVOName="LIGO", WallDuration=600, CpuDuration_user=0,
               CpuDuration_system=0, CpuDuration=0, StartTime="2026-11-20T23:50:00Z",
               EndTime="2026-11-21T00:00:00Z")  # fmt: skip
    for name in ("Njobs", "Resource_ExitCode"):
        del e[name]
    # no EndTime: StartTime + WallDuration (00:30 the next day); no times at all: quarantined
    f = {**e, "RecordId": "ap1:1.6", "GlobalJobId": "condor.ap1#6#1795000000", "LocalJobId": "6",
         "WallDuration": 3600, "StartTime": "2026-11-20T23:30:00Z"}  # fmt: skip
    del f["EndTime"]
    g = {**f, "RecordId": "ap1:1.7", "GlobalJobId": "condor.ap1#7#1795000000", "LocalJobId": "7"}
    del g["StartTime"]
    docs = [a, b, a_resent, a_revo, e, f, g]

    raw = raw_documents(docs, received=datetime(2026, 11, 22, tzinfo=UTC))
    assert len(raw) == 5 and raw[raw_checksum(a)]["VOName"] == "osg"
    assert raw[raw_checksum(g)]["Quarantine"] == "MissingEndTime"
    assert raw[raw_checksum(f)]["EndTime"] == "2026-11-21T00:30:00.000Z"
    # the id, by hand: sorted keys, Processors/Njobs as integers, Network as a float, Ruby's JSON
    tiny = {"type": "JobUsageRecord", "RecordId": "r", "WallDuration": 60, "Processors": "2", "Network": "0",
            "VOName": "v", "EndTime": "2026-11-20T10:00:00Z"}  # fmt: skip
    hashed = '{"EndTime":"2026-11-20T10:00:00Z","Network":0.0,"Processors":2,"WallDuration":60}'
    assert raw_checksum(tiny) == hashlib.md5(hashed.encode()).hexdigest()

    df = daily_summary(docs)
    rows = {(r["EndTime"][:10], r["VOName"]): r for r in df.to_dict("records")}
    assert sorted(rows) == [("2026-11-20", "lsst"), ("2026-11-20", "osg"), ("2026-11-21", "ligo")]
    lsst, osg, ligo = rows["2026-11-20", "lsst"], rows["2026-11-20", "osg"], rows["2026-11-21", "ligo"]
    # b alone: WallDuration is a long in GRACC's index, so 1800.9 sums as 1800; CoreHours keeps it
    assert (lsst["Count"], lsst["Njobs"], lsst["WallDuration"]) == (1, 3, 1800)
    assert (lsst["CpuDuration_user"], lsst["CpuDuration_system"]) == (1000.5, 50.25)
    assert lsst["CoreHours"] == pytest.approx(1800.9 * 2 / 3600)
    # a (its last version): 3600 s x 2
    assert (osg["Count"], osg["Njobs"], osg["WallDuration"], osg["CoreHours"]) == (1, 1, 3600, 2.0)
    assert (osg["ReportableVOName"], osg["Processors"], osg["ProjectName"]) == ("LSST", 2, "P1")
    # e and f: 600 + 3600 s on one processor (the missing Processors), each counting one job
    assert (ligo["Count"], ligo["Njobs"], ligo["WallDuration"]) == (2, 2, 4200)
    assert ligo["CoreHours"] == pytest.approx((600 + 3600) / 3600)
    assert (ligo["Processors"], ligo["GPUs"], ligo["Resource_ExitCode"]) == (1, "0", 0)
    assert (ligo["DN"], ligo["CommonName"], ligo["Host_description"]) == ("N/A", "N/A", "N/A")
    assert (ligo["RawProjectName"], ligo["ProjectName"]) == ("N/A", "ligo")  # addProperties: the VO stands in
    assert (ligo["EndTime"], ligo["SiteName"], ligo["Grid"]) == ("2026-11-21T00:00:00.000Z", "AP1", "OSG")
    # a replay of 2026-11-20 reaches the next midnight: e (ending at 00:00:00) comes with it, as a row of the 21st
    one_day = daily_summary(docs, day=date(2026, 11, 20))
    assert sorted(zip(one_day["EndTime"].str[:10], one_day["Count"], strict=True)) == [
        ("2026-11-20", 1), ("2026-11-20", 1), ("2026-11-21", 1),
    ]  # fmt: skip
