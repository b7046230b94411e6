"""The collector under a sustained load: end to end into its store, with the outbox's depth over time.

``fairacct collector serve`` runs as in production (``flush_every_s = 1``: the flusher sends
the outbox to the store all along) pinned to one core (``taskset``), with the embedded SQLite
store (``--store sqlite``, written by the flusher in the collector's own process, on that
core) or Elasticsearch (``--store elasticsearch``: osmem-server, an OpenSearch-compatible
server on loopback, on the other core with the probes). ``--probes`` probes (one asyncio
process on the other core) post gzip-compressed batches of ``--batch`` demo slot records on a
schedule, ``--rate`` records/s offered by all of them together, for ``--minutes`` minutes; a
probe that gets 429 or 503 keeps its batch, waits the reply's ``Retry-After`` and sends it
again, as :class:`collector.sinks.http.CollectorSink` does (on its next flush).

Record ids cycle over ``--distinct`` records per store (each probe its share), so that ten
minutes stay within the disk (a store of ~1.3 KB a record) or osmem-server's memory: past
that many, a record sent replaces its earlier copy in the store, as a re-sent record does.

Every ``--sample-every`` seconds the run prints: records acknowledged (202) and stored (the
collector's ``fairacct_collector_records_stored_total``) so far and in the last interval, the
outbox's depth (``/healthz``), the outbox file's and its WAL's bytes, and the collector's CPU.
At the end: the end-to-end rate (records stored / wall time), the ingest rate (records
acknowledged / wall time), the CPU per record of the ingest path (the event loop, the Gratia
conversion thread and the outbox's writer thread, by records acknowledged) and of the flush
path (the flusher's thread, with the embedded store's SQLite, by records stored), each thread
told apart in ``/proc/PID/task`` by name and by the flusher's nice value.

Targets (issue 24, item 9): ingest and store within 2x of each other on one core (what one
core takes end to end, 1 / (ingest + flush CPU per record), at least half of what it takes
into the outbox alone, 1 / ingest CPU per record); the outbox's depth and its files bounded
(the last third of the run holds no more than the first two thirds' peak and the collector's
``backpressure_depth`` plus what one round of requests in flight adds); every record
acknowledged in the store or the outbox at the end.

Run: ``python benchmarks/bench_sustained.py [--store sqlite|elasticsearch] [--minutes 10]
[--rate 55000] [--probes 50] [--batch 500] [--distinct N] [--sample-every 10] [--setting KEY=VALUE ...]``.
``--setting`` adds a key to the collector's ``[collector]`` section (e.g. ``backpressure_depth=200000``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gzip
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._verdict import verdict
from benchmarks._worker import peak_rss_mb
from benchmarks.bench_collector import count_rows, demo_docs, free_port

RECORDS_PATH = "/v1/records"
_ID_MARK = b"@@@@@@@@@@"  # ten characters in each record's id, replaced by the record's number in a body
_KEEP_ALIVE_S = 4.0  # uvicorn closes a connection idle for 5 s
TARGET_RATIO = 2.0


@dataclass
class Counts:
    """What the probes saw, updated as replies come."""

    acked: int = 0
    refused: dict[int, int] = field(default_factory=dict)  # status -> requests answered 429/503
    latencies: list[float] = field(default_factory=list)


def template_body(probe: str, template: list[dict[str, Any]], batch: int) -> bytes:
    """A batch's JSON with each record's id ``probe-<mark>-i``: the mark is replaced by the
    batch's number (one ``bytes.replace``, not a JSON encoding per batch)."""
    docs = [dict(template[i % len(template)], id=f"{probe}-{_ID_MARK.decode()}-{i}", probe=probe) for i in range(batch)]
    return orjson.dumps(docs)


async def probe_client(
    port: int, token: str, body: bytes, counts: Counts, batch: int, every_s: float, phase: float,
    batches: int, end: float,
) -> None:  # fmt: skip
    """Post batch after batch, one every ``every_s`` seconds from ``phase``, until ``end``
    (perf_counter); a refused batch is sent again after its ``Retry-After``. Hand-written
    HTTP/1.1 over one keep-alive connection (see bench_collector.py: a general client would
    make the probes what is measured)."""
    head = (
        f"POST {RECORDS_PATH} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {token}\r\n"
        "Content-Type: application/json\r\nContent-Encoding: gzip\r\n"
    ).encode()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    n, due = 0, time.perf_counter() + phase
    payload: bytes | None = None
    try:
        while True:
            wait = due - time.perf_counter()
            if wait > 0:
                await asyncio.sleep(wait)
            if time.perf_counter() >= end:
                return
            if wait > _KEEP_ALIVE_S:  # the server has closed the idle connection: a new one, as a probe would
                writer.close()
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
            if payload is None:
                payload = gzip.compress(body.replace(_ID_MARK, b"%010d" % (n % batches)), compresslevel=1)
            start = time.perf_counter()
            writer.write(head + b"Content-Length: %d\r\n\r\n" % len(payload) + payload)
            status_line = await reader.readline()
            length, retry_after = 0, 1.0
            while (line := await reader.readline()) not in (b"\r\n", b""):
                name, _, value = line.decode().partition(":")
                if name.lower() == "content-length":
                    length = int(value)
                elif name.lower() == "retry-after":
                    retry_after = float(value)
            reply = await reader.readexactly(length)
            status = int(status_line.split()[1])
            if status == 202:
                counts.acked += batch
                counts.latencies.append(time.perf_counter() - start)
                payload, n, due = None, n + 1, max(due + every_s, time.perf_counter() - every_s)
            elif status in (429, 503):  # nothing stored: the same batch, later
                counts.refused[status] = counts.refused.get(status, 0) + 1
                due = time.perf_counter() + retry_after
            else:
                raise SystemExit(f"{status_line.decode().strip()}: {reply[:300]!r}")
    finally:
        writer.close()


@dataclass
class Sample:
    t: float
    acked: int
    stored: int
    depth: int
    outbox_bytes: int
    wal_bytes: int
    cpu_s: float
    drain: bool = False  # taken after the probes stopped, while the outbox drains


def sample(url: str, pid: int, state: Path, t: float, counts: Counts) -> Sample:
    health = httpx.get(f"{url}/healthz", timeout=30).json()
    metrics = httpx.get(f"{url}/metrics", timeout=30).text
    stored = sum(
        int(float(line.rsplit(" ", 1)[1]))
        for line in metrics.splitlines()
        if line.startswith("fairacct_collector_records_stored_total{")
    )
    return Sample(
        t, counts.acked, stored, int(health["outbox"]["depth"]), _size(state / "outbox.sqlite"),
        _size(state / "outbox.sqlite-wal"), sum(threads_cpu(pid).values()),
    )  # fmt: skip


async def run_load(
    port: int, tokens: dict[str, str], bodies: dict[str, bytes], args: argparse.Namespace, pid: int, state: Path
) -> tuple[Counts, list[Sample]]:
    counts = Counts()
    url = f"http://127.0.0.1:{port}"
    every_s = len(tokens) * args.batch / args.rate
    start = time.perf_counter()
    end = start + args.minutes * 60
    batches = max(1, args.distinct // (len(tokens) * args.batch))
    clients = [
        asyncio.create_task(
            probe_client(
                port, tokens[p], bodies[p], counts, args.batch, every_s, every_s * i / len(tokens), batches, end
            )
        )
        for i, p in enumerate(tokens)
    ]
    samples = [await asyncio.to_thread(sample, url, pid, state, 0.0, counts)]
    print(f"{'t s':>6} {'acked':>11} {'stored':>11} {'in/s':>8} {'stored/s':>8} {'depth':>9} "
          f"{'outbox MB':>9} {'WAL MB':>7} {'CPU':>5}")  # fmt: skip
    while time.perf_counter() < end:
        await asyncio.sleep(min(args.sample_every, max(0.0, end - time.perf_counter())))
        s = await asyncio.to_thread(sample, url, pid, state, time.perf_counter() - start, counts)
        last = samples[-1]
        dt = s.t - last.t
        print(
            f"{s.t:6.0f} {s.acked:11,} {s.stored:11,} {(s.acked - last.acked) / dt:8,.0f} "
            f"{(s.stored - last.stored) / dt:8,.0f} {s.depth:9,} {s.outbox_bytes / 1e6:9.1f} "
            f"{s.wal_bytes / 1e6:7.1f} {(s.cpu_s - last.cpu_s) / dt:5.0%}",
            flush=True,
        )
        samples.append(s)
    await asyncio.gather(*clients)
    drain_end = time.perf_counter() + args.drain_s  # the probes stop: the outbox drains, and every record is counted
    while samples[-1].depth and time.perf_counter() < drain_end:
        await asyncio.sleep(1.0)
        samples.append(await asyncio.to_thread(sample, url, pid, state, time.perf_counter() - start, counts))
        samples[-1].drain = True
    if samples[-1].drain:
        s = samples[-1]
        print(f"after the load, {s.t - args.minutes * 60:.0f} s to drain: {s.stored:,} stored, depth {s.depth:,}")
    return counts, samples


def threads_cpu(pid: int) -> dict[str, float]:
    """CPU seconds of each thread of the collector, by role: ``flusher`` (the thread at nice
    +10, which the flusher sets on itself), ``summarizer``, ``ingest`` (the others: the event
    loop, the conversion thread, the outbox's writer)."""
    out: dict[str, float] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # the thread ended meanwhile
            continue
        cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        role = "flusher" if int(fields[16]) > 0 else "ingest"
        out[role] = out.get(role, 0.0) + cpu
    return out


@contextlib.contextmanager
def store_server(kind: str, core: int | None) -> Iterator[tuple[str, int | None]]:
    """The store's URL for the collector (and the store's own process, if any)."""
    if kind == "sqlite":
        yield "sqlite:///store.sqlite", None
        return
    from benchmarks._osmem import osmem_server
    from collector.sinks.elasticsearch import ElasticsearchSink

    with osmem_server() as server:
        if core is not None and hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(server.pid, {core})
        with ElasticsearchSink.from_url(server.url) as sink:
            sink.install_templates()
        yield server.url, server.pid


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--store", choices=("sqlite", "elasticsearch"), default="sqlite")
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--rate", type=float, default=55_000, help="records/s offered by all probes together")
    parser.add_argument("--probes", type=int, default=50)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument(
        "--distinct", type=int, default=None, help="distinct ids (default: sqlite 2,000,000, elasticsearch 300,000)"
    )
    parser.add_argument("--sample-every", type=float, default=10.0)
    parser.add_argument("--drain-s", type=float, default=300.0, help="seconds the outbox may take to drain")
    parser.add_argument("--core", type=int, default=0, help="the core the collector is pinned to")
    parser.add_argument("--client-core", type=int, default=1, help="the core of the probes (and osmem-server)")
    parser.add_argument("--setting", action="append", default=[], metavar="KEY=VALUE",
                        help="a [collector] key for the collector's configuration (TOML value)")  # fmt: skip
    args = parser.parse_args()
    args.distinct = args.distinct or (2_000_000 if args.store == "sqlite" else 300_000)
    pin = shutil.which("taskset") is not None and hasattr(os, "sched_setaffinity")

    work = Path(tempfile.mkdtemp(prefix="bench-sustained-"))
    try:
        tokens = {f"probe{i:03d}": f"token-{i:03d}-{os.urandom(8).hex()}" for i in range(args.probes)}
        (work / "tokens").mkdir()
        for name, token in tokens.items():
            (work / "tokens" / name).write_text(token)
            os.chmod(work / "tokens" / name, 0o600)
        template = demo_docs()
        bodies = {p: template_body(p, template, args.batch) for p in tokens}
        port = free_port()
        with store_server(args.store, args.client_core if pin else None) as (store_url, _):
            settings = "".join(f"{s}\n" for s in args.setting)
            (work / "collector.toml").write_text(
                f'[collector]\nport = {port}\nflush_every_s = 1\n{settings}[collector.store]\nurl = "{store_url}"\n'
            )
            fairacct = Path(sys.executable).parent / "fairacct"
            taskset = ["taskset", "-c", str(args.core)] if pin else []
            with open(work / "collector.log", "w") as log:
                server = subprocess.Popen(
                    [*taskset, str(fairacct), "collector", "serve", "--config", str(work / "collector.toml")],
                    stdout=subprocess.DEVNULL, stderr=log, cwd=work,
                )  # fmt: skip
            try:
                url = f"http://127.0.0.1:{port}"
                deadline = time.monotonic() + 60
                while True:
                    with contextlib.suppress(httpx.HTTPError):
                        if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                            break
                    if time.monotonic() > deadline or server.poll() is not None:
                        print((work / "collector.log").read_text()[-2000:])
                        return 2
                    time.sleep(0.2)
                if pin:
                    os.sched_setaffinity(0, {args.client_core})
                cpu0 = threads_cpu(server.pid)
                print(
                    f"store {args.store}, {args.probes} probes posting batches of {args.batch}, "
                    f"{args.rate:,.0f} records/s offered for {args.minutes:g} min, ids cycling over {args.distinct:,}"
                    + (f", collector settings {', '.join(args.setting)}" if args.setting else "")
                )
                counts, samples = asyncio.run(run_load(port, tokens, bodies, args, server.pid, work / "collector"))
                cpu = {k: v - cpu0.get(k, 0.0) for k, v in threads_cpu(server.pid).items()}
                peak_mb = peak_rss_mb(server.pid)
            finally:
                server.send_signal(signal.SIGTERM)
                server.wait(120)
            waiting = count_rows(
                work / "collector" / "outbox.sqlite",
                "SELECT (SELECT count(*) FROM item) + (SELECT coalesce(sum(count), 0) FROM parcel)",
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)

    loaded = [s for s in samples if not s.drain]  # the load itself
    wall = loaded[-1].t
    last, final = loaded[-1], samples[-1]
    ingest_us = cpu.get("ingest", 0.0) / max(1, final.acked) * 1e6  # the drain's CPU included: all its records
    flush_us = cpu.get("flusher", 0.0) / max(1, final.stored) * 1e6
    ratio = (ingest_us + flush_us) / ingest_us if ingest_us else float("inf")
    third = [s for s in loaded if s.t <= wall * 2 / 3]
    tail = [s for s in loaded if s.t > wall * 2 / 3]
    bound = max(s.depth for s in third) * 1.1 + args.probes * args.batch
    lat = sorted(counts.latencies) or [0.0]
    print()
    print(
        f"wall {wall:.0f} s; acknowledged {last.acked:,} ({last.acked / wall:,.0f}/s), stored {last.stored:,} "
        f"({last.stored / wall:,.0f}/s end to end), refused and sent again: {counts.refused or 'none'}"
    )
    print(
        f"collector CPU {sum(cpu.values()):.1f} s ({sum(cpu.values()) / wall:.0%} of its core): ingest "
        f"{ingest_us:.1f} us a record acknowledged, flush {flush_us:.1f} us a record stored; one core: "
        f"{1e6 / ingest_us:,.0f} records/s into the outbox alone, {1e6 / (ingest_us + flush_us):,.0f}/s end to end "
        f"(ratio {ratio:.2f})"
    )
    print(
        f"outbox depth peak {max(s.depth for s in loaded):,} (last third {max(s.depth for s in tail):,}), "
        f"outbox file peak {max(s.outbox_bytes for s in samples) / 1e6:.0f} MB, "
        f"WAL peak {max(s.wal_bytes for s in samples) / 1e6:.0f} MB; reply p50 {lat[len(lat) // 2] * 1e3:.0f} ms, "
        f"p99 {lat[int(len(lat) * 0.99)] * 1e3:.0f} ms; peak RSS {peak_mb:.0f} MB; after the stop {waiting:,} waiting"
    )
    return verdict(
        [
            (
                final.stored + waiting >= final.acked,
                f"every acknowledged record stored or waiting ({final.stored:,} + {waiting:,} >= {final.acked:,})",
            ),
            (ratio <= TARGET_RATIO, f"one core end to end within {TARGET_RATIO:g}x of ingest alone ({ratio:.2f}x)"),
            (
                max(s.depth for s in tail) <= bound,
                f"outbox depth bounded: last third's peak {max(s.depth for s in tail):,} <= {bound:,.0f}",
            ),
        ]
    )


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
