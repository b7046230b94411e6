"""Daily summaries computed in the store: the time to summarize N job records.

Target (issue 15): 1,000,000 job records summarized in at most 2 s on the embedded store
(SQLite GROUP BY). On osmem-server (an OpenSearch-compatible server in memory) it prints the
time and the number of requests: the composite aggregation runs in the server, so the number
of requests follows the number of summary buckets (1,000 per page), not the number of records.

Records: a year of completed jobs of 50 users in 10 projects, each user running at 2 of 5
sites (a resource per site), so a day holds about 2,700 jobs in about 100 groups (user, group,
project, site, resource), about 36,500 summaries a year. Loading them is not timed; the time
is the whole ``summarize``: the aggregation in the store and writing the summaries back (and
deleting stale ones: none here). The embedded store is measured as it is in use: its covering
index for the daily sums (``EmbeddedStore.index_aggregation``, made by the first summary) exists
while the records arrive, so its cost is in the writes, not in the time; the one-off cost of
making it on a store that holds the records already is printed beside. CPU seconds are printed
too: the machine is shared, and wall time is noisy. Run:
``python benchmarks/bench_summaries.py [N] [N_OSMEM]`` (default 1,000,000 and 50,000;
N_OSMEM 0 skips osmem).

Issue 23: ``summarize`` also writes each day's books (``audit`` and ``gap`` summaries); their
cost on the same year must not double the summaries' (CPU seconds, one run). Printed beside,
for the record: the books again once a snapshot of one node every 300 s makes every day one
with books to make.
"""

from __future__ import annotations

import os
import sqlite3
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._osmem import osmem_server
from benchmarks._verdict import verdict
from collector.records import table_docs
from collector.sinks.base import Aggregation
from collector.sinks.sqlite import EmbeddedStore
from collector.summaries import SOURCES, summarize

TARGET_S = 2.0
START = 1_735_689_600  # 2025-01-01T00:00:00Z
FIRST, LAST = date(2025, 1, 1), date(2025, 12, 31)


def job_docs(n: int, seed: int = 1) -> list[dict[str, object]]:
    rng = np.random.default_rng(seed)
    user = rng.integers(0, 50, n)
    site = (user + rng.integers(0, 2, n)) % 5  # each user runs at two sites
    end = np.sort(START + rng.integers(0, 365 * 86400, n)).astype(float)
    walltime = rng.uniform(60, 86400, n).round(0)
    frame = pd.DataFrame(
        {
            "job_id": [f"schedd.example#{i}.0#1700000000" for i in range(n)],
            "pool": "bench",
            "user": [f"user{u:02d}" for u in user],
            "group": [f"group{u % 5}" for u in user],
            "project": [f"project{u % 10}" for u in user],
            "site": [f"site{s}" for s in site],
            "resource_name": [f"ce{s}" for s in site],
            "cpus": rng.choice([1.0, 2.0, 4.0, 8.0], n),
            "memory": rng.choice([2048.0, 4096.0, 8192.0], n),
            "gpus": rng.choice([0.0, 0.0, 0.0, 1.0], n),
            "walltime_s": walltime,
            "cpu_time_s": (walltime * 0.8).round(0),
            "start": end - walltime,
            "end": end,
            "penalty_usage": walltime * 1.5,
            "cpu_only_usage": walltime,
        }
    )
    return table_docs("job", frame, probe="bench")


def embedded(docs: list[dict[str, object]], path: Path) -> list[tuple[bool, str]]:
    """Load ``docs`` into a new embedded store at ``path`` (untimed) and time their summaries."""
    n = len(docs)
    with EmbeddedStore(path) as store:
        source = SOURCES["job"]
        store.index_aggregation(Aggregation("job", source.dimensions, source.totals, "day"))
        for start in range(0, n, 20_000):
            store.send("job", docs[start : start + 20_000])
        t, cpu = time.perf_counter(), time.process_time()
        done = summarize(store, FIRST, LAST, probe="bench", kinds=["job"], chunk_days=366)
        took, cpu = time.perf_counter() - t, time.process_time() - cpu
        print(
            f"embedded store: {n:,} job records -> {done.total:,} daily summaries in {took:.2f} s, {cpu:.2f} s of CPU "
            f"({n / took:,.0f} records/s)"
        )
        books = audit_cost(store, cpu)
    target = TARGET_S * n / 1_000_000
    return [(took <= target, f"summarizing {n:,} job records <= {target:.2f} s on SQLite ({took:.2f} s)"), books]


def audit_cost(store: EmbeddedStore, job_cpu: float) -> tuple[bool, str]:
    """The daily books (``audit`` summaries) of the same year, in CPU seconds against the job
    summaries' ``job_cpu``: they must not double summarize's cost. Then, for the record, with a
    snapshot of one node every 300 s all year, so that every day has books to make."""
    cpu = time.process_time()
    done = summarize(store, FIRST, LAST, probe="bench", kinds=["audit"], chunk_days=366)
    books_cpu = time.process_time() - cpu
    ratio = (job_cpu + books_cpu) / job_cpu
    print(f"  + the daily books of the same year ({done.total} summaries): {books_cpu:.2f} s of CPU, x{ratio:.2f}")
    t = START + np.arange(300.0, 365 * 86400 + 1, 300.0)
    slots = pd.DataFrame(
        {"pool": "bench", "name": "node1@bench", "site": "site0", "partition": "cpu", "total_cpus": 8.0,
         "unallocated_cpus": 8.0, "overhead_cu_hours": 0.0, "interval_s": 300.0, "observed_at": t}
    )  # fmt: skip
    for part in np.array_split(np.arange(len(slots)), 6):
        store.send("slot", table_docs("slot", slots.iloc[part], probe="bench"))
    cpu = time.process_time()
    done = summarize(store, FIRST, LAST, probe="bench", kinds=["audit"], chunk_days=366)
    watched_cpu = time.process_time() - cpu
    print(
        f"  + the daily books with {len(slots):,} snapshots, every day watched ({done.total:,} summaries): "
        f"{watched_cpu:.2f} s of CPU ({1000 * watched_cpu / 365:.0f} ms a day)"
    )
    return ratio < 2.0, f"summaries and the daily books of {FIRST.year} < 2 x the summaries alone (x{ratio:.2f})"


def main() -> int:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    n_osmem = int(sys.argv[2]) if len(sys.argv) > 2 else 50_000
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {0})
    docs = job_docs(n)
    checks = []
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "store.sqlite"
        checks += embedded(docs, path)
        with sqlite3.connect(path) as db:  # as a store made by an earlier version: no covering index
            for (name,) in db.execute(
                "SELECT name FROM sqlite_master WHERE type = 'index' AND name LIKE 'job_day_sums_%'"
            ):
                db.execute(f'DROP INDEX "{name}"')
        with EmbeddedStore(path) as store:
            cpu = time.process_time()
            store.index_aggregation(Aggregation("job", SOURCES["job"].dimensions, SOURCES["job"].totals, "day"))
            print(
                "  (making the covering index on a store already holding them, once: "
                f"{time.process_time() - cpu:.2f} s of CPU)"
            )
    if n_osmem:
        from collector.sinks.elasticsearch import ElasticsearchSink

        with osmem_server() as server, ElasticsearchSink(server.url, batch_size=1000, timeout_s=300) as sink:
            sink.install_templates()
            some = docs[:n_osmem]
            for start in range(0, len(some), 20_000):
                sink.send("job", some[start : start + 20_000])
            sink.requests = 0
            t = time.perf_counter()
            done = summarize(sink, FIRST, LAST, probe="bench", kinds=["job"], chunk_days=366)
            took = time.perf_counter() - t
            print(
                f"osmem-server:   {len(some):,} job records -> {done.total:,} daily summaries in {took:.2f} s, "
                f"{sink.requests} aggregation requests (and {-(-done.total // 1000)} bulk writes of the summaries)"
            )
    return verdict(checks)


if __name__ == "__main__":
    sys.exit(main())
