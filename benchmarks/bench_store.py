"""Embedded store and outbox throughput: documents per second, on one core.

Target (issue 5): the embedded store takes at least 50,000 documents/s. Documents are real
slot records of the demo pool, copied with distinct ids, so their size and shape are those the
probe writes. Run: ``python benchmarks/bench_store.py [N]``.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from collector.outbox import Outbox  # noqa: E402
from collector.records import table_docs  # noqa: E402
from collector.sinks.sqlite import EmbeddedStore  # noqa: E402
from probes.config import load_config  # noqa: E402
from probes.pipeline.overhead import overhead_report  # noqa: E402
from probes.sources.status import read_status  # noqa: E402

TARGET = 50_000


def main() -> int:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200_000
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {0})
    config = load_config(ROOT / "config/demo.toml")
    snapshot, _ = read_status(config.sources.status_files, config.slot_reading())
    base = table_docs("slot", overhead_report(snapshot, config).slots, probe="bench")
    docs = [dict(base[i % len(base)], id=f"{i:032x}") for i in range(n)]
    size = sum(len(str(d)) for d in docs[:100]) / 100
    with tempfile.TemporaryDirectory() as tmp:
        with EmbeddedStore(Path(tmp) / "store.sqlite") as store:
            t = time.perf_counter()
            for start in range(0, n, 5000):
                store.send("slot", docs[start : start + 5000])
            store_rate = n / (time.perf_counter() - t)
            assert store.count("slot") == n
        with Outbox(Path(tmp) / "outbox.sqlite") as outbox, EmbeddedStore(Path(tmp) / "store2.sqlite") as store:
            t = time.perf_counter()
            outbox.commit({"slot": docs}, {})
            flushed = outbox.flush(store, batch_size=5000)
            outbox_rate = n / (time.perf_counter() - t)
            assert flushed.sent["slot"] == n and store.count("slot") == n
    print(f"{n:,} slot documents of about {size:.0f} bytes")
    print(f"embedded store:              {store_rate:10,.0f} documents/s")
    print(f"outbox commit + flush:       {outbox_rate:10,.0f} documents/s")
    ok = store_rate >= TARGET
    print(f"{'PASS' if ok else 'FAIL'}  embedded store >= {TARGET:,} documents/s")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
