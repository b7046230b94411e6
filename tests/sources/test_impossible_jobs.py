"""Impossible jobs are quarantined with their reason (issue 41, point 5), never billed: an end
before the start, a ``JobStatus`` that is no HTCondor state, a wall time longer than the job's
whole span. Each case is one real job ad of HTCondor 25 with one value changed (the job
``vm#12.1#1795269388``: queued at 1795269388, started at 1795269398, completed at 1795269401, 3 s
of wall time), read as the user reads it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from probes.cli import main

JOB = "vm#12.1#1795269388"


@pytest.fixture
def ad(condor25: Path) -> str:
    first = (condor25 / "history.ads").read_text().split("\n\n")[0] + "\n"
    for line in ("CompletionDate = 1795269401", "JobCurrentStartDate = 1795269398", "JobStartDate = 1795269398",
                 "QDate = 1795269388", "RemoteWallClockTime = 3.0", "JobStatus = 4"):  # fmt: skip
        assert f"\n{line}\n" in first
    return first


IMPOSSIBLE = [
    ("CompletionDate = 1795269401", "CompletionDate = 1795269300", "ends (CompletionDate, or EnteredCurrentStatus"),
    ("JobStatus = 4", "JobStatus = -1", "attribute 'JobStatus' = -1: HTCondor's job states are 1 (idle) to 7"),
    ("JobStatus = 4", "JobStatus = 8", "attribute 'JobStatus' = 8: HTCondor's job states"),
    (
        "RemoteWallClockTime = 3.0",
        "RemoteWallClockTime = 1000000000",
        "attribute 'RemoteWallClockTime' = 1000000000: longer",
    ),
    ("RemoteWallClockTime = 3.0", "RemoteWallClockTime = 64", "longer than the 3 s from its first start"),
]


@pytest.mark.parametrize(("old", "new", "reason"), IMPOSSIBLE, ids=[n for _, n, _ in IMPOSSIBLE])
def test_an_impossible_job_is_quarantined_with_its_reason(
    old: str, new: str, reason: str, ad: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    history = tmp_path / "h.ads"
    history.write_text(ad.replace(f"\n{old}", f"\n{new}", 1))
    assert main(["jobs", "--history", str(history), "--json", "--quarantine", str(tmp_path / "q")]) == 0
    captured = capsys.readouterr()
    document = json.loads(captured.out)
    assert document["jobs"] == [] and document["read"]["history"]["malformed"] == 1
    assert f"1 malformed history ad(s) skipped, the first: {history} line 1: " in captured.err
    assert reason in captured.err, captured.err
    (kept,) = (tmp_path / "q").iterdir()
    assert f'GlobalJobId = "{JOB}"' in kept.read_text() and new.strip() in kept.read_text().replace(".0\n", "\n")


def test_an_impossible_job_is_not_billed_and_its_neighbour_is(
    ad: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same job twice under two ids, one of them with a wall time of 1e9 s: fairshare
    counts the possible one only (1 core x 3 s; main: 1,000,000,003)."""
    other = ad.replace(JOB, "vm#12.2#1795269388").replace("RemoteWallClockTime = 3.0", "RemoteWallClockTime = 1e9")
    history = tmp_path / "h.ads"
    history.write_text(ad + "\n" + other)
    assert main(["fairshare", "--history", str(history), "--json"]) == 0
    captured = capsys.readouterr()
    usage = {(c["type"], c["name"]): c["usage"][0] for c in json.loads(captured.out)["credentials"]}
    assert usage[("user", "condoruser")] == 3.0
    assert "1 malformed history ad(s) skipped" in captured.err


def test_a_job_that_ran_before_its_last_start_is_possible(
    ad: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A job evicted and run again: its wall time (30 s) is longer than its last run (3 s) but
    within its span from its first start (JobStartDate 1795269360, 41 s to its end)."""
    history = tmp_path / "h.ads"
    history.write_text(
        ad.replace("\nJobStartDate = 1795269398\n", "\nJobStartDate = 1795269360\n").replace(
            "\nRemoteWallClockTime = 3.0\n", "\nRemoteWallClockTime = 30.0\n"
        )
    )
    assert main(["jobs", "--history", str(history), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert [j["walltime_s"] for j in document["jobs"]] == [30.0] and document["read"]["history"]["malformed"] == 0
