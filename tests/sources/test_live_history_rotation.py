"""A schedd that rotates its own history (MAX_HISTORY_LOG), read from its files.

A pool of its own (tests/htcondor_pool.py) whose schedd rotates its history file once it passes
6,000 bytes (two job ads): it renames ``history`` to ``history.<YYYYMMDDTHHMMSS>`` and starts a
new one. Jobs ending a few seconds apart land in several files; ``pool.history_files`` reads
every job ``condor_history`` lists, once, oldest file first, in the order the schedd wrote them,
across the rotations, and a pass after more rotations reads only the jobs written since.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from probes.pipeline.reading import live_pool
from probes.sources.checkpoints import checkpoint_key
from tests.htcondor_pool import HTCondorPool, own_pool
from tests.sources.test_live_pool import pool_config

pytestmark = pytest.mark.slow

SHARED = Path(__file__).resolve().parents[3] / "shared"
ROTATED = re.compile(r"history\.\d{8}T\d{6}")


@pytest.fixture(scope="module")
def rotating_pool() -> Iterator[HTCondorPool]:
    with own_pool(SHARED) as pool:
        pool.reconfigure("MAX_HISTORY_LOG = 6000\nMAX_HISTORY_ROTATIONS = 50")
        yield pool


def _run(pool: HTCondorPool, name: str, seconds: list[int]) -> None:
    """Jobs sleeping ``seconds`` each (ending that far apart), run to the end."""
    before = len(pool.tool("condor_history", "-af", "GlobalJobId").split())
    lines = "".join(f"arguments = {s}\nqueue 1\n" for s in seconds)
    pool.submit(f"executable = /bin/sleep\nrequest_cpus = 1\nrequest_memory = 64\n{lines}", name)
    pool.wait_for(
        f"{len(seconds)} more jobs in the history",
        lambda: len(pool.tool("condor_history", "-af", "GlobalJobId").split()) >= before + len(seconds),
        timeout=180,
    )


def _pass(pool: HTCondorPool, history: Path, mark: dict | None) -> tuple[list[str], dict]:
    live = live_pool(pool_config(pool, pool={"history_files": {"vm": str(history)}, "history_piece": 3}))
    schedds, _ = live.schedds()
    try:
        pieces = list(live.history_pieces(schedds, lambda key: mark))
    finally:
        live.cancel()
    assert all(p.failures == {} and p.problems == {} for p in pieces)
    return [i for p in pieces for i in p.jobs["job_id"]], pieces[-1].checkpoints[checkpoint_key("vm")]


def test_the_schedds_own_rotations_are_read_once_across_passes(rotating_pool: HTCondorPool) -> None:
    history = Path(rotating_pool.tool("condor_config_val", "HISTORY").strip())
    _run(rotating_pool, "first", [1, 3, 5, 7, 9])
    rotated = sorted(p.name for p in history.parent.iterdir() if ROTATED.fullmatch(p.name))
    assert len(rotated) >= 2, sorted(p.name for p in history.parent.iterdir())  # the schedd's own names

    listed = rotating_pool.tool("condor_history", "-af", "GlobalJobId").split()  # newest first
    read, mark = _pass(rotating_pool, history, None)
    assert read == listed[::-1]  # every job once, in the order written, across the files

    _run(rotating_pool, "second", [1, 3, 5])
    more = sorted(p.name for p in history.parent.iterdir() if ROTATED.fullmatch(p.name))
    assert len(more) > len(rotated)  # the schedd rotated again since the first pass
    listed = rotating_pool.tool("condor_history", "-af", "GlobalJobId").split()
    again, _ = _pass(rotating_pool, history, mark)
    assert again == listed[:3][::-1]  # only the jobs written since
