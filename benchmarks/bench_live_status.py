"""Benchmark the live snapshot of a global-pool-sized collector against ``condor_status -long``.

A real HTCondor pool (``../shared/htcondor``, started and removed here) is loaded with the startd
ads of a glideinWMS global pool (``generate_startd_ads.py``: NODES partitionable slots, each a
glidein with DSLOTS dynamic slots, ~6-8 KB and ~670 attributes an ad, as a startd sends them),
advertised into its collector with ``condor_advertise -multiple UPDATE_STARTD_AD`` (1,000 ads a
connection). Sizes are cumulative: the second size's first nodes are the first size's, so the
pool grows between them. The pool's negotiator is turned off first (each of its cycles would
query the whole collector meanwhile).

Measured, each a whole process (start and imports included), CPU from ``wait4`` (the process and
the children it reaped, here the bindings' worker), peak RSS from ``VmHWM``:

* ``condor_status -long > FILE``, then the file reader (``read_status``, as ``fairacct slots
  --status FILE`` reads) on that file; the two together are the daemons' own tools' path;
* the live snapshot (``LivePool.snapshot``, as ``probe once`` takes it: the collector query with
  its projection in the bindings' worker, the ads across to the probe, the same table
  builders);
* the collector's own query: ``condor_status -af Name`` (one attribute: what the collector
  spends walking its table, with next to nothing to send). The collector's CPU (its own and its
  reaped query workers') is shown beside each command;
* with ``--old REV``, the snapshot of a git revision's code the same way (exported and put first
  on the path): the figures before a change, on the same loaded pool;
* a whole probe cycle: ``fairacct probe once`` of the live pool (the snapshot, the schedd's idle
  jobs and history, the records written to a fresh embedded store), against the default cadence.

The live paths are measured before ``condor_status -long``, so that a run cut short at a large
size (``-long`` of 220,000 ads takes several CPU-minutes on this build) still has them.

Targets (of the scale issue): the live snapshot within 1.5x of ``condor_status -long > FILE`` plus
the reader, in wall and in CPU; its peak RSS past the table itself flat with pool size (the
larger size's peak minus its table at most 1.5x the smaller's); a probe cycle within half the
default cadence (300 s) in wall time.

Run with ``python benchmarks/bench_live_status.py [--sizes 1000 5000 20000] [--old REV]
[--live-only]`` (``--live-only``: the live paths and the probe cycle, without ``condor_status
-long`` and the reader, several CPU-minutes at 220,000 ads; their ratio is then not checked).
It needs ~1.5 GB of disk for the ads at 20,000 x 10 (kept in ``benchmarks/.data``) and the
collector ~3 GB of memory. Exits 0 when every target is met, 1 when one is not, 2 when nothing
could be measured.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _verdict import verdict  # benchmarks/ is on the path when a benchmark runs
from _worker import peak_rss_mb, peak_rss_mb_of

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SHARED = ROOT.parent / "shared"
DEFAULT_DATA = HERE / ".data"
GENERATOR_VERSION = 2  # bump when generate_startd_ads.py's output changes
PER_FILE = 1100  # 100 nodes of 10 dynamic slots a file: a size's first files are a smaller size's
MAX_RATIO = 1.5
CADENCE_S = 300.0  # the probe's default cadence (pool.interval_s)
CODE_ENV = "FAIRACCT_BENCH_CODE"  # where a measured process takes fairacct's packages from (--old)
EXIT_UNMEASURED = 2


@dataclass(frozen=True)
class Run:
    """One measured command: wall-s, CPU-s (with its reaped children), the collector's CPU-s,
    peak RSS MB (of the process; ``worker_mb`` of the bindings' worker), and what it printed."""

    label: str
    wall_s: float
    cpu_s: float
    collector_s: float
    peak_mb: float | None
    detail: dict[str, object]


def _collector_cpu(pid: int) -> float:
    """CPU-s of the collector and of the query workers it has reaped."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
        f = fh.read().rpartition(")")[2].split()
    return sum(int(x) for x in f[11:15]) / os.sysconf("SC_CLK_TCK")


def _measure(label: str, cmd: Sequence[str], out: Path | None, collector: int, env: dict[str, str]) -> Run:
    before = _collector_cpu(collector)
    began = time.perf_counter()
    with open(out or os.devnull, "wb") as fh:
        proc = subprocess.Popen(list(cmd), stdout=fh, stderr=subprocess.PIPE, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - began
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{label}: {' '.join(cmd)} failed:\n{err[-3000:]}")
    time.sleep(0.5)  # the collector reaps its query worker once it has sent the last ad
    detail: dict[str, object] = {}
    if out is not None and out.suffix == ".json":
        detail = json.loads(out.read_text().strip().splitlines()[-1])
    peak = detail.get("peak_mb")
    cpu = usage.ru_utime + usage.ru_stime
    return Run(label, wall, cpu, _collector_cpu(collector) - before,
               float(peak) if isinstance(peak, (int, float)) else usage.ru_maxrss / 1000, detail)  # fmt: skip


def _ads(data: Path, nodes: int) -> list[Path]:
    """The files of the first ``nodes`` nodes (generated once, in their own process)."""
    folder = data / f"startd-v{GENERATOR_VERSION}-{nodes}x10"
    if not (folder / "done").exists():
        cmd = [sys.executable, str(HERE / "generate_startd_ads.py"), str(folder), str(nodes), "10",
               "--per-file", str(PER_FILE)]  # fmt: skip
        subprocess.run(cmd, check=True)
        (folder / "done").touch()
    return sorted(folder.glob("startd-*.ads"))


def _advertise(pool: object, files: Sequence[Path]) -> float:
    """Send ``files`` to the collector, two connections at a time; the wall-s it took."""
    advertise = str(pool.release / "sbin" / "condor_advertise")  # type: ignore[attr-defined]
    env = pool.env()  # type: ignore[attr-defined]
    began = time.perf_counter()
    running: list[subprocess.Popen[bytes]] = []
    for path in files:
        if len(running) >= 2:
            running.pop(0).wait()
        running.append(subprocess.Popen([advertise, "-multiple", "UPDATE_STARTD_AD", str(path)], env=env,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))  # fmt: skip
    for proc in running:
        if proc.wait() != 0:
            raise SystemExit(f"condor_advertise exited {proc.returncode}")
    return time.perf_counter() - began


def _row(run: Run, base: Run | None) -> None:
    ratio = f"{run.wall_s / base.wall_s:>6.2f} {run.cpu_s / base.cpu_s:>6.2f}" if base else f"{'':>6} {'':>6}"
    peak = f"{run.peak_mb:>8.0f}" if run.peak_mb is not None else f"{'?':>8}"
    print(f"{run.label:<40} {run.wall_s:>8.2f} {run.cpu_s:>8.2f} {ratio} {peak} {run.collector_s:>9.2f}", flush=True)


def _probe_once(pool: object, work: Path, collector: int, env: dict[str, str]) -> Run:
    """``fairacct probe once`` of the live pool into a fresh embedded store: a whole cycle (the
    snapshot, the schedd's idle jobs and history, the records written), as the service runs it."""
    state = work / "probe-state"
    if state.exists():
        shutil.rmtree(state)
    config = work / "probe.toml"
    config.write_text(f'[pool]\nname = "bench"\ncondor_config = "{pool.condor_config}"\ntimeout_s = 600\n'  # type: ignore[attr-defined]
                      f'[sources]\nlive = true\n[probe]\nstate_dir = "{state}"\n')  # fmt: skip
    # without --json, as the service's cycles run: its report lists every bill (~700 MB more at
    # 110,000 allocations, measured from files), which is the command's output, not the cycle's
    cmd = [sys.executable, "-m", "probes", "probe", "once", "--config", str(config), "--store",
           f"sqlite:///{state / 'fairacct.sqlite'}"]  # fmt: skip
    return _measure("a probe cycle (fairacct probe once)", cmd, None, collector, {**env, "PYTHONPATH": str(ROOT)})


def _one_size(
    nodes: int, pool: object, data: Path, work: Path, advertised: int, old: Path | None, live_only: bool = False
) -> tuple[list[tuple[bool, str]], Run]:
    from tests.htcondor_pool import HTCondorPool

    assert isinstance(pool, HTCondorPool)
    files = _ads(data, nodes)
    expected = nodes * 11
    took = _advertise(pool, files[advertised * 11 // PER_FILE :])
    deadline = time.monotonic() + 600
    while True:
        count = pool.tool("condor_status", "-af", "Name", timeout=600).count("\n")
        if count >= expected or time.monotonic() > deadline:
            break
        time.sleep(2)
    collector = pool.daemon_pid("condor_collector")
    env = {**pool.env(), "OMP_NUM_THREADS": "1"}
    print(f"\n{nodes:,} partitionable slots and {nodes * 10:,} dynamic slots ({count:,} ads in the collector; "
          f"{took:.0f} s to advertise the new ones), collector {pool.address}")  # fmt: skip
    print(f"{'':<40} {'wall s':>8} {'CPU s':>8} {'x wall':>6} {'x CPU':>6} {'peak MB':>8} {'coll. CPU':>9}")
    status = str(pool.release / "bin" / "condor_status")
    floor = _measure("condor_status -af Name (the floor)", [status, "-af", "Name"], None, collector, env)
    _row(floor, None)
    # the live paths first: a run cut short at a large size still has them
    me = [sys.executable, str(Path(__file__).resolve()), "--worker"]
    config = str(pool.condor_config)
    live = _measure("live snapshot (LivePool.snapshot)", [*me, "live", config], work / "live.json", collector, env)
    _row(live, None)
    lives = [live]
    if old is not None:
        old_env = {**env, "PYTHONPATH": str(old), CODE_ENV: str(old)}
        before = _measure("  before: the old code's snapshot", [*me, "live", config], work / "old.json", collector,
                          old_env)  # fmt: skip
        _row(before, None)
        lives.append(before)
    cycle = _probe_once(pool, work, collector, env)
    _row(cycle, None)
    print(f"  a whole probe cycle (fairacct probe once, live, into an embedded store): {cycle.wall_s:.1f} s wall, "
          f"{cycle.cpu_s:.1f} CPU-s, peak {cycle.peak_mb:.0f} MB: {cycle.wall_s / CADENCE_S:.0%} of a "
          f"{CADENCE_S:.0f} s cadence")  # fmt: skip
    for run in lives:
        print(f"  {run.label.strip()}: peak {run.peak_mb:.0f} MB, past the tables "
              f"{(run.peak_mb or 0) - float(run.detail['table_mb']):.0f} MB; "  # type: ignore[arg-type]
              f"bindings' worker peak {run.detail.get('worker_mb')} MB")  # fmt: skip
    in_cadence = (cycle.wall_s <= CADENCE_S / 2,
                  f"{nodes:,}x10: a probe cycle {cycle.wall_s:.0f} s wall <= half the default cadence "
                  f"of {CADENCE_S:.0f} s")  # fmt: skip
    if live_only:  # the tools' figures are an earlier run's: several CPU-minutes at 220,000 ads
        every = (live.detail["slots"] == nodes + 2 and live.detail["allocations"] == nodes * 10,
                 f"{nodes:,}x10: the live snapshot has every slot advertised ({live.detail['slots']:,} slots, "
                 f"{live.detail['allocations']:,} allocations)")  # fmt: skip
        return [in_cadence, every], live
    dump = work / f"status-{nodes}.long"
    tool = _measure("condor_status -long > FILE", [status, "-long"], dump, collector, env)
    _row(tool, None)
    reader = _measure("  read_status(FILE)", [*me, "file", str(dump)], work / "file.json", collector, env)
    _row(reader, None)
    both = Run("the tools: -long, then the reader", tool.wall_s + reader.wall_s, tool.cpu_s + reader.cpu_s,
               tool.collector_s, max(tool.peak_mb or 0, reader.peak_mb or 0), reader.detail)  # fmt: skip
    _row(both, None)
    for run in lives:
        _row(run, both)
    print(f"  rows: file {reader.detail['slots']:,} slots, {reader.detail['allocations']:,} allocations; "
          f"live {live.detail['slots']:,} slots, {live.detail['allocations']:,} allocations; "
          f"tables {live.detail['table_mb']} MB, file's {reader.detail['table_mb']} MB; dump "
          f"{dump.stat().st_size / 1e6:,.0f} MB")  # fmt: skip
    dump.unlink()
    checks = [
        (live.wall_s <= MAX_RATIO * both.wall_s,
         f"{nodes:,}x10: live snapshot wall {live.wall_s:.1f} s <= {MAX_RATIO} x the tools' {both.wall_s:.1f} s"),
        (live.cpu_s <= MAX_RATIO * both.cpu_s,
         f"{nodes:,}x10: live snapshot CPU {live.cpu_s:.1f} s <= {MAX_RATIO} x the tools' {both.cpu_s:.1f} s"),
        in_cadence,
        (live.detail["slots"] == reader.detail["slots"] == nodes + 2
         and live.detail["allocations"] == reader.detail["allocations"] == nodes * 10,
         f"{nodes:,}x10: the live snapshot and the file have every slot advertised (and the pool's own 2)"),
    ]  # fmt: skip
    return checks, live


def _export(rev: str, into: Path) -> Path:
    """The packages of git revision ``rev``, exported under ``into``."""
    into.mkdir()
    archive = subprocess.run(["git", "archive", rev, "probes", "collector", "mappings"], cwd=ROOT, check=True,
                             capture_output=True).stdout  # fmt: skip
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def _stop_negotiator(pool: object) -> None:
    off = str(pool.release / "sbin" / "condor_off")  # type: ignore[attr-defined]
    subprocess.run([off, "-daemon", "negotiator"], env=pool.env(), check=True, capture_output=True)  # type: ignore[attr-defined]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[2_000, 20_000], help="partitionable slots")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="where the generated ads are kept")
    parser.add_argument("--old", metavar="REV", help="also measure the snapshot of this git revision (before a change)")
    parser.add_argument("--live-only", action="store_true",
                        help="the live paths and the probe cycle only, not condor_status -long")  # fmt: skip
    parser.add_argument("--worker", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return _worker(*args.worker)
    sys.path.insert(0, str(ROOT))
    from tests.htcondor_pool import remove, start_pool, unavailable

    why = unavailable(SHARED) or (None if (SHARED / "fixtures" / "condor25" / "status.ads").is_file()
                                  else "needs ../shared/fixtures/condor25/status.ads (the template ads)")  # fmt: skip
    if why:
        print(f"cannot measure: {why}", file=sys.stderr)
        return EXIT_UNMEASURED
    sizes = sorted(args.sizes)
    for n in sizes:  # before the pool starts: generating 20,000 nodes takes a minute or two
        _ads(args.data, n)
    checks: list[tuple[bool, str]] = []
    lives: list[tuple[int, Run]] = []
    with tempfile.TemporaryDirectory(prefix="bench-live-status-") as tmp:
        old = _export(args.old, Path(tmp) / "old") if args.old else None
        pool = start_pool(SHARED)
        try:
            _stop_negotiator(pool)
            advertised = 0
            for n in sizes:
                found, live = _one_size(n, pool, args.data, Path(tmp), advertised, old, args.live_only)
                checks += found
                lives.append((n, live))
                advertised = n
        finally:
            remove(pool)
    if len(lives) > 1:
        (n0, a), (n1, b) = lives[0], lives[-1]
        over0 = (a.peak_mb or 0) - float(a.detail["table_mb"])  # type: ignore[arg-type]
        over1 = (b.peak_mb or 0) - float(b.detail["table_mb"])  # type: ignore[arg-type]
        checks.append((over1 <= MAX_RATIO * over0,
                       f"live peak past the tables flat: {over1:.0f} MB at {n1:,}x10 <= {MAX_RATIO} x "
                       f"{over0:.0f} MB at {n0:,}x10"))  # fmt: skip
    return verdict(checks)


# -- the measured processes --------------------------------------------------------------------------


def _table_mb(snapshot: Any) -> float:
    """MB of a snapshot's two tables (a benchmark's worker imports the code under test late)."""
    return round(sum(int(t.memory_usage(deep=True).sum()) for t in (snapshot.slots, snapshot.allocations)) / 1e6)


def _worker(kind: str, where: str) -> int:
    """``file PATH``: read_status of the dump; ``live CONDOR_CONFIG``: one live snapshot. A JSON
    line of figures to stdout."""
    sys.path.insert(0, os.environ.get(CODE_ENV) or str(ROOT))
    if kind == "file":
        from probes.sources.status import read_status

        snapshot, _ = read_status([where])
        print(json.dumps({"slots": len(snapshot.slots), "allocations": len(snapshot.allocations),
                          "table_mb": _table_mb(snapshot), "peak_mb": round(peak_rss_mb())}))  # fmt: skip
        return 0
    from probes.config import parse_config
    from probes.pipeline.reading import live_pool

    config = parse_config({"pool": {"name": "bench", "condor_config": where, "timeout_s": 600},
                           "sources": {"live": True}})  # fmt: skip
    live = live_pool(config)
    snapshot, _ = live.snapshot(now=time.time())
    bindings = live.bindings
    workers = [*bindings._idle, *bindings._busy] if bindings is not None else []  # a benchmark's look inside
    peaks = [round(p) for p in (peak_rss_mb_of(w.process.pid) for w in workers) if p is not None]
    print(json.dumps({"slots": len(snapshot.slots), "allocations": len(snapshot.allocations),
                      "table_mb": _table_mb(snapshot), "peak_mb": round(peak_rss_mb()),
                      "worker_mb": max(peaks, default=None)}))  # fmt: skip
    live.cancel()
    return 0


if __name__ == "__main__":
    sys.exit(main())
