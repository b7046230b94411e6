"""The live path against a real HTCondor pool (the ``htcondor_pool`` fixture of tests/conftest.py).

What the bindings read from the running pool must be what HTCondor's own tools print about it,
read through the file readers: ``condor_status -long`` for the slots and allocations,
``condor_q -long`` for the idle demand, ``condor_history -long`` for the jobs and the
checkpoint. The fakes of test_live.py stay for what a real pool cannot be made to do on demand
(garbage answers, replicas, schedds that ignore a constraint).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from collector.outbox import Outbox
from collector.sinks.sqlite import EmbeddedStore
from probes.config import ProbeConfig, parse_config
from probes.pipeline.cycle import ProbeCycle
from probes.pipeline.reading import live_pool
from probes.sources.checkpoints import checkpoint_key, new_jobs
from probes.sources.history import read_history
from probes.sources.queue import read_idle
from probes.sources.status import read_status
from tests.htcondor_pool import HTCondorPool

NOW = 1795269400.0


def pool_config(htc: HTCondorPool, **sections: dict[str, Any]) -> ProbeConfig:
    raw: dict[str, Any] = {
        "pool": {"name": "real", "condor_config": str(htc.condor_config), "timeout_s": 20},
        "sources": {"live": True},
    }
    for name, values in sections.items():
        raw[name] = {**raw.get(name, {}), **values}
    return parse_config(raw)


def dump(pool: HTCondorPool, tmp_path: Path, tool: str, *args: str) -> Path:
    path = tmp_path / f"{tool}.ads"
    path.write_text(pool.tool(tool, *args), encoding="utf-8")
    return path


def by(frame: pd.DataFrame, key: str, drop: list[str]) -> pd.DataFrame:
    return frame.drop(columns=drop).sort_values(key).reset_index(drop=True)


def test_slots_and_allocations_are_what_condor_status_says(htcondor_pool: HTCondorPool, tmp_path: Path) -> None:
    cfg = pool_config(htcondor_pool)
    snapshot, report = live_pool(cfg).snapshot(now=NOW)
    files, _ = read_status([dump(htcondor_pool, tmp_path, "condor_status", "-long")], cfg.slot_reading())

    assert not report.rejects
    ignore = ["observed_at", "source", "line"]
    pd.testing.assert_frame_equal(by(snapshot.slots, "name", ignore), by(files.slots, "name", ignore))
    pd.testing.assert_frame_equal(
        by(snapshot.allocations, "name", ["observed_at"]), by(files.allocations, "name", ["observed_at"])
    )
    # the pool as its README describes it, carved by the three running jobs of the fixture
    slots = snapshot.slots.set_index("name")
    assert sorted(slots.index) == ["slot1@glidein_cpu@vm", "slot1@glidein_gpu@vm"]
    assert (slots["total_cpus"] == 16).all() and (slots["total_memory"] == 32768).all()
    assert slots.loc["slot1@glidein_gpu@vm", "total_gpus"] == 4 and (slots["site"] == "TestSite").all()
    alloc = snapshot.allocations
    assert len(alloc) == 3 and int(alloc["cpus"].sum()) == 6 and int(alloc["gpus"].sum()) == 1
    assert int(slots["unallocated_cpus"].sum()) == 32 - 6 and int(slots["n_dynamic"].sum()) == 3


def test_idle_demand_is_what_condor_q_says(htcondor_pool: HTCondorPool, tmp_path: Path) -> None:
    live = live_pool(pool_config(htcondor_pool))
    schedds, missing = live.schedds()
    assert [name for name, _ in schedds] == ["vm"] and missing == {}
    read = live.idle(schedds)
    files, _ = read_idle([dump(htcondor_pool, tmp_path, "condor_q", "-allusers", "-long")])

    assert read.failures == {} and read.idle is not None
    ignore = ["example_job", "source", "line"]
    pd.testing.assert_frame_equal(by(read.idle, "autocluster_id", ignore), by(files, "autocluster_id", ignore))
    # only the job too large for any slot waits; the running ones are not demand
    assert read.idle[["request_cpus", "request_memory", "count"]].values.tolist() == [[64, 1024, 1]]


def test_history_and_its_checkpoint_are_what_condor_history_says(htcondor_pool: HTCondorPool, tmp_path: Path) -> None:
    cfg = pool_config(htcondor_pool, pool={"history_match": 1})  # one job converted at a time: the stream too
    live = live_pool(cfg)
    schedds, _ = live.schedds()
    read = live.history(schedds, lambda key: None)
    files, _ = read_history([dump(htcondor_pool, tmp_path, "condor_history", "-long")], cfg.job_reading())

    assert read.failures == {} and len(read.jobs) == 2 and read.pages == {"vm": 1}
    ignore = ["source", "line"]
    pd.testing.assert_frame_equal(by(read.jobs, "job_id", ignore), by(files, "job_id", ignore))
    assert set(read.jobs["cpus"]) == {1} and set(read.jobs["memory"]) >= {512}
    _, mark = new_jobs(files, None)
    newest_first = files["job_id"].tolist()  # condor_history prints the history file from its end
    assert read.checkpoints == {checkpoint_key("vm"): {**mark, "tail": newest_first}}

    again = live.history(schedds, read.checkpoints.get)
    assert len(again.jobs) == 0 and again.checkpoints == read.checkpoints and again.problems == {}


def test_a_cycle_against_the_pool_commits_each_job_once(htcondor_pool: HTCondorPool, tmp_path: Path) -> None:
    cfg = pool_config(htcondor_pool)
    with Outbox(tmp_path / "outbox.sqlite") as outbox, EmbeddedStore(tmp_path / "store.sqlite") as store:
        first, _ = ProbeCycle(cfg, probe="test", pool=live_pool(cfg)).once(outbox, store)
        assert first.reading.failures == {} and first.enqueued["slot"] == 2 and first.enqueued["allocation"] == 3
        assert first.enqueued["job"] == 2 and store.count("job") == 2
        second, _ = ProbeCycle(cfg, probe="test", pool=live_pool(cfg)).once(outbox, store)
        assert second.enqueued.get("job", 0) == 0 and store.count("job") == 2
        assert store.count("slot") == 4  # a second snapshot: new records, not the first ones replaced


@pytest.fixture(autouse=True)
def _no_leftover_condor_config(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CONDOR_CONFIG", raising=False)  # the pool is reached through pool.condor_config only
