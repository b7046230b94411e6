"""Benchmark the command line as a user runs it: whole processes, start and imports included.

Targets (issue 12, item 12), each a fresh process pinned to one core:

* ``python -c 'import probes.cli'`` and ``fairacct --version``: well under half a second, taken
  here as at most 0.25 CPU-s each;
* ``fairacct jobs --history F --json > /dev/null`` on 40,000 generated ads: at least 20,000 ads
  per CPU-second for the whole command (start, imports, reading, JSON), on a file without and a
  file with escaped strings (a quarter of the clusters' ``ProjectName`` with old ClassAd escapes);
* the same on 200,000 ads: peak RSS under 300 MB.

``fairacct jobs --history F > /dev/null`` (the table a person reads) on 40,000 ads is measured
beside them, for comparison only.

CPU seconds, not wall time, are what count: the machine is shared, and a process that waits for
a core has not worked longer. Each process's CPU time and peak RSS are its own, from ``wait4``
(``ru_utime + ru_stime``, ``ru_maxrss``): this driver imports nothing heavy and generates the
files in a separate process, so the peak a child inherits from it before ``exec`` (the note in
``bench_readers.py``) is this driver's few MB, and the table says how many.

Run with ``python benchmarks/bench_cli.py`` (``--python /other/checkout/.venv/bin/python`` to
measure another checkout, e.g. before a change). Exits 0 when every target is met, 1 when one
is not, 2 when nothing could be measured.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from _verdict import verdict  # benchmarks/ is on the path when a benchmark runs

HERE = Path(__file__).resolve().parent
DEFAULT_DATA = HERE / ".data"

SMALL, LARGE = 40_000, 200_000
ESCAPED_SHARE = 0.25  # of the clusters spell ProjectName with old ClassAd escapes (bench_readers' example share)
MAX_START_CPU_S = 0.25
MIN_ADS_PER_CPU_S = 20_000
MAX_PEAK_MB = 300  # decimal megabytes, as bench_readers.py
TIMEOUT_S = 1800

EXIT_UNMEASURED = 2


@dataclass(frozen=True)
class Run:
    """The best (least CPU) of the repeats of one command; the largest peak RSS of them."""

    label: str
    cpu_s: float
    wall_s: float
    peak_mb: float
    ads: int | None

    @property
    def rate(self) -> float | None:
        return self.ads / self.cpu_s if self.ads else None


def _history(data: Path, n: int, escaped: float, python: str) -> Path:
    """The generated file of ``n`` ads (made once, in its own process, and kept in ``data``)."""
    # read, not imported: importing it would bring numpy into this driver, whose peak a child inherits
    version = re.search(r"^GENERATOR_VERSION = (\d+)", (HERE / "generate_history.py").read_text(), re.MULTILINE)
    name = f"history-v{version[1] if version else 0}-{n}" + (f"-e{round(100 * escaped)}" if escaped else "") + ".ads"
    path = data / name
    if not path.exists():
        data.mkdir(parents=True, exist_ok=True)
        cmd = [python, str(HERE / "generate_history.py"), str(path), str(n)] + (
            ["--escaped-share", str(escaped)] if escaped else []
        )
        subprocess.run(cmd, check=True, timeout=TIMEOUT_S)
    return path


def _cache(path: Path) -> None:
    """Read ``path`` into the page cache before anything is timed, a MB at a time: held whole,
    it would raise this driver's peak, which a child inherits."""
    with open(path, "rb") as fh:
        while fh.read(1 << 20):
            pass


def _measure(cmd: Sequence[str], *, cwd: Path) -> tuple[float, float, float]:
    """CPU-s, wall-s and peak RSS (MB) of one run of ``cmd``, its output thrown away."""
    began = time.perf_counter()
    with open(os.devnull, "wb") as null:
        proc = subprocess.Popen(list(cmd), cwd=cwd, stdout=null, stderr=subprocess.PIPE)
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        except BaseException:
            proc.kill()
            raise
        proc.returncode = os.waitstatus_to_exitcode(status)
        err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    wall = time.perf_counter() - began
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed (exit {proc.returncode}):\n{err[-2000:]}")
    return usage.ru_utime + usage.ru_stime, wall, usage.ru_maxrss * 1024 / 1e6


def _run(label: str, cmd: Sequence[str], repeat: int, cwd: Path, ads: int | None = None) -> Run:
    results = [_measure(cmd, cwd=cwd) for _ in range(repeat)]
    cpu, wall, _ = min(results)
    run = Run(label, cpu, wall, max(r[2] for r in results), ads)
    rate = f"{run.rate:>10,.0f}" if run.rate else f"{'':>10}"
    print(f"{label:<46} {run.cpu_s:>7.2f} {run.wall_s:>7.2f} {rate} {run.peak_mb:>8.0f}", flush=True)
    return run


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--python", default=sys.executable, help="the interpreter whose fairacct is measured (default: this one)"
    )
    parser.add_argument(
        "--data", type=Path, default=DEFAULT_DATA, help=f"where the generated files are kept (default {DEFAULT_DATA})"
    )
    parser.add_argument("--repeat", type=int, default=3, help="runs of each command; the least CPU counts (default 3)")
    parser.add_argument("--cpu", type=int, help="the core to pin to (default: the first allowed)")
    parser.add_argument("--small-only", action="store_true", help="skip the 200,000-ad file (its memory target)")
    args = parser.parse_args(argv)

    allowed = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {args.cpu if args.cpu is not None else min(allowed)})  # children inherit it
    python = args.python
    repo = Path(subprocess.run(
        [python, "-c", "import pathlib, probes; print(pathlib.Path(probes.__file__).parent.parent)"],
        capture_output=True, text=True, check=False, cwd="/",  # not this checkout's probes/, by accident
    ).stdout.strip() or "/nonexistent")  # fmt: skip
    if not (repo / "probes" / "cli").is_dir():
        print(f"{python} has no fairacct to measure (import probes failed)", file=sys.stderr)
        return EXIT_UNMEASURED
    fairacct = [python, "-m", "probes"]
    small = _history(args.data, SMALL, 0.0, python)
    escaped = _history(args.data, SMALL, ESCAPED_SHARE, python)
    for path in (small, escaped):
        _cache(path)

    driver_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e6
    print(f"fairacct of {repo}, {python}; this driver's peak RSS {driver_mb:.0f} MB (a bound on what a child inherits)")
    print(f"\n{'command (fresh process, one core)':<46} {'CPU s':>7} {'wall s':>7} {'ads/CPU-s':>10} {'peak MB':>8}")
    start = _run("python -c 'import probes.cli'", [python, "-c", "import probes.cli"], args.repeat, repo)
    version = _run("fairacct --version", [*fairacct, "--version"], args.repeat, repo)
    # the first jobs run after a change may compile the scanner (a minute): not what is measured
    _measure([*fairacct, "jobs", "--history", str(small), "--json"], cwd=repo)
    plain = _run(
        f"jobs --json, {SMALL:,} ads", [*fairacct, "jobs", "--history", str(small), "--json"], args.repeat, repo, SMALL
    )
    esc = _run(
        f"jobs --json, {SMALL:,} ads, escapes ({ESCAPED_SHARE:.0%} clusters)",
        [*fairacct, "jobs", "--history", str(escaped), "--json"], args.repeat, repo, SMALL,
    )  # fmt: skip
    _run(f"jobs (table), {SMALL:,} ads", [*fairacct, "jobs", "--history", str(small)], args.repeat, repo, SMALL)
    large = None
    if not args.small_only:
        big = _history(args.data, LARGE, 0.0, python)
        _cache(big)
        large = _run(
            f"jobs --json, {LARGE:,} ads", [*fairacct, "jobs", "--history", str(big), "--json"], 1, repo, LARGE
        )

    checks = [
        (start.cpu_s <= MAX_START_CPU_S, f"import probes.cli: {start.cpu_s:.2f} CPU-s (at most {MAX_START_CPU_S})"),
        (
            version.cpu_s <= MAX_START_CPU_S,
            f"fairacct --version: {version.cpu_s:.2f} CPU-s (at most {MAX_START_CPU_S})",
        ),
    ]
    for run in (plain, esc):
        assert run.rate is not None
        checks.append(
            (run.rate >= MIN_ADS_PER_CPU_S, f"{run.label}: {run.rate:,.0f} ads/CPU-s (at least {MIN_ADS_PER_CPU_S:,})")
        )
    if large is not None:
        checks.append(
            (large.peak_mb < MAX_PEAK_MB, f"{large.label}: peak RSS {large.peak_mb:.0f} MB (under {MAX_PEAK_MB})")
        )
    return verdict(checks)


if __name__ == "__main__":
    sys.exit(main())
