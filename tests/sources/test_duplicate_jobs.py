"""A job once, whatever the inputs (issue 41, point 4): the same ``GlobalJobId`` read twice, from
one file, two files, a folder and a dump, or a ``.bak`` copy, is one job; the copies are counted
and named, and fairshare usage is the job's once. Each case is the smallest: one real job ad of
HTCondor 25 (``vm#12.1#1795269388``, 1 core provisioned for 3 s of wall time), as the user runs
the commands."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from probes.cli import main

JOB = "vm#12.1#1795269388"


@pytest.fixture
def ad(condor25: Path) -> bytes:
    """The first ad of the real history: the job ``JOB``, ending with its newline."""
    first = (condor25 / "history.ads").read_bytes().split(b"\n\n")[0] + b"\n"
    assert f'GlobalJobId = "{JOB}"'.encode() in first and b"\nCpusProvisioned = 1\n" in first
    assert b"\nRemoteWallClockTime = 3.0\n" in first
    return first


def _layout(kind: str, ad: bytes, root: Path) -> list[str]:
    """The inputs (``--history`` arguments) of one way to give the same job twice."""
    if kind == "twice in one file":
        (root / "h.ads").write_bytes(ad + b"\n" + ad)
        return ["h.ads"]
    if kind == "one file given twice":
        (root / "h.ads").write_bytes(ad)
        return ["h.ads", "h.ads"]
    folder = root / "spool"
    folder.mkdir()
    (folder / "history.12.1").write_bytes(ad)
    if kind == "a dump beside its per-job files":
        (folder / "history.ads").write_bytes(ad)
    else:  # a copy an editor or a rotation left behind
        (folder / "history.12.1.bak").write_bytes(ad)
    return ["spool"]


LAYOUTS = ("twice in one file", "one file given twice", "a dump beside its per-job files", "a .bak copy in the folder")


@pytest.mark.parametrize("kind", LAYOUTS)
def test_fairshare_counts_a_job_read_twice_once(
    kind: str, ad: bytes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    histories = [a for path in _layout(kind, ad, tmp_path) for a in ("--history", path)]
    code = main(["fairshare", *histories, "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    usage = {(c["type"], c["name"]): c["usage"][0] for c in json.loads(out)["credentials"]}
    # dedicated_ps without machines: 1 core x 3 s, once (main: 6.0)
    assert usage[("user", "condoruser")] == usage[("group", "group_osg")] == 3.0
    assert "history: 1 job(s) read more than once" in err and f"again: {JOB} (" in err, err


@pytest.mark.parametrize("kind", LAYOUTS)
def test_jobs_lists_a_job_read_twice_once_and_names_the_copy(
    kind: str, ad: bytes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    histories = [a for path in _layout(kind, ad, tmp_path) for a in ("--history", path)]
    assert main(["jobs", *histories, "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert [j["job_id"] for j in document["jobs"]] == [JOB]
    read = document["read"]["history"]
    assert read["ads"] == 2 and read["duplicates"] == 1 and read["duplicate_jobs"][0].startswith(f"{JOB} (")


def test_jobs_seen_keeps_the_first_read_of_each_id_across_parts() -> None:
    from probes.sources.duplicate_jobs import JobsSeen
    from probes.sources.report import ReadTally

    seen, tally = JobsSeen(), ReadTally()
    paths, lines = np.array(["a", "a", "a"], dtype=object), np.array([1, 5, 9])
    first = np.array(["x", "y", "z"], dtype=object)
    assert seen.first_reads(first, paths, lines, tally) is None  # all new: no mask
    keep = seen.first_reads(np.array(["y", "w", "w"], dtype=object), paths, lines, tally)
    assert keep is not None and keep.tolist() == [False, True, False]
    assert tally.duplicates == 2 and tally.duplicate_jobs == ["y (a line 1)", "w (a line 9)"]
    assert len(seen) == 4
