"""The live history pass against a real schedd whose history file is not in end-time order.

A schedd writes a job to its history file (its ``HISTORY``) when the job leaves the queue, so
the file is in queue-exit order. Here the file of the pool's schedd (the ``htcondor_pool``
fixture) is replaced, in place, by generated jobs written as the schedd writes them
(``benchmarks/schedd_history.py``), in two orders: the generator's own, far out of end-time
order, and a real schedd's (by end time, 3% of the jobs late by seconds to hours). Each time,
every job that ``condor_history -long`` prints for that schedd is read exactly once, a second
pass reads none, and a job the schedd writes later with an older end time is still read. The
file is put back as it was afterwards, for the other tests of the pool.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import numpy as np
import pandas as pd
import pytest

from probes.pipeline.reading import live_pool
from probes.sources.checkpoints import checkpoint_key
from probes.sources.history import read_history
from tests.htcondor_pool import HTCondorPool
from tests.sources.test_live_pool import by, pool_config

ROOT = Path(__file__).resolve().parents[2]
N_JOBS = 2000  # a scan of the unoptimised schedd takes a few seconds at this size

_BANNER = re.compile(
    r'\*\*\* Offset = (\d+) ClusterId = (\d+) ProcId = (\d+) Owner = "([^"]*)" '
    r"CompletionDate = (\d+) CurrentTime = (\d+)"
)


def _benchmark_module(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = sys.modules.setdefault(spec.name, importlib.util.module_from_spec(spec))  # its dataclasses look it up
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def schedd_history(htcondor_pool: HTCondorPool) -> Iterator[tuple[Path, bytes]]:
    """The schedd's history file and what it held; put back afterwards. Always written over,
    never replaced: the schedd keeps it open to append to it."""
    path = Path(htcondor_pool.tool("condor_config_val", "HISTORY").strip())
    original = path.read_bytes()
    rotated = set(path.parent.glob(f"{path.name}.*"))
    try:
        yield path, original
    finally:
        for extra in set(path.parent.glob(f"{path.name}.*")) - rotated:
            extra.unlink()
        path.write_bytes(original)


def test_the_history_files_written_here_are_as_the_schedd_writes_them(schedd_history: tuple[Path, bytes]) -> None:
    """The pool's own history (its finished jobs): each ad ends with the banner
    ``schedd_history.banner`` writes, its Offset where the banner before it starts (0 first)."""
    assert _banners(schedd_history[1]) >= 2


def _banners(history: bytes) -> int:
    """Check every banner of a history file against ``schedd_history.banner``; how many."""
    banner = _benchmark_module("schedd_history").banner
    previous, at, seen = 0, 0, 0
    for line in history.splitlines(keepends=True):
        if line.startswith(b"***"):
            found = _BANNER.fullmatch(line.decode().rstrip("\n"))
            assert found, line
            offset, cluster, proc, owner, completion, written = found.groups()
            assert int(offset) == previous, line
            assert banner(previous, int(cluster), int(proc), owner, int(completion), int(written)) == line.decode()
            previous, seen = at, seen + 1
        at += len(line)
    assert history.endswith(b"\n") and at == len(history)
    return seen


@pytest.mark.parametrize("order", ["generated", "realistic"])
def test_every_job_is_read_once_whatever_the_order_of_the_history_file(
    order: str,
    htcondor_pool: HTCondorPool,
    schedd_history: tuple[Path, bytes],
    generated_history: Callable[..., Path],
    tmp_path: Path,
) -> None:
    writer = _benchmark_module("schedd_history")
    history, _ = schedd_history
    source = generated_history(N_JOBS)
    dump = writer.read_dump(source)
    positions = writer.realistic_order(dump, seed=1) if order == "realistic" else np.arange(len(dump))
    writer.write_history(source, history, positions, dump)
    # the file is out of end-time order: this share of its jobs ended before one written earlier
    ends = dump.end_time[positions]
    behind = float(np.mean(ends[1:] < np.maximum.accumulate(ends)[:-1]))
    assert behind > (0.4 if order == "generated" else 0.01), behind

    cfg = pool_config(htcondor_pool)
    live = live_pool(cfg)
    schedds, _ = live.schedds()
    first = live.history(schedds, lambda key: None)
    address = htcondor_pool.tool("condor_status", "-schedd", "-af", "MyAddress").strip()
    printed = tmp_path / "condor_history.long"
    printed.write_text(htcondor_pool.tool("condor_history", "-name", address, "-long", timeout=300))
    files, _ = read_history([printed], cfg.job_reading())

    assert first.failures == {} and first.problems == {} and first.pages == {"vm": 1}
    assert len(files) == N_JOBS and first.jobs["job_id"].is_unique  # every job, each once
    pd.testing.assert_frame_equal(by(first.jobs, "job_id", ["source", "line"]), by(files, "job_id", ["source", "line"]))

    again = live.history(schedds, first.checkpoints.get)
    assert again.jobs.empty and again.checkpoints == first.checkpoints and again.problems == {}

    # the schedd writes one more job, removed after days on hold: it ended before any of them
    late = _late_job(history, source, dump, end=int(dump.end_time.min()) - 86400)
    third = live.history(schedds, first.checkpoints.get)
    assert third.jobs["job_id"].tolist() == [late] and third.problems == {}
    mark = third.checkpoints[checkpoint_key("vm")]
    assert mark["tail"][0] == late and mark["end"] == first.checkpoints[checkpoint_key("vm")]["end"]
    assert live.history(schedds, third.checkpoints.get).jobs.empty
    assert _banners(history.read_bytes()) == N_JOBS + 1  # written as the schedd writes


def _late_job(history: Path, source: Path, dump: object, *, end: int) -> str:
    """Append a job to the history file as the schedd does (its ad, then its banner): a copy of the
    dump's first job under a new id, that ended at ``end``. Its GlobalJobId."""
    writer = _benchmark_module("schedd_history")
    with open(source, "rb") as fh:
        fh.seek(int(dump.starts[0]))  # type: ignore[attr-defined]
        ad = fh.read(int(dump.ends[0] - dump.starts[0])).decode()  # type: ignore[attr-defined]
    job_id = "late.example.org#7.0#1700000000"
    wall = re.search(r"(?m)^RemoteWallClockTime = (\S+)$", ad)
    start = str(end - int(float(wall.group(1)) if wall else 0))  # its run moved with its end
    for name, value in (("GlobalJobId", f'"{job_id}"'), ("ClusterId", "7"), ("ProcId", "0"), ("JobStatus", "3"),
                        ("CompletionDate", "0"), ("EnteredCurrentStatus", str(end)), ("QDate", start),
                        ("JobStartDate", start), ("JobCurrentStartDate", start)):  # fmt: skip
        ad, count = re.subn(rf"(?m)^{name} = .*$", f"{name} = {value}", ad)
        ad += "" if count else f"{name} = {value}\n"
    writer.append_job(history, ad, 7, 0, "late", 0, end + 3 * 86400)
    return job_id
