"""A probe whose state directory's file system is full (issue 54, point 5): the same outbox as
the collector's, on a real tmpfs the test fills. ``probe once`` says it in one line with what to
do (exit 1: a store failed), ``probe run`` one line per job, never a traceback; with room
again, the next run commits and sends what the full disk held back, each record once."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from collector.outbox import Outbox
from probes.cli import main

from ..conftest import ROOT
from ..fullfs import fill, small_file_system

FAIRACCT = str(Path(sys.executable).parent / "fairacct")
HINT = "free space on that file system and run again (what was committed before is kept, and nothing of this run was half-written)"  # noqa: E501


def demo_config(tmp_path: Path, state: Path) -> Path:
    """The demo pool's configuration, its state in ``state``, its embedded store in tmp_path."""
    text = (ROOT / "config/demo.toml").read_text().replace('"demo/', f'"{ROOT}/config/demo/')
    config = tmp_path / "probe.toml"
    config.write_text(
        text.replace('"../.demo"', f'"{state}"') + f'\n[store]\nurl = "sqlite:///{tmp_path / "store.sqlite"}"\n'
    )
    return config


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    return code, capsys.readouterr().err


def stored_jobs(tmp_path: Path) -> int:
    with sqlite3.connect(tmp_path / "store.sqlite") as db:
        return int(db.execute("SELECT count(*) FROM job").fetchone()[0])


def test_probe_once_says_a_full_state_disk_in_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    with small_file_system(tmp_path / "state", "16m") as state:
        config = str(demo_config(tmp_path, state))
        ballast = fill(state)  # a new state directory, not a byte free
        code, err = run(capsys, "probe", "once", "--config", config)
        assert (code, err) == (
            1,
            f"fairacct: {state}/outbox.sqlite: cannot open the outbox: its file system is full (database or disk is "
            f"full; 0.0 MiB free in {state}); {HINT}\n",
        )
        ballast.unlink()
        code, err = run(capsys, "probe", "once", "--config", config)
        assert code == 0, err
        assert stored_jobs(tmp_path) == 60

        # The disk fills between two runs: the outbox opens, the history read again cannot be committed.
        history = f"{ROOT}/config/demo/history.ads"
        assert run(capsys, "probe", "checkpoints", "--config", config, "--reset", history)[0] == 0
        ballast = fill(state, leave=48 * 1024)  # room for SQLite's shared-memory index, not for a page of records
        code, err = run(capsys, "probe", "once", "--config", config)
        assert code == 1 and err.count("\n") == 1 and "Traceback" not in err, err
        assert err.startswith(
            f"fairacct: {state}/outbox.sqlite: cannot commit the cycle to the outbox: its file system is full "
            "(database or disk is full; "
        ) and err.endswith(f" MiB free in {state}); {HINT}\n"), err
        ballast.unlink()
        code, err = run(capsys, "probe", "once", "--config", config)
        assert code == 0, err
        assert stored_jobs(tmp_path) == 60  # read again, stored once
        with Outbox(state / "outbox.sqlite") as outbox:
            assert outbox.status().depth == {}


def test_probe_run_says_a_full_state_disk_once_per_job_and_goes_on(tmp_path: Path) -> None:
    with small_file_system(tmp_path / "state", "16m") as state:
        config = demo_config(tmp_path, state)
        fill(state)
        done = subprocess.run(
            [FAIRACCT, "probe", "run", "--config", str(config), "--for", "3"],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    failed = [line for line in done.stderr.splitlines() if " ERROR " in line]
    assert failed and all(
        line.endswith(
            f"failed: {state}/outbox.sqlite: cannot open the outbox: its file system is full (database or disk is "
            f"full; 0.0 MiB free in {state}) (said once while it fails the same way)"
        )
        for line in failed
    ), done.stderr
    assert {line.split(" ERROR ")[1].split(" failed: ")[0] for line in failed} >= {"snapshot", "flush"}
