"""fairacct on a pool's host reads what the pool's configuration says (issue 50, point 4): with
``--condor`` the collectors, UPDATE_INTERVAL, CLASSAD_LIFETIME, the log and the state come from
the HTCondor configuration (read by the real bindings, ``htcondor2.param``), fairacct's own file
from FAIRACCT_CONFIG, and a key that file sets wins. Each command runs in a process of its own,
with its own CONDOR_CONFIG (the bindings read it once per process)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from ..conftest import ROOT


def fairacct(condor_config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CONDOR_CONFIG": str(condor_config)}
    return subprocess.run([sys.executable, "-m", "probes", *args], capture_output=True, text=True, cwd=ROOT,
                          env=env, timeout=300)  # fmt: skip


def pool_config(tmp_path: Path, extra: str = "") -> Path:
    path = tmp_path / "condor_config"
    path.write_text(
        f"LOCAL_DIR = {tmp_path}\nLOG = $(LOCAL_DIR)/log\nSPOOL = $(LOCAL_DIR)/spool\n"
        "CONDOR_HOST = cm1.example.org:9618, cm2.example.org:9618\nUPDATE_INTERVAL = 10\n"
        "CLASSAD_LIFETIME = 120\n" + extra
    )
    return path


def test_config_check_condor_takes_what_the_pool_says(tmp_path: Path) -> None:
    own = tmp_path / "fairacct.toml"
    own.write_text('[pool]\nname = "cms-t2"\ninterval_s = 60\n[machines]\nspeed_attribute = "HEPSPEC"\n')
    condor = pool_config(tmp_path, f"STARTD.UPDATE_INTERVAL = 15\nFAIRACCT_CONFIG = {own}\n")
    done = fairacct(condor, "config", "check", "--condor")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == f"configuration ok: {own}"
    assert "  pool.update_interval_s = 15.0  (the pool's STARTD.UPDATE_INTERVAL)" in lines
    assert "  pool.max_interval_s = 120.0  (the pool's CLASSAD_LIFETIME)" in lines
    assert '  pool.collectors = ["cm1.example.org:9618, cm2.example.org:9618"]  (the pool\'s COLLECTOR_HOST)' in lines
    assert f'  log.file = "{tmp_path}/log/FairacctLog"  (the pool\'s $(LOG)/FairacctLog)' in lines
    assert f'  probe.state_dir = "{tmp_path}/spool/fairacct"  (the pool\'s $(SPOOL)/fairacct)' in lines
    assert '  machines.speed_attribute = "HEPSPEC"' in lines  # fairacct's own, from its file

    # a key fairacct's file sets wins over the pool's
    own.write_text('[pool]\nname = "cms-t2"\nupdate_interval_s = 30\n')
    resolved = json.loads(fairacct(condor, "config", "check", "--condor", "--json").stdout)
    assert resolved["pool"]["update_interval_s"] == 30 and resolved["sources"]["live"] is True
    assert resolved["pool"]["max_interval_s"] == 300  # CLASSAD_LIFETIME, but never less than interval_s


def test_without_condor_the_file_alone_counts(tmp_path: Path) -> None:
    resolved = json.loads(fairacct(pool_config(tmp_path), "config", "check", "--json").stdout)
    assert resolved["pool"]["update_interval_s"] == 300 and resolved["log"]["file"] == ""


def test_a_configuration_error_under_the_master_is_said_in_its_log(tmp_path: Path) -> None:
    """condor_master starts the probe with its stderr nowhere: each start that fails says why
    in $(LOG)/FairacctLog."""
    bad = tmp_path / "fairacct.toml"
    bad.write_text('[pool]\ninterval_s = "often"\n')
    (tmp_path / "log").mkdir()
    done = fairacct(pool_config(tmp_path, f"FAIRACCT_CONFIG = {bad}\n"), "probe", "run", "--condor")
    assert done.returncode == 2
    said = (tmp_path / "log" / "FairacctLog").read_text()
    assert said.endswith(
        f"fairacct ERROR configuration error: {bad}: pool.interval_s: expected a number, got 'often'\n"
    )


def test_the_local_schedds_history_is_read_from_its_files(tmp_path: Path) -> None:
    """HISTORY of this host's schedd, by the schedd's name, once the file exists (before, the
    schedd is asked: a fresh access point has no history yet, and the probe still starts)."""
    condor = pool_config(tmp_path, "DAEMON_LIST = MASTER, SCHEDD\nSCHEDD_NAME = ap1\n")
    resolved = json.loads(fairacct(condor, "config", "check", "--condor", "--json").stdout)
    assert resolved["pool"]["history_files"] == {}
    (tmp_path / "spool").mkdir()
    (tmp_path / "spool" / "history").write_text("")
    resolved = json.loads(fairacct(condor, "config", "check", "--condor", "--json").stdout)
    ((name, path),) = resolved["pool"]["history_files"].items()
    assert name.startswith("ap1@") and path == f"{tmp_path}/spool/history"
