"""The idle table: demand from the queue, one row per autocluster."""

from __future__ import annotations

from pathlib import Path

import pytest

from probes.errors import SourceError
from probes.sources.queue import expand_job_ids, read_idle, running_job_ids
from probes.sources.status import read_status

from ..conftest import DEMO

# condor25's three idle jobs: 11.4 (2 cores, 4096 MiB, 1 GPU), 11.7 (8, 16384), 11.8 (40000 MiB)
CONDOR25_IDLE = [(11, 2, 4096, 1, 1), (13, 8, 16384, 0, 1), (14, 1, 40000, 0, 1)]


def rows(idle):  # type: ignore[no-untyped-def]
    cols = ["autocluster_id", "request_cpus", "request_memory", "request_gpus", "count"]
    return [tuple(int(v) for v in r) for r in idle[cols].itertuples(index=False)]


def test_idle_jobs_of_a_queue_dump(condor25: Path) -> None:
    idle, report = read_idle([condor25 / "queue.ads"])
    assert report.ads == 9  # 6 running and 3 idle jobs
    assert rows(idle) == CONDOR25_IDLE
    assert set(idle["schedd"]) == {"vm"} and set(idle["user"]) == {"condoruser"}
    # one row per autocluster and submitter, each naming who waits as the negotiator does
    assert idle[["submitter", "group", "project"]].values.tolist() == [
        ["group_osg.condoruser@localpool", "group_osg", "OSG-ML"],  # 11.4
        ["group_atlas.condoruser@localpool", "group_atlas", "ATLAS-Prod"],  # 11.7
        ["group_osg.condoruser@localpool", "group_osg", "OSG-Staff"],  # 11.8
    ]
    # RequestDisk = DiskUsage: evaluated in the job's context
    assert set(idle["request_disk"]) == {45}


def test_an_autocluster_dump_needs_the_running_jobs(condor25: Path) -> None:
    with pytest.raises(SourceError, match="counts running jobs too; give the status dump of the same instant"):
        read_idle([condor25 / "queue-autocluster.ads"])
    snap, _ = read_status([condor25 / "status.ads"])
    running = running_job_ids(snap.allocations)
    assert running == {"11.0", "11.1", "11.2", "11.3", "11.5", "11.6"}
    idle, _ = read_idle([condor25 / "queue-autocluster.ads"], running=running)
    # the same demand as the idle jobs themselves: running jobs are not demand
    assert rows(idle) == CONDOR25_IDLE


def test_expand_job_ids() -> None:
    assert expand_job_ids("11.0 ... 11.2") == ["11.0", "11.1", "11.2"]
    assert expand_job_ids("11.4 11.5") == ["11.4", "11.5"]
    assert expand_job_ids("3.0 ... 5.0 7.1") == ["3.0", "4.0", "5.0", "7.1"]
    assert expand_job_ids(None) == []


def test_jobs_without_an_autocluster_are_grouped_by_request(tmp_path: Path) -> None:
    ads = "".join(
        f'JobStatus = 1\nClusterId = {c}\nProcId = 0\nOwner = "u"\nRequestCpus = {cpus}\nRequestMemory = {mem}\n\n'
        for c, cpus, mem in [(1, 1, 2048), (2, 1, 2048), (3, 4, 8192)]
    )
    path = tmp_path / "q.ads"
    path.write_text(ads + "JobStatus = 2\nClusterId = 4\nRequestCpus = 1\nRequestMemory = 2048\n")
    idle, _ = read_idle([path])
    assert sorted(zip(idle["request_cpus"], idle["request_memory"], idle["count"], strict=True)) == [
        (1, 2048, 2),
        (4, 8192, 1),
    ]


def test_the_demo_queue() -> None:
    idle, _ = read_idle([DEMO / "queue.ads"])
    assert int(idle["count"].sum()) == 15 and len(idle) == 6
    by_ac = idle.set_index("autocluster_id")
    # carol's jobs with HTCondor's default RequestMemory expression, evaluated: 1758 MiB
    assert by_ac.loc[9, "request_memory"] == 1758 and by_ac.loc[9, "count"] == 2


def test_an_empty_queue_dump_is_an_empty_queue(tmp_path: Path) -> None:
    """condor_q -long of a queue without jobs writes nothing (issue 12, item 10)."""
    empty = tmp_path / "queue.ads"
    empty.write_text("\n")
    idle, report = read_idle([empty])
    assert len(idle) == 0 and report.ads == 0 and not report.malformed
