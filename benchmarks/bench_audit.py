"""``fairacct audit`` of a day on the embedded store: the CPU seconds of the books.

Target (issue 23, part 4): a day of a 200-node pool sampled every 300 s (288 snapshots: 57,600
slot records, 230,400 allocation records of 50 submitters, four claims a node) and 100,000
completed jobs audited in at most 5 CPU seconds. Everything is summed in the store (SQL
``GROUP BY``, with ``ranges`` clipping the jobs to the window); only sums come back. Loading
the records is not timed. CPU seconds are printed beside the wall time: the machine is shared.
Run: ``python benchmarks/bench_audit.py [NODES] [JOBS]`` (default 200 and 100,000).
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._verdict import verdict
from collector.records import table_docs
from collector.sinks.sqlite import EmbeddedStore
from probes.config import parse_config
from probes.pipeline.audit import audit

TARGET_CPU_S = 5.0
T0, INTERVAL_S, SNAPSHOTS, CLAIMS = 1_800_000_000.0, 300.0, 288, 4


def load(store: EmbeddedStore, nodes: int, jobs: int) -> None:
    rng = np.random.default_rng(1)
    t = T0 + INTERVAL_S * np.arange(1, SNAPSHOTS + 1)
    names = [f"slot1@node{i}" for i in range(nodes)]
    slots = pd.DataFrame(
        {"pool": "bench", "name": np.tile(names, SNAPSHOTS), "site": "S", "partition": "cpu",
         "observed_at": np.repeat(t, nodes), "interval_s": INTERVAL_S, "overhead_cu": 0, "overhead_cu_hours": 0.0,
         "total_cpus": 16.0, "total_memory": 32768.0, "total_disk": 0.0, "total_gpus": 0.0,
         "unallocated_cpus": 8.0, "unallocated_memory": 16384.0, "unallocated_disk": 0.0, "unallocated_gpus": 0.0}
    )  # fmt: skip
    per = nodes * CLAIMS
    claims = [f"slot1_{j}@node{i}" for i in range(nodes) for j in range(CLAIMS)]
    allocations = pd.DataFrame(
        {"pool": "bench", "name": np.tile(claims, SNAPSHOTS),
         "parent": np.tile(np.repeat(names, CLAIMS), SNAPSHOTS),
         "job_id": [f"schedd#{k}.{i}#1" for k in range(SNAPSHOTS) for i in range(per)],
         "submitter": np.tile([f"user{i % 50}@pool" for i in range(per)], SNAPSHOTS), "site": "S",
         "cpus": 2.0, "memory": 4096.0, "disk": 0.0, "gpus": 0.0, "observed_at": np.repeat(t, per),
         "interval_s": INTERVAL_S}
    )  # fmt: skip
    start = T0 + rng.uniform(-3600, 86400, jobs)
    history = pd.DataFrame(
        {"job_id": [f"schedd#{i}.0#2" for i in range(jobs)], "submitter": [f"user{i % 50}@pool" for i in range(jobs)],
         "site": "S", "cpus": 2.0, "start": start, "end": start + 600.0, "walltime_s": 600.0}
    )  # fmt: skip
    for kind, frame in (("slot", slots), ("allocation", allocations), ("job", history)):
        for i in range(0, len(frame), 50_000):
            store.send(kind, table_docs(kind, frame.iloc[i : i + 50_000], probe="bench"))


def main() -> int:
    nodes = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    jobs = int(sys.argv[2]) if len(sys.argv) > 2 else 100_000
    config = parse_config({"pool": {"name": "bench", "interval_s": INTERVAL_S}})
    with tempfile.TemporaryDirectory() as folder, EmbeddedStore(Path(folder) / "store.sqlite") as store:
        load(store, nodes, jobs)
        wall, cpu = time.perf_counter(), time.process_time()
        report = audit(store, config, T0, T0 + 86400)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    print(
        f"audit of a day: {nodes} nodes x {SNAPSHOTS} snapshots ({nodes * SNAPSHOTS:,} slot and "
        f"{nodes * CLAIMS * SNAPSHOTS:,} allocation records), {jobs:,} jobs: {cpu:.2f} CPU s, {wall:.2f} s wall; "
        f"{len(report.submitters)} submitter rows, {len(report.nodes)} nodes, {len(report.gaps)} gaps"
    )
    return verdict([(cpu <= TARGET_CPU_S, f"the audit of a day in {cpu:.2f} CPU s (target {TARGET_CPU_S:g})")])


if __name__ == "__main__":
    raise SystemExit(main())
