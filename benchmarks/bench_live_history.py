"""Benchmark the live history pass against ``condor_history -long`` on the same schedd.

Targets, on a real HTCondor pool (``../shared/htcondor``, started and removed here)
whose schedd's history file holds N generated jobs (``generate_history.py``, written as the
schedd writes its history by ``schedd_history.py``, in the generated order: far from end-time
order; the jobs of one of its schedds made the pool's schedd's) at N = 100,000 and 1,000,000:

* one live history pass (``LivePool.history_pieces`` as ``fairacct probe once`` reads a schedd,
  each part written out and let go as the probe commits each) within 1.5x of ``condor_history
  -name SCHEDD -long > FILE`` against the same schedd, in wall time and in CPU time (each command
  a whole process, start and imports included; CPU time from ``wait4``: the process and the
  children it reaped, here the bindings' worker);
* the same pass within 1.5x of the CPU of ``condor_history -long > FILE`` and then the file reader
  (``read_history``, as ``fairacct jobs --history FILE`` reads it) on that file, both processes;
* every job that ``condor_history -long`` prints read exactly once (none lost, none twice), and a
  second pass from the first one's checkpoint reading none;
* at 1,000,000 jobs, the peaks of the pass's process and of the bindings' worker at most
  1,500 MB together (issue 34).

``--route files`` (the default) reads the schedd's history file (``pool.history_files``);
``--route query`` asks the schedd (``Schedd.history``, in parts of ``--piece`` jobs when the
backlog is longer). The schedd's history helper (a ``condor_history`` it starts per query)
scans the file; its CPU time, taken from the schedd's reaped children, is shown beside each,
not counted in the ratio: it is the schedd's work, not the client's. ``--old REV`` measures the
code of a git revision the same way (exported to a temporary directory and put first on the
path), for the figures before a change.

Run with ``python benchmarks/bench_live_history.py [--sizes 100000 1000000] [--order realistic]
[--route files|query] [--piece N] [--old REV]``. It needs about 12 GB of disk at 1,000,000 jobs
(the dump twice, the history file, condor_history's output). Exits 0 when every target is met,
1 when one is not, 2 when nothing could be measured.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from _verdict import verdict  # benchmarks/ is on the path when a benchmark runs
from _worker import peak_rss_mb, peak_rss_mb_of

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SHARED = ROOT.parent / "shared"
DEFAULT_DATA = HERE / ".data"
MAX_RATIO = 1.5
MAX_PEAK_MB = 1500  # issue 34: a 1,000,000-job backlog, probe plus the bindings' worker
TIMEOUT_S = 4 * 3600  # a pass of the old code over 1,000,000 jobs is hours
EXIT_UNMEASURED = 2

_GLOBAL_JOB_ID = re.compile(rb'^GlobalJobId = "([^"]*)"$', re.MULTILINE)


@dataclass(frozen=True)
class Run:
    """One measured command: CPU-s (with its reaped children), wall-s, and the schedd's CPU-s."""

    label: str
    cpu_s: float
    wall_s: float
    schedd_cpu_s: float
    jobs: int
    detail: dict[str, object]


# -- the driver ------------------------------------------------------------------------------------


def _dump(data: Path, n: int) -> Path:
    """The generated ``-long`` dump of ``n`` jobs (made once, in its own process, kept in ``data``)."""
    version = re.search(r"^GENERATOR_VERSION = (\d+)", (HERE / "generate_history.py").read_text(), re.MULTILINE)
    path = data / f"history-v{version[1] if version else 0}-{n}.ads"
    if not path.exists():
        data.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, str(HERE / "generate_history.py"), str(path), str(n)], check=True)
    return path


def _as_schedd(dump: Path, schedd: str) -> Path:
    """The dump with the jobs of one of its schedds (``ap20.uc.osg-htc.org``) made ``schedd``'s,
    as the pool's own schedd would have written them (made once, kept beside the dump)."""
    path = dump.with_name(f"{dump.stem}-{schedd}.ads")
    if not path.exists():
        with open(dump, "rb") as src, open(path.with_suffix(".tmp"), "wb") as out:
            tail = b""
            while block := src.read(1 << 24):
                block = tail + block
                cut = block.rfind(b"\n") + 1
                out.write(block[:cut].replace(b'"ap20.uc.osg-htc.org#', f'"{schedd}#'.encode()))
                tail = block[cut:]
            out.write(tail)
        path.with_suffix(".tmp").rename(path)
    return path


def _install(dump: Path, history: Path, realistic: bool) -> None:
    """Put the dump's jobs in place of the schedd's history file. Written over the same file: the
    schedd keeps it open (O_APPEND), so jobs it finishes later land after them."""
    for rotated in history.parent.glob(f"{history.name}.*"):
        rotated.unlink()
    if not history.exists():  # no job has finished yet: the schedd's own, to append to
        history.touch()
        owner = history.parent.stat()
        os.chown(history, owner.st_uid, owner.st_gid)
    cmd = [sys.executable, str(HERE / "schedd_history.py"), str(dump), str(history)]
    subprocess.run([*cmd, *(["--realistic"] if realistic else [])], check=True)
    with open(history, "rb") as fh:  # into the page cache before anything is timed
        while fh.read(1 << 24):
            pass


def _children_cpu(pid: int) -> float:
    """CPU-s of the children a process has reaped (the schedd's history helpers)."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
        fields = fh.read().rpartition(")")[2].split()
    return (int(fields[13]) + int(fields[14])) / os.sysconf("SC_CLK_TCK")


def _measure(label: str, cmd: Sequence[str], out: Path, schedd: int, env: dict[str, str] | None = None) -> Run:
    """Run ``cmd`` with its output to ``out``; its CPU, wall, and the schedd's CPU meanwhile."""
    before = _children_cpu(schedd)
    began = time.perf_counter()
    with open(out, "wb") as fh:
        proc = subprocess.Popen(list(cmd), stdout=fh, stderr=subprocess.PIPE, env=env)
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        except BaseException:
            proc.kill()
            raise
    wall = time.perf_counter() - began
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{label}: {' '.join(cmd)} failed:\n{err[-3000:]}")
    time.sleep(1)  # the schedd reaps its helper when the helper has written its last ad
    return Run(label, usage.ru_utime + usage.ru_stime, wall, _children_cpu(schedd) - before, 0, {})


def _ids(path: Path) -> list[bytes]:
    """The GlobalJobIds of a ``-long`` output, in its order."""
    ids: list[bytes] = []
    with open(path, "rb") as fh:
        tail = b""
        while block := fh.read(1 << 24):
            block = tail + block
            cut = block.rfind(b"\n") + 1
            ids += _GLOBAL_JOB_ID.findall(block, 0, cut)
            tail = block[cut:]
    return ids


def _export(rev: str, into: Path) -> Path:
    """The packages of git revision ``rev``, exported under ``into``."""
    archive = subprocess.run(["git", "archive", rev, "probes", "collector", "mappings"], cwd=ROOT, check=True,
                             capture_output=True).stdout  # fmt: skip
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def _pass(
    label: str, pool: object, work: Path, schedd: int, code: Path | None, checkpoint: Path | None, files: str
) -> Run:
    """One live history pass in a fresh interpreter (of ``code``'s packages, if given); reading
    the schedd's history ``files`` (``pool.history_files``) unless empty."""
    ids, mark = work / f"{label}.ids", work / f"{label}.checkpoint.json"
    config = str(pool.condor_config)  # type: ignore[attr-defined]
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", config, str(ids), str(mark), files]
    if checkpoint is not None:
        cmd.append(str(checkpoint))
    env = {**os.environ, "PYTHONPATH": str(code)} if code is not None else None
    run = _measure(label, cmd, work / f"{label}.json", schedd, env)
    detail = json.loads((work / f"{label}.json").read_text().strip().splitlines()[-1])
    return Run(label, run.cpu_s, run.wall_s, run.schedd_cpu_s, int(detail["jobs"]), detail)


def _read_file(path: Path, work: Path, schedd: int) -> Run:
    """``read_history`` of ``condor_history -long``'s output, in a fresh interpreter."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", "reader", str(path)]
    out = work / "reader.json"
    run = _measure("  read_history(FILE)", cmd, out, schedd)
    detail = json.loads(out.read_text().strip().splitlines()[-1])
    return Run(run.label, run.cpu_s, run.wall_s, run.schedd_cpu_s, int(detail["jobs"]), detail)


def _probe_once(pool: object, work: Path, schedd: int, files: str, piece: int) -> Run:
    """``fairacct probe once`` of the pool into an embedded store, the schedd's history read as
    the pass reads it (``files``: "[NAME=PATH]"): its CPU, wall, the schedd's, and the peaks of
    the probe and of each process it started (the bindings' workers), polled from ``/proc``."""
    state = work / "probe-once"
    name, _, path = files.partition("=")
    table = f'history_files = {{ "{name}" = "{path}" }}\n' if path else ""
    config = work / "probe-once.toml"
    config.write_text(
        f'[pool]\nname = "bench"\ncondor_config = "{pool.condor_config}"\ntimeout_s = 3600\n'  # type: ignore[attr-defined]
        f'history_piece = {piece}\n{table}[sources]\nlive = true\n[probe]\nstate_dir = "{state}"\n'
    )
    before = _children_cpu(schedd)
    began = time.perf_counter()
    cmd = [sys.executable, "-m", "probes", "probe", "once", "--config", str(config)]
    said, errors = work / "probe-once.out", work / "probe-once.err"
    with open(said, "wb") as out, open(errors, "wb") as err:
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=out, stderr=err)
    peaks: dict[int, float] = {}
    while True:  # reaped here, with its rusage; its peaks polled until then
        for pid in [proc.pid, *_descendants(proc.pid)]:
            with contextlib.suppress(OSError, RuntimeError):  # gone, or a zombie: its peak was taken before
                peaks[pid] = max(peaks.get(pid, 0.0), peak_rss_mb(pid))
        done, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if done:
            break
        time.sleep(0.2)
    wall = time.perf_counter() - began
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"probe once failed ({status}):\n{errors.read_text()[-3000:]}")
    with sqlite3.connect(state / "fairacct.sqlite") as db:
        stored, distinct = db.execute("SELECT count(*), count(DISTINCT id) FROM job").fetchone()
    probe = peaks.pop(proc.pid, 0.0)
    lines = [line for line in said.read_text().splitlines() if "history" in line or line.startswith("job:")]
    detail = {"probe_peak_mb": round(probe), "workers_peak_mb": round(max(peaks.values(), default=0.0)),
              "stored": stored, "distinct": distinct, "said": lines}  # fmt: skip
    return Run("probe once (records, store)", usage.ru_utime + usage.ru_stime, wall, _children_cpu(schedd) - before,
               stored, detail)  # fmt: skip


def _descendants(pid: int) -> list[int]:
    """The processes ``pid`` started, and theirs."""
    found: list[int] = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children", encoding="ascii") as fh:
                for child in map(int, fh.read().split()):
                    found += [child, *_descendants(child)]
    except OSError:
        pass
    return found


def _row(run: Run, base: Run | None) -> None:
    ratio = f"{run.wall_s / base.wall_s:>6.2f} {run.cpu_s / base.cpu_s:>6.2f}" if base else f"{'':>6} {'':>6}"
    print(f"{run.label:<34} {run.jobs:>9,} {run.wall_s:>9.1f} {run.cpu_s:>9.1f} {ratio} {run.schedd_cpu_s:>10.1f}",
          flush=True)  # fmt: skip


def _one_size(
    n: int, pool: object, data: Path, work: Path, realistic: bool, old: Path | None, route: str, piece: int
) -> list[tuple[bool, str]]:
    from tests.htcondor_pool import HTCondorPool

    assert isinstance(pool, HTCondorPool)
    history = Path(pool.tool("condor_config_val", "HISTORY").strip())
    name = pool.tool("condor_status", "-schedd", "-af", "Name").strip()
    _install(_as_schedd(_dump(data, n), name), history, realistic)
    schedd = pool.daemon_pid("condor_schedd")
    address = pool.tool("condor_status", "-schedd", "-af", "MyAddress").strip()
    files = f"{name}={history}" if route == "files" else ""
    files += f"@{piece}"
    print(f"\n{n:,} jobs in {history} ({'realistic' if realistic else 'generated'} order), schedd {address}")
    print(f"{'':<34} {'jobs':>9} {'wall s':>9} {'CPU s':>9} {'x wall':>6} {'x CPU':>6} {'schedd CPU':>10}")
    long_out = work / f"condor_history-{n}.long"
    tool = [str(pool.release / "bin" / "condor_history"), "-name", address, "-long"]
    ch = _measure("condor_history -long > FILE", tool, long_out, schedd, pool.env())
    expected = _ids(long_out)
    ch = Run(ch.label, ch.cpu_s, ch.wall_s, ch.schedd_cpu_s, len(expected), {})
    _row(ch, None)
    reader = _read_file(long_out, work, schedd)
    long_out.unlink()  # gigabytes at 1,000,000 jobs
    _row(reader, None)
    tools = Run("  the tools: -long > FILE, then the reader", ch.cpu_s + reader.cpu_s, ch.wall_s + reader.wall_s,
                ch.schedd_cpu_s, reader.jobs, {})  # fmt: skip
    _row(tools, None)
    print(f"  read_history: {reader.jobs / reader.cpu_s:,.0f} jobs per CPU-s (the whole process), "
          f"peak {reader.detail.get('peak_mb', '?')} MB, table {reader.detail.get('table_mb', '?')} MB")  # fmt: skip
    checks = []
    runs = [(f"live history pass ({route})", None)] + ([("the old code's pass", old)] if old else [])
    for label, code in runs:
        first = _pass(f"{label} {n}", pool, work, schedd, code, None, files if code is None else "")
        got = (work / f"{label} {n}.ids").read_bytes().split()
        lost, twice = len(set(expected) - set(got)), len(got) - len(set(got))
        _row(Run(label, first.cpu_s, first.wall_s, first.schedd_cpu_s, first.jobs, {}), ch)
        again = _pass(f"{label} {n} again", pool, work, schedd, code, work / f"{label} {n}.checkpoint.json",
                      files if code is None else "")  # fmt: skip
        _row(Run("  a second pass", again.cpu_s, again.wall_s, again.schedd_cpu_s, again.jobs, {}), ch)
        print(f"  {label}: {lost:,} of {len(expected):,} jobs lost, {twice:,} read twice, "
              f"calls {first.detail['pages']}, worker peak {first.detail.get('worker_peak_mb', '?')} MB, "
              f"probe peak {first.detail.get('peak_mb', '?')} MB")  # fmt: skip
        if code is None:
            checks += [
                (first.wall_s <= MAX_RATIO * ch.wall_s,
                 f"{n:,} jobs: live pass wall {first.wall_s:.1f} s <= {MAX_RATIO} x condor_history's {ch.wall_s:.1f}"),
                (first.cpu_s <= MAX_RATIO * ch.cpu_s,
                 f"{n:,} jobs: live pass CPU {first.cpu_s:.1f} s <= {MAX_RATIO} x condor_history's {ch.cpu_s:.1f}"),
                (first.cpu_s <= MAX_RATIO * tools.cpu_s,
                 f"{n:,} jobs: live pass CPU {first.cpu_s:.1f} s <= {MAX_RATIO} x condor_history's and the reader's "
                 f"{tools.cpu_s:.1f}"),
                (lost == 0 and twice == 0 and first.jobs == len(expected),
                 f"{n:,} jobs: every job of condor_history -long read once ({lost} lost, {twice} twice)"),
                (again.jobs == 0, f"{n:,} jobs: a second pass reads none again ({again.jobs})"),
            ]  # fmt: skip
            peak = sum(int(str(first.detail.get(k) or 0)) for k in ("peak_mb", "worker_peak_mb"))
            if n >= 1_000_000:
                checks.append(
                    (peak <= MAX_PEAK_MB, f"{n:,} jobs: probe plus worker peak {peak:,} MB <= {MAX_PEAK_MB:,}")
                )
            once = _probe_once(pool, work, schedd, files.partition("@")[0], piece)
            _row(once, ch)
            d = once.detail
            print(f"  probe once: {d['stored']:,} job records stored ({d['distinct']:,} distinct), probe peak "
                  f"{d['probe_peak_mb']:,} MB, bindings' workers peak {d['workers_peak_mb']:,} MB; it said "
                  f"{d['said']}")  # fmt: skip
            peak = int(d["probe_peak_mb"]) + int(d["workers_peak_mb"])  # type: ignore[call-overload]
            once_ok = d["stored"] == d["distinct"] == len(expected)
            checks.append((once_ok, f"{n:,} jobs: probe once stored each job once"))
            if n >= 1_000_000:
                said = f"{n:,} jobs: probe once, probe and workers peak {peak:,} MB <= {MAX_PEAK_MB}"
                checks.append((peak <= MAX_PEAK_MB, said))
    return checks


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--order", choices=("generated", "realistic"), default="generated")
    parser.add_argument("--route", choices=("files", "query"), default="files",
                        help="read the schedd's history files (pool.history_files), or ask the schedd")  # fmt: skip
    parser.add_argument("--piece", type=int, default=50_000, help="pool.history_piece")
    parser.add_argument("--old", metavar="REV", help="also measure the code of this git revision (before a change)")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="where the generated dumps are kept")
    parser.add_argument("--worker", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return _worker(*args.worker)
    sys.path.insert(0, str(ROOT))
    from tests.htcondor_pool import remove, start_pool, unavailable

    why = unavailable(SHARED)
    if why:
        print(f"cannot measure: {why}", file=sys.stderr)
        return EXIT_UNMEASURED
    checks: list[tuple[bool, str]] = []
    with tempfile.TemporaryDirectory(prefix="bench-live-history-") as tmp:
        work = Path(tmp)
        old = None
        if args.old:
            (work / "old").mkdir()
            old = _export(args.old, work / "old")
        pool = start_pool(SHARED)
        try:
            for n in args.sizes:
                checks += _one_size(n, pool, args.data, work, args.order == "realistic", old, args.route, args.piece)
        finally:
            remove(pool)
    return verdict(checks)


# -- the measured process ----------------------------------------------------------------------------


def _worker(
    condor_config: str, ids_out: str, checkpoint_out: str = "", files: str = "", checkpoint_in: str | None = None
) -> int:
    """One pass over every schedd's history, as ``probe once`` reads it, a part at a time (each
    part's job ids written, then let go, as the probe commits each): the job ids to
    ``ids_out``, the checkpoints to ``checkpoint_out``, a JSON line of figures to stdout."""
    if condor_config == "reader":  # the file reader on condor_history -long's output instead
        from probes.sources.history import read_history

        jobs, _ = read_history([ids_out])
        print(json.dumps({"jobs": len(jobs), "peak_mb": round(peak_rss_mb()),
                          "table_mb": round(int(jobs.memory_usage(deep=True).sum()) / 1e6)}))  # fmt: skip
        return 0
    from probes.config import parse_config
    from probes.pipeline.reading import live_pool

    pool: dict[str, object] = {"name": "bench", "condor_config": condor_config, "timeout_s": 3600}
    files, _, piece = files.partition("@")  # "[NAME=PATH]@PIECE"
    pool["history_piece"] = int(piece or 50_000)
    if files:
        pool["history_files"] = dict([files.split("=", 1)])
    live = live_pool(parse_config({"pool": pool, "sources": {"live": True}}))
    schedds, _ = live.schedds()
    marks = json.loads(Path(checkpoint_in).read_text()) if checkpoint_in else {}
    checkpoints: dict[str, object] = {}
    pages: dict[str, int] = {}
    failures: dict[str, str] = {}
    n_jobs = parts = 0
    with open(ids_out, "w", encoding="ascii") as out:
        for read in live.history_pieces(schedds, marks.get):
            out.write("".join(f"{i}\n" for i in read.jobs["job_id"]))
            n_jobs, parts = n_jobs + len(read.jobs), parts + 1
            checkpoints |= read.checkpoints
            pages |= read.pages
            failures |= read.failures
            del read
    Path(checkpoint_out).write_text(json.dumps(checkpoints))
    bindings = live.bindings
    workers = [*bindings._idle, *bindings._busy] if bindings is not None else []  # a benchmark's look inside
    peaks = [round(p) for p in (peak_rss_mb_of(w.process.pid) for w in workers) if p is not None]
    print(json.dumps({"jobs": n_jobs, "parts": parts, "pages": pages, "failures": failures,
                      "peak_mb": round(peak_rss_mb()), "worker_peak_mb": max(peaks, default=None)}))  # fmt: skip
    live.cancel()
    return 0


if __name__ == "__main__":
    sys.exit(main())
