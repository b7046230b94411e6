"""Efficiency by resource set over a year of a 10,000-slot pool, the fair-share lab and the
what-if emulator, and the drift of a year's job history, on one core.

Targets (issue 16): efficiency for a year of records of a 10,000-slot pool "in seconds"
(here: at most 60 s for the efficiency math, reading and generating excluded); the lab's
cases under every policy in under a minute together. Run: ``python benchmarks/bench_analytics.py``.

The year is hourly snapshots (8,760 x 10,000 = 87.6 million slot rows) and 10 million
completed jobs, streamed a day (240,000 slot rows) and a million jobs at a time, as a store
would page them: the sums per set add up across chunks (probes.accounting.efficiency). The set
attribute is categorical, as a page of a low-cardinality column is; with plain strings the
slot part takes about twice as long (factorizing the strings dominates).

Drift (``history_drift``): a million jobs of a history as the reader gives them (``hosts`` as
plain strings: "slot1_3@wn42.example.org", and 5% parallel jobs listing 4 slots) against a
snapshot of the 10,000 slots; at most 30 CPU seconds. Reading the history is left out (see
bench_readers.py), as are the output tables.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from probes.accounting.efficiency import add_sums, efficiency_table, job_sums, slot_sums
from probes.accounting.lab import generate_cluster, generate_workload, run_lab, whatif
from probes.pipeline.analytics import history_drift

SLOTS, HOURS, JOBS, JOB_CHUNK = 10_000, 8760, 10_000_000, 1_000_000
EFFICIENCY_TARGET_S = 60.0
LAB_TARGET_S = 60.0
DRIFT_JOBS, DRIFT_PARALLEL, DRIFT_TARGET_S = 1_000_000, 0.05, 30.0


def day(rng: np.random.Generator, sets: np.ndarray, cores: np.ndarray, start: float) -> pd.DataFrame:
    n = SLOTS * 24
    total = np.tile(cores, 24)
    free = np.floor(rng.random(n) * (total + 1))
    return pd.DataFrame(
        {
            "set": pd.Categorical(np.tile(sets, 24)),
            "total_cpus": total,
            "unallocated_cpus": free,
            "interval_s": 3600.0,
            "capacity_cu": total,
            "overhead_cu": np.floor(free * rng.random(n)),
            "observed_at": start + np.repeat(np.arange(24) * 3600.0, SLOTS),
        }
    )


def drift(rng: np.random.Generator, sets: np.ndarray) -> bool:
    """history_drift on a million jobs of a history against the pool's 10,000 slots."""
    startds = np.array([f"wn{i}.example.org" for i in range(SLOTS)], dtype=object)
    slots = pd.DataFrame(
        {"name": "slot1@" + startds, "machine": startds, "speed": rng.choice([8.0, 10.5, 15.0], SLOTS), "model": sets}
    )
    node = rng.integers(0, SLOTS, (DRIFT_JOBS, 4))
    single = np.char.add(np.char.add("slot1_", rng.integers(1, 33, DRIFT_JOBS).astype(str)), "@")
    hosts = pd.Series(np.char.add(single, startds[node[:, 0]].astype(str)), dtype=object)
    parallel = rng.random(DRIFT_JOBS) < DRIFT_PARALLEL
    listed = [
        "slot1@" + startds[n[0]] + ",slot1@" + startds[n[1]] + ",slot1@" + startds[n[2]] + ",slot1@" + startds[n[3]]
        for n in node[parallel]
    ]
    hosts[parallel] = listed
    jobs = pd.DataFrame(
        {
            "hosts": hosts.astype(pd.StringDtype("python", na_value=np.nan)),
            "user": pd.Series(rng.choice([f"user{i}" for i in range(300)], DRIFT_JOBS)).astype(
                pd.StringDtype("python", na_value=np.nan)
            ),
            "cpus": rng.integers(1, 9, DRIFT_JOBS).astype(float),
            "walltime_s": rng.exponential(3600.0, DRIFT_JOBS),
        }
    )
    t = time.process_time()
    report = history_drift(jobs, slots, "model", speed_attribute="HEPSPEC")
    spent = time.process_time() - t
    summary = report.summary.iloc[0]
    ok = spent <= DRIFT_TARGET_S
    print(
        f"drift: {DRIFT_JOBS:,} jobs ({DRIFT_PARALLEL:.0%} on 4 nodes; {len(report.nodes):,} nodes) "
        f"in {spent:.1f} CPU s; mixed {summary['mixed_share']:.3f}, lost {summary['lost_share']:.3f}: "
        f"{'PASS' if ok else 'FAIL'} (<= {DRIFT_TARGET_S:.0f} s)"
    )
    return ok


def main() -> int:
    rng = np.random.default_rng(16)
    sets = rng.choice(np.array([f"model{i}" for i in range(12)], dtype=object), SLOTS)
    cores = rng.choice(np.array([8.0, 16.0, 32.0, 64.0]), SLOTS)
    spent = 0.0
    parts = []
    for d in range(HOURS // 24):
        chunk = day(rng, sets, cores, 1.7e9 + d * 86400.0)
        t = time.perf_counter()
        parts.append(slot_sums(chunk, "set"))
        spent += time.perf_counter() - t
    jobs_parts = []
    for _ in range(JOBS // JOB_CHUNK):
        jobs = pd.DataFrame(
            {
                "set": pd.Categorical(rng.choice(np.unique(sets), JOB_CHUNK)),
                "cpus": rng.integers(1, 9, JOB_CHUNK).astype(float),
                "n_hosts": 1,
                "walltime_s": rng.exponential(3600.0, JOB_CHUNK),
            }
        )
        jobs["cpu_time_s"] = jobs["cpus"] * jobs["walltime_s"] * rng.random(JOB_CHUNK)
        t = time.perf_counter()
        jobs_parts.append(job_sums(jobs, "set"))
        spent += time.perf_counter() - t
    t = time.perf_counter()
    table = efficiency_table(add_sums(parts), add_sums(jobs_parts))
    spent += time.perf_counter() - t
    overall = table[table["set"] == "(all)"].iloc[0]
    ok = spent <= EFFICIENCY_TARGET_S
    print(
        f"efficiency: {SLOTS * HOURS:,} slot rows and {JOBS:,} jobs in {spent:.1f} s "
        f"({SLOTS * HOURS / spent / 1e6:.1f} M slot rows/s); scheduling {overall['scheduling']:.3f}, "
        f"job {overall['job']:.3f}, system {overall['system']:.3f}: "
        f"{'PASS' if ok else 'FAIL'} (<= {EFFICIENCY_TARGET_S:.0f} s)"
    )

    t = time.perf_counter()
    runs = run_lab()
    lab_s = time.perf_counter() - t
    ok_lab = lab_s <= LAB_TARGET_S
    print(
        f"lab: {len(runs)} runs (6 cases x 3 policies) in {lab_s:.1f} s: "
        f"{'PASS' if ok_lab else 'FAIL'} (<= {LAB_TARGET_S:.0f} s)"
    )

    cluster = generate_cluster(seed=1)
    workload = generate_workload(cluster, 3000, seed=1)
    t = time.perf_counter()
    frame = whatif(cluster, workload)
    print(
        f"what-if: 3,000 jobs on {int(cluster['cores'].sum())} cores under {len(frame)} policies "
        f"in {time.perf_counter() - t:.1f} s"
    )
    print(frame[["policy", "scheduling", "job", "system", "mixed_share"]].round(3).to_string(index=False))
    ok_drift = drift(rng, sets)
    return 0 if ok and ok_lab and ok_drift else 1


if __name__ == "__main__":
    sys.exit(main())
