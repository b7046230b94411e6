"""Job records -> JobUsageRecords: for every job of the real history fixtures, the fields GRACC
makes of what fairacct sends against the values gratia-probe's condor-ap makes of the same ad
(its rules restated here from the ad, through the real ClassAd bindings), the deliberate
differences named; hand-checked values for three jobs, the removed ones left out; and XML
that no user name can break."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import classad2
import pytest

from collector.gratia import envelope_docs
from collector.gratia.jobusage import GratiaIdentity, envelope_xml, left_out, record_xml
from collector.records import table_docs
from probes.sources.condor_ap import resolve_vos
from probes.sources.history import read_history
from probes.sources.settings import JobReading

WHO = GratiaIdentity("condor:ap.example.org")


def _job_docs(history: Path) -> list[dict[str, Any]]:
    jobs, _ = read_history([history], JobReading(gratia=True))
    return table_docs("job", resolve_vos(jobs, {}), probe="p")


def _gracc_docs(history: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The ads of a history file by condor-ap's GlobalJobId, and GRACC's documents of fairacct's
    records of them (those condor-ap reports: the others are left out)."""
    ads = {f"condor.{a['GlobalJobId']}": a for a in classad2.parseAds(history.read_text())}
    docs = _job_docs(history)
    xml = envelope_xml([record_xml(d, WHO) for d in docs if not left_out(d)])
    result = envelope_docs(xml, probe=WHO.probe_name, received=2e9)
    assert not result.errors and not result.quarantined
    return result.docs, ads


def _iso(seconds: int) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def condor_ap(ad: Any) -> dict[str, Any]:
    """The GRACC fields of condor-ap's record of ``ad`` (classadToJUR's rules), for the fields
    a fairacct job record carries."""
    proc = int(ad["ProcId"])
    out: dict[str, Any] = {
        "LocalJobId": f"{ad['ClusterId']}.{proc}" if proc > 0 else str(ad["ClusterId"]),
        "GlobalJobId": f"condor.{ad['GlobalJobId']}",
        "JobName": ad["GlobalJobId"],
        "MachineName": ad["GlobalJobId"].split("#")[0],
        "SubmitHost": ad["GlobalJobId"].split("#")[0],
        "LocalUserId": ad["Owner"],
        "GlobalUsername": ad["User"],
        "WallDuration": float(ad["RemoteWallClockTime"]),
        "CpuDuration_user": float(ad["RemoteUserCpu"]) + float(ad.get("LocalUserCpu", 0)),
        "CpuDuration_system": float(ad["RemoteSysCpu"]) + float(ad.get("LocalSysCpu", 0)),
        "QueueTime": _iso(ad["QDate"]),
        "NodeCount": int(ad["MaxHosts"]),
        "Resource_condor-JobStatus": str(ad["JobStatus"]),
        "Resource_AccountingGroup": ad.get("AccountingGroup"),
        "ProbeName": WHO.probe_name,
    }
    for attr in ("MachineAttrCpus0", "MATCH_EXP_JOB_GLIDEIN_Cpus", "CpusProvisioned", "RequestCpus"):
        if attr in ad:
            out["Processors"] = int(ad[attr])
            break
    if ad.get("CompletionDate", 0) > 0:
        out["EndTime"] = _iso(ad["CompletionDate"])
    if "JobStartDate" in ad:
        out["StartTime"] = _iso(ad["JobStartDate"])
    if "LastRemoteHost" in ad:
        out["Host"] = ad["LastRemoteHost"].split("@")[-1]
    resource = ad.get("MachineAttrGLIDEIN_ResourceName0") or ad.get("MATCH_EXP_JOBGLIDEIN_ResourceName")
    out["ResourceType"] = "Payload" if resource else "Batch"  # BatchPilot, as GRACC names it
    if resource and "LastRemoteHost" in ad:
        out["Host_description"] = resource
    if "ExitCode" in ad:
        out["Resource_ExitCode"] = str(ad["ExitCode"])
    if "ProjectName" in ad:
        out["ProjectName"] = ad["ProjectName"]
    for field, attr in (("ReportableVOName", "x509UserProxyVOName"), ("VOName", "x509UserProxyFirstFQAN"),
                        ("DN", "x509userproxysubject")):  # fmt: skip
        if attr in ad:
            out[field] = ad[attr]
    if "VOName" not in out:  # MapUnknownToGroup: an owner this host has no account of is its own VO
        out["VOName"] = out["ReportableVOName"] = ad["Owner"]
    return out


HISTORIES = ["condor25/history.ads", "classads/history-glidein-job-finished.ad"]


@pytest.mark.parametrize("name", HISTORIES)
def test_every_field_is_condor_aps_but_the_named_differences(fixtures: Path, name: str) -> None:
    docs, ads = _gracc_docs(fixtures / name)
    # every job condor-ap reports, once: a job removed before it started (no CompletionDate nor
    # JobStartDate) would reach GRACC without times and be quarantined there, so it is left out
    reported = sorted(i for i, a in ads.items() if a.get("CompletionDate") or a.get("JobStartDate"))
    assert sorted(d["GlobalJobId"] for d in docs) == reported
    for doc in docs:
        ad = ads[doc["GlobalJobId"]]
        want = condor_ap(ad)
        got = {k: doc.get(k) for k in want}
        assert got == want, doc["GlobalJobId"]
        # the deliberate differences (docs/gracc.md): Status (ExitCode, not
        # the ExitStatus that HTCondor leaves 0)
        assert doc.get("Status") == (str(ad["ExitCode"]) if "ExitCode" in ad else None)
        assert doc.get("GPUs") == (str(int(ad["RequestGpus"])) if "RequestGpus" in ad else None)
    # 13 of condor25's 42 jobs were removed: 11 after they started, 2 before (8.6's sibling 11.8 and 1.7)
    assert len(docs) == (40 if name.startswith("condor25") else 1)


def test_hand_checked_jobs(condor25: Path) -> None:
    docs, _ = _gracc_docs(condor25 / "history.ads")
    by_id = {d["GlobalJobId"]: d for d in docs}
    # 10.0: proc 0 is reported by its cluster alone; 6 s on one core; ran on a glidein
    job = by_id["condor.vm#10.0#1795269288"]
    assert (job["LocalJobId"], job["WallDuration"], job["Processors"], job["Host"]) == ("10", 6, 1, "vm")
    assert (job["StartTime"], job["EndTime"]) == ("2026-11-21T13:54:56Z", "2026-11-21T13:55:02Z")
    assert (job["ResourceType"], job["Host_description"]) == ("Payload", "Loopback-CE1")
    assert job["SiteName"] == "LoopbackSite"
    assert job["Resource_fairacct-core-hours"] == "0.001667"  # 1 core x 6 s / 3600
    assert (job["ProjectName"], job["Resource_AccountingGroup"]) == ("CMS-Tier2", "group_cms.condoruser")
    assert (job["LocalUserId"], job["GlobalUsername"]) == ("condoruser", "condoruser@localpool")
    # 10.6: 8 cores, 11 s: 8 x 11 / 3600 core-hours
    assert by_id["condor.vm#10.6#1795269288"]["Resource_fairacct-core-hours"] == "0.024444"
    # 11.0 ran 51 s and 11.8 never started, both removed: 11.0 is sent without EndTime, as condor-ap
    # sends it, and GRACC's raw pipeline ends it at StartTime + WallDuration; 11.8 has no time, is not
    job = by_id["condor.vm#11.0#1795269336"]
    assert (job["StartTime"], job["WallDuration"], job["EndTime"]) == (
        "2026-11-21T13:55:42Z",
        51,
        "2026-11-21T13:56:33.000Z",
    )
    assert "<EndTime" not in record_xml(
        next(d for d in _job_docs(condor25 / "history.ads") if d["cluster"] == 11 and d["proc"] == 0), WHO
    )
    assert "condor.vm#11.8#1795269336" not in by_id
    # 12.1 exited 3: Status says so (condor-ap's ExitStatus would say 0)
    job = by_id["condor.vm#12.1#1795269388"]
    assert (job["Status"], job["Resource_ExitCode"], job["WallDuration"]) == ("3", "3", 3)


def test_glidein_job_from_a_real_pool(fixtures: Path) -> None:
    (job,), _ = _gracc_docs(fixtures / "classads/history-glidein-job-finished.ad")
    assert job["StartTime"] == "2016-08-01T01:18:33Z"  # JobStartDate, its first start, as condor-ap
    assert (job["ReportableVOName"], job["VOName"]) == ("cms", "/cms/Role=production/Capability=NULL")
    assert (job["SiteName"], job["Host"], job["WallDuration"]) == ("INFN-LNL-2", "wp-06-12.lnl.infn.it", 18)


def test_the_same_job_is_the_same_bytes_and_hostile_text_stays_text() -> None:
    doc = {"id": "x1", "job_id": "ap#3.0#1", "cluster": 3, "proc": 0, "end": 1800000000.0, "walltime_s": 60.0,
           "cpus": 2.0, "user": 'a</LocalUserId><Status>9</Status>&"', "submitter": "g.a@pool",
           "site": "S&P"}  # fmt: skip
    assert record_xml(doc, WHO) == record_xml(dict(doc), WHO)
    (got,) = envelope_docs(envelope_xml([record_xml(doc, WHO)]), probe=WHO.probe_name, received=2e9).docs
    assert got["LocalUserId"] == 'a</LocalUserId><Status>9</Status>&"' and "Status" not in got
    assert (got["SiteName"], got["Resource_fairacct-core-hours"]) == ("S&P", "0.033333")


def test_a_record_without_its_end_is_refused_by_name() -> None:
    from collector.errors import RecordError

    with pytest.raises(RecordError, match="job record 'x2': expected id, job_id, cluster and end"):
        record_xml({"id": "x2", "job_id": "ap#3.0#1", "cluster": 3}, WHO)
