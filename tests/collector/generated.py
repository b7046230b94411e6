"""Generated records for the summaries, exports and report tests: jobs, bills, slot snapshots
and fairshare windows over a period, deterministic by seed, as the probe writes them."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from collector.records import table_docs

DAY = 86400
START = 1_767_225_600  # 2026-01-01T00:00:00Z

USERS = ["alice", "bob", "carol", "dave", "erin"]
PROJECTS = ["CMS", "OSG-Staff", "LIGO"]
SITES = ["CIT", "Purdue", "UNL"]
PARTITIONS = ["cpu", "gpu"]
PHASES = ["starting", "running", "retiring"]


def generated_frames(days: int = 10, per_day: int = 40, seed: int = 7) -> dict[str, pd.DataFrame]:
    """The tables behind the records: ``job``, ``allocation``, ``slot``, ``fairshare``."""
    rng = np.random.default_rng(seed)
    n = days * per_day
    end = START + rng.integers(0, days * DAY, n)
    walltime = rng.uniform(600, 20_000, n).round(1)
    cpus = rng.choice([1, 2, 4, 8], n).astype(float)
    priced = rng.random(n) < 0.8
    jobs = pd.DataFrame(
        {
            "job_id": [f"schedd#{i}.0#1" for i in range(n)],
            "pool": "gen",
            "user": rng.choice(USERS, n),
            "group": rng.choice(["cms", "osg"], n),
            "project": rng.choice(PROJECTS, n),
            "site": rng.choice(SITES, n),
            "resource_name": rng.choice(["ce1", "ce2"], n),
            "cpus": cpus,
            "memory": rng.choice([2048.0, 4096.0, 16384.0], n),
            "gpus": rng.choice([0.0, 0.0, 1.0], n),
            "walltime_s": walltime,
            "cpu_time_s": (walltime * rng.uniform(0.3, 1.0, n)).round(1),
            "start": (end - walltime).astype(float),
            "end": end.astype(float),
            "qdate": (end - walltime - 60).astype(float),
            "penalty_usage": np.where(priced, walltime * cpus * rng.uniform(0.8, 3.0, n), np.nan),
            "cpu_only_usage": np.where(priced, walltime * cpus, np.nan),
        }
    )
    jobs["submitter"] = jobs["group"] + "." + jobs["user"] + "@gen"  # as the negotiator names them
    m = days * per_day
    observed = START + rng.integers(0, days * DAY // 300, m) * 300
    held = rng.choice([1.0, 2.0, 4.0], m)
    allocations = pd.DataFrame(
        {
            "pool": "gen",
            "name": [f"slot1_{i}@node{i % 9}" for i in range(m)],
            "job_id": [f"schedd#{i}.0#2" for i in range(m)],
            "observed_at": observed.astype(float),
            "interval_s": 300.0,
            "user": rng.choice(USERS, m),
            "group": rng.choice(["cms", "osg"], m),
            "project": rng.choice(PROJECTS, m),
            "site": rng.choice(SITES, m),
            "partition": rng.choice(PARTITIONS, m),
            "cpus": held,
            "memory": held * 2048.0,
            "gpus": 0.0,
            "billed_cpus_hours": held * rng.uniform(1.0, 2.0, m) * 300 / 3600,
            "billed_memory_hours": held * 2048.0 * rng.uniform(1.0, 1.5, m) * 300 / 3600,
            "billed_gpus_hours": 0.0,
        }
    )
    allocations["submitter"] = allocations["group"] + "." + allocations["user"] + "@gen"
    allocations["resource_name"] = np.where(np.arange(m) % 2 == 0, "ce1", "ce2")  # not drawn: the rest stays as it was
    s = days * per_day
    slot_observed = START + rng.integers(0, days * DAY // 300, s) * 300
    cu = rng.choice([0, 0, 1, 2, 3, 8], s).astype(float)
    slots = pd.DataFrame(
        {
            "pool": "gen",
            "name": [f"slot1@node{i}" for i in range(s)],
            "observed_at": slot_observed.astype(float),
            "interval_s": 300.0,
            "site": rng.choice(SITES, s),
            "resource_name": rng.choice(["ce1", "ce2"], s),
            "partition": rng.choice(PARTITIONS, s),
            "phase": rng.choice(PHASES, s),
            "total_cpus": 16.0,
            "overhead_cu": cu,
            "overhead_cu_hours": cu * 300 / 3600,
            "fits_idle": rng.random(s) < 0.3,
        }
    )
    windows = [float(START + d * DAY) for d in range(days)]
    fairshare = pd.DataFrame(
        [
            {
                "policy": "dedicated_ps", "type": "user", "name": u, "window_start": w, "window_end": w + DAY,
                "usage": float(rng.uniform(0, 100)), "effective": float(rng.uniform(0, 0.5)),
                "target": float(t), "target_mode": "target",
            }
            for w in windows for u, t in zip(USERS, [30, 20, 20, 20, 10], strict=True)
        ]
    )  # fmt: skip
    return {"job": jobs, "allocation": allocations, "slot": slots, "fairshare": fairshare}


def generated_docs(**options: Any) -> dict[str, list[dict[str, Any]]]:
    """The records of :func:`generated_frames`, by kind."""
    return {kind: table_docs(kind, frame, probe="test") for kind, frame in generated_frames(**options).items()}
