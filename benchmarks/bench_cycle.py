"""Benchmark the probe cycle: ``fairacct probe once`` into the embedded store, as a whole process.

Two inputs: the demo pool (``config/demo.toml``) and the demo pool's slots with a generated
history of 200,000 jobs (``generate_history.py``). Each run is a fresh process pinned to one
core, with a fresh state directory (a first cycle: every job is new, every record goes through
the outbox into the store). Two figures per run:

* ``process``: the CPU seconds (user + sys, from ``wait4``) of ``python -m probes probe once
  --config C --json``, start, imports, reading and printing included;
* ``cycle``: in another fresh process, the CPU seconds of ``run_once`` alone
  (``time.process_time`` around it), and of its commit and delivery (the records from the
  cycle's batches into the outbox, and from the outbox into the store) inside it.

``--old REV`` measures a git revision too, from a ``git worktree add`` of it (removed at the
end), in the same run, the two codes' runs interleaved so that a change in the machine's load
touches both alike. The least CPU of ``--repeat`` runs counts.

Run with ``python benchmarks/bench_cycle.py [--old 536e45f] [--jobs 200000] [--repeat 3]``.
Exits 0 once measured, 2 when nothing could be measured.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DEFAULT_DATA = HERE / ".data"
TIMEOUT_S = 1800
EXIT_UNMEASURED = 2


def _history(data: Path, n: int) -> Path:
    """The generated history of ``n`` jobs (made once, in its own process, and kept in ``data``)."""
    version = re.search(r"^GENERATOR_VERSION = (\d+)", (HERE / "generate_history.py").read_text(), re.MULTILINE)
    path = data / f"history-v{version[1] if version else 0}-{n}.ads"
    if not path.exists():
        data.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [sys.executable, str(HERE / "generate_history.py"), str(path), str(n)], check=True, timeout=TIMEOUT_S
        )
    return path


def _config(into: Path, history: Path) -> Path:
    """A configuration of the demo pool's slots and queue with ``history``, its state in ``into``/state."""
    demo = ROOT / "config" / "demo"
    path = into / "cycle.toml"
    path.write_text(
        f'[pool]\nname = "demo"\ninterval_s = 300\n\n'
        f"[sources]\nstatus_files = [{json.dumps(str(demo / 'status.ads'))}]\n"
        f"idle_files = [{json.dumps(str(demo / 'queue.ads'))}]\nhistory = [{json.dumps(str(history))}]\n\n"
        f'[machines]\nspeed_attribute = "HEPSPEC"\n\n[probe]\nstate_dir = {json.dumps(str(into / "state"))}\n'
    )
    return path


def _fresh(work: Path, history: Path) -> Path:
    """A new directory with a configuration and an empty state directory."""
    run = Path(tempfile.mkdtemp(dir=work))
    return _config(run, history)


def _env(code: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return env | {"PYTHONPATH": str(code), "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def _process(code: Path, config: Path, python: str) -> float:
    """CPU-s of one ``probe once`` process of ``code``."""
    cmd = [python, "-m", "probes", "probe", "once", "--config", str(config), "--json"]
    with open(os.devnull, "wb") as null:
        proc = subprocess.Popen(cmd, cwd=code, env=_env(code), stdout=null, stderr=subprocess.PIPE)
        _, status, usage = os.wait4(proc.pid, 0)
        err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    code_ = os.waitstatus_to_exitcode(status)
    if code_ not in (0, 1):  # 1: a cycle that left records unsent or dead (not the case here)
        raise SystemExit(f"{' '.join(cmd)} in {code} failed (exit {code_}):\n{err[-2000:]}")
    return usage.ru_utime + usage.ru_stime


def _cycle(code: Path, config: Path, python: str) -> dict[str, float]:
    """The in-process figures of one cycle of ``code`` (see :func:`_worker`)."""
    out = subprocess.run(
        [python, str(Path(__file__).resolve()), "--worker", str(config)],
        cwd=code, env=_env(code), capture_output=True, text=True, timeout=TIMEOUT_S, check=False,
    )  # fmt: skip
    if out.returncode != 0:
        raise SystemExit(f"the cycle of {code} failed:\n{out.stderr[-2000:]}")
    result: dict[str, float] = json.loads(out.stdout.splitlines()[-1])
    return result


def _worker(config_path: str) -> int:
    """One cycle in this process, the code from PYTHONPATH: prints its CPU-s as JSON."""
    # the scanner and numba, before the clock, as the other reader workers do: a revision whose
    # readers import them on first use (since the lazy imports) would count their loading in
    # its cycle, one that imported them with its modules (e.g. faeff88) would not
    import probes.sources.classad.long  # noqa: F401
    from collector import sinks
    from collector.outbox import Outbox
    from probes.config import load_config
    from probes.pipeline import cycle

    config = load_config(config_path)
    state = config.probe.state_dir
    spent = {"commit": 0.0, "deliver": 0.0}

    def timed(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def run(*args: Any, **kwargs: Any) -> Any:
            began = time.process_time()
            try:
                return fn(*args, **kwargs)
            finally:
                spent[name] += time.process_time() - began

        return run

    lane = importlib.import_module("probes.pipeline.lane") if importlib.util.find_spec("probes.pipeline.lane") else None
    if lane is not None:  # since issue 52 point 3: the record lane's commit and delivery
        lane._commit = timed("commit", lane._commit)  # type: ignore[attr-defined]
        lane._deliver = timed("deliver", lane._deliver)  # type: ignore[attr-defined]
    elif hasattr(cycle, "commit"):  # the cycle looks them up here
        cycle.commit = timed("commit", cycle.commit)  # type: ignore[method-assign]
        cycle.deliver = timed("deliver", cycle.deliver)  # type: ignore[method-assign]
    else:  # an older revision (--old, e.g. faeff88): its run_once calls the outbox itself
        Outbox.commit = timed("commit", Outbox.commit)  # type: ignore[method-assign]
        Outbox.flush = timed("deliver", Outbox.flush)  # type: ignore[method-assign]
    state.mkdir(parents=True, exist_ok=True)
    if hasattr(sinks, "open_store"):  # since issue 52: a configured store is opened from its settings
        sink = sinks.open_store(config.store, config.opening())
    else:  # an older revision (--old): its settings as the sink's keyword arguments
        sink = sinks.open_sink(config.store.url, base=state, auth=config.store.auth())
    with Outbox(state / "outbox.sqlite") as outbox:
        began = time.process_time()
        if hasattr(cycle, "ProbeCycle"):  # since issue 38: the one cycle object, probe once's call
            done, delivery = cycle.ProbeCycle(config, probe="bench@cycle").once(outbox, sink)
        else:  # an older revision (--old)
            got = cycle.run_once(config, outbox, sink, probe="bench@cycle")
            # (result, delivery) once delivery was split off; before (e.g. faeff88) one result said both
            done, delivery = got if isinstance(got, tuple) else (got, got)
        total = time.process_time() - began
    sink.close()
    assert delivery.flushed is not None and not delivery.unsent, delivery
    records = sum(done.enqueued.values())
    print(json.dumps({"run_once": total, "records": records, **spent}))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--old", metavar="REV", help="also measure this git revision (before a change)")
    parser.add_argument("--jobs", type=int, default=200_000, help="jobs of the generated history (default 200,000)")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each measurement; the least CPU counts")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="where the generated history is kept")
    parser.add_argument("--cpu", type=int, help="the core to pin to (default: the first allowed)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return _worker(args.worker)

    allowed = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {args.cpu if args.cpu is not None else min(allowed)})  # children inherit it
    python = sys.executable
    inputs = {"demo": ROOT / "config" / "demo" / "history.ads", f"{args.jobs:,} jobs": _history(args.data, args.jobs)}
    with tempfile.TemporaryDirectory(prefix="bench-cycle-") as tmp:
        work = Path(tmp)
        codes = {"new": ROOT}
        if args.old:
            old = work / "old"
            subprocess.run(["git", "worktree", "add", "--detach", str(old), args.old], cwd=ROOT, check=True,
                           capture_output=True)  # fmt: skip
            codes = {"old": old, "new": ROOT}
        try:
            return _measure_all(codes, inputs, work, python, args.repeat, args.old)
        finally:
            if args.old:
                subprocess.run(["git", "worktree", "remove", "--force", str(work / "old")], cwd=ROOT, check=False)


def _measure_all(
    codes: dict[str, Path], inputs: dict[str, Path], work: Path, python: str, repeat: int, old: str | None
) -> int:
    for code in codes.values():  # the scanner compiled and cached, the files in the page cache: not measured
        _process(code, _fresh(work, inputs["demo"]), python)
    for path in inputs.values():
        with open(path, "rb") as fh:
            while fh.read(1 << 20):
                pass
    label = {"old": f"old ({old})", "new": "new (this checkout)"}
    print(f"{'input':<16} {'code':<22} {'process CPU-s':>13} {'run_once CPU-s':>14} {'commit':>7} {'deliver':>8} "
          f"{'records':>8}", flush=True)  # fmt: skip
    best: dict[tuple[str, str], tuple[float, dict[str, float]]] = {}
    for name, history in inputs.items():
        process: dict[str, list[float]] = {c: [] for c in codes}
        cycles: dict[str, list[dict[str, float]]] = {c: [] for c in codes}
        for _ in range(repeat):
            for c, code in codes.items():
                process[c].append(_process(code, _fresh(work, history), python))
                cycles[c].append(_cycle(code, _fresh(work, history), python))
        for c in codes:
            cyc = min(cycles[c], key=lambda r: r["run_once"])
            best[(name, c)] = (min(process[c]), cyc)
            print(f"{name:<16} {label[c]:<22} {min(process[c]):>13.2f} {cyc['run_once']:>14.2f} "
                  f"{cyc['commit']:>7.2f} {cyc['deliver']:>8.2f} {int(cyc['records']):>8,}", flush=True)  # fmt: skip
    if "old" in codes:
        print("\nnew / old")
        for name in inputs:
            (p_old, c_old), (p_new, c_new) = best[(name, "old")], best[(name, "new")]
            store_old, store_new = c_old["commit"] + c_old["deliver"], c_new["commit"] + c_new["deliver"]
            print(f"{name:<16} process {p_new / p_old:.2f}, run_once {c_new['run_once'] / c_old['run_once']:.2f}, "
                  f"commit + deliver {store_new / store_old:.2f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
