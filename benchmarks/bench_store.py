"""Embedded store and outbox throughput: documents per second, on one core.

Targets (issue 12, item 12; issue 26): the embedded store takes at least 100,000 documents/s
(50,000 until issue 26), and the
outbox's commit + flush into it moves at least 25,000 documents/s. Documents are real slot
records of the demo pool, copied with distinct ids, so their size and shape are those the
probe writes. Run: ``python benchmarks/bench_store.py [N]``.

Both figures are documents per CPU-second of this process (user + system, pinned to one
core), which is what one core would do if it were ours alone: the machine this project is
measured on is shared, and the wall-clock rate (printed beside it) then says more about the
neighbours than about the code. Left out: the start and the imports, building the documents,
creating the tables (first use), and the time spent waiting for the disk (each commit is
synced, ``synchronous=FULL``: wall time, not CPU). One run, no best-of-N; the files are new,
in a temporary directory, and small enough to stay in the page cache. The ids are in order;
real ids are hashes (the collector stores a record under a SHA-256 of its sender and its id),
whose inserts land all over the store's id index, a page of it written for nearly every
record, which costs more as the store grows beyond SQLite's page cache: the store's rate with
the same documents under hashed ids is printed too, without a target.
"""

from __future__ import annotations

import gc
import hashlib
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._verdict import verdict
from collector.outbox import Outbox
from collector.records import table_docs
from collector.server.serve import GC_THRESHOLDS
from collector.sinks.sqlite import EmbeddedStore
from probes.config import load_config
from probes.pipeline.overhead import overhead_report
from probes.sources.status import read_status

TARGET_STORE = 100_000  # issue 26 (issue 12 asked 50,000)
TARGET_OUTBOX = 25_000
BATCH = 5000


def measure(n: int) -> dict[str, float]:
    """CPU and wall seconds of ``n`` demo slot documents into the store (ids in order, then
    hashed) and through an outbox into a store; ``size``: a document's bytes, about."""
    config = load_config(ROOT / "config/demo.toml")
    snapshot, _ = read_status(config.sources.status_files, config.slot_reading())
    base = table_docs("slot", overhead_report(snapshot, config).slots, probe="bench")
    docs = [dict(base[i % len(base)], id=f"{i:032x}") for i in range(n)]
    size = sum(len(str(d)) for d in docs[:100]) / 100
    # The garbage collector as the collector's process has it (collector/server/serve.py), with
    # the documents built here frozen out of it like the collector's start-up heap: the
    # benchmark's 200,000 documents held at once are its scaffolding, and each young collection
    # of the store's rows would otherwise count them again (a tenth of the store's CPU).
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)
    with tempfile.TemporaryDirectory() as tmp:
        with EmbeddedStore(Path(tmp) / "store.sqlite") as store:
            store.count("slot")  # creates the table
            wall, cpu = time.perf_counter(), time.process_time()
            for start in range(0, n, BATCH):
                store.send("slot", docs[start : start + BATCH])
            store_wall, store_cpu = time.perf_counter() - wall, time.process_time() - cpu
            assert store.count("slot") == n
        with EmbeddedStore(Path(tmp) / "hashed.sqlite") as store:
            store.count("slot")
            hashed = [dict(d, id=hashlib.sha256(d["id"].encode()).hexdigest()[:32]) for d in docs]
            wall, cpu = time.perf_counter(), time.process_time()
            for start in range(0, n, BATCH):
                store.send("slot", hashed[start : start + BATCH])
            hashed_wall, hashed_cpu = time.perf_counter() - wall, time.process_time() - cpu
            del hashed
        with Outbox(Path(tmp) / "outbox.sqlite") as outbox, EmbeddedStore(Path(tmp) / "store2.sqlite") as store:
            store.count("slot")
            wall, cpu = time.perf_counter(), time.process_time()
            outbox.commit({"slot": docs}, {})
            commit_cpu = time.process_time() - cpu
            flushed = outbox.flush(store, batch_size=BATCH)
            outbox_wall, outbox_cpu = time.perf_counter() - wall, time.process_time() - cpu
            assert flushed.sent["slot"] == n and store.count("slot") == n and outbox.status().depth == {}
    return {
        "size": size, "store_cpu": store_cpu, "store_wall": store_wall, "hashed_cpu": hashed_cpu,
        "hashed_wall": hashed_wall, "outbox_cpu": outbox_cpu, "outbox_wall": outbox_wall, "commit_cpu": commit_cpu,
    }  # fmt: skip


def main() -> int:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200_000
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {0})
    m = measure(n)
    size, store_cpu, store_wall, hashed_cpu, hashed_wall, outbox_cpu, outbox_wall, commit_cpu = (
        m[k] for k in ("size", "store_cpu", "store_wall", "hashed_cpu", "hashed_wall", "outbox_cpu", "outbox_wall",
                       "commit_cpu")
    )  # fmt: skip
    store_rate, outbox_rate = n / store_cpu, n / outbox_cpu
    print(f"{n:,} slot documents of about {size:.0f} bytes, batches of {BATCH:,}")
    print(
        f"embedded store:         {store_rate:10,.0f} documents/CPU-s  ({store_cpu / n * 1e6:5.1f} us CPU each; "
        f"wall {n / store_wall:,.0f}/s)"
    )
    print(
        f"  ids hashed, as stored: {n / hashed_cpu:10,.0f} documents/CPU-s  ({hashed_cpu / n * 1e6:5.1f} us CPU each; "
        f"wall {n / hashed_wall:,.0f}/s; no target)"
    )
    print(
        f"outbox commit + flush:  {outbox_rate:10,.0f} documents/CPU-s  ({outbox_cpu / n * 1e6:5.1f} us CPU each, "
        f"{commit_cpu / n * 1e6:.1f} of them the commit; wall {n / outbox_wall:,.0f}/s)"
    )
    return verdict(
        [
            (store_rate >= TARGET_STORE, f"embedded store {store_rate:,.0f} >= {TARGET_STORE:,} documents/CPU-s"),
            (
                outbox_rate >= TARGET_OUTBOX,
                f"outbox commit + flush {outbox_rate:,.0f} >= {TARGET_OUTBOX:,} documents/CPU-s",
            ),
        ]
    )


if __name__ == "__main__":
    sys.exit(main())
