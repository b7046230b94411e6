"""Efficiency by resource set of stored records: summed by the store against paged into memory.

``fairacct efficiency --store`` asks the store for sums per set, shape and period
(:mod:`probes.pipeline.stored_efficiency`); before, it read every slot and job record into
pandas. On the embedded store both run in this process (SQLite is a library), so CPU seconds
of the process compare them whole; the numbers must be equal. On osmem-server (an
OpenSearch-compatible server in memory) it prints the time and the number of requests: the
composite aggregations run in the server, one request per 1,000 groups, whatever the number
of records (the old path read at most 10,000 records per kind there, silently).

Records: ``N_SLOTS`` slot snapshots of a pool of 2,000 slots in 12 CPU-model sets and 4 shapes,
hourly, and ``N_SLOTS / 3`` completed jobs on random slots, each carrying a random set of its
own, which the slot records of its node override (as in memory): the jobs come back grouped
by node and own set (some 24,000 groups; a pool whose jobs carry their node's set gives one
per node). Loading them is not timed.
Run: ``python benchmarks/bench_efficiency_store.py [N_SLOTS] [N_OSMEM]`` (default 300,000 and
30,000; N_OSMEM 0 skips osmem).
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

from benchmarks._osmem import osmem_server
from benchmarks._verdict import verdict
from collector.records import table_docs
from collector.sinks.sqlite import EmbeddedStore
from probes.config import ProbeConfig
from probes.pipeline.analytics import efficiency_report
from probes.pipeline.stored_efficiency import store_efficiency

START = 1_735_689_600.0  # 2025-01-01T00:00:00Z
POOL = 2000
CONFIG = ProbeConfig()


def docs(n_slots: int, seed: int = 16) -> dict[str, list[dict[str, object]]]:
    rng = np.random.default_rng(seed)
    model = rng.integers(0, 12, POOL)
    shape = rng.integers(0, 4, POOL)
    cores = np.array([8.0, 16.0, 32.0, 64.0])[shape]
    i = np.arange(n_slots)
    slot = i % POOL
    total = cores[slot]
    free = np.floor(rng.random(n_slots) * (total + 1))
    slots = pd.DataFrame(
        {
            "pool": "bench", "name": [f"slot1@node{s}" for s in slot], "machine": [f"node{s}" for s in slot],
            "cpu_model": [f"model{m}" for m in model[slot]], "site": "site", "partition": "cpu",
            "total_cpus": total, "total_memory": total * 2048.0, "total_disk": 1e8, "total_gpus": 0.0,
            "unallocated_cpus": free, "unallocated_memory": free * 2048.0, "unallocated_disk": 1e8,
            "unallocated_gpus": 0.0,
            "observed_at": START + (i // POOL) * 3600.0, "interval_s": 3600.0, "overhead_cu": free,
        }
    )  # fmt: skip
    n_jobs = n_slots // 3
    walltime = rng.uniform(60, 36000, n_jobs).round(0)
    cpus = rng.choice([1.0, 2.0, 4.0, 8.0], n_jobs)
    jobs = pd.DataFrame(
        {
            "job_id": [f"schedd#{j}.0#1" for j in range(n_jobs)],
            "cpu_model": [f"model{m}" for m in rng.integers(0, 12, n_jobs)],
            "host": [f"slot1_1@node{h}" for h in rng.integers(0, POOL, n_jobs)], "cpus": cpus, "n_hosts": 1,
            "walltime_s": walltime, "cpu_time_s": (cpus * walltime * rng.random(n_jobs)).round(0),
            "end": np.sort(START + rng.uniform(0, (n_slots // POOL) * 3600.0, n_jobs)),
        }
    )  # fmt: skip
    return {"slot": table_docs("slot", slots, probe="bench"), "job": table_docs("job", jobs, probe="bench")}


def timed(what: str, run: object) -> tuple[pd.DataFrame, float, float]:
    cpu, wall = time.process_time(), time.perf_counter()
    frame = run()  # type: ignore[operator]
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    print(f"  {what}: {cpu:.2f} CPU s, {wall:.2f} s wall")
    return frame, cpu, wall


def in_memory(sink: object) -> pd.DataFrame:
    slots = pd.DataFrame(sink.query("slot"))  # type: ignore[attr-defined]
    return efficiency_report(slots, pd.DataFrame(sink.query("job")), CONFIG, by="cpu_model")  # type: ignore[attr-defined]


def main() -> int:
    n_slots = int(sys.argv[1]) if len(sys.argv) > 1 else 300_000
    n_osmem = int(sys.argv[2]) if len(sys.argv) > 2 else 30_000
    checks = []
    records = docs(n_slots)
    with tempfile.TemporaryDirectory() as tmp, EmbeddedStore(Path(tmp) / "store.sqlite") as store:
        for kind, batch in records.items():
            for k in range(0, len(batch), 50_000):
                store.send(kind, batch[k : k + 50_000])
        print(f"embedded store: {n_slots:,} slot and {len(records['job']):,} job records, efficiency by cpu_model")
        pushed, cpu_store, _ = timed(
            "summed in the store (SQL GROUP BY)", lambda: store_efficiency(store, CONFIG, by="cpu_model")
        )
        paged, cpu_memory, _ = timed("paged into memory and summed by pandas", lambda: in_memory(store))
        same = np.allclose(
            pushed.select_dtypes("number").to_numpy(float),
            paged.select_dtypes("number").to_numpy(float),
            equal_nan=True,
        )
        checks.append((same, "the store's sums give the in-memory numbers"))
        checks.append(
            (cpu_store < cpu_memory, f"the store path costs less CPU: {cpu_store:.2f} s against {cpu_memory:.2f} s")
        )
    if n_osmem:
        from collector.sinks.elasticsearch import ElasticsearchSink

        with osmem_server() as server:
            small = docs(n_osmem, seed=17)
            with ElasticsearchSink(server.url) as sink:
                sink.install_templates()
                for kind, batch in small.items():
                    for k in range(0, len(batch), 5_000):
                        sink.send(kind, batch[k : k + 5_000])
                print(f"osmem-server: {n_osmem:,} slot and {len(small['job']):,} job records")
                before = sink.requests
                timed(
                    "summed in the server (composite aggregations)",
                    lambda: store_efficiency(sink, CONFIG, by="cpu_model"),
                )
                print(f"  {sink.requests - before} requests")
    return verdict(checks)


if __name__ == "__main__":
    sys.exit(main())
