"""One collector per state directory (issue 25 item 5), with two real processes."""

from __future__ import annotations

import subprocess
from typing import Any

from collector.statelock import LOCK_NAME

from .conftest import FAIRACCT


def test_a_second_collector_on_a_state_dir_in_use_is_refused(start_collector: Any) -> None:
    first = start_collector()
    state = first.root / "collector"  # collector.state_dir's default, relative to the configuration
    second = subprocess.run(
        [FAIRACCT, "collector", "serve", "--config", str(first.config)], capture_output=True, text=True, timeout=60
    )
    assert second.returncode == 2, second.stderr
    assert first.process is not None
    assert f"is in use by pid {first.process.pid}" in second.stderr and "collector serve" in second.stderr
    assert (state / LOCK_NAME).is_file()
