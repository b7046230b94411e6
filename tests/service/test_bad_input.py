"""The probe service on damaged inputs (issue 29): a -json status dump with one ad missing a
comma and a history with a negative resource. It keeps running, every cycle succeeds, the rest
is committed, and /healthz and /metrics say so (the quarantined ads counted by input)."""

from __future__ import annotations

import json
import re
import socket
import time
import urllib.error
import urllib.request
from pathlib import Path

from probes.config import load_config
from probes.service.scheduler import ProbeService


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_the_service_reads_past_bad_ads_and_says_so(condor25: Path, tmp_path: Path) -> None:
    status = (condor25 / "status.json").read_text()
    at = status.index(',\n  "State"', status.index('"Name": "slot1_1@cpu-node1@vm"'))
    (tmp_path / "status.json").write_text(status[:at] + status[at + 1 :])  # ad 3 loses a comma
    history = (condor25 / "history.ads").read_text()
    history, n = re.subn(r"(?m)^CpusProvisioned = \d+$", "CpusProvisioned = -1", history, count=1)
    assert n == 1
    (tmp_path / "history.ads").write_text(history)
    port = _free_port()
    config_path = tmp_path / "probe.toml"
    config_path.write_text(
        '[pool]\nname = "bad"\ninterval_s = 1\nmax_interval_s = 5\n'
        '[sources]\nstatus_files = ["status.json"]\nhistory = ["history.ads"]\n'
        '[probe]\nstate_dir = "state"\nhistory_every_s = 1\nflush_every_s = 0.5\nmisfire_grace_s = 5\n'
        f"health_port = {port}\n"
    )
    svc = ProbeService(load_config(config_path), probe="test")
    svc.start()
    try:
        deadline = time.monotonic() + 30
        while svc.metrics.jobs["history"].runs < 2 or svc.metrics.jobs["snapshot"].runs < 2:
            assert time.monotonic() < deadline, svc.metrics.render()
            time.sleep(0.05)
        status_code, body = _get(f"http://127.0.0.1:{port}/healthz")
        assert status_code == 200 and json.loads(body)["status"] == "ok", body
        _, text = _get(f"http://127.0.0.1:{port}/metrics")
        assert re.search(r'^fairacct_cycles_total\{job="history",outcome="failed"\} 0$', text, re.M), text
        assert re.search(r'^fairacct_cycles_total\{job="snapshot",outcome="failed"\} 0$', text, re.M), text
        assert re.search(r'^fairacct_records_total\{kind="job"\} 41$', text, re.M), text  # once, not 42
        # the same bad ads are met on every cycle: counted each time they are skipped
        status_bad = re.search(r'^fairacct_quarantined_ads_total\{input="status"\} (\d+)$', text, re.M)
        history_bad = re.search(r'^fairacct_quarantined_ads_total\{input="history"\} (\d+)$', text, re.M)
        assert status_bad and int(status_bad[1]) >= 1 and history_bad and int(history_bad[1]) >= 1, text
        assert list((tmp_path / "state" / "quarantine").iterdir())
    finally:
        svc.stop()
