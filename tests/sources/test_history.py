"""The jobs table, on real job histories."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest

import probes.sources.classad.model as classad_module
from probes.config import parse_config
from probes.errors import ClassAdError, SourceError
from probes.sources.history import iter_history, read_history
from probes.sources.report import ReadTally
from probes.sources.settings import JobReading

from ..conftest import DEMO


def test_the_finished_glidein_job(fixtures: Path) -> None:
    jobs, _ = read_history([fixtures / "classads/history-glidein-job-finished.ad"])
    (job,) = jobs.to_dict("records")
    assert job["job_id"] == "cmsgwms-submit1.fnal.gov#449897.0#1470014183"
    assert job["site"] == "INFN-LNL-2"  # MATCH_EXP_JOB_GLIDEIN_Site
    assert job["walltime_s"] == 18.0  # RemoteWallClockTime
    assert (job["start"], job["end"]) == (1470014416, 1470014433)
    assert (job["user"], job["group"]) == ("cmsdataops", "production")  # AccountingGroup = production.cmsdataops
    # HTCondor 8.4 had no *Provisioned: the request stands for what the job held
    assert not job["provisioned"] and job["memory"] == 1250 and job["cpus"] == 1


def test_the_htcondor_25_history(condor25: Path) -> None:
    jobs, report = read_history([condor25 / "history.ads"])
    assert len(jobs) == 42 and not report.malformed
    by_id = jobs.set_index(jobs["cluster"].astype(str) + "." + jobs["proc"].astype(str))
    # 12.0 and 12.1: RequestMemory is the default expression (it evaluates to 0), but the slot
    # gave them 128 MiB: MemoryProvisioned wins, the expression is never evaluated
    assert by_id.loc["12.0", "memory"] == by_id.loc["12.1", "memory"] == 128
    assert (by_id.loc["12.0", "exit_code"], by_id.loc["12.1", "exit_code"]) == (0, 3)
    # 11.8 was removed before it ran: no slot, its request (40000 MiB) stands
    never = by_id.loc["11.8"]
    assert (never["status"], never["memory"], never["provisioned"]) == (3, 40000, False)
    assert never["site"] == "unknown" and pd.isna(never["start"])
    # clusters 1-9 have no glidein attributes; cluster 10 has them
    assert set(jobs.loc[jobs["cluster"] < 10, "site"]) == {"unknown"}
    assert set(jobs.loc[jobs["cluster"] == 10, "site"]) == {"LoopbackSite"}
    assert set(jobs.loc[jobs["cluster"] >= 10, "group"]) == {"group_cms", "group_atlas", "group_osg"}
    assert jobs.loc[jobs["cluster"] < 10, "group"].isna().all()  # submitted without accounting_group
    assert report.evaluated == 2  # only 11.8's RequestDisk = DiskUsage, and the other never-ran job


def test_long_json_and_per_job_files_agree(condor25: Path) -> None:
    long, _ = read_history([condor25 / "history.ads"])
    js, _ = read_history([condor25 / "history.json"])
    per_job, _ = read_history([condor25 / "per_job_history"])
    ignore = ["source", "line"]
    pd.testing.assert_frame_equal(long.drop(columns=ignore), js.drop(columns=ignore))
    assert len(per_job) == 12
    same = long[long["cluster"] >= 10].sort_values(["cluster", "proc"]).reset_index(drop=True)
    pd.testing.assert_frame_equal(same.drop(columns=ignore), per_job.drop(columns=ignore))
    assert per_job["source"].str.endswith("/history.10.0").iloc[0]


def test_speed_and_credentials_from_the_config(condor25: Path) -> None:
    config = parse_config(
        {
            "machines": {"speed_attribute": "HEPSPEC"},
            "credentials": {
                "user": ["User"],
                "group": ["AccountingGroup"],
                "project": ["ProjectName"],
                "qos": ["JobPrio"],
            },
        }
    )
    jobs, report = read_history([condor25 / "per_job_history"], config.job_reading())
    assert set(jobs["user"]) == {"condoruser"}  # the account of User, as Owner names it
    assert set(jobs["group"]) == {"group_cms", "group_atlas", "group_osg"}
    # speed of the host the job ran on, through SYSTEM_JOB_MACHINE_ATTRS: 10.5 CPU node, 15.0 GPU node
    ran = jobs[jobs["host"].notna()]
    assert set(zip(ran["host"].str.split("@").str[1], ran["speed"], strict=True)) == {
        ("cpu-node1", 10.5),
        ("gpu-node1", 15.0),
    }
    assert report.rejects == {"JobPrio: expected a string, got number": 12}


def test_an_empty_history_directory(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match=r"no history\.<cluster>\.<proc> files nor ClassAd dumps in this folder"):
        read_history([tmp_path])


def test_the_demo_history() -> None:
    jobs, _ = read_history([DEMO / "history.ads"])
    assert len(jobs) == 60 and (jobs["status"] == 4).sum() == 58
    assert jobs["site"].ne("unknown").sum() == 59  # all but the job that never ran


def test_a_history_read_a_few_ads_at_a_time_gives_the_same_table(
    condor25: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each chunk becomes its rows of the table as it is read: the table of a history cut into
    chunks of one or two ads, from several inputs, is the table of the whole. The 12 per-job
    files are 12 of the dump's 42 jobs: read, and each job counted once."""
    inputs = [condor25 / "history.ads", condor25 / "per_job_history", DEMO / "history.ads"]
    whole, report = read_history(inputs)
    monkeypatch.setattr(classad_module, "CHUNK_BYTES", 4096)
    chunked, chunked_report = read_history(inputs)
    assert report.ads == chunked_report.ads == 42 + 12 + 60
    assert len(whole) == 42 + 60 and report.duplicates == chunked_report.duplicates == 12
    pd.testing.assert_frame_equal(whole, chunked)
    assert whole["source"].tolist() == [str(condor25 / "history.ads")] * 42 + [str(DEMO / "history.ads")] * 60
    assert whole.dtypes.astype(str).to_dict() == {
        **dict.fromkeys(
            [
                "job_id",
                "schedd",
                "submitter",
                "user",
                "group",
                "project",
                "host",
                "hosts",
                "site",
                "resource_name",
                "source",
            ],
            "str",
        ),
        **dict.fromkeys(["queue", "qos"], "object"),  # no attribute configured: all None
        **dict.fromkeys(["vo", "fqan", "dn"], "object"),  # no VOMS proxy in these histories: all None
        **dict.fromkeys(["cluster", "proc", "status", "exit_code", "n_hosts", "runs"], "Int64"),
        **dict.fromkeys(
            ["cpus", "memory", "disk", "gpus", "qdate", "start", "end", "walltime_s", "cpu_time_s", "speed"], "float64"
        ),
        **dict.fromkeys(["first_start", "earlier_s", "ran_from", "ran_to"], "float64"),
        "provisioned": "bool",
        "line": "int64",
    }


def test_a_history_streamed_gives_the_table_in_parts(condor25: Path, generated_history: Callable[..., Path]) -> None:
    """iter_history is read_history a few chunks at a time: its parts, one after another, are
    the table, and its report is read_history's once the last part is taken; a malformed ad in
    the middle is skipped and counted the same way."""
    inputs = [generated_history(3000, malformed=1500), condor25 / "history.ads"]
    whole, report = read_history(inputs)
    tally = ReadTally()
    parts = list(iter_history(inputs, JobReading(), tally))
    streamed = tally.report()
    assert len(parts) > 1 and all(len(p) for p in parts)
    pd.testing.assert_frame_equal(pd.concat(parts, ignore_index=True), whole)
    assert (streamed.ads, streamed.evaluated, streamed.rejects) == (report.ads, report.evaluated, report.rejects)
    assert report.ads == len(whole) == 2999 + 42
    assert streamed.malformed == report.malformed and [m.reason for m in report.malformed] == [
        "unterminated string in attribute 'User'"
    ]


def test_a_history_streamed_is_checked_as_it_is_read(condor25: Path, generated_history: Callable[..., Path]) -> None:
    """The checks of read_history, where the stream meets them: a file of another kind is refused
    once it is read, a malformed ad raises in strict mode after the parts before it."""
    streamed = iter_history([generated_history(3000), condor25 / "status.ads"], JobReading(), ReadTally())
    assert sum(map(len, itertools.islice(streamed, 1))) >= 2000
    with pytest.raises(SourceError, match=r"status\.ads: this looks like startd ads"):
        list(streamed)
    broken = generated_history(3000, malformed=2500)
    with pytest.raises(ClassAdError) as raised:
        read_history([broken], strict=True)
    streamed = iter_history([broken], JobReading(), ReadTally(), strict=True)
    assert len(next(streamed)) >= 2000
    with pytest.raises(ClassAdError) as at:
        list(streamed)
    assert str(at.value) == str(raised.value) and "line" in str(at.value)
