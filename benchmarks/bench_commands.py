"""Whole commands as processes against their kernels in a process (the scale issue, part 2).

Each command runs as a user runs it, a fresh process (``python -m probes``, the ``fairacct``
script's entry point), its CPU time (``ru_utime + ru_stime``) from ``wait4``; beside it, the
same command through ``probes.cli.main`` with the interpreter's own exit (the entry point
before this issue: the full collections of its teardown included), and its kernel timed in a
process after the imports (``time.process_time``):

* ``fairacct fairshare`` on wagap-2013 (``../shared/data/metacentrum``): at most 0.5 CPU-s, and
  within 1.5x of ``read_usage_inputs`` + ``fairshare_report`` + the report's text in a process;
  whether it loads numba (``-X importtime``), which a command that reads no ClassAd should not;
* ``fairacct jobs --history FILE --json > /dev/null`` at 50,000 and 200,000 generated ads
  (``generate_history.py``): within 1.5x of ``read_history`` in a process;
* ``fairacct summarize`` of an embedded store of 1,000,000 job records (``bench_summaries``'s,
  loaded untimed): at most 2 CPU-s, beside ``summarize`` in a process.

Run with ``python benchmarks/bench_commands.py [--repeat 3]``: the least CPU of the repeats
counts. Python writes no bytecode cache when ``PYTHONDONTWRITEBYTECODE`` is set (as it is on
this machine): then every run compiles the project's modules again (~7 % of a short command),
which an installed fairacct never does, so the commands run with it unset. Exits 0 when every
target is met, 1 when one is not, 2 when nothing could be measured.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from _verdict import verdict  # benchmarks/ is on the path when a benchmark runs

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
METACENTRUM = ROOT.parent / "shared" / "data" / "metacentrum"
DATA = HERE / ".data"
MAX_RATIO = 1.5
MAX_FAIRSHARE_CPU_S = 0.5
MAX_SUMMARIZE_CPU_S = 2.0
EXIT_UNMEASURED = 2
OLD_ENTRY = "import sys; from probes.cli import main; sys.exit(main())"
FS_CONFIG = '[fairshare]\nmetric = "mrpe"\ninterval_s = 604800\ndepth = 8\ndecay = 0.8\n'


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return {**env, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}


def _cpu(cmd: Sequence[str], stderr: Path | None = None) -> float:
    """CPU-s of one run of ``cmd`` (its output to /dev/null)."""
    with open(os.devnull, "wb") as null, open(stderr or os.devnull, "wb") as err:
        proc = subprocess.Popen(list(cmd), stdout=null, stderr=err, env=_env(), cwd=ROOT)
        _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(cmd)} failed" + (f":\n{stderr.read_text()[-2000:]}" if stderr else ""))
    return usage.ru_utime + usage.ru_stime


def _best(cmd: Sequence[str], repeat: int) -> float:
    return min(_cpu(cmd) for _ in range(repeat))


def _kernel(kind: str, *args: str) -> float:
    """The kernel's CPU-s in a fresh process, after its imports."""
    out = subprocess.run([sys.executable, __file__, "--worker", kind, *args], env=_env(), cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout  # fmt: skip
    return float(json.loads(out.strip().splitlines()[-1])["cpu_s"])


def _row(label: str, new: float, old: float | None, kernel: float) -> None:
    before = f"{old:>8.2f}" if old is not None else f"{'':>8}"
    print(f"{label:<46} {before} {new:>8.2f} {kernel:>8.2f} {new / kernel:>7.2f}", flush=True)


def _fairshare(tmp: Path, repeat: int) -> list[tuple[bool, str]]:
    config = tmp / "fs.toml"
    config.write_text(FS_CONFIG)
    args = ["fairshare", "--config", str(config), "--swf", str(METACENTRUM / "wagap-2013.swf"),
            "--machines", str(METACENTRUM / "wagap-2013.machines"), "--fs-dir", str(tmp / "fs")]  # fmt: skip
    new = _best([sys.executable, "-m", "probes", *args], repeat)
    old = _best([sys.executable, "-c", OLD_ENTRY, *args], repeat)
    kernel = min(_kernel("wagap", str(config)) for _ in range(repeat))
    _row("fairacct fairshare, wagap-2013", new, old, kernel)
    trace = tmp / "importtime.txt"
    _cpu([sys.executable, "-X", "importtime", "-m", "probes", *args], trace)
    imported = [line.split("|")[-1].strip() for line in trace.read_text().splitlines() if "|" in line]
    numba = "numba" in imported
    print(f"  numba loaded: {numba} (-X importtime; {len(imported)} modules imported)")
    return [
        (new <= MAX_FAIRSHARE_CPU_S, f"wagap fairshare as a process <= {MAX_FAIRSHARE_CPU_S} CPU-s: {new:.2f}"),
        (new <= MAX_RATIO * kernel, f"wagap fairshare <= {MAX_RATIO} x its kernel: {new:.2f} / {kernel:.2f} CPU-s"),
        (not numba, "wagap fairshare (no ClassAd read) loads no numba"),
    ]


def _jobs(n: int, repeat: int) -> list[tuple[bool, str]]:
    path = DATA / f"commands-history-{n}.ads"
    if not path.exists():
        DATA.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, str(HERE / "generate_history.py"), str(path), str(n)], check=True,
                       stdout=subprocess.DEVNULL)  # fmt: skip
    args = ["jobs", "--history", str(path), "--json"]
    new = _best([sys.executable, "-m", "probes", *args], repeat)
    old = _best([sys.executable, "-c", OLD_ENTRY, *args], repeat)
    kernel = min(_kernel("reader", str(path)) for _ in range(repeat))
    _row(f"fairacct jobs --json, {n:,} ads", new, old, kernel)
    return [(new <= MAX_RATIO * kernel, f"jobs --json, {n:,} ads, <= {MAX_RATIO} x read_history's CPU: "
                                        f"{new:.2f} / {kernel:.2f} CPU-s")]  # fmt: skip


def _summarize(tmp: Path, n: int, repeat: int) -> list[tuple[bool, str]]:
    store = tmp / "store.sqlite"
    subprocess.run([sys.executable, __file__, "--worker", "load", str(store), str(n)], env=_env(), cwd=ROOT,
                   check=True)  # fmt: skip
    args = ["summarize", "--store", f"sqlite:///{store}", "--from", "2025-01-01", "--to", "2025-12-31"]
    new = _best([sys.executable, "-m", "probes", *args], repeat)
    old = _best([sys.executable, "-c", OLD_ENTRY, *args], repeat)
    kernel = min(_kernel("summarize", str(store)) for _ in range(repeat))
    _row(f"fairacct summarize, {n:,} job records", new, old, kernel)
    return [(new <= MAX_SUMMARIZE_CPU_S, f"summarize {n:,} records as a process <= {MAX_SUMMARIZE_CPU_S} CPU-s: "
                                         f"{new:.2f}")]  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--records", type=int, default=1_000_000, help="job records in the summarized store")
    parser.add_argument("--worker", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return _worker(*args.worker)
    print(f"CPU seconds, least of {args.repeat} (load average {os.getloadavg()[0]:.1f})")
    print(f"{'':<46} {'old exit':>8} {'process':>8} {'kernel':>8} {'x kernel':>7}")
    checks: list[tuple[bool, str]] = []
    with tempfile.TemporaryDirectory(prefix="bench-commands-") as tmp:
        if METACENTRUM.is_dir():
            checks += _fairshare(Path(tmp), args.repeat)
        else:
            print(f"note: {METACENTRUM} is absent: the fairshare command is not measured")
        for n in (50_000, 200_000):
            checks += _jobs(n, args.repeat)
        checks += _summarize(Path(tmp), args.records, args.repeat)
    if not checks:
        return EXIT_UNMEASURED
    return verdict(checks)


# -- the kernels, in a process of their own ----------------------------------------------------------


def _worker(kind: str, *args: str) -> int:
    sys.path.insert(0, str(ROOT))
    if kind == "wagap":
        from probes.cli.usage_views import diagnose_f
        from probes.config import load_config
        from probes.pipeline.usage import fairshare_report, fs_files, read_usage_inputs

        config = load_config(Path(args[0]))
        began = time.process_time()
        inputs = read_usage_inputs(config, swf=METACENTRUM / "wagap-2013.swf",
                                   machines_file=METACENTRUM / "wagap-2013.machines")  # fmt: skip
        report = fairshare_report(inputs, config)
        diagnose_f(report.result), fs_files(report.result)
    elif kind == "reader":
        import probes.sources.classad.long  # noqa: F401  # the scanner and numba, which the reader imports on first use
        from probes.sources.history import read_history

        began = time.process_time()
        read_history([args[0]])
    elif kind == "summarize":
        from bench_summaries import FIRST, LAST

        from collector.sinks.sqlite import EmbeddedStore
        from collector.summaries import summarize

        with EmbeddedStore(Path(args[0])) as store:
            began = time.process_time()
            summarize(store, FIRST, LAST, probe="bench", kinds=["job"], chunk_days=366)
    elif kind == "load":
        from bench_summaries import job_docs

        from collector.sinks.base import Aggregation
        from collector.sinks.sqlite import EmbeddedStore
        from collector.summaries import SOURCES

        docs = job_docs(int(args[1]))
        with EmbeddedStore(Path(args[0])) as store:
            source = SOURCES["job"]
            store.index_aggregation(Aggregation("job", source.dimensions, source.totals, "day"))
            for start in range(0, len(docs), 20_000):
                store.send("job", docs[start : start + 20_000])
        return 0
    else:
        raise SystemExit(f"unknown worker {kind!r}")
    print(json.dumps({"cpu_s": time.process_time() - began}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
