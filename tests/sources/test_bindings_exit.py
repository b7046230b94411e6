"""The bindings' worker whose caller is gone (the probe killed during a flush) ends without a
traceback: a probe's log once held 15 lines of ``BrokenPipeError`` from it (issue 51, point 12)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from ..conftest import ROOT

# a worker started as the probe starts it, whose caller asks one call and is gone at once: the
# worker (still importing the bindings) finds the pipe broken at its first answer
SCRIPT = """
import multiprocessing, sys
from probes.sources.bindings import _serve

if __name__ == "__main__":
    parent, child = multiprocessing.Pipe()
    worker = multiprocessing.get_context("spawn").Process(target=_serve, args=(child, sys.argv[1], 5.0, ""))
    worker.start()
    child.close()
    parent.send(("nowhere", "", "nothing", {}))
    parent.close()
    worker.join(60)
    print("exit", worker.exitcode)
"""


def test_a_worker_whose_caller_is_gone_ends_quietly(tmp_path: Path) -> None:
    config = tmp_path / "condor_config"
    config.write_text("", encoding="utf-8")
    script = tmp_path / "gone.py"
    script.write_text(SCRIPT, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script), str(config)], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.stdout.strip() == "exit 0", done.stderr
    assert "Traceback" not in done.stderr and "BrokenPipeError" not in done.stderr, done.stderr
