"""The history reader's rules (issue 51, points 5, 7 and 8), each class on its smallest input: two
jobs of 2 cores, 4096 MiB and one hour of wall time (alice's and bob's), 7,200 core-seconds each.
A job whose billed values are not numbers HTCondor writes (``"abc"``, ``undefined``, ``8 GB``,
``0x10``), whose times are after the time of reading, or whose CPU time no cores can give in its
wall time is set aside with its reason, counted and said by ``jobs``, ``fairshare`` and
``penalty`` (``--json`` too); a value taken by default is counted. Before, each was billed
as something else (a wall time of 0, 1 core, 8 MiB, 2090 as fairshare's instant)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from probes.cli import main
from probes.sources.history import read_history

from ..conftest import ROOT

END = 1_700_003_600  # 2023-11-14T23:13:20Z


def job(n: int, user: str, **attrs: str | None) -> str:
    base = {"MyType": '"Job"', "GlobalJobId": f'"ap#{n}.0#1700000000"', "ClusterId": str(n), "ProcId": "0",
            "Owner": f'"{user}"', "JobStatus": "4", "QDate": "1700000000", "JobStartDate": "1700000000",
            "JobCurrentStartDate": "1700000000", "CompletionDate": str(END), "EnteredCurrentStatus": str(END),
            "RemoteWallClockTime": "3600.0", "RemoteUserCpu": "3000.0", "RemoteSysCpu": "0.0",
            "RequestCpus": "2", "RequestMemory": "4096", "RequestDisk": "1000"}  # fmt: skip
    return "".join(f"{k} = {v}\n" for k, v in {**base, **attrs}.items() if v is not None)


def history(tmp_path: Path, **bob: str | None) -> Path:
    path = tmp_path / "history.ads"
    path.write_text(job(1, "alice") + "\n" + job(2, "bob", **bob))
    return path


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[Any, str]:
    code = main([*args, "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out), err


NOT_NUMBERS = [
    # (attribute, value, what the reason says): the issue read each as wall 0, 1 core, no status, 8 or 0 MiB
    ("RemoteWallClockTime", '"abc"', "attribute 'RemoteWallClockTime' = \"abc\": expected a finite number"),
    ("RemoteWallClockTime", "undefined", "attribute 'RemoteWallClockTime' = undefined: expected a finite number"),
    ("RemoteWallClockTime", 'real("NaN")', "attribute 'RemoteWallClockTime' = real(\"NaN\"): expected a finite"),
    ("RequestCpus", "undefined", "attribute 'RequestCpus' = undefined: expected a finite number"),
    ("RequestCpus", "Infinity", "attribute 'RequestCpus' = Infinity: expected a finite number"),
    ("JobStatus", "undefined", "attribute 'JobStatus' = undefined: expected a finite number; the ad was skipped"),
    ("RequestMemory", "8 GB", "attribute 'RequestMemory' = 8 GB: expected a finite number from 0 to below"),
    ("MemoryProvisioned", "2 GB", "('2 GB' is a number followed by 'GB' (a unit?), not a plain number"),
    ("RequestMemory", "0x10", "('0x10' is hexadecimal, not a plain decimal number)"),
    ("RemoteUserCpu", "3000s", "attribute 'RemoteUserCpu' = 3000s: expected a finite number"),
]


@pytest.mark.parametrize(("attr", "value", "reason"), NOT_NUMBERS, ids=[f"{a}={v}" for a, v, _ in NOT_NUMBERS])
def test_a_billed_value_that_is_not_a_number_sets_its_job_aside(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], attr: str, value: str, reason: str
) -> None:
    path = history(tmp_path, **{attr: value})
    doc, err = run(capsys, "jobs", "--history", str(path))
    assert [(j["user"], j["cpus"], j["memory"], j["walltime_s"]) for j in doc["jobs"]] == [
        ("alice", 2.0, 4096.0, 3600.0)
    ]
    assert doc["read"]["history"]["malformed"] == 1 and doc["read"]["history"]["rejects"] == {}
    assert f"1 malformed history ad(s) skipped, the first: {path} line 19: " in err and reason in err, err


def test_fairshare_and_penalty_say_the_job_set_aside(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """bob's wall time "abc": the issue counted his job with 0 s (usage 0, in silence); now his job
    is set aside, said on stderr and in the JSON's ``read``, and alice's 7,200 core-seconds stand."""
    path = history(tmp_path, RemoteWallClockTime='"abc"')
    doc, err = run(capsys, "fairshare", "--history", str(path))
    usage = {c["name"]: c["usage"][0] for c in doc["credentials"] if c["type"] == "user"}
    assert usage == {"alice": 7200.0}
    assert doc["read"]["history"]["malformed"] == 1 and "1 malformed history ad(s) skipped" in err
    status = tmp_path / "status.ads"
    status.write_text(_NODE)
    doc, err = run(capsys, "penalty", "--history", str(path), "--status-file", str(status))
    assert doc["read"]["history"]["malformed"] == 1 and "1 malformed history ad(s) skipped" in err


_NODE = (
    'MyType = "Machine"\nName = "slot1@n1"\nMachine = "n1"\nSlotType = "Partitionable"\nPartitionableSlot = true\n'
    'State = "Unclaimed"\nCpus = 16\nMemory = 65536\nTotalSlotCpus = 16\nTotalSlotMemory = 65536\n'
    "LastHeardFrom = 1700000000\nMyCurrentTime = 1700000000\n\n"  # the blank line condor_status ends an ad with
)


def test_a_value_taken_by_default_is_counted(tmp_path: Path) -> None:
    """No RequestCpus (nor CpusProvisioned): HTCondor's 1 core, billed and counted; no
    RemoteWallClockTime nor CPU time: 0 s, counted (the issue counted none of them)."""
    bob = {"RequestCpus": None, "RemoteWallClockTime": None, "RemoteUserCpu": None, "RemoteSysCpu": None}
    jobs, report = read_history([history(tmp_path, **bob)])
    assert jobs["cpus"].tolist() == [2.0, 1.0] and jobs["walltime_s"].tolist() == [3600.0, 0.0]
    assert jobs["cpu_time_s"].tolist() == [3000.0, 0.0]
    assert dict(report.rejects) == {
        "RequestCpus: absent (and no CpusProvisioned), HTCondor's default of 1 core billed": 1,
        "RemoteWallClockTime: absent, read as 0 s (no wall time billed)": 1,
        "RemoteUserCpu: absent, read as 0 s": 1,
        "RemoteSysCpu: absent, read as 0 s": 1,
    }


def test_a_job_from_the_future_moves_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """bob's job completed in 2090: the issue took 2090 as fairshare's instant, and alice's usage
    (7,200 core-seconds in 2023) vanished from every window; now bob's job is set aside."""
    in_2090 = "3786912000"
    path = history(tmp_path, CompletionDate=in_2090, EnteredCurrentStatus=in_2090)
    doc, err = run(capsys, "fairshare", "--history", str(path))
    assert doc["at"] == END
    assert {c["name"]: c["usage"][0] for c in doc["credentials"] if c["type"] == "user"} == {"alice": 7200.0}
    assert "attribute 'CompletionDate' = 3786912000 (2090-01-01T00:00:00Z) is after the time of reading" in err
    jobs, report = read_history([path], now=3786912000.0)  # read in 2090, it is a job like the others
    assert jobs["user"].tolist() == ["alice", "bob"] and not report.malformed


def test_a_cpu_time_no_cores_can_give_is_left_out(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """RemoteUserCpu = 1e12 on a 2-core hour (the issue exported 277,777,778 CPU-hours): the CPU
    time is left out and counted, the job's wall time and cores stand (condor-ap sends it too);
    16 times its cores' worth (115,200 s, plus 60 s) is the most a job is credited with."""
    doc, err = run(capsys, "jobs", "--history", str(history(tmp_path, RemoteUserCpu="1e12")))
    bob = [j for j in doc["jobs"] if j["user"] == "bob"]
    assert len(doc["jobs"]) == 2 and doc["read"]["history"]["malformed"] == 0
    assert [(j["cpu_time_s"], j["walltime_s"], j["cpus"]) for j in bob] == [(0.0, 3600.0, 2.0)]
    left_out = "RemoteUserCpu + RemoteSysCpu: more than 16 times its cores' worth over its wall time (plus 60 s)"
    assert doc["read"]["history"]["rejects"] == {f"{left_out}, left out (0 s credited)": 1}
    assert f"history: 1 value(s) ignored: {left_out}" in err
    jobs, report = read_history([history(tmp_path, RemoteUserCpu="115260")])  # 16 x 7,200 + 60: kept
    assert jobs["cpu_time_s"].tolist() == [3000.0, 115260.0] and not report.malformed


def test_json_expressions_with_a_base_or_a_unit_are_no_numbers(tmp_path: Path) -> None:
    """condor_history -json: classad2 reads the expression 0x10 as 0 and 010 as 10 (the issue's
    0 MiB); both set their job aside, as in -long."""
    for value, why in (("0x10", "hexadecimal"), ("010", "leading zero")):
        path = tmp_path / "history.json"
        ads = [{"MyType": "Job", "GlobalJobId": f"ap#{n}.0#1", "Owner": user, "JobStatus": 4,
                "MemoryProvisioned": memory, "RemoteWallClockTime": 60.0}
               for n, user, memory in ((1, "alice", 16), (2, "bob", f"/Expr({value})/"))]  # fmt: skip
        path.write_text(json.dumps(ads))
        jobs, report = read_history([path])
        assert jobs["user"].tolist() == ["alice"] and jobs["memory"].tolist() == [16.0]
        assert len(report.malformed) == 1 and why in report.malformed[0].reason, report


def test_probe_once_says_the_job_set_aside(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The demo pool's probe reading bob's job of wall time "abc": its cycle sends alice's job only
    and says why bob's was not (the issue sent bob's with 0 s)."""
    config = tmp_path / "probe.toml"
    text = (ROOT / "config/demo.toml").read_text().replace('"demo/', f'"{ROOT}/config/demo/')
    text = text.replace('"../.demo"', '"state"').replace(f'"{ROOT}/config/demo/history.ads"', '"history.ads"')
    config.write_text(text)
    history(tmp_path, RemoteWallClockTime='"abc"')
    assert main(["probe", "once", "--config", str(config)]) == 0
    out, err = capsys.readouterr()
    assert "\njob: 1 records, 1 sent to sqlite:///" in out, out
    assert "1 malformed history ad(s) skipped" in err and "attribute 'RemoteWallClockTime' = \"abc\"" in err, err
