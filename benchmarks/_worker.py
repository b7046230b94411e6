"""One measurement in a fresh interpreter: run it, and read the JSON result it prints last."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

# Libraries must not spread work over threads the pinned core then has to time-share; set
# before the worker's interpreter starts, since BLAS reads them at import.
WORKER_ENV = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def peak_rss_mb(pid: int | str = "self") -> float:
    """Peak RSS of a process (this one by default) in MB (10^6 bytes), from ``VmHWM``.

    Not ``ru_maxrss``: Linux carries the pre-exec peak of the forked parent over into the child's
    ``ru_maxrss``, so it can report the benchmark driver's memory instead of the measured one's.
    VmHWM belongs to the process's own address space, which exec starts afresh.
    """
    with open(f"/proc/{pid}/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024 / 1e6
    raise RuntimeError(f"no VmHWM in /proc/{pid}/status")


def peak_rss_mb_of(pid: int | str | None) -> float | None:
    """:func:`peak_rss_mb` of a process that may have exited by now, or never started (None then)."""
    if pid is None:
        return None
    try:
        return peak_rss_mb(pid)
    except OSError:
        return None


class Unmeasured(Exception):
    """A measurement could not be made at all."""


def run_worker(cmd: Sequence[str], what: str, *, cwd: Path, timeout_s: float) -> dict[str, Any]:
    """Run ``cmd`` and return the JSON object on its last line of output; :class:`Unmeasured`,
    with the end of its stderr, when it fails, hangs past ``timeout_s`` or prints no result."""
    try:
        proc = subprocess.run(
            list(cmd),
            check=False,  # a failing worker is reported with its stderr below
            cwd=cwd,
            env={**os.environ, **WORKER_ENV},
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
    except subprocess.TimeoutExpired as exc:
        raise Unmeasured(f"{what} did not finish within {timeout_s:g} s") from exc
    # the result is the last line; the code under test may print before it
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        tail = "\n".join(proc.stderr.strip().splitlines()[-20:])
        raise Unmeasured(f"{what} failed (exit {proc.returncode}):\n{tail}")
    try:
        result: dict[str, Any] = json.loads(lines[-1])
    except json.JSONDecodeError as exc:
        raise Unmeasured(f"{what} printed no result; its last line was {lines[-1][:200]!r}") from exc
    return result
