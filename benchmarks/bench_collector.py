"""Collector ingest: records/s and reply latency, 50 probes posting batches of 500 over loopback.

The collector (``fairacct collector serve``) runs pinned to one core (``taskset``) with its
embedded SQLite store; the probes are one asyncio process of ``--probes`` concurrent clients
pinned to another core, each with its own token, posting ``--batches`` batches of
``--batch`` records over one keep-alive connection, one after the other, as a probe's flusher does (gzip-compressed JSON
arrays, as :class:`collector.sinks.http.CollectorSink` sends them). The records are real slot
records of the demo pool (about 40 fields each), each with its own id. A reply is 202 only
once its records are committed to the collector's outbox (SQLite, ``synchronous=FULL``), so
every measured latency includes the durable commit.

The probes post on a schedule (``--rate``, records/s offered by all of them together, 55,000 by
default, a tenth over the target: each probe posts a batch every probes x batch / rate seconds, the probes' phases
spread evenly): a collector that keeps up answers every batch before the probe's next one
is due, and its records/s is the offered rate. ``--rate 0`` posts back to back (each probe
sends its next batch when the last reply comes): the most the collector can take, with
latencies that are then only queueing (50 probes x 500 records in flight / records/s).

Measured: records/s (records acknowledged / wall time from the first request to the last
reply) and the p50/p99 of the request latency seen by the probes, with the slowest requests
named (when sent, which batch; ``--latencies FILE`` writes them all). Each probe's first
``--warmup`` batch (1 by default) is posted on the same schedule and not timed: it finds the
collector just started (its caches empty, its memory and its outbox file not grown yet), which
is not what a collector serving probes meets. After the run, every record must be in the store
or still in the outbox, or the run fails; the collector's peak RSS is printed.

What the target measures is ingest: records durable in the collector's outbox before the
reply. By default the flusher therefore waits out the run (``--flush-every 600``), as it
would while the store is down; ``--flush-every 1`` runs it as in production, on the same
core. It costs about as much per record as ingest does, so one core cannot sustain both at
50,000/s: the flusher runs at a lower priority (nice +10) and hands its deletes to the outbox's
writer thread, so that the replies keep their pace: the flusher takes what is left of the
core, the outbox holds the rest (the run prints how many records reached the store).

Targets (issue 14): >= 50,000 records/s with p99 < 100 ms.

``--gratia``: the same with real Gratia probes' requests instead: ``POST /gratia-servlets/rmi``,
form-encoded as gratia-probe's ``encodeData`` builds it (``command=multiupdate``, ``arg1`` an
envelope of ``--batch`` JobUsageRecords, ``from``, ``bundlesize``, not compressed), each sender
named in the collector's ``gratia_senders``, a reply counted only when it is ``200 OK``. The
records are GRACC's six conformance records (``../shared/fixtures/gracc``) made into distinct
jobs (benchmarks/bench_gratia.py), ``--batches`` 8 by default (400 timed requests: the p99 is
the fourth slowest, not the second as of 200) and 5,500 records/s offered (a tenth over the
target). Target: >= 5,000 Gratia records/s with p99 < 100 ms.

Run: ``python benchmarks/bench_collector.py [--gratia] [--probes 50] [--batch 500] [--batches 20] [--warmup 1]
[--core 0] [--latencies CSV]``.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import os
import re
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._verdict import verdict
from benchmarks._worker import peak_rss_mb
from benchmarks.bench_gratia import GRACC, distinct_records, envelope
from collector.records import table_docs
from probes.config import load_config
from probes.pipeline.overhead import overhead_report
from probes.sources.status import read_status

TARGET_RATE = 50_000
TARGET_GRATIA_RATE = 5_000
TARGET_P99_S = 0.100
_KEEP_ALIVE_S = 4.0  # uvicorn closes a connection idle for 5 s
RECORDS_PATH, GRATIA_PATH = "/v1/records", "/gratia-servlets/rmi"
GRACC_SITES = ["fermilab", "TAMU_BRAZOS_CE", "CHTC", "UCSDT2-D"]  # the SiteNames of its records
_PROBE_NAME = re.compile(rb"(<(?:\w+:)?ProbeName\b[^>]*>)[^<]*<")


def demo_docs() -> list[dict[str, Any]]:
    config = load_config(ROOT / "config/demo.toml")
    snapshot, _ = read_status(config.sources.status_files, config.slot_reading())
    return table_docs("slot", overhead_report(snapshot, config).slots, probe="x")


def bodies(probe: str, template: list[dict[str, Any]], batches: int, batch: int) -> list[bytes]:
    out = []
    for b in range(batches):
        docs = [dict(template[i % len(template)], id=f"{probe}-{b}-{i}", probe=probe) for i in range(batch)]
        out.append(gzip.compress(orjson.dumps(docs), compresslevel=1))
    return out


def gratia_bodies(probes: list[str], batches: int, batch: int) -> dict[str, list[bytes]]:
    """Each sender's forms, as gratia-probe posts them; every record a distinct job, under its
    sender's ProbeName (the collector takes a record under no other)."""
    records = iter(distinct_records(len(probes) * batches * batch))
    out: dict[str, list[bytes]] = {}
    for probe in probes:
        out[probe] = []
        named = rb"\g<1>" + probe.encode().replace(b"\\", b"\\\\") + b"<"  # a template: its backslashes escaped
        for _ in range(batches):
            xml = envelope([_PROBE_NAME.sub(named, next(records)) for _ in range(batch)])
            fields = [("command", "multiupdate"), ("arg1", xml.decode()), ("from", probe), ("xmlfiles", 0),
                      ("tarfiles", 0), ("maxpendingfiles", 100000), ("backlog", 0), ("bundlesize", batch)]  # fmt: skip
            out[probe].append(urlencode(fields).encode())
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def probe_client(
    port: int,
    token: str,
    payloads: list[bytes],
    latencies: list[tuple[float, float, int]],
    batch: int,
    every_s: float,
    phase: float,
    gratia: bool = False,
    warmup: int = 0,
) -> int:
    """Post the batches over one keep-alive connection, one every ``every_s`` seconds from
    ``phase`` (0: back to back); a batch whose time has passed goes at once, after the previous
    reply. HTTP/1.1 is written by hand: a general client (httpx) costs the probes' core ~5 ms
    a request, enough to make the probes, not the collector, what is measured."""
    acked = 0
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    if gratia:  # ``token``: the sender's name, in the form already
        head = (
            f"POST {GRATIA_PATH} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            "Content-Type: application/x-www-form-urlencoded\r\n"
        )
        expected = (b"200", b"OK")
    else:
        head = (
            f"POST {RECORDS_PATH} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {token}\r\n"
            "Content-Type: application/json\r\nContent-Encoding: gzip\r\n"
        )
        expected = (b"202", None)
    head_bytes = head.encode()
    try:
        begin = time.perf_counter() + phase
        for n, body in enumerate(payloads):
            wait = begin + n * every_s - time.perf_counter()
            if every_s and wait > 0:
                await asyncio.sleep(wait)
            if wait > _KEEP_ALIVE_S:  # the server has closed the idle connection: a new one, as a probe would
                writer.close()
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
            start = time.perf_counter()
            writer.write(head_bytes + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
            status_line = await reader.readline()
            length = 0
            while (line := await reader.readline()) not in (b"\r\n", b""):
                name, _, value = line.decode().partition(":")
                if name.lower() == "content-length":
                    length = int(value)
            reply = await reader.readexactly(length)
            if n >= warmup:
                latencies.append((time.perf_counter() - start, start, n - warmup))
            if status_line.split()[1] != expected[0] or expected[1] not in (None, reply):
                raise SystemExit(f"{status_line.decode().strip()}: {reply[:300]!r}")
            acked += batch
    finally:
        writer.close()
    return acked


async def drive(
    port: int,
    tokens: dict[str, str],
    payloads: dict[str, list[bytes]],
    batch: int,
    rate: float,
    gratia: bool = False,
    warmup: int = 0,
) -> tuple[int, float, list[tuple[float, float, int]]]:
    """All probes at once; ``rate``: records/s offered by all of them together (0: as fast as
    replies come); each probe's first ``warmup`` batches are not timed."""
    latencies: list[tuple[float, float, int]] = []  # (seconds, when sent, the probe's batch number)
    every_s = len(tokens) * batch / rate if rate else 0.0
    start = time.perf_counter()
    counts = await asyncio.gather(
        *(
            probe_client(
                port, tokens[p], payloads[p], latencies, batch, every_s, every_s * i / len(tokens), gratia, warmup
            )
            for i, p in enumerate(tokens)
        )
    )
    return sum(counts), time.perf_counter() - start, [(s, at - start, n) for s, at, n in latencies]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--probes", type=int, default=50)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument(
        "--gratia", action="store_true", help="Gratia probes' envelopes to /gratia-servlets/rmi instead"
    )
    parser.add_argument("--batches", type=int, default=None, help="batches per probe, timed (default 20; --gratia: 8)")
    parser.add_argument("--warmup", type=int, default=1, help="batches per probe first posted and not timed")
    parser.add_argument("--core", type=int, default=0, help="the core the collector is pinned to")
    parser.add_argument("--client-core", type=int, default=1, help="the core the probes are pinned to")
    parser.add_argument(
        "--flush-every", type=float, default=600.0,
        help="the collector's flush_every_s (600: the flusher waits out the run; 1: flushing all along)",
    )  # fmt: skip
    parser.add_argument("--latencies", metavar="CSV", help="write each request's latency, send time and batch number")
    parser.add_argument("--json", metavar="PATH", help="also write the figures as JSON (for benchmarks/run.py)")
    parser.add_argument("--profile", metavar="SVG", help="record the collector with py-spy into this flame graph")
    parser.add_argument(
        "--rate", type=float, default=None,
        help="records/s offered by all probes together, each posting on a schedule (0: back to back, the most the "
        "collector takes; default a tenth over the target)",
    )  # fmt: skip
    args = parser.parse_args()
    target = TARGET_GRATIA_RATE if args.gratia else TARGET_RATE
    args.rate = 1.1 * target if args.rate is None else args.rate
    args.batches = (8 if args.gratia else 20) if args.batches is None else args.batches
    if args.gratia and not GRACC.is_dir():
        print(
            f"cannot measure: --gratia needs GRACC's records in {GRACC} (../shared beside the project)", file=sys.stderr
        )
        return 2

    work = Path(tempfile.mkdtemp(prefix="bench-collector-"))
    try:
        tokens = {f"probe{i:03d}": f"token-{i:03d}-{os.urandom(8).hex()}" for i in range(args.probes)}
        if args.gratia:  # Gratia senders are named, not tokened
            tokens = {f"condor:ce{i:03d}.example.org": f"condor:ce{i:03d}.example.org" for i in range(args.probes)}
        (work / "tokens").mkdir()
        for name, token in tokens.items():
            (work / "tokens" / name).write_text(token)
            os.chmod(work / "tokens" / name, 0o600)
        template = [] if args.gratia else demo_docs()
        if args.gratia:
            payloads = gratia_bodies(list(tokens), args.warmup + args.batches, args.batch)
        else:
            payloads = {p: bodies(p, template, args.warmup + args.batches, args.batch) for p in tokens}
        port = free_port()
        (work / "collector.toml").write_text(
            f"[collector]\nport = {port}\n"
            f"flush_every_s = {args.flush_every}\nmax_outbox_depth = 100000000\n"
            f"gratia_senders = [{', '.join(_sender(p) for p in tokens) if args.gratia else ''}]\n"
            f"probes = [{'' if args.gratia else ', '.join(_reporter(p, template) for p in tokens)}]\n"
            '[collector.store]\nurl = "sqlite:///store.sqlite"\n'
        )
        fairacct = Path(sys.executable).parent / "fairacct"
        taskset = [shutil.which("taskset") or "taskset", "-c", str(args.core)] if shutil.which("taskset") else []
        with open(work / "collector.log", "w") as log:
            server = subprocess.Popen(
                [*taskset, str(fairacct), "collector", "serve", "--config", str(work / "collector.toml")],
                stdout=subprocess.DEVNULL, stderr=log,
            )  # fmt: skip
        try:
            url = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + 60
            while True:
                try:
                    if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline or server.poll() is not None:
                    print((work / "collector.log").read_text()[-2000:])
                    return 2
                time.sleep(0.2)
            if shutil.which("taskset"):
                os.sched_setaffinity(0, {args.client_core})
            spy = None
            if args.profile:
                fmt = "raw" if args.profile.endswith(".txt") else "flamegraph"
                spy = subprocess.Popen(
                    [
                        "py-spy",
                        "record",
                        "-p",
                        str(server.pid),
                        "-o",
                        args.profile,
                        "-f",
                        fmt,
                        "--nonblocking",
                        "--idle",
                        "--threads",
                    ]
                )
            cpu0, client0, threads0 = _cpu_seconds(server.pid), time.process_time(), _thread_cpu_seconds(server.pid)
            acked, wall, latencies = asyncio.run(
                drive(port, tokens, payloads, args.batch, args.rate, args.gratia, args.warmup)
            )
            cpu, client_cpu = _cpu_seconds(server.pid) - cpu0, time.process_time() - client0
            threads = _thread_cpu_seconds(server.pid)
            threads = {name: seconds - threads0.get(name, 0.0) for name, seconds in threads.items()}
            stats = httpx.get(f"{url}/metrics").text
            peak_mb = peak_rss_mb(server.pid)
            if spy is not None:
                spy.send_signal(signal.SIGINT)
                spy.wait(60)
        finally:
            server.send_signal(signal.SIGTERM)
            server.wait(60)
        stored = count_rows(
            work / "collector" / "store.sqlite", f"SELECT count(*) FROM {'gratia' if args.gratia else 'slot'}"
        )
        waiting = count_rows(
            work / "collector" / "outbox.sqlite",
            "SELECT (SELECT count(*) FROM item) + (SELECT coalesce(sum(count), 0) FROM parcel)",
        )
        commits = next(
            (
                line.split()[-1]
                for line in stats.splitlines()
                if line.startswith("fairacct_collector_group_commits_total")
            ),
            "?",
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)

    if args.latencies:
        with open(args.latencies, "w") as out:
            out.write("seconds,sent_at_s,batch\n")
            out.writelines(f"{seconds:.6f},{at:.6f},{n}\n" for seconds, at, n in sorted(latencies, key=lambda t: t[1]))
    slowest = sorted(latencies, reverse=True)[:3]
    latencies = sorted(seconds for seconds, _, _ in latencies)
    p50 = latencies[len(latencies) // 2]
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
    rate = acked / wall
    offered = f"{args.rate:,.0f} records/s offered" if args.rate else "back to back"
    what = (
        f"Gratia senders {args.probes} ({GRATIA_PATH}), envelopes"
        if args.gratia
        else f"probes {args.probes} ({RECORDS_PATH}), batches"
    )
    print(
        f"{what} of {args.batch}, {offered}, {len(latencies)} requests timed after {args.warmup * args.probes} not, "
        f"{acked} records acknowledged ({'200 OK' if args.gratia else '202'})"
    )
    print(
        f"wall {wall:.2f} s, collector CPU {cpu:.2f} s ({cpu / wall:.0%} of its core), "
        f"{cpu / acked * 1e6:.1f} us CPU/record, "
        f"peak RSS {peak_mb:.0f} MB; probes' CPU {client_cpu:.2f} s"
    )
    print(
        "collector CPU by thread: "
        + ", ".join(
            f"{name} {seconds / acked * 1e6:.1f} us/record"
            for name, seconds in sorted(threads.items(), key=lambda t: -t[1])
            if seconds > 0
        )
    )
    print(
        f"records/s {rate:,.0f}; latency p50 {p50 * 1e3:.1f} ms, p99 {p99 * 1e3:.1f} ms, "
        f"max {latencies[-1] * 1e3:.1f} ms"
    )
    print("slowest: " + ", ".join(f"{s * 1e3:.0f} ms (sent at {at:.2f} s, batch {n})" for s, at, n in slowest))
    print(
        f"group commits {commits} (of {len(latencies) + args.warmup * args.probes} requests); "
        f"after the run: {stored} in the store, {waiting} in the outbox"
    )
    if args.json:
        figures = {
            "records_per_s": rate,
            "p50_s": p50,
            "p99_s": p99,
            "cpu_s": cpu,
            "acked": acked,
            "stored": stored,
            "waiting": waiting,
            "cpu_us_per_record": cpu / acked * 1e6,
            "peak_mb": peak_mb,
        }
        Path(args.json).write_text(orjson.dumps(figures).decode())  # fmt: skip
    return verdict(
        [
            (
                stored + waiting >= acked,
                f"every acknowledged record is in the store or the outbox ({stored} + {waiting} >= {acked})",
            ),
            (rate >= target, f"records/s {rate:,.0f} >= {target:,}"),
            (p99 < TARGET_P99_S, f"p99 latency {p99 * 1e3:.1f} ms < {TARGET_P99_S * 1e3:.0f} ms"),
        ]
    )


def _cpu_seconds(pid: int) -> float:
    return _stat_cpu_seconds(Path(f"/proc/{pid}/stat"))


def _thread_cpu_seconds(pid: int) -> dict[str, float]:
    """CPU seconds of each of the process's threads: the main one (the event loop) and the others by id."""
    out: dict[str, float] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            out["main" if task.name == str(pid) else f"thread {task.name}"] = _stat_cpu_seconds(task / "stat")
        except OSError:  # the thread ended meanwhile
            continue
    return out


def _stat_cpu_seconds(stat: Path) -> float:
    """User + system CPU seconds in a /proc ``stat`` file."""
    fields = stat.read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def count_rows(path: Path, sql: str) -> int:
    try:
        with sqlite3.connect(path) as db:
            return int(db.execute(sql).fetchone()[0])
    except sqlite3.Error:
        return 0


def _reporter(probe: str, docs: list[dict[str, Any]]) -> str:
    """A probe of the benchmark's collector (``collector.probes``), listed for the demo records'
    sites and pools: a probe listed for none is refused records that name one (403)."""
    sites = sorted({str(d["site"]) for d in docs if d.get("site")})
    pools = sorted({str(d["pool"]) for d in docs if d.get("pool")})
    quoted = {k: orjson.dumps(v).decode() for k, v in (("probe", probe), ("sites", sites), ("pools", pools))}
    return "{" + ", ".join(f"{k} = {v}" for k, v in quoted.items()) + "}"


def _sender(probe: str) -> str:
    """A Gratia sender of the benchmark's collector: ``probe``, sending from loopback, for the
    sites of GRACC's conformance records."""
    return f'{{probe = "{probe}", networks = ["127.0.0.1/32"], sites = {orjson.dumps(GRACC_SITES).decode()}}}'


if __name__ == "__main__":
    sys.exit(main())
