"""``make bench``: the benchmarks that matter, each beside its anchor in the same run, one table.

Every row is a cost (CPU seconds, or CPU per record) over its anchor's cost measured minutes
apart in the same run on the same core, and a target on that ratio: PASS or FAIL. The rows and
their anchors (``benchmarks/README.md`` says why each):

* the reader (``read_history`` of a generated 50,000-job history, in a process, after its
  one-time start): beside ``grep -c '^$'`` over the same bytes (target: half of grep's byte rate,
  ratio <= 2), ``classad2.parseAds`` per ad (its first 2,000 ads; no target) and, with ``--old``,
  the same reader of the earlier revision (at least its speed, <= 1);
* ``fairacct jobs --history F --json`` as a process: beside the reader in a process (<= 1.5);
* ``fairacct fairshare`` on wagap-2013 as a process: beside ``python -c 'import pandas'`` plus
  its kernel in a process (<= 1.5);
* usage pricing, 1,000,000 jobs with every request distinct x 50 machine classes (penalties and
  fairshare, in a process): beside a budget of 1 CPU-s;
* the embedded store: the collector's ingest plus the flusher's work into the store, per
  record, beside ingest alone (<= 2: the store keeps pace with ingest on one core);
* collector ingest: its CPU per record beside one core's budget at 50,000 records/s (20 us),
  and its p99 reply latency beside 100 ms;
* summaries: ``summarize`` of N job records in the embedded store beside 2 CPU-s a million;
* the probe cycle (``fairacct probe once`` as a process, and ``run_once`` in one) on the demo
  pool, and on 200,000 jobs in full mode: beside the earlier revision's (``--old``; <= 1).

CPU seconds, not wall time: the machine is shared; a process's CPU comes from ``wait4``
(``ru_utime + ru_stime``), a kernel's from ``time.process_time`` in its process after the
imports. Every figure is the least of ``--repeat`` (3) fresh processes, all on one core;
the old and new revisions' runs interleaved. ``--old REV`` extracts that revision
(``git archive``) into ``benchmarks/.data/rev-SHA`` (kept, with its compiled scanner, for the
next run) and puts it first on the children's ``sys.path``.

``--quick`` (``make bench-quick``) measures the same rows on smaller inputs where a row allows
it (the store 50,000 records, the collector 4 batches a probe, the summaries 200,000 records,
no 200,000-job cycle): under 3 minutes on 2 cores once the inputs exist.

Run: ``python benchmarks/run.py [--quick] [--old REV] [--json PATH] [--repeat 3]``. Exits 0
when every target is met, 1 when one is not.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DATA = HERE / ".data"
sys.path.insert(0, str(HERE))  # the bench_* modules, whether run from the repo root or not

import bench_commands
import bench_cycle
from _worker import run_worker

READER_ADS = 50_000
PARSEADS_ADS = 2_000
CYCLE_JOBS = 200_000
INGEST_BUDGET_US = 1e6 / 50_000  # one core taking 50,000 records/s (issue 14)
P99_BUDGET_S = 0.100
USAGE_BUDGET_CPU_S = 1.0  # 1,000,000 jobs x 50 classes (the scale issue)
SUMMARIES_CPU_S_PER_MILLION = 2.0  # issue 15: a year of 1,000,000 job records
TIMEOUT_S = 1800


@dataclass(frozen=True)
class Size:
    """The inputs of one mode."""

    store_records: int
    collector_batches: int
    summary_records: int
    cycle_jobs: int | None


FULL = Size(store_records=200_000, collector_batches=20, summary_records=1_000_000, cycle_jobs=CYCLE_JOBS)
QUICK = Size(store_records=50_000, collector_batches=4, summary_records=200_000, cycle_jobs=None)


@dataclass(frozen=True)
class Row:
    """One line of the table: ``measured / anchor_value = ratio``, PASS when ``ratio <= target``."""

    what: str
    measured: float
    anchor: str
    anchor_value: float | None  # None: no anchor in this run (the old revision, without --old)
    unit: str  # of measured and anchor_value
    target: float | None  # the largest ratio that passes; None: shown, no target
    note: str = ""

    @property
    def ratio(self) -> float | None:
        return None if self.anchor_value is None else self.measured / self.anchor_value

    @property
    def verdict(self) -> str:
        if self.target is None or self.ratio is None:
            return "-"
        return "PASS" if self.ratio <= self.target else "FAIL"


# ---------------------------------------------------------------------------------------------
# the measurements; each returns its rows


def _cpu(cmd: Sequence[str], repeat: int) -> float:
    """Least CPU-s of ``repeat`` runs of ``cmd`` (as bench_commands runs a command)."""
    return bench_commands._best(cmd, repeat)


def _reader(path: Path, code: Path) -> float:
    """CPU-s of ``read_history`` of ``path`` by the checkout ``code``, in a process after its start."""
    cmd = [sys.executable, str(HERE / "bench_readers.py"), "--worker", "read_history", str(path), "0",
           "--code", str(code), "--cpu", str(_core())]  # fmt: skip
    result = run_worker(cmd, f"read_history of {code}", cwd=code, timeout_s=TIMEOUT_S)
    if "cpu_seconds" not in result:
        raise SystemExit(f"read_history of {code} was not measured: {result}")
    return float(result["cpu_seconds"])


def _parseads(path: Path, n_ads: int) -> float:
    cmd = [sys.executable, str(HERE / "bench_readers.py"), "--worker", "parseads", str(path), str(n_ads),
           "--cpu", str(_core())]  # fmt: skip
    return float(run_worker(cmd, "parseAds", cwd=ROOT, timeout_s=TIMEOUT_S)["cpu_seconds"])


def reader_rows(history: Path, codes: dict[str, Path], repeat: int) -> tuple[list[Row], float]:
    """The reader beside grep, parseAds and the old revision; also its CPU-s (jobs --json's anchor)."""
    for code in codes.values():  # the scanner compiled and cached: not what is measured
        _reader(history, code)
    times: dict[str, list[float]] = {c: [] for c in codes}
    for _ in range(repeat):  # interleaved: a change in the machine's load touches both alike
        for c, code in codes.items():
            times[c].append(_reader(history, code))
    new = min(times["new"])
    # to a file: GNU grep whose output is /dev/null stops at the first match (as -q does)
    count = Path(tempfile.mkdtemp(prefix="bench-run-")) / "count"
    grep = _cpu(["sh", "-c", 'exec grep -c "^$" "$0" > "$1"', str(history), str(count)], repeat)
    count.unlink()
    count.parent.rmdir()
    parse = min(_parseads(history, PARSEADS_ADS) for _ in range(repeat))
    mb = history.stat().st_size / 1e6
    rows = [
        Row(f"reader, {READER_ADS:,} ads ({mb:.0f} MB)", new, "grep -c '^$', same bytes", grep, "CPU-s", 2.0,
            f"{READER_ADS / new:,.0f} ads/CPU-s, {mb / new:,.0f} MB/CPU-s; grep {mb / grep:,.0f} MB/CPU-s"),
        Row("reader, an ad", 1e6 * new / READER_ADS, f"classad2.parseAds (first {PARSEADS_ADS:,} ads)",
            1e6 * parse / PARSEADS_ADS, "CPU-us", None),
    ]  # fmt: skip
    if "old" in codes:
        old = min(times["old"])
        rows.append(Row(f"reader, {READER_ADS:,} ads", new, f"the same, {_OLD_LABEL}", old, "CPU-s", 1.0,
                        f"{READER_ADS / new:,.0f} against {READER_ADS / old:,.0f} ads/CPU-s"))  # fmt: skip
    return rows, new


def jobs_json_row(history: Path, reader_cpu: float, repeat: int) -> Row:
    cmd = [sys.executable, "-m", "probes", "jobs", "--history", str(history), "--json"]
    bench_commands._cpu(cmd)  # a first run compiles what changed: not measured
    return Row(f"`fairacct jobs --json`, {READER_ADS:,} ads", _cpu(cmd, repeat), "the reader in a process",
               reader_cpu, "CPU-s", 1.5)  # fmt: skip


def fairshare_row(work: Path, repeat: int) -> Row | None:
    meta = bench_commands.METACENTRUM
    if not meta.is_dir():
        print(f"note: {meta} is absent: the wagap fairshare row is not measured", file=sys.stderr)
        return None
    config = work / "fs.toml"
    config.write_text(bench_commands.FS_CONFIG)
    cmd = [sys.executable, "-m", "probes", "fairshare", "--config", str(config),
           "--swf", str(meta / "wagap-2013.swf"), "--machines", str(meta / "wagap-2013.machines"),
           "--fs-dir", str(work / "fs")]  # fmt: skip
    command = _cpu(cmd, repeat)
    pandas = _cpu([sys.executable, "-c", "import pandas"], repeat)
    kernel = min(bench_commands._kernel("wagap", str(config)) for _ in range(repeat))
    return Row("`fairacct fairshare`, wagap-2013", command, "`import pandas` + its kernel in a process",
               pandas + kernel, "CPU-s", 1.5, f"import pandas {pandas:.2f}, kernel {kernel:.2f} CPU-s")  # fmt: skip


def usage_row(repeat: int) -> Row:
    cmd = [sys.executable, str(HERE / "bench_usage.py"), "--worker", "million-distinct", "--cpu", str(_core())]
    runs = [run_worker(cmd, "usage pricing", cwd=ROOT, timeout_s=TIMEOUT_S) for _ in range(repeat)]
    best = min(runs, key=lambda r: float(r["cpu_seconds"]))
    return Row("usage pricing, 1,000,000 distinct requests x 50 classes", float(best["cpu_seconds"]),
               "budget (the scale issue)", USAGE_BUDGET_CPU_S, "CPU-s", 1.0,
               f"wall: penalties {best['penalties_s']:.2f} s, fairshare {best['fairshare_s']:.2f} s")  # fmt: skip


def collector_rows(batches: int) -> tuple[list[Row], float]:
    """Ingest as ``bench_collector.py`` measures it (one run: a rate over many requests); also
    its CPU per record, the store row's anchor."""
    with tempfile.TemporaryDirectory(prefix="bench-run-") as tmp:
        out = Path(tmp) / "collector.json"
        subprocess.run([sys.executable, str(HERE / "bench_collector.py"), "--batches", str(batches), "--core",
                        str(_core()), "--client-core", str(_other_core()), "--json", str(out)],
                       cwd=ROOT, check=False, stdout=subprocess.DEVNULL, timeout=TIMEOUT_S)  # fmt: skip
        if not out.exists():
            raise SystemExit("bench_collector.py measured nothing (run it alone to see why)")
        got = json.loads(out.read_text())
    us, rate = float(got["cpu_us_per_record"]), float(got["records_per_s"])
    note = f"{rate:,.0f} records/s of 55,000 offered, {got['acked']:,} records, collector peak {got['peak_mb']:.0f} MB"
    return [
        Row("collector ingest, CPU a record", us, "one core at 50,000 records/s", INGEST_BUDGET_US, "us", 1.0, note),
        Row("collector ingest, p99 reply", 1000 * float(got["p99_s"]), "budget (issue 14)", 1000 * P99_BUDGET_S,
            "ms", 1.0, f"p50 {1000 * float(got['p50_s']):.0f} ms"),
    ], us  # fmt: skip


def store_row(n: int, ingest_us: float, repeat: int) -> Row:
    cmd = [sys.executable, __file__, "--worker", "store", str(n)]
    runs = [run_worker(cmd, "the embedded store", cwd=ROOT, timeout_s=TIMEOUT_S) for _ in range(repeat)]
    flush_us = min(float(r["flush_us"]) for r in runs)
    return Row(f"embedded store, {n:,} records: ingest + flush", ingest_us + flush_us, "ingest alone",
               ingest_us, "us", 2.0, f"flush {flush_us:.1f} us a record (ids hashed)")  # fmt: skip


def summaries_row(work: Path, n: int, repeat: int) -> Row:
    """``summarize`` of a year of ``n`` job records against issue 15's budget for 1,000,000. Not
    scaled down for fewer (quick): most of the cost follows the year's ~36,500 summaries, not
    the records, so fewer records meeting it is a necessary bound, not a sufficient one."""
    store = work / "summaries.sqlite"
    subprocess.run([sys.executable, bench_commands.__file__, "--worker", "load", str(store), str(n)],
                   env=bench_commands._env(), cwd=ROOT, check=True, timeout=TIMEOUT_S)  # fmt: skip
    kernel = min(bench_commands._kernel("summarize", str(store)) for _ in range(repeat))
    budget = SUMMARIES_CPU_S_PER_MILLION * max(1.0, n / 1e6)
    note = "`summarize` in a process, embedded store" + ("" if n >= 1e6 else "; the 1,000,000 records' budget")
    return Row(f"summaries, {n:,} job records", kernel, "budget (issue 15)", budget, "CPU-s", 1.0, note)


def cycle_rows(inputs: dict[str, Path], codes: dict[str, Path], work: Path, repeat: int) -> list[Row]:
    python = sys.executable
    for code in codes.values():  # the scanner compiled and cached
        bench_cycle._process(code, bench_cycle._fresh(work, inputs["demo"]), python)
    rows = []
    for name, history in inputs.items():
        process: dict[str, list[float]] = {c: [] for c in codes}
        cycle: dict[str, list[float]] = {c: [] for c in codes}
        for _ in range(repeat):
            for c, code in codes.items():
                process[c].append(bench_cycle._process(code, bench_cycle._fresh(work, history), python))
                cycle[c].append(bench_cycle._cycle(code, bench_cycle._fresh(work, history), python)["run_once"])
        for label, got in (("`fairacct probe once`", process), ("`run_once` in a process", cycle)):
            new = min(got["new"])
            if "old" in codes:
                rows.append(Row(f"probe cycle, {name}: {label}", new, f"the same, {_OLD_LABEL}", min(got["old"]),
                                "CPU-s", 1.0))  # fmt: skip
            else:
                rows.append(
                    Row(f"probe cycle, {name}: {label}", new, "the old revision (--old REV)", None, "CPU-s", 1.0)
                )
    return rows


# ---------------------------------------------------------------------------------------------
# the earlier revision, the core, the table


_OLD_LABEL = "old"


def old_tree(rev: str) -> Path:
    """The revision's files in ``.data/rev-SHA`` (made once, kept: its compiled scanner too)."""
    sha = subprocess.run(["git", "rev-parse", "--verify", f"{rev}^{{commit}}"], cwd=ROOT, capture_output=True,
                         text=True, check=False).stdout.strip()  # fmt: skip
    if not sha:
        raise SystemExit(f"--old {rev}: not a revision of {ROOT}")
    tree = DATA / f"rev-{sha[:12]}"
    if not tree.is_dir():
        archive = subprocess.run(["git", "archive", "--format=tar", sha], cwd=ROOT, capture_output=True, check=True)
        partial = Path(tempfile.mkdtemp(dir=DATA, prefix="rev-partial-"))
        with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
            tar.extractall(partial, filter="data")
        partial.rename(tree)
    return tree


def _core() -> int:
    return min(os.sched_getaffinity(0))


def _other_core() -> int:
    others = sorted(set(range(os.cpu_count() or 1)) - {_core()})
    return others[0] if others else _core()


def table(rows: Sequence[Row]) -> str:
    """The rows as a Markdown table (printed, and pasted into benchmarks/README.md as it is)."""
    lines = [
        "| row | measured | anchor | anchor's | ratio | target | verdict | note |",
        "|---|---:|---|---:|---:|---:|---|---|",
    ]
    for r in rows:
        target = f"<= {r.target:g}" if r.target is not None else "-"
        ratio = f"{r.ratio:.2f}" if r.ratio is not None else "-"
        anchor = f"{_figure(r.anchor_value)} {r.unit}" if r.anchor_value is not None else "-"
        lines.append(f"| {r.what} | {_figure(r.measured)} {r.unit} | {r.anchor} | {anchor} | {ratio} | {target} "
                     f"| {r.verdict} | {r.note} |")  # fmt: skip
    return "\n".join(lines)


def _figure(value: float) -> str:
    """Three significant digits below 100 (0.434, 21.7), whole numbers above."""
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def _revision(path: Path) -> str:
    out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=path, capture_output=True, text=True, check=False)
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=path, capture_output=True,
                           text=True, check=False).stdout.strip()  # fmt: skip
    return out.stdout.strip() + (" (with uncommitted changes)" if dirty else "")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller inputs where a row allows (under 3 min)")
    parser.add_argument("--old", metavar="REV", help="also measure the reader and the cycle of this git revision")
    parser.add_argument("--json", type=Path, metavar="PATH", help="write the table as JSON to PATH")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each measurement; the least CPU counts")
    parser.add_argument("--worker", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(_worker(*args.worker)))
        return 0
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")

    global _OLD_LABEL
    os.sched_setaffinity(0, {_core()})  # every child inherits the core
    # Python writes its bytecode cache then, as an installed fairacct has it (set on this machine,
    # every run would compile the modules again, the old revision's tree most of all).
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    size = QUICK if args.quick else FULL
    began, load_before = time.perf_counter(), os.getloadavg()
    DATA.mkdir(exist_ok=True)
    codes = {"new": ROOT}
    if args.old:
        codes = {"old": old_tree(args.old), "new": ROOT}
        _OLD_LABEL = f"`{args.old}`"
    history = bench_cycle._history(DATA, READER_ADS)
    inputs = {"demo": ROOT / "config" / "demo" / "history.ads"}
    if size.cycle_jobs:
        inputs[f"{size.cycle_jobs:,} jobs"] = bench_cycle._history(DATA, size.cycle_jobs)
    for path in (history, *inputs.values()):
        _read(path)
    print(f"{'quick' if args.quick else 'full'} run of {_revision(ROOT)}, on core {_core()}, least CPU of "
          f"{args.repeat}; load average {load_before[0]:.1f}", flush=True)  # fmt: skip

    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="bench-run-") as tmp:
        work = Path(tmp)
        with _step("reader"):
            got, reader_cpu = reader_rows(history, codes, args.repeat)
            rows += got
        with _step("jobs --json"):
            rows.append(jobs_json_row(history, reader_cpu, args.repeat))
        with _step("fairshare"):
            row = fairshare_row(work, args.repeat)
            rows += [row] if row else []
        with _step("usage pricing"):
            rows.append(usage_row(args.repeat))
        with _step("collector ingest"):
            got, ingest_us = collector_rows(size.collector_batches)
            rows += got
        with _step("embedded store"):
            rows.append(store_row(size.store_records, ingest_us, args.repeat))
        with _step("summaries"):
            rows.append(summaries_row(work, size.summary_records, args.repeat))
        with _step("probe cycle"):
            rows += cycle_rows(inputs, codes, work, args.repeat)

    wall, load_after = time.perf_counter() - began, os.getloadavg()
    print()
    print(table(rows))
    print(f"\n{wall:.0f} s; load average {load_before[0]:.1f} before, {load_after[0]:.1f} after")
    if args.json:
        args.json.write_text(json.dumps({
            "revision": _revision(ROOT), "old": args.old, "mode": "quick" if args.quick else "full",
            "repeat": args.repeat, "at": datetime.now(UTC).isoformat(timespec="seconds"), "wall_s": round(wall, 1),
            "load_before": load_before[0], "load_after": load_after[0],
            "rows": [asdict(r) | {"ratio": r.ratio, "verdict": r.verdict} for r in rows],
        }, indent=1) + "\n")  # fmt: skip
    return 1 if any(r.verdict == "FAIL" for r in rows) else 0


@contextlib.contextmanager
def _step(name: str) -> Iterator[None]:
    """Say how long a step took (the quick mode's 3 minutes are spent somewhere)."""
    began = time.perf_counter()
    yield
    print(f"  {name}: {time.perf_counter() - began:.0f} s", flush=True)


def _read(path: Path) -> None:
    """Into the page cache before anything is timed."""
    with open(path, "rb") as fh:
        while fh.read(1 << 20):
            pass


def _worker(kind: str, *args: str) -> dict[str, Any]:
    if kind == "store":
        from bench_store import measure

        n = int(args[0])
        m = measure(n)
        # the flusher's work a record: the outbox's flush into a store (ids in order), with the
        # extra of the ids hashed as the collector stores them
        flush = m["outbox_cpu"] - m["commit_cpu"] + m["hashed_cpu"] - m["store_cpu"]
        return {"flush_us": 1e6 * flush / n, **m}
    raise SystemExit(f"unknown worker {kind!r}")


if __name__ == "__main__":
    sys.exit(main())
