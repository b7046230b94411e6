"""Benchmark the ClassAd history reader against the targets of the reader issue.

Targets, for ``probes.sources.history.read_history`` on one core:

* throughput: at least 50,000 ads/s into the jobs table (on 50,000 and on 200,000 ads);
* scaling: a file 4x as large (200,000 vs 50,000 ads) takes at most 4.4x the time;
* memory: peak RSS under 300 MB while reading 200,000 ads.

``classad2.parseAds`` is timed on the first 2,000 and 8,000 ads of the same file for comparison
only: its throughput falls as its input grows, so the whole file would take over an hour.

Every measurement runs in a fresh interpreter pinned to one core, so its peak RSS is its own and
nothing else (imports, other measurements, data generation) is counted in it. The input files are
generated once into ``benchmarks/.data/`` and reused. Throughput and scaling are timed after the
reader's one-time start in the process (its compiled scanner loading, timed on the file's first
ad and printed beside as 'start s', with the 'cold' rate that counts it in); the peak RSS
includes that start.

``--escaped-share F`` reads files in which that share of clusters spell ``ProjectName`` with old
ClassAd escapes (``"CMS-Tier2 \\"7\\""``, about a quarter of the ads at 0.25), kept beside the
plain ones. The table's 'cpu ads/s' (ads per CPU second of the run) is the figure to compare
on a machine whose core is shared: 'ads/s' is per wall-clock second.

Run with ``make bench`` or ``python benchmarks/bench_readers.py``. Exits 0 when every target is
met, 1 when one is not, 2 when nothing could be measured (e.g. ``read_history`` is missing).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _verdict import verdict  # benchmarks/ is on the path when a benchmark runs
from _worker import Unmeasured, peak_rss_mb, run_worker

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
DEFAULT_DATA = HERE / ".data"

SMALL, LARGE = 50_000, 200_000
PARSEADS_PREFIXES = (2_000, 8_000)
MIN_ADS_PER_S = 50_000
MAX_SCALING = 4.4
MAX_PEAK_MB = 300  # decimal megabytes, the stricter reading of "300 MB"
WORKER_TIMEOUT_S = 1800  # a reader stuck for half an hour has failed; do not hang `make bench`

EXIT_UNMEASURED = 2


# ---------------------------------------------------------------------------------------------
# worker side: one measurement, in its own process


def _load_reader() -> Callable[..., Any]:
    """The function under test; imported here, inside the worker, so its import cost and memory
    belong to the worker and a missing module is reported rather than crashing the suite."""
    import probes.sources.classad.long  # noqa: F401  # the scanner and numba, which the reader imports on first use
    from probes.sources.history import read_history

    return read_history


def _pin(cpu: int | None) -> int:
    allowed = os.sched_getaffinity(0)
    # core 0 unless told otherwise; a container's cpuset may not include it
    chosen = cpu if cpu is not None else (0 if 0 in allowed else min(allowed))
    os.sched_setaffinity(0, {chosen})
    return chosen


def _head(path: Path, n_ads: int) -> str:
    """The text of the first ``n_ads`` ads of a ``-long`` file, each with the blank line that ends
    it (without it, the reader sets the last ad aside as cut by the end of its file: a warm-up on
    it would leave the job table's first build to the timed read)."""
    lines: list[str] = []
    seen = 0
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            lines.append(line)
            if line == "\n":
                seen += 1
                if seen == n_ads:
                    break
    if seen < n_ads - 1:  # the last ad of a file has no blank line after it
        raise SystemExit(f"{path} has fewer than {n_ads:,} ads")
    return "".join(lines)


def _worker(kind: str, path: Path | None, n_ads: int, cpu: int | None, code: Path = REPO) -> dict[str, Any]:
    """One measurement of ``kind``; ``code``: the checkout whose ``probes`` is measured (this one,
    or an earlier revision's tree for ``run.py --old``)."""
    chosen = _pin(cpu)
    sys.path.insert(0, str(code))
    result: dict[str, Any] = {"cpu": chosen}
    if kind in ("check", "read_history"):
        try:
            read = _load_reader()
        except ImportError as exc:
            return {"unavailable": f"{type(exc).__name__}: {exc}"}
        if kind == "check":
            return result
        assert path is not None
        result["rss_before_mb"] = peak_rss_mb()
        # The reader's one-time start in a process (numba loading its compiled scanner: about
        # 0.3 s, whatever the input) is timed apart, on the file's first ad, as a JIT is warmed
        # before its throughput is measured. Its memory stays in the peak.
        with tempfile.TemporaryDirectory() as tmp:
            first = Path(tmp) / "first.ads"
            first.write_text(_head(path, 1))
            began = time.perf_counter()
            read([first])
            result["startup_seconds"] = time.perf_counter() - began
        began, cpu_began = time.perf_counter(), time.process_time()
        out = read([path])
        result["seconds"] = time.perf_counter() - began
        result["cpu_seconds"] = time.process_time() - cpu_began
        result["peak_rss_mb"] = peak_rss_mb()
        if not (isinstance(out, tuple) and len(out) == 2):
            return {"error": f"read_history returned {type(out).__name__}, expected (DataFrame, ReadReport)"}
        table, report = out
        result["rows"] = len(table)
        result["report_ads"] = getattr(report, "ads", None)
        result["evaluated"] = getattr(report, "evaluated", None)
        result["malformed"] = len(getattr(report, "malformed", ()))
    elif kind == "parseads":
        import classad2

        assert path is not None
        text = _head(path, n_ads)  # read before timing: the file read is not parseAds' work
        result["rss_before_mb"] = peak_rss_mb()
        began, cpu_began = time.perf_counter(), time.process_time()
        ads = list(classad2.parseAds(text, classad2.ParserType.Old))
        result["seconds"] = time.perf_counter() - began
        result["cpu_seconds"] = time.process_time() - cpu_began
        result["peak_rss_mb"] = peak_rss_mb()
        result["rows"] = len(ads)
    else:
        raise SystemExit(f"unknown worker kind {kind!r}")
    return result


# ---------------------------------------------------------------------------------------------
# driver side


@dataclass
class Run:
    """The best of the repeats of one measurement."""

    label: str
    ads: int
    bytes: int
    seconds: float  # fastest repeat (least disturbed by the rest of the machine)
    startup_seconds: float | None  # of that repeat: the reader's one-time start, before timing
    slowest: float  # slowest repeat: how far apart they are says how noisy the machine was
    cpu_seconds: float  # of that repeat
    peak_rss_mb: float  # largest over the repeats
    rss_before_mb: float
    rows: int
    evaluated: int | None = None  # ads the reader handed to classad2, when its report says
    report_ads: int | None = None
    malformed: int = 0

    @property
    def rate(self) -> float:
        return self.ads / self.seconds

    @property
    def cpu_rate(self) -> float:
        """Ads per CPU second: what the reader costs, whatever else ran on its core."""
        return self.ads / self.cpu_seconds

    @property
    def cold_rate(self) -> float:
        """Ads per second counting the one-time start too: a fresh process reading one file."""
        return self.ads / (self.seconds + (self.startup_seconds or 0.0))


def _spawn(kind: str, path: Path | None, n_ads: int, cpu: int | None) -> dict[str, Any]:
    what = kind if path is None else f"{kind} on {path.name}"
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", kind, str(path or ""), str(n_ads)]
    if cpu is not None:
        cmd += ["--cpu", str(cpu)]
    result = run_worker(cmd, what, cwd=REPO, timeout_s=WORKER_TIMEOUT_S)
    if "unavailable" in result:
        raise Unmeasured(
            "probes.sources.history.read_history cannot be imported "
            f"({result['unavailable']}).\nThis benchmark measures that function; nothing was measured."
        )
    if "error" in result:
        raise Unmeasured(f"{what}: {result['error']}")
    return result


def _measure(label: str, kind: str, path: Path, n_ads: int, size: int, repeat: int, cpu: int | None) -> Run:
    results = [_spawn(kind, path, n_ads, cpu) for _ in range(repeat)]
    best = min(results, key=lambda r: r["seconds"])
    return Run(
        label=label,
        ads=n_ads,
        bytes=size,
        seconds=best["seconds"],
        startup_seconds=best.get("startup_seconds"),
        slowest=max(r["seconds"] for r in results),
        cpu_seconds=best["cpu_seconds"],
        peak_rss_mb=max(r["peak_rss_mb"] for r in results),
        rss_before_mb=best["rss_before_mb"],
        rows=best["rows"],
        evaluated=best.get("evaluated"),
        report_ads=best.get("report_ads"),
        malformed=best.get("malformed", 0),
    )


def _data_file(data_dir: Path, n_ads: int, escaped_share: float = 0.0) -> Path:
    # imported here so that workers, which run this file too, do not load the generator
    from generate_history import GENERATOR_VERSION, generate

    stem = f"history-{n_ads}-e{round(100 * escaped_share)}" if escaped_share else f"history-{n_ads}"
    path = data_dir / f"{stem}-g{GENERATOR_VERSION}.ads"
    if not path.exists():
        data_dir.mkdir(parents=True, exist_ok=True)
        # files from an older generator would otherwise pile up (hundreds of MB each)
        for stale in data_dir.glob(f"{stem}-g*.ads"):
            stale.unlink()
        print(f"generating {path} ({n_ads:,} ads) ...", flush=True)
        began = time.perf_counter()
        generate(path, n_ads, escaped_share=escaped_share)
        print(f"  done in {time.perf_counter() - began:.1f} s, {path.stat().st_size / 1e6:,.0f} MB", flush=True)
    return path


def _warm(path: Path) -> None:
    """Read the file once so every repeat finds it in the page cache: the targets are about the
    reader's CPU work, not about the disk the benchmark happens to run on."""
    with open(path, "rb") as fh:
        while fh.read(1 << 24):
            pass


def _offset_of_ad(path: Path, n_ads: int) -> int:
    """Bytes taken by the first ``n_ads`` ads (for MB/s of the parseAds runs)."""
    seen = size = 0
    with open(path, "rb") as fh:
        for line in fh:
            size += len(line)
            if line == b"\n":
                seen += 1
                if seen == n_ads:
                    break
    return size


def _table(runs: Sequence[Run]) -> str:
    # (title, width, cell) per column; the first is left-aligned
    columns: list[tuple[str, int, Callable[[Run], str]]] = [
        ("measurement", 52, lambda r: r.label),
        ("ads", 9, lambda r: f"{r.ads:,}"),
        ("seconds", 8, lambda r: f"{r.seconds:.2f}"),
        ("spread", 7, lambda r: f"+{100 * (r.slowest / r.seconds - 1):.0f}%"),
        ("ads/s", 9, lambda r: f"{r.rate:,.0f}"),
        ("cpu ads/s", 9, lambda r: f"{r.cpu_rate:,.0f}"),
        ("start s", 7, lambda r: "" if r.startup_seconds is None else f"{r.startup_seconds:.2f}"),
        ("cold ads/s", 10, lambda r: "" if r.startup_seconds is None else f"{r.cold_rate:,.0f}"),
        ("MB/s", 7, lambda r: f"{r.bytes / 1e6 / r.seconds:.1f}"),
        ("cpu %", 6, lambda r: f"{100 * r.cpu_seconds / r.seconds:.0f}"),
        ("peak RSS", 9, lambda r: f"{r.peak_rss_mb:.0f} MB"),
        ("rows", 9, lambda r: f"{r.rows:,}"),
        ("via classad2", 12, lambda r: "" if r.evaluated is None else f"{r.evaluated:,}"),
    ]

    def row(cells: Sequence[str]) -> str:
        first, *rest = cells
        return " ".join(
            [f"{first:<{columns[0][1]}}", *(f"{c:>{w}}" for c, (_, w, _) in zip(rest, columns[1:], strict=True))]
        )

    head = row([title for title, _, _ in columns])
    return "\n".join([head, "-" * len(head), *(row([cell(r) for _, _, cell in columns]) for r in runs)])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--data-dir", type=Path, default=DEFAULT_DATA, help="where the generated files are kept (default: %(default)s)"
    )
    parser.add_argument(
        "--repeat", type=int, default=3, help="runs per measurement; the fastest counts (default: %(default)s)"
    )
    parser.add_argument("--cpu", type=int, default=None, help="core to pin the measurements to (default: 0)")
    parser.add_argument(
        "--escaped-share",
        type=float,
        default=0.0,
        help="share of clusters whose ProjectName has old ClassAd escapes, 0 to 1 (default: %(default)s)",
    )
    parser.add_argument("--worker", nargs=3, metavar=("KIND", "PATH", "N"), help=argparse.SUPPRESS)
    parser.add_argument("--code", type=Path, default=REPO, help=argparse.SUPPRESS)  # the worker's checkout
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    if not 0 <= args.escaped_share <= 1:
        parser.error("--escaped-share must be between 0 and 1")

    if args.worker:
        kind, path, n = args.worker
        print(json.dumps(_worker(kind, Path(path) if path else None, int(n), args.cpu, args.code)))
        return 0

    sys.path.insert(0, str(HERE))  # generate_history, whether run from the repo root or not
    try:
        cpu = _spawn("check", None, 0, args.cpu)["cpu"]  # fail fast, before generating data
        small, large = (_data_file(args.data_dir, n, args.escaped_share) for n in (SMALL, LARGE))
        for path in (small, large):
            _warm(path)
        size = {p: p.stat().st_size for p in (small, large)}
        load = os.getloadavg()[0]
        print(
            f"\nmeasuring on core {cpu}, best of {args.repeat} runs each, every run in a fresh process "
            f"(load average {load:.1f}; other work on that core, or waiting for I/O, shows as cpu % under 100)\n",
            flush=True,
        )
        runs = [
            _measure(f"read_history  {small.name}", "read_history", small, SMALL, size[small], args.repeat, args.cpu),
            _measure(f"read_history  {large.name}", "read_history", large, LARGE, size[large], args.repeat, args.cpu),
        ]
        for n in PARSEADS_PREFIXES:
            label = f"parseAds      first {n:,} ads of {large.name}"
            runs.append(_measure(label, "parseads", large, n, _offset_of_ad(large, n), args.repeat, args.cpu))
    except Unmeasured as exc:
        print(f"ERROR: {exc}", file=sys.stderr)
        return EXIT_UNMEASURED

    print(_table(runs))
    prefixes = " and ".join(f"{n:,}" for n in PARSEADS_PREFIXES)
    print(
        f"\nparseAds (classad2) is given only the first {prefixes} ads of the file, for comparison:"
        "\nits throughput falls as its input grows, so it is not run on the whole file."
        "\n'start s' is read_history's one-time start in a process (its first call, on one ad), timed"
        "\napart like a JIT's warm-up; 'cold ads/s' counts it in, as a fresh process reading one file would."
    )
    rh_small, rh_large = runs[0], runs[1]
    # A reader that skips ads would look fast; say so next to its numbers.
    for r in (rh_small, rh_large):
        name = r.label.split()[-1]
        if r.rows != r.ads:
            print(f"note: read_history returned {r.rows:,} rows for the {r.ads:,} ads of {name}")
        if r.report_ads is not None and r.report_ads != r.ads:
            print(f"note: read_history's report counts {r.report_ads:,} ads in {name}, which has {r.ads:,}")
        if r.malformed:
            print(f"note: read_history found {r.malformed:,} malformed ads in {name}")

    scaling = rh_large.seconds / rh_small.seconds
    checks = [
        (
            min(rh_small.rate, rh_large.rate) >= MIN_ADS_PER_S,
            (
                f"throughput >= {MIN_ADS_PER_S:,} ads/s on one core: {rh_small.rate:,.0f} ads/s ({SMALL:,} ads), "
                f"{rh_large.rate:,.0f} ads/s ({LARGE:,} ads)"
            ),
        ),
        (
            scaling <= MAX_SCALING,
            f"scaling: {LARGE:,} ads take <= {MAX_SCALING}x the time of {SMALL:,}: {scaling:.2f}x",
        ),
        (
            rh_large.peak_rss_mb < MAX_PEAK_MB,
            (
                f"peak RSS < {MAX_PEAK_MB} MB reading {LARGE:,} ads: {rh_large.peak_rss_mb:.0f} MB "
                f"({rh_large.rss_before_mb:.0f} MB of it before the call: interpreter and imports)"
            ),
        ),
    ]
    return verdict(checks)


if __name__ == "__main__":
    sys.exit(main())
