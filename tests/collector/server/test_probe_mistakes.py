"""What a site gets wrong when it points its probe at a collector (issue 25 item 6): a token
file that is missing (refused by `probe run` as by `probe once`, before starting), readable by
others (a warning), a URL with a wrong path (said once; the records wait in the outbox)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from collector.errors import SinkError
from collector.outbox import Outbox
from collector.sinks.http import CollectorSink
from probes.cli import main

from ...conftest import DEMO
from .conftest import Collector, record


def probe_config(tmp_path: Path, url: str, token: Path) -> Path:
    path = tmp_path / "probe.toml"
    path.write_text(
        f"""
[pool]
name = "demo"
interval_s = 1
max_interval_s = 5
[sources]
status_files = ["{DEMO / "status.ads"}"]
history = ["{DEMO / "history.ads"}"]
[probe]
state_dir = "state"
flush_every_s = 0.3
history_every_s = 60
[store]
url = "collector+{url}"
token_file = "{token}"
"""
    )
    return path


@pytest.mark.parametrize("action", [["probe", "run", "--for", "30"], ["probe", "once"], ["config", "check"]])
def test_a_missing_token_file_is_refused_before_anything_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], action: list[str]
) -> None:
    config = probe_config(tmp_path, "http://127.0.0.1:9", tmp_path / "nowhere.token")
    assert main([*action, "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert f"store.token_file: {tmp_path / 'nowhere.token'}: no such file" in err
    assert not (tmp_path / "state" / "outbox.sqlite").exists()  # nothing started, nothing written


def test_a_token_others_can_read_is_warned_of(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    token = tmp_path / "probe.token"
    token.write_text("secret\n")
    config = probe_config(tmp_path, "http://127.0.0.1:9", token)
    token.chmod(0o644)
    assert main(["config", "check", "--config", str(config)]) == 0
    err = capsys.readouterr().err
    assert f"warning: store.token_file: {token} is mode 0644, readable by other users" in err and "chmod 600" in err
    assert "secret" not in err
    token.chmod(0o600)
    assert main(["config", "check", "--config", str(config)]) == 0
    assert "warning" not in capsys.readouterr().err


def test_a_collector_url_with_a_wrong_path_is_said_once_and_the_records_wait(
    start_collector: Any, tmp_path: Path
) -> None:
    c: Collector = start_collector()
    token = tmp_path / "p1.token"
    token.write_text(c.tokens["p1"] + "\n")
    token.chmod(0o600)
    wrong = f"{c.url}/fairacct"  # a prefix the collector does not serve under
    with Outbox(tmp_path / "o.sqlite") as outbox, CollectorSink(f"collector+{wrong}", token_file=token) as sink:
        outbox.commit({"job": [record(1, "p1")]}, {})
        result = outbox.flush(sink)
        assert result.retried["job"] == 1 and outbox.status().depth == {"job": 1}  # kept
        assert "answered 404" in result.errors[0] and "store.url is wrong" in result.errors[0]
        with pytest.raises(SinkError, match=r"store\.url is wrong"):
            sink.send("job", [record(2, "p1")])
    # the service: one ERROR line however many flushes fail the same way
    run = subprocess.run(
        [sys.executable, "-m", "probes", "probe", "run", "--for", "6", "--config",
         str(probe_config(tmp_path, wrong, token))],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    failures = re.findall(r"ERROR flush failed: .*", run.stderr)
    assert len(failures) == 1, run.stderr
    assert "store.url is wrong" in failures[0]
    assert "httpx" not in run.stderr  # no INFO line per POST (issue 25 item 9)
    with Outbox(tmp_path / "state" / "outbox.sqlite") as outbox:
        assert outbox.status().depth["slot"] == 36  # every record kept for a corrected URL
