"""Elasticsearch / OpenSearch sink throughput against osmem-server: documents per second.

Documents are real slot records of the demo pool (with their overhead columns), repeated over
successive snapshots so each has its own id and time, as a probe would write them. For each
client flavour (``elasticsearch`` over ``http://``, ``opensearch-py`` over
``opensearch+http://``) and each batch size, a fresh in-memory cluster with the templates
installed takes N documents through :meth:`ElasticsearchSink.send`, one call per batch; the
time covers serializing, the bulk requests, indexing and reading every item's result. Every
document must be acknowledged and counted, or the run fails.

The wall-clock rate is osmem-server's: an in-memory stand-in whose indexing, not the sink,
takes nearly all of the time, so it predicts neither a real cluster's rate nor the sink's
limit. The sink's own cost is the last column, this process's CPU time per document
(serializing, the client, reading every item's result): 10^6 over it is the most documents/s
the sink could hand to a cluster that indexed for free.

Run: ``python benchmarks/bench_sinks.py [--docs N] [--batch 500 1000 2000 5000]``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._osmem import osmem_server
from collector.records import table_docs
from collector.sinks.elasticsearch import ElasticsearchSink
from probes.config import load_config
from probes.pipeline.overhead import overhead_report
from probes.sources.status import read_status

FLAVOURS = {"elasticsearch": "http", "opensearch-py": "opensearch+http"}


def slot_documents(n: int) -> list[dict[str, Any]]:
    """``n`` slot records: the demo pool's slots, one snapshot every 300 s."""
    config = load_config(ROOT / "config/demo.toml")
    snapshot, _ = read_status(config.sources.status_files, config.slot_reading())
    slots = overhead_report(snapshot, config).slots
    snapshots = -(-n // len(slots))
    frames = [slots.assign(observed_at=slots["observed_at"] + 300 * k) for k in range(snapshots)]
    return table_docs("slot", pd.concat(frames, ignore_index=True), probe="bench")[:n]


def measure(url: str, docs: list[dict[str, Any]], batch: int) -> tuple[float, float]:
    """Wall-clock and this process's CPU seconds to send ``docs`` in batches of ``batch``;
    checks that every one was stored."""
    with ElasticsearchSink(url, batch_size=batch, max_retries=0) as sink:
        sink.install_templates()
        start, cpu = time.perf_counter(), time.process_time()
        acked = 0
        for first in range(0, len(docs), batch):
            result = sink.send("slot", docs[first : first + batch])
            if result.retry or result.rejected:
                raise SystemExit(f"{url}: not stored: {dict(list({**result.retry, **result.rejected}.items())[:3])}")
            acked += len(result.acked)
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
        stored = sink.count("slot")
    if acked != len(docs) or stored != len(docs):
        raise SystemExit(f"{url}: {len(docs)} documents sent, {acked} acknowledged, {stored} stored")
    return seconds, cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=10_000, help="documents per measurement (default 10,000)")
    parser.add_argument("--batch", type=int, nargs="+", default=[500, 1000, 2000, 5000], help="batch sizes")
    parser.add_argument("--repeat", type=int, default=1, help="runs per measurement; the fastest counts")
    args = parser.parse_args()

    docs = slot_documents(args.docs)
    sample = docs[:1000]
    size = sum(len(json.dumps(d, separators=(",", ":"))) for d in sample) / len(sample)  # as the sink sends them
    print(f"{len(docs):,} slot documents of about {size:.0f} bytes of JSON, best of {args.repeat}")
    print(f"{'client':<15}{'batch':>7}{'seconds':>10}{'documents/s':>14}{'MB/s':>8}{'client CPU us/doc':>20}")
    with osmem_server() as server:
        for flavour, scheme in FLAVOURS.items():
            for batch in args.batch:
                best, cpu = float("inf"), float("inf")
                for _ in range(args.repeat):
                    with server.clone() as clone:  # an empty cluster each time
                        wall, used = measure(clone.url.replace("http", scheme, 1), docs, batch)
                    best, cpu = min(best, wall), min(cpu, used)
                rate = len(docs) / best
                per_doc = 1e6 * cpu / len(docs)
                print(f"{flavour:<15}{batch:>7}{best:>10.2f}{rate:>14,.0f}{rate * size / 1e6:>8.1f}{per_doc:>20.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
