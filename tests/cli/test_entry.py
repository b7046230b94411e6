"""The process's entry point (``python -m probes``, the ``fairacct`` script): it skips the
interpreter's teardown once the command is done, and loses nothing doing so."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from probes.cli import main

ROOT = Path(__file__).resolve().parents[2]


def _process(*argv: str, stdout: int = subprocess.PIPE) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "probes", *argv]
    return subprocess.run(cmd, stdout=stdout, stderr=subprocess.PIPE, env=env, timeout=120, check=False)


def test_the_process_writes_all_the_command_wrote(capsys: pytest.CaptureFixture[str], condor25: Path) -> None:
    """Its output, exit code and stderr are the command's, to the last byte: what sat in
    stdout's buffer at the end is flushed before the process leaves without its teardown."""
    argv = ["jobs", "--history", str(condor25 / "history.ads"), "--json"]
    code = main(argv)
    expected = capsys.readouterr().out
    done = _process(*argv)
    assert (done.returncode, done.stderr) == (code, b"") == (0, b"")
    assert done.stdout.decode() == expected and expected.endswith("}\n") and len(expected) > 10_000


def test_the_process_exits_with_the_commands_code(tmp_path: Path) -> None:
    """A configuration error is exit 2 with its one line on stderr, as main() returns it."""
    config = tmp_path / "bad.toml"
    config.write_text("[pool]\nnmae = 'x'\n")
    done = _process("config", "check", "--config", str(config))
    assert done.returncode == 2 and done.stderr.decode().startswith("fairacct: configuration error:"), done.stderr


def test_a_reader_that_stops_early_costs_no_traceback(condor25: Path) -> None:
    """`fairacct jobs --json | head -1`: the pipe closed under the command is not an error."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = f"'{sys.executable}' -m probes jobs --history '{condor25 / 'history.ads'}' --json | head -c 10"
    done = subprocess.run(["sh", "-c", cmd], capture_output=True, env=env, timeout=120, check=False)
    assert done.stdout == b'{"jobs": [' and b"Traceback" not in done.stderr and b"Error" not in done.stderr, done.stderr


INTERRUPTED = "fairacct: interrupted (SIGINT); what was committed is kept, the next run does the rest\n"


def _sigint_as_at_a_terminal() -> None:
    """In the child, before it runs: SIGINT as a terminal gives it to a foreground command. A
    shell's background job (`make test &`, a CI run under nohup) starts with SIGINT ignored, and
    Python, and so fairacct, rightly keeps it ignored: the Ctrl-C tests would test nothing."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.parametrize("when", [0.0, 0.3, "in-the-cycle"])
def test_ctrl_c_on_probe_once_is_one_line_and_exit_130(tmp_path: Path, when: float | str) -> None:
    """Issue 39, point 3: SIGINT during the imports or the cycle was a KeyboardInterrupt
    traceback of some 70 lines (exit 1). Now it is one line and exit 130 (or, sent before the
    interpreter reads it, the signal's own death, -2, with nothing written), whenever it lands:
    at once, 0.3 s in (the imports), or once the cycle has opened its store (its lock file is
    there; the cycle then still reads, bills and commits for some 0.4 s: a fixed delay would miss
    it on a fast machine). The next run then stores the demo's records once each: nothing was left
    half-written."""
    import signal
    import sqlite3
    import time

    config = tmp_path / "probe.toml"
    text = (ROOT / "config/demo.toml").read_text().replace('"demo/', f'"{ROOT}/config/demo/')
    config.write_text(text.replace('"../.demo"', f'"{tmp_path / "state"}"'))
    cmd = [sys.executable, "-m", "probes", "probe", "once", "--config", str(config)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with subprocess.Popen(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, text=True, preexec_fn=_sigint_as_at_a_terminal
    ) as process:
        if isinstance(when, float):
            time.sleep(when)  # when it lands, not a bound on anything: every moment must give the same
        else:
            deadline = time.monotonic() + 120
            while not (tmp_path / "state/fairacct.lock").exists() and process.poll() is None:
                assert time.monotonic() < deadline, "probe once never opened its store"
                time.sleep(0.002)
        assert process.poll() is None, "probe once ended before the signal: it would test nothing"
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=120)
    # CPython's own start-up, before a line of fairacct runs, may take the signal as a fatal error
    # of its initialisation (exit 1), or in runpy while it looks for the module (its traceback, all
    # of it CPython's frozen frames, and the signal's death): nothing was read or written
    frames = [line for line in err.splitlines() if line.lstrip().startswith("File ")]
    in_runpy = err.startswith("Traceback") and bool(frames) and all('File "<frozen ' in f for f in frames)
    python_start = err.rstrip().endswith("KeyboardInterrupt") and (
        (process.returncode == 1 and err.startswith("Fatal Python error: init_"))
        or (process.returncode == -signal.SIGINT and in_runpy)
    )
    # at a high load, start-up lasts past 0.3 s too
    assert (process.returncode, err) in ((130, INTERRUPTED), (-signal.SIGINT, "")) or python_start, err
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    with sqlite3.connect(tmp_path / "state/fairacct.sqlite") as db:
        stored = [db.execute(f"SELECT count(*) FROM {k}").fetchone()[0] for k in ("slot", "allocation", "job")]
    assert stored == [36, 72, 60]


def test_the_services_log_level_and_format_from_the_configuration_and_the_command_line(tmp_path: Path) -> None:
    """Issue 39, point 7: the services logged INFO text lines, nothing else could be asked.
    `[log] format = "json"` makes each line one JSON object; `--log-level WARNING
    --log-format text` on the command line then win over the file."""
    import json

    config = tmp_path / "probe.toml"
    text = (ROOT / "config/demo.toml").read_text().replace('"demo/', f'"{ROOT}/config/demo/')
    config.write_text(text.replace('"../.demo"', f'"{tmp_path / "state"}"') + '\n[log]\nformat = "json"\n')
    as_json = _process("probe", "run", "--config", str(config), "--for", "0.1")
    assert as_json.returncode == 0, as_json.stderr
    docs = [json.loads(line) for line in as_json.stderr.decode().splitlines()]
    assert docs[0]["logger"] == "fairacct.service" and docs[0]["level"] == "INFO", docs
    assert docs[0]["message"].startswith("started: ") and re.fullmatch(
        r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", docs[0]["time"]
    )
    assert docs[-1]["message"] == "stopped" and all(set(d) == {"time", "logger", "level", "message"} for d in docs)
    quiet = _process("probe", "run", "--config", str(config), "--for", "0.1", "--log-level", "WARNING",
                     "--log-format", "text")  # fmt: skip
    assert quiet.returncode == 0, quiet.stderr
    assert " INFO " not in quiet.stderr.decode() and "{" not in quiet.stderr.decode(), quiet.stderr
    refused = _process("probe", "run", "--config", str(config), "--log-level", "LOUD")
    assert refused.returncode == 2 and b"argument --log-level: invalid choice: 'LOUD'" in refused.stderr


def test_sighup_on_the_probe_service_is_said_not_to_reload(tmp_path: Path) -> None:
    """Issue 39, point 7: SIGHUP (what `systemctl reload` and many tools send) killed the probe
    service, as its default does. Now it logs that the configuration is not reloaded, and the
    service goes on to its clean stop."""
    import signal

    config = tmp_path / "probe.toml"
    text = (ROOT / "config/demo.toml").read_text().replace('"demo/', f'"{ROOT}/config/demo/')
    config.write_text(text.replace('"../.demo"', f'"{tmp_path / "state"}"'))
    cmd = [sys.executable, "-m", "probes", "probe", "run", "--config", str(config)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    lines: list[str] = []
    with subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, text=True) as service:
        assert service.stderr is not None
        watchdog = threading.Timer(90, service.kill)  # a service that never says it ends the read, not the suite
        watchdog.start()
        try:
            for line in service.stderr:
                lines.append(line)
                if " INFO started: " in line:
                    service.send_signal(signal.SIGHUP)
                if " WARNING SIGHUP: " in line:
                    service.send_signal(signal.SIGTERM)
            assert service.wait(timeout=60) == 0, "".join(lines)
        finally:
            watchdog.cancel()
            if service.poll() is None:
                service.kill()
    said = [line for line in lines if "SIGHUP" in line]
    assert len(said) == 1 and said[0].endswith(
        "fairacct.service WARNING SIGHUP: the configuration is not reloaded while the service runs; restart it "
        "to apply a change (systemctl restart fairacct-probe)\n"
    ), "".join(lines)
    assert lines[-1].endswith(" INFO stopped\n"), "".join(lines)
