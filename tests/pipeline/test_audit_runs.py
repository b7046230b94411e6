"""``fairacct audit`` over every run of a job, on hand-computed timelines, in both stores.

The jobs' records are read by the probe's own reader from ``condor_history -long`` text (the
attributes HTCondor 25 writes: NumJobStarts, JobRunCount, JobStartDate, JobCurrentStartDate,
RemoteWallClockTime, LastRemoteWallClockTime, LastVacateTime, CompletionDate,
EnteredCurrentStatus, JobStatus); the allocation records are samples every INTERVAL_S of the
claims each run made, accounted by the probe's own code. A sample at ``t`` sees a claim when
``start <= t <= end`` and stands for ``(t - INTERVAL_S, t]``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from collector.records import table_docs
from probes.config import ProbeConfig, parse_config
from probes.pipeline.audit import audit
from probes.pipeline.overhead import overhead_report
from probes.pipeline.records import snapshot_docs
from probes.sources.history import read_history
from probes.sources.status import Snapshot
from tests.collector.conftest import osmem_server  # noqa: F401 - the session's server, its pipe closed at the end
from tests.pipeline.test_audit import open_store

T0 = 1_790_000_000.0  # 2026-09-21: the jobs ended before their history is read
INTERVAL_S = 10.0
SAMPLES = 121  # t0 ... t0 + 1200
NODE = "slot1@node"
#: (job, submitter, cores, claims): each claim (start, end) relative to T0 is one run's slot
CLAIMS = (
    ("s#1.0#1", "alice@pool", 2, ((100, 400), (460, 1000))),  # evicted at 400, rerun at 460
    ("s#2.0#1", "bob@pool", 4, ((500, 517),)),  # ran 17 s, held 40 s (517 ... 557), removed
    ("s#3.0#1", "carol@pool", 1, ((705, 712),)),  # failed to start: a claim, no run time; held, removed at 900
    ("s#4.0#1", "dave@pool", 2, ((100, 400), (460, 1000))),  # alice's job, in a record without the run fields
)


def ad(**attrs: Any) -> str:
    return "\n".join(f'{k} = "{v}"' if isinstance(v, str) else f"{k} = {v}" for k, v in attrs.items()) + "\n"


def history(folder: Path) -> Path:
    """The three jobs' history as condor_history -long writes it (HTCondor 25.0.13's attributes)."""
    common = {"MyType": "Job", "RequestMemory": 1024, "QDate": int(T0) + 50, "MachineAttrGLIDEIN_Site0": "S"}
    ads = [
        ad(**common, GlobalJobId="s#1.0#1", ClusterId=1, ProcId=0, Owner="alice", User="alice@pool", RequestCpus=2,
           JobStatus=4, NumJobStarts=2, JobRunCount=2, JobStartDate=int(T0) + 100, JobCurrentStartDate=int(T0) + 460,
           LastVacateTime=int(T0) + 400, CompletionDate=int(T0) + 1000, EnteredCurrentStatus=int(T0) + 1000,
           RemoteWallClockTime=840.0, LastRemoteWallClockTime=540.0),
        ad(**common, GlobalJobId="s#2.0#1", ClusterId=2, ProcId=0, Owner="bob", User="bob@pool", RequestCpus=4,
           JobStatus=3, NumJobStarts=1, JobRunCount=1, JobStartDate=int(T0) + 500, JobCurrentStartDate=int(T0) + 500,
           LastVacateTime=int(T0) + 517, CompletionDate=0, EnteredCurrentStatus=int(T0) + 557,
           RemoteWallClockTime=17.0, LastRemoteWallClockTime=17.0),
        ad(**common, GlobalJobId="s#3.0#1", ClusterId=3, ProcId=0, Owner="carol", User="carol@pool", RequestCpus=1,
           JobStatus=3, NumJobStarts=1, JobRunCount=1, JobStartDate=int(T0) + 705, JobCurrentStartDate=int(T0) + 705,
           LastVacateTime=int(T0) + 705, CompletionDate=0, EnteredCurrentStatus=int(T0) + 900,
           RemoteWallClockTime=0.0, LastRemoteWallClockTime=0.0),
    ]  # fmt: skip
    path = folder / "history.ads"
    path.write_text("\n".join(ads), encoding="utf-8")
    return path


def config() -> ProbeConfig:
    return parse_config({"pool": {"name": "synthetic", "interval_s": INTERVAL_S, "max_interval_s": 2 * INTERVAL_S}})


def sampled() -> dict[str, list[dict[str, Any]]]:
    """Every sample's slot and allocation records."""
    out: dict[str, list[dict[str, Any]]] = {"slot": [], "allocation": []}
    for k in range(SAMPLES):
        t = T0 + k * INTERVAL_S
        rows = [(j, who, c) for j, who, c, runs in CLAIMS if any(T0 + a <= t <= T0 + b for a, b in runs)]
        allocations = pd.DataFrame(
            {
                "pool": "synthetic", "name": [f"slot1_{j[2]}@node" for j, _, _ in rows], "parent": NODE,
                "job_id": [j for j, _, _ in rows], "submitter": [w for _, w, _ in rows],
                "user": [w.split("@")[0] for _, w, _ in rows], "group": None, "project": None, "site": "S",
                "cpus": [float(c) for _, _, c in rows], "memory": [1024.0 * c for _, _, c in rows],
                "disk": 0.0, "gpus": 0.0, "observed_at": t, "interval_s": INTERVAL_S,
            },
            columns=["pool", "name", "parent", "job_id", "submitter", "user", "group", "project", "site",
                     "cpus", "memory", "disk", "gpus", "observed_at", "interval_s"],
        )  # fmt: skip
        used = float(allocations["cpus"].sum())
        slots = pd.DataFrame(
            [{"pool": "synthetic", "name": NODE, "machine": "node", "slot_type": "Partitionable", "site": "S",
              "partition": "cpu", "total_cpus": 16.0, "total_memory": 16384.0, "total_disk": 1e6, "total_gpus": 0.0,
              "unallocated_cpus": 16.0 - used, "unallocated_memory": 16384.0 - 1024.0 * used,
              "unallocated_disk": 1e6, "unallocated_gpus": 0.0, "n_dynamic": len(rows), "incomplete": False,
              "glidein_to_retire": np.nan, "observed_at": t, "interval_s": INTERVAL_S}]
        )  # fmt: skip
        for kind, docs in snapshot_docs(
            overhead_report(Snapshot(slots, allocations), config()), idle_known=False, probe="p"
        ).items():
            out[kind] += docs.decoded()
    return out


@pytest.fixture(params=["sqlite", "osmem"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    sink = open_store(request, tmp_path)
    jobs, report = read_history([history(tmp_path)])
    assert report.ads == 3 and not report.malformed
    # dave's record is alice's job as a probe before the run fields wrote it
    old = jobs.iloc[[0]].drop(columns=["runs", "first_start", "earlier_s", "ran_from", "ran_to"], errors="ignore")
    old = old.assign(job_id="s#4.0#1", cluster=4, submitter="dave@pool", user="dave")
    for kind, docs in {
        **sampled(),
        "job": table_docs("job", jobs, probe="p") + table_docs("job", old, probe="p"),
    }.items():
        assert not sink.send(kind, docs).rejected
    yield sink
    sink.close()


def test_the_jobs_table_says_what_each_job_ran() -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        jobs, _ = read_history([history(Path(folder))])
    rel = jobs[["start", "first_start", "ran_from", "ran_to"]] - T0
    assert jobs["runs"].tolist() == [2, 1, 1]
    assert jobs["earlier_s"].tolist() == [300.0, 0.0, 0.0]
    assert rel.values.tolist() == [[460, 100, 160, 1000], [500, 500, 500, 517], [705, 705, 705, 705]]
    assert (jobs["ran_to"] - jobs["ran_from"]).tolist() == jobs["walltime_s"].tolist()  # every run, nothing held


def test_every_run_counts_and_nothing_while_held_or_idle(store: Any) -> None:
    report = audit(store, config(), T0, T0 + 1200, lag_s=2.0)
    books = report.submitters.set_index("submitter")
    h = 3600.0
    # alice, 2 cores: run 1 seen at 100 ... 400 (31 samples), run 2 at 460 ... 1000 (55); the first
    # sample of each stands for 10 s before its start: held (31 + 55) x 10 x 2 = 1720 core-s; used:
    # RemoteWallClockTime 840 s x 2 (main: the last run, 540 s x 2 = 1080, 640 beyond a bound of 24)
    assert books.loc["alice@pool", "held_core_hours"] == pytest.approx(1720 / h)
    assert books.loc["alice@pool", "used_core_hours"] == pytest.approx(1680 / h)
    assert (books.loc["alice@pool", "jobs"], books.loc["alice@pool", "runs"]) == (1, 2)
    assert books.loc["alice@pool", "bound_core_hours"] == pytest.approx(2 * 2 * (10 + 2) / h)  # two runs, two ends each
    # bob, 4 cores: seen at 500 and 510: held 80 core-s; used 17 s x 4 = 68 (main: to the removal, 57 s x 4 = 228)
    assert books.loc["bob@pool", "held_core_hours"] == pytest.approx(80 / h)
    assert books.loc["bob@pool", "used_core_hours"] == pytest.approx(68 / h)
    assert books.loc["bob@pool", "bound_core_hours"] == pytest.approx(4 * 12 / h)
    # carol, 1 core: her failed start's claim seen at 710 (10 core-s), no run time (main: 705 -> 900, 195 core-s)
    assert books.loc["carol@pool", "held_core_hours"] == pytest.approx(10 / h)
    assert books.loc["carol@pool", "used_core_hours"] == 0.0
    assert books.loc["carol@pool", "bound_core_hours"] == pytest.approx(12 / h)
    # dave: alice's job in a record without the run fields is audited as before: its last run only, beyond
    assert books.loc["dave@pool", "held_core_hours"] == pytest.approx(1720 / h)
    assert books.loc["dave@pool", "used_core_hours"] == pytest.approx(1080 / h)
    assert books.loc["dave@pool", "runs"] == 1 and books.loc["dave@pool", "bound_core_hours"] == pytest.approx(24 / h)
    assert books["beyond"].to_dict() == {"alice@pool": False, "bob@pool": False, "carol@pool": False, "dave@pool": True}


def test_earlier_runs_cut_by_an_edge_are_bounded_by_their_wall_time(store: Any) -> None:
    # the window starts at 250, inside alice's first run: where her earlier 300 s ran is known
    # only as somewhere in (100, 460); they are counted as the 300 s before her last start,
    # (160, 460), of which 210 s in the window, and the bound adds their 300 s x 2 cores
    report = audit(store, config(), T0 + 250, T0 + 1200, lag_s=2.0)
    alice = report.submitters.set_index("submitter").loc["alice@pool"]
    # held: run 1's samples 260 ... 400 (15 x 10 s), run 2's 460 ... 1000 (55): 1400 core-s
    assert alice["held_core_hours"] == pytest.approx(1400 / 3600)
    assert alice["used_core_hours"] == pytest.approx((210 + 540) * 2 / 3600)  # truth: (150 + 540) x 2
    assert alice["bound_core_hours"] == pytest.approx((2 * 2 * 12 + 300 * 2) / 3600)
    assert not alice["beyond"]
    # an edge after her last start cuts no earlier run: exact, no unplaced time
    alice = audit(store, config(), T0 + 600, T0 + 1200, lag_s=2.0).submitters.set_index("submitter").loc["alice@pool"]
    assert alice["used_core_hours"] == pytest.approx(400 * 2 / 3600)
    assert alice["bound_core_hours"] == pytest.approx(2 * 2 * 12 / 3600)
