"""One process per state directory (issue 25 item 5), with real processes: a second probe or
collector on a state directory in use is refused before it touches anything, and told who holds it."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from collector.errors import ConfigError
from collector.statelock import LOCK_NAME, hold_state_dir

from .test_scheduler import Lines, file_config, probe_run


def _holder(state: Path, pid: int, timeout_s: float = 30) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            holder: dict[str, Any] = json.loads((state / LOCK_NAME).read_text())
            if holder["pid"] == pid:
                return holder
        except (OSError, ValueError):
            pass
        time.sleep(0.05)
    raise AssertionError(f"pid {pid} did not take the lock of {state}")


def test_a_second_probe_on_a_state_dir_in_use_is_refused_and_told_who_holds_it(tmp_path: Path) -> None:
    config = file_config(tmp_path)
    state = tmp_path / "state"
    first = probe_run(config)
    lines = Lines(first)
    try:
        holder = _holder(state, first.pid)
        lines.wait_for(r" fairacct.service INFO snapshot: ")
        for action in (["probe", "once"], ["probe", "run", "--for", "5"]):
            second = subprocess.run(
                [sys.executable, "-m", "probes", *action, "--config", str(config)],
                capture_output=True, text=True, timeout=60,
            )  # fmt: skip
            assert second.returncode == 2, second.stderr
            message = second.stderr.strip().splitlines()[-1]
            assert f"probe.state_dir {state} is in use by pid {first.pid}" in message, message
            assert "probe run --config" in message and holder["started"] in message
            assert "snapshot" not in second.stderr  # nothing ran
        assert _holder(state, first.pid, timeout_s=0.1) == holder  # the refused ones wrote nothing there
    finally:
        first.terminate()
        assert first.wait(timeout=30) == 0
        lines.text()
    # the lock goes with its holder however it ends (flock): test_scheduler's SIGKILLed service starts again


def test_the_lock_names_the_setting_and_is_released_on_exit(tmp_path: Path) -> None:
    with hold_state_dir(tmp_path, "probe.state_dir") as path:
        assert json.loads(path.read_text())["pid"] > 0
        held = subprocess.run(
            [sys.executable, "-c", "from collector.statelock import hold_state_dir as h; from pathlib import Path; "
             f"h(Path({str(tmp_path)!r}), 'probe.state_dir').__enter__()"],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert (
            held.returncode == 1 and "ConfigError: probe.state_dir" in held.stderr and "is in use by pid" in held.stderr
        )
    with hold_state_dir(tmp_path, "probe.state_dir"):
        pass


def test_a_lock_file_that_cannot_be_opened_is_named(tmp_path: Path) -> None:
    with (
        pytest.raises(ConfigError, match=r"probe.state_dir: cannot open the lock file .*/missing/fairacct.lock"),
        hold_state_dir(tmp_path / "missing", "probe.state_dir"),
    ):
        pass
