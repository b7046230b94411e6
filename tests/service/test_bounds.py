"""The service's bounds: it refuses a state directory it cannot write, its health server closes
idle connections, and SIGTERM takes at most probe.stop_timeout_s even with a hung store."""

from __future__ import annotations

import errno
import os
import re
import signal
import socket
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
from osmem_server import OsmemServer

import probes.service.health as health
from probes.cli import main

from ..conftest import DEMO
from .conftest import fake_service


def config_file(tmp_path: Path, state: Path) -> Path:
    path = tmp_path / "probe.toml"
    path.write_text(
        f'[sources]\nstatus_files = ["{DEMO / "status.ads"}"]\n[machines]\nspeed_attribute = "HEPSPEC"\n'
        f'[probe]\nstate_dir = "{state}"\n'
    )
    return path


def test_a_read_only_state_directory_is_refused_at_start(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = tmp_path / "state"
    state.mkdir()

    def read_only(*args: Any, **kwargs: Any) -> Any:  # what a read-only bind mount answers (root ignores modes)
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(tempfile, "mkstemp", read_only)
    code = main(["probe", "run", "--config", str(config_file(tmp_path, state)), "--for", "30"])
    err = capsys.readouterr().err
    assert code == 2, err  # refused at start: 30 s of running would have ended "--for elapsed", exit 0
    assert (
        f"fairacct: configuration error: probe.state_dir: cannot write in {state} (it is on a read-only file system)"
        in err
    )


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes in a directory of mode 0555")
def test_a_state_directory_without_write_permission_is_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o555)
    code = main(["probe", "run", "--config", str(config_file(tmp_path, state)), "--for", "30"])
    assert code == 2 and "permission denied" in capsys.readouterr().err


def test_the_health_server_closes_idle_connections(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(health, "CONNECTION_TIMEOUT_S", 0.5)
    server = health.HealthServer(health.Metrics(), "127.0.0.1", 0)
    server.start()
    idle = [socket.create_connection(("127.0.0.1", server.port), timeout=5) for _ in range(50)]
    try:
        time.sleep(1.5)
        assert all(s.recv(1) == b"" for s in idle)  # closed by the server, thread and descriptor freed
    finally:
        for s in idle:
            s.close()
        server.stop()


def test_a_stop_with_a_hung_store_takes_at_most_stop_timeout_s(
    store: OsmemServer, tmp_path: Path, condor25: Path, caplog: pytest.LogCaptureFixture
) -> None:
    service = fake_service(
        tmp_path / "state", condor25, store.url,
        pool={"interval_s": 1}, probe={"flush_every_s": 1, "history_every_s": 3600, "stop_timeout_s": 2},
    )  # fmt: skip
    service.start()
    try:
        deadline = time.monotonic() + 60
        while "flush" not in service.metrics.jobs or service.metrics.jobs["flush"].runs < 1:
            assert time.monotonic() < deadline
            time.sleep(0.1)
        os.kill(store.process.pid, signal.SIGSTOP)
        time.sleep(2)  # a flush is now waiting on the store (30 s per request)
    finally:
        with caplog.at_level("WARNING", logger="fairacct"):
            service.stop()
    # left behind at probe.stop_timeout_s (no bound on the stop's wall time: a loaded machine only
    # makes it later): waiting for the flush would have ended it at the store's 30 s request timeout,
    # with nothing left running
    assert re.search(r"stop: \d+ job\(s\) still running at probe\.stop_timeout_s, left behind", caplog.text)
