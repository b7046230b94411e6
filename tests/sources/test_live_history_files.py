"""A live schedd's history read from its own files (``pool.history_files``), in pieces.

On the real pool (the ``htcondor_pool`` fixture), the schedd's history file is written over,
in place, with generated jobs as the schedd writes them (``benchmarks/schedd_history.py``,
the generator's order: far from end-time order). Read from the files ``history_piece`` jobs at
a time, the pass gives the same jobs table as asking the schedd and every job ``condor_history
-long`` prints once; a pass cut after a piece resumes with the rest; the checkpoints of the
files and of the query are one, either way; a job the schedd is still writing waits for its
banner; rotated files are read oldest first; a file of another schedd is refused by name.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest

from collector.outbox import Outbox
from probes.config import ProbeConfig
from probes.pipeline.reading import live_pool
from probes.sources.checkpoints import checkpoint_key
from probes.sources.history import read_history
from tests.htcondor_pool import HTCondorPool
from tests.pipeline.test_cycle import probe_once
from tests.sources.test_live_history_pool import _benchmark_module, schedd_history  # noqa: F401 - a fixture
from tests.sources.test_live_pool import by, pool_config

N_JOBS = 2000
PIECE = 300
KEY = checkpoint_key("vm")
_ID = re.compile(r'^GlobalJobId = "([^"]*)"$', re.MULTILINE)


def _files_config(pool: HTCondorPool, history: Path, piece: int = PIECE) -> ProbeConfig:
    return pool_config(pool, pool={"history_files": {"vm": str(history)}, "history_piece": piece})


def _pieces(cfg: ProbeConfig, mark: dict | None) -> list:
    live = live_pool(cfg)
    schedds, _ = live.schedds()
    try:
        return list(live.history_pieces(schedds, lambda key: mark if key == KEY else None))
    finally:
        live.cancel()


@pytest.fixture(scope="module")
def generated(
    htcondor_pool: HTCondorPool,
    schedd_history: tuple[Path, bytes],  # noqa: F811 - the fixture imported
    generated_history: Callable[..., Path],
    tmp_path_factory: pytest.TempPathFactory,
) -> Path:
    writer = _benchmark_module("schedd_history")
    history, _ = schedd_history
    source = tmp_path_factory.mktemp("dump") / "history.ads"  # the generated jobs, as this schedd's
    source.write_bytes(generated_history(N_JOBS).read_bytes().replace(b'"ap20.uc.osg-htc.org#', b'"vm#'))
    dump = writer.read_dump(source)
    writer.write_history(source, history, list(range(len(dump))), dump)
    return history


def test_the_files_give_the_schedds_answer_a_piece_at_a_time(
    htcondor_pool: HTCondorPool, generated: Path, tmp_path: Path
) -> None:
    pieces = _pieces(_files_config(htcondor_pool, generated), None)
    asked = live_pool(pool_config(htcondor_pool))
    schedds, _ = asked.schedds()
    answer = asked.history(schedds, lambda key: None)
    asked.cancel()
    address = htcondor_pool.tool("condor_status", "-schedd", "-af", "MyAddress").strip()
    printed = htcondor_pool.tool("condor_history", "-name", address, "-long", timeout=300)

    assert [len(p.jobs) for p in pieces] == [PIECE] * 6 + [N_JOBS - 6 * PIECE]
    assert all(p.failures == {} and p.problems == {} for p in pieces)
    jobs = pd.concat([p.jobs for p in pieces], ignore_index=True)
    assert jobs["job_id"].is_unique and sorted(jobs["job_id"]) == sorted(_ID.findall(printed))
    # each piece's checkpoint names its newest jobs; the last one its place in the file too
    for piece in pieces:
        assert piece.checkpoints[KEY]["tail"] == piece.jobs["job_id"].iloc[::-1].tolist()[:2]
    last = pieces[-1].checkpoints[KEY]
    assert last["at"]["offset"] == generated.stat().st_size and last["at"]["file"][1] == generated.stat().st_ino
    assert last["at"]["line"] == generated.read_bytes().count(b"\n") + 1
    drop = ["source", "line"]
    pd.testing.assert_frame_equal(by(jobs, "job_id", drop), by(answer.jobs, "job_id", drop))
    # the lines the file reader names are the file's own
    files, _ = read_history([generated], _files_config(htcondor_pool, generated).job_reading())
    pd.testing.assert_frame_equal(by(jobs, "job_id", []), by(files, "job_id", []))


def test_a_pass_cut_after_a_piece_resumes_with_the_rest(htcondor_pool: HTCondorPool, generated: Path) -> None:
    cfg = _files_config(htcondor_pool, generated)
    live = live_pool(cfg)
    schedds, _ = live.schedds()
    first = list(itertools.islice(live.history_pieces(schedds, lambda key: None), 3))  # killed after the third
    live.cancel()
    mark = first[-1].checkpoints[KEY]
    assert "at" not in mark  # a piece's position is its jobs', searched for again
    rest = _pieces(cfg, mark)
    ids = [i for p in first + rest for i in p.jobs["job_id"]]
    assert [len(p.jobs) for p in rest] == [PIECE] * 3 + [N_JOBS - 6 * PIECE]
    assert len(ids) == N_JOBS == len(set(ids))
    assert rest[-1].checkpoints[KEY]["tail"] == _pieces(cfg, None)[-1].checkpoints[KEY]["tail"]


def test_the_files_and_the_query_resume_from_each_others_checkpoint(
    htcondor_pool: HTCondorPool, generated: Path
) -> None:
    files = _files_config(htcondor_pool, generated)
    by_files = _pieces(files, None)[-1].checkpoints[KEY]
    asked = live_pool(pool_config(htcondor_pool))
    schedds, _ = asked.schedds()
    by_query = asked.history(schedds, lambda key: None).checkpoints[KEY]
    again = asked.history(schedds, lambda key: by_files if key == KEY else None)
    asked.cancel()
    assert by_files["tail"] == by_query["tail"]
    assert again.jobs.empty and again.problems == {}
    after = _pieces(files, by_query)
    assert len(after) == 1 and after[0].jobs.empty and after[0].problems == {}
    assert _pieces(files, by_query | {"at": {"file": [0, 0], "offset": 1, "line": 1}})[0].jobs.empty  # a stale place


def test_a_job_still_being_written_waits_for_its_banner(htcondor_pool: HTCondorPool, generated: Path) -> None:
    files = _files_config(htcondor_pool, generated)
    mark = _pieces(files, None)[-1].checkpoints[KEY]
    original = generated.read_bytes()
    ad = original[: original.index(b"\n***")]  # the first job's ad, as another job
    ad = ad.replace(_ID.search(ad.decode()).group(1).encode(), b"vm#999999.0#1795683153")  # type: ignore[union-attr]
    ad = re.sub(rb"\nClusterId = \d+", b"\nClusterId = 999999", ad)
    try:
        with open(generated, "ab") as fh:  # as the schedd appends: the ad, then its banner
            fh.write(ad[: len(ad) // 2])
        assert _pieces(files, mark)[0].jobs.empty
        with open(generated, "ab") as fh:
            fh.write(ad[len(ad) // 2 :] + b"\n")
        assert _pieces(files, mark)[0].jobs.empty  # no banner yet
        with open(generated, "ab") as fh:
            fh.write(b'*** Offset = 0 ClusterId = 999999 ProcId = 0 Owner = "x" CompletionDate = 1 CurrentTime = 1\n')
        new = _pieces(files, mark)
        assert new[0].jobs["job_id"].tolist() == ["vm#999999.0#1795683153"]
        assert new[0].checkpoints[KEY]["at"]["offset"] == generated.stat().st_size
    finally:
        generated.write_bytes(original)


def test_rotated_files_are_read_oldest_first(htcondor_pool: HTCondorPool, generated: Path) -> None:
    """The schedd renames its full history to ``history.<UTC time>`` (MAX_HISTORY_LOG) and
    starts a new one: a pass positioned in the renamed file reads on into the new one."""
    files = _files_config(htcondor_pool, generated)
    original = generated.read_bytes()
    cut = original.index(b"\n***", len(original) // 2)
    cut = original.index(b"\n", cut + 1) + 1
    older, newer = (
        generated.with_name(generated.name + ".20261101T000000"),
        generated.with_name(generated.name + ".20261102T000000"),
    )
    try:
        older.write_bytes(original[:cut])
        newer.write_bytes(original[cut:])
        generated.write_bytes(b"")  # in place: the schedd keeps it open
        whole = _pieces(files, None)
        ids = [i for p in whole for i in p.jobs["job_id"]]
        assert ids == _ID.findall(original.decode())  # every job, in the order written
        mark = whole[2].checkpoints[KEY]  # inside the older file
        rest = _pieces(files, mark)
        assert [i for p in rest for i in p.jobs["job_id"]] == ids[3 * PIECE :]
        assert rest[-1].checkpoints[KEY]["at"] == {"file": [generated.stat().st_dev, generated.stat().st_ino],
                                                   "offset": 0, "line": 1}  # fmt: skip
    finally:
        for path in (older, newer):
            path.unlink(missing_ok=True)
        generated.write_bytes(original)


def test_a_file_of_another_schedd_is_refused_by_name(
    htcondor_pool: HTCondorPool, generated: Path, tmp_path: Path
) -> None:
    other = tmp_path / "history"
    other.write_bytes(generated.read_bytes().replace(b'GlobalJobId = "vm#', b'GlobalJobId = "elsewhere#'))
    pieces = _pieces(_files_config(htcondor_pool, other), None)
    assert len(pieces) == 1 and pieces[0].jobs.empty
    assert "pool.history_files names another schedd's history" in pieces[0].failures["schedd:vm"]
    missing = _pieces(_files_config(htcondor_pool, tmp_path / "nothing" / "history"), None)
    assert "cannot be listed" in missing[0].failures["schedd:vm"] and str(tmp_path) in missing[0].failures["schedd:vm"]
    assert os.path.exists(generated)


def test_probe_once_commits_each_piece_and_resumes_after_a_kill(
    htcondor_pool: HTCondorPool, generated: Path, tmp_path: Path
) -> None:
    """``probe once`` SIGKILLed after its third commit (the snapshot, then two pieces) and run
    again: every job of the history stored once, the second run reading only the rest."""
    config = tmp_path / "probe.toml"
    config.write_text(
        f"""[pool]
name = "real"
condor_config = "{htcondor_pool.condor_config}"
history_files = {{ vm = "{generated}" }}
history_piece = {PIECE}
[sources]
live = true
[probe]
state_dir = "{tmp_path / "state"}"
"""
    )
    killed = probe_once(config, crash_at="after-commit:3")
    assert killed.returncode == -9, killed.stderr
    with Outbox(tmp_path / "state" / "outbox.sqlite") as outbox:  # the two pieces, durable
        assert outbox.status().depth.get("job") == 2 * PIECE
    again = probe_once(config)
    assert again.returncode == 0, again.stderr
    assert f"{N_JOBS - 2 * PIECE} jobs from the history" in again.stdout
    with sqlite3.connect(tmp_path / "state" / "fairacct.sqlite") as db:
        ids = [json.loads(doc)["job_id"] for (doc,) in db.execute('SELECT doc FROM "job"')]
    assert len(ids) == N_JOBS == len(set(ids))
    assert sorted(ids) == sorted(_ID.findall(generated.read_text()))


# -- the same backlog asked of the schedd, in parts ---------------------------------------------------


def _asked(pool: HTCondorPool, mark: dict | None, piece: int = PIECE, cut: int | None = None) -> list:
    live = live_pool(pool_config(pool, pool={"history_piece": piece}))
    schedds, _ = live.schedds()
    try:
        parts = live.history_pieces(schedds, lambda key: mark if key == KEY else None)
        return list(parts if cut is None else itertools.islice(parts, cut))
    finally:
        live.cancel()


def _append_job(history: Path, cluster: int) -> str:
    """A job appended to the history as the schedd appends one (its ad, then its banner)."""
    original = history.read_bytes()
    ad = original[: original.index(b"\n***")]
    job = f"vm#{cluster}.0#1795683153"
    ad = ad.replace(_ID.search(ad.decode()).group(1).encode(), job.encode())  # type: ignore[union-attr]
    ad = re.sub(rb"\nClusterId = \d+", f"\nClusterId = {cluster}".encode(), ad)
    banner = f'*** Offset = 0 ClusterId = {cluster} ProcId = 0 Owner = "x" CompletionDate = 1 CurrentTime = 1\n'
    with open(history, "ab") as fh:
        fh.write(ad + b"\n" + banner.encode())
    return job


def test_a_backlog_longer_than_a_piece_is_asked_in_parts_each_job_once(
    htcondor_pool: HTCondorPool, generated: Path
) -> None:
    """2,000 jobs, pieces of 300: the first answer is cut at the bound, a sample sizes the
    backlog, and parts by (ClusterId + ProcId) % m give every job once; a job the schedd writes
    during the pass is the next pass's; a pass cut after two parts resumes with the rest."""
    original = generated.read_bytes()
    expected = _ID.findall(original.decode())
    try:
        live = live_pool(pool_config(htcondor_pool, pool={"history_piece": PIECE}))
        schedds, _ = live.schedds()
        parts = live.history_pieces(schedds, lambda key: None)
        first = next(parts)
        late = _append_job(generated, 999998)  # written while the pass goes on
        rest = list(parts)
        live.cancel()
        whole = [first, *rest]
        ids = [i for p in whole for i in p.jobs["job_id"]]
        assert 8 <= len(whole) <= 16 and all(len(p.jobs) <= PIECE for p in whole)  # 2,000 x 1.25 / 300, sampled
        assert len(ids) == len(set(ids)) == N_JOBS and sorted(ids) == sorted(expected)
        assert all(p.failures == {} and p.problems == {} for p in whole)
        assert all("pass" in p.checkpoints[KEY] for p in whole[:-1]) and "pass" not in whole[-1].checkpoints[KEY]
        assert whole[-1].checkpoints[KEY]["tail"] == expected[::-1][:2]  # the newest when the pass began
        after = _asked(htcondor_pool, whole[-1].checkpoints[KEY])
        assert len(after) == 1 and after[0].jobs["job_id"].tolist() == [late]

        generated.write_bytes(original)
        cut = _asked(htcondor_pool, None, cut=3)  # three parts, then killed
        resumed = _asked(htcondor_pool, cut[-1].checkpoints[KEY])
        again = [i for p in cut + resumed for i in p.jobs["job_id"]]
        assert len(again) == len(set(again)) == N_JOBS and len(resumed) == len(whole) - 3
        assert resumed[-1].checkpoints[KEY]["tail"] == whole[-1].checkpoints[KEY]["tail"]
        assert _asked(htcondor_pool, resumed[-1].checkpoints[KEY])[0].jobs.empty
    finally:
        generated.write_bytes(original)
