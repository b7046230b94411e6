"""The suite itself under load (issue 50, point 6): a Hypothesis test does not turn flaky because
another thread of its worker draws from the global ``random``, and the last lines of a run say
which groups of tests did not run and why.

Each runs pytest in a process of its own on a few tests written here, with this project's
configuration (``pyproject.toml``) and, for the summary, its ``tests/conftest.py`` as a plugin."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from .conftest import ROOT

CHURN = """
import random
import threading

from hypothesis import given, settings, strategies as st

stop = threading.Event()


def churn():  # another thread of the worker drawing from the global random, as a client's retry jitter does
    while not stop.is_set():
        random.random()


@settings(max_examples=300, deadline=None, database=None)
@given(st.lists(st.binary(max_size=20), max_size=40))
def joined(parts):
    assert b"|".join(parts).count(b"|") >= len(parts) - 1


def test_draws_while_another_thread_uses_random():
    thread = threading.Thread(target=churn, daemon=True)
    thread.start()
    try:
        joined()
    finally:
        stop.set()
"""

SKIPS = """
import pytest


@pytest.mark.parametrize("n", range(3))
def test_needs_a_server(n):
    pytest.skip("no MariaDB server (make apel-server)")


def test_needs_a_browser():
    pytest.skip("no headless browser (make browser)")


def test_runs():
    pass
"""


def _pytest(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "HYPOTHESIS"))}
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-c", str(ROOT / "pyproject.toml"),
         "--rootdir", str(folder), *args],
        capture_output=True, text=True, cwd=folder, env=env, timeout=300,
    )  # fmt: skip


def test_a_thread_drawing_from_random_does_not_make_hypothesis_flaky(tmp_path: Path) -> None:
    """test_kernel.py's test_texts_decode_as_each_slice_would failed as a FlakyFailure at a load
    of 6-9: Hypothesis's check of the global random state around a draw, an error here, saw
    another thread's draw."""
    (tmp_path / "test_churn.py").write_text(CHURN)
    done = _pytest(tmp_path, "test_churn.py")
    assert done.returncode == 0, done.stdout[-3000:]
    assert "FlakyFailure" not in done.stdout


def test_the_last_lines_say_which_groups_did_not_run_and_why(tmp_path: Path) -> None:
    (tmp_path / "test_skips.py").write_text(SKIPS)
    done = _pytest(tmp_path, "-p", "tests.conftest", "test_skips.py")
    assert done.returncode == 0, done.stdout[-3000:]
    last = done.stdout.strip().splitlines()[-4:]
    assert "4 tests did not run, in 2 group(s), and why" in last[0], done.stdout
    assert last[1:3] == [
        "3 not run: no MariaDB server (make apel-server) [test_skips.py (3)]",
        "1 not run: no headless browser (make browser) [test_skips.py]",
    ]
    assert last[3].startswith("1 passed, 4 skipped")
