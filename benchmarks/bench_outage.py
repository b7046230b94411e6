"""The collector's memory while its Elasticsearch store is down, and once it is back (issue 54, point 3).

``fairacct collector serve`` runs as in production with an Elasticsearch store: osmem-server
(an OpenSearch-compatible server in memory) behind ``tests/collector/fake_store.py``, a proxy
that, once the collector took a first batch, resets every connection for ``--down`` seconds
(``--mode status:503`` answers 503 instead), then forwards again for at most ``--back``
seconds. A probe posts ``--records`` records a request every ``--every`` seconds all along:
records of about 1 KB, or with ``--fields N`` N fields of 32,500 characters each (240: 7.8 MB,
the issue's largest), one request's records at most 8 MiB as the collector takes them.

Every 15 s the run prints the collector's RSS (``/proc/PID/status``), its peak so far as
sampled, the outbox's depth and /healthz's status; at the end, its peak over the whole run
(``VmHWM``). ``--tree DIR`` runs the collector of another tree
(``git archive REV collector probes mappings | tar -x -C DIR``), to compare a revision's figures.

Targets: flat during the outage (RSS at its end at most 32 MB over RSS a quarter of the way
in, once the flusher's working set is there); with records of several MB, a peak within
``--peak-mb`` (1,000) of the RSS before the outage; and every record posted stored once the
store is back.

The backlog is sent at osmem-server's pace (a few hundred records a second here), hence the
modest default load (100 records/s) and the long ``--back``.

Run: ``python benchmarks/bench_outage.py [--down 420] [--back 600] [--records 50] [--every 0.5]
[--fields 0] [--mode reset] [--tree DIR]``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._osmem import osmem_server
from benchmarks._verdict import verdict
from benchmarks.bench_collector import free_port
from tests.collector.conftest import fake_store

GROWTH_MB = 32.0
TOKEN = "bench-outage-token"


def rss_mb(pid: int, field: str = "VmRSS") -> float:
    """The process's resident memory now (``VmHWM``: its peak so far), MB."""
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) / 1024 for line in status if line.startswith(f"{field}:"))


def job(i: str, extra: dict[str, str]) -> dict[str, Any]:
    return {"id": f"p1-job-{i}", "kind": "job", "schema_version": 1, "probe": "p1", "timestamp": "2026-11-21T14:00:00Z",
            "end": 1795269600, "user": "alice", "cpus": 1.0, **extra}  # fmt: skip


def stored(url: str) -> int:
    from collector.sinks.elasticsearch import ElasticsearchSink

    with ElasticsearchSink(url) as store:
        return store.count("job")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--down", type=float, default=420.0, help="seconds the store is down")
    parser.add_argument("--back", type=float, default=600.0, help="seconds the backlog may take once it is back")
    parser.add_argument("--records", type=int, default=50, help="records a request")
    parser.add_argument("--every", type=float, default=0.5, help="seconds between requests")
    parser.add_argument("--fields", type=int, default=0, help="fields of 32,500 characters a record (0: 1 KB records)")
    parser.add_argument("--mode", default="reset", help="the store while down: reset, silent, status:503")
    parser.add_argument("--peak-mb", type=float, default=1000.0)
    parser.add_argument("--tree", type=Path, help="the tree whose collector runs (another revision's)")
    args = parser.parse_args()
    extra = {"pad": "x" * 900} if not args.fields else {f"f{k}": chr(97 + k % 26) * 32_500 for k in range(args.fields)}
    env = {**os.environ, **({"PYTHONPATH": str(args.tree.resolve())} if args.tree else {})}
    work = Path(tempfile.mkdtemp(prefix="bench-outage-"))
    sent = 0
    try:
        (work / "tokens").mkdir()
        (work / "tokens" / "p1").write_text(TOKEN)
        os.chmod(work / "tokens" / "p1", 0o600)
        with osmem_server() as server, fake_store("proxy", upstream=server.url) as proxy:
            from collector.sinks.elasticsearch import ElasticsearchSink

            with ElasticsearchSink(server.url) as sink:
                sink.install_templates()
            port = free_port()
            (work / "collector.toml").write_text(
                f'[collector]\nport = {port}\nflush_every_s = 1\n[collector.store]\nurl = "{proxy}"\n'
            )
            with open(work / "collector.log", "w") as log:
                collector = subprocess.Popen(
                    [str(Path(sys.executable).parent / "fairacct"), "collector", "serve", "--config",
                     str(work / "collector.toml")], stdout=subprocess.DEVNULL, stderr=log, cwd=work, env=env,
                )  # fmt: skip
            url = f"http://127.0.0.1:{port}"
            try:
                deadline = time.monotonic() + 60
                while True:
                    with contextlib.suppress(httpx.HTTPError):
                        if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                            break
                    if time.monotonic() > deadline or collector.poll() is not None:
                        print((work / "collector.log").read_text()[-2000:])
                        return 2
                    time.sleep(0.2)
                headers = {"Content-Type": "application/json", "Authorization": f"Bearer {TOKEN}"}

                def post() -> int:
                    nonlocal sent
                    docs = [job(f"{sent}-{i}", extra) for i in range(args.records)]
                    reply = httpx.post(f"{url}/v1/records", content=orjson.dumps(docs), headers=headers, timeout=120)
                    if reply.status_code == 202:
                        sent += 1
                    return reply.status_code

                post()
                while stored(server.url) < args.records:
                    time.sleep(0.5)
                before = rss_mb(collector.pid)
                httpx.post(f"{proxy}/_fake/mode", content=args.mode.encode())
                print(f"store up: RSS {before:.0f} MB; store down ({args.mode}) for {args.down:g} s")
                start, shown, peak, quarter = time.monotonic(), -1e9, before, None
                while (t := time.monotonic() - start) < args.down:
                    code = post()
                    now = rss_mb(collector.pid)
                    peak = max(peak, now)
                    if quarter is None and t >= args.down / 4:
                        quarter = now
                    if time.monotonic() - shown >= 15:
                        shown = time.monotonic()
                        health = httpx.get(f"{url}/healthz").json()
                        print(f"  down {t:4.0f} s: RSS {now:5.0f} MB (peak {peak:5.0f}), depth "
                              f"{health['outbox']['depth']:,}, reply {code}, /healthz {health['status']}")  # fmt: skip
                    time.sleep(args.every)
                end = rss_mb(collector.pid)
                httpx.post(f"{proxy}/_fake/mode", content=b"proxy")
                start = time.monotonic()
                while (n := stored(server.url)) < sent * args.records and time.monotonic() - start < args.back:
                    time.sleep(5)
                    print(
                        f"  back {time.monotonic() - start:4.0f} s: RSS {rss_mb(collector.pid):5.0f} MB, stored {n:,}"
                    )
                back, peak = rss_mb(collector.pid), rss_mb(collector.pid, "VmHWM")
            finally:
                collector.terminate()
                collector.wait(120)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    quarter = end if quarter is None else quarter
    print(
        f"\nRSS: {before:.0f} MB with the store up, {quarter:.0f} MB a quarter into the outage, {end:.0f} MB at its "
        f"end, {back:.0f} MB once the backlog was sent, {peak:.0f} MB at its peak (VmHWM, the whole run); {n:,} of "
        f"{sent * args.records:,} stored"
    )
    return verdict(
        [
            (end - quarter <= GROWTH_MB, f"flat during the outage: +{end - quarter:.0f} MB <= {GROWTH_MB:g} MB"),
            (peak - before <= args.peak_mb, f"peak within {args.peak_mb:g} MB of the RSS before: +{peak - before:.0f}"),
            (
                n == sent * args.records,
                f"every record stored once the store is back ({n:,} of {sent * args.records:,})",
            ),
        ]
    )


if __name__ == "__main__":
    sys.exit(main())
