"""A history folder is read whole (issue 25 item 7): its per-job files, the -long and -json
dumps and gzip-compressed ones beside them; every entry that is not read is named with why."""

from __future__ import annotations

import gzip
import shutil
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd
import pytest

from probes.errors import SourceError
from probes.sources.history import read_history
from probes.sources.report import problem_lines

JOBS = 42  # condor25/history.ads and history.json: the same 42 jobs


def _jobs(paths: list[Path]) -> pd.DataFrame:
    table, _ = read_history(paths)
    return table.drop(columns=["source", "line"]).sort_values("job_id").reset_index(drop=True)


def test_gzip_long_and_json_dumps_in_a_folder_are_read_and_the_rest_named(condor25: Path, tmp_path: Path) -> None:
    folder = tmp_path / "history"
    folder.mkdir()
    with open(condor25 / "history.ads", "rb") as src, gzip.open(folder / "history.ads.gz", "wb") as packed:
        shutil.copyfileobj(src, packed)
    (folder / "notes.txt").write_text("rotated by cron on Mondays\n")
    (folder / "empty.ads").write_text("")
    (folder / "older").mkdir()
    table, report = read_history([folder])
    assert len(table) == JOBS
    assert set(table["source"]) == {str(folder / "history.ads.gz")}  # the site's file, not a temporary copy
    pd.testing.assert_frame_equal(_jobs([folder]), _jobs([condor25 / "history.ads"]))
    skipped = sorted(report.skipped)
    assert skipped == [
        f"{folder / 'empty.ads'}: the file is empty, expected ClassAds",
        f"{folder / 'notes.txt'}: not ClassAds (neither condor_history -long nor -json)",
        f"{folder / 'older'}: a subfolder, not read (give it as a --history of its own)",
    ]
    lines = problem_lines({"history": report}, {}, None, datetime.now(UTC))
    assert f"history: skipped {folder / 'notes.txt'}: not ClassAds (neither condor_history -long nor -json)" in lines


def test_per_job_files_and_a_json_dump_in_one_folder(condor25: Path, tmp_path: Path) -> None:
    folder = tmp_path / "spool"
    shutil.copytree(condor25 / "per_job_history", folder)
    shutil.copy(condor25 / "history.json", folder / "history.json")
    per_job = _jobs([condor25 / "per_job_history"])
    table, report = read_history([folder])
    assert report.skipped == ()
    # the dump holds the per-job files' jobs too: read first, they are not read again from it
    assert len(table) == JOBS and report.ads == len(per_job) + JOBS and report.duplicates == len(per_job)
    assert (table["source"] == str(folder / "history.json")).sum() == JOBS - len(per_job)
    assert set(table["job_id"]) == set(_jobs([condor25 / "history.json"])["job_id"])


def test_a_gzip_history_file_given_alone_is_read(condor25: Path, tmp_path: Path) -> None:
    packed = tmp_path / "history.json.gz"
    packed.write_bytes(gzip.compress((condor25 / "history.json").read_bytes()))
    pd.testing.assert_frame_equal(_jobs([packed]), _jobs([condor25 / "history.json"]))


def test_a_folder_with_nothing_to_read_names_what_it_skipped(tmp_path: Path) -> None:
    (tmp_path / "README").write_text("nothing here\n")
    with pytest.raises(
        SourceError, match=r"no history.<cluster>.<proc> files nor ClassAd dumps .*README: not ClassAds"
    ):
        read_history([tmp_path])


def test_a_broken_gzip_file_is_named(tmp_path: Path) -> None:
    broken = tmp_path / "history.gz"
    broken.write_bytes(gzip.compress(b"ClusterId = 1\n" * 1000)[:50])
    with pytest.raises(SourceError, match=r"history.gz: cannot be decompressed"):
        read_history([broken])
