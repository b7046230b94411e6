"""fairacct run the way HTCondor's own daemons are (issue 50, point 4): the configuration snippet
it ships (``fairacct config example fairacct.config``) in a pool's configuration puts the probe
in DAEMON_LIST; condor_master starts it, restarts it when it is SIGKILLed, and stops it
(``condor_off -daemon FAIRACCT``), starts it again (``condor_on``), restarts it with
the pool (``condor_restart``); the probe logs under $(LOG), keeps its state under $(SPOOL), and takes
UPDATE_INTERVAL from the pool: a SIGKILLed startd's slots are billed no longer than twice the
pool's real UPDATE_INTERVAL (10 s here), with no fairacct setting for it.

A pool of its own (its configuration changes, a startd is killed), the probe being this
checkout's ``fairacct``, run by the pool's master as the pool's user."""

from __future__ import annotations

import os
import pwd
import signal
import sqlite3
import subprocess
import sys
import sysconfig
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from probes.examples import example_text
from tests.conftest import ROOT, SHARED
from tests.htcondor_pool import HTCondorPool, own_pool

pytestmark = pytest.mark.slow

SITE = Path(sysconfig.get_paths()["purelib"])
"""This environment's site-packages: fairacct (editable) and its dependencies, for the probe the master runs."""


def probe_command(pool: HTCondorPool) -> Path:
    """An executable the pool's user can run (the master runs its daemons as that user): this
    environment's packages under an interpreter of the same version it can reach (a venv's may
    live under root's 0700 home, as on CI), started as ``fairacct``."""
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    candidates = [Path(sys.executable), Path("/usr/bin") / version, Path("/usr/local/bin") / version]
    user = pool.tool("condor_config_val", "CONDOR_IDS").strip() if os.geteuid() == 0 else ""
    for python in candidates:
        if not python.exists():
            continue
        if user:
            name = pwd.getpwuid(int(user.split(".")[0])).pw_name
            reach = subprocess.run(["runuser", "-u", name, "--", str(python), "-S", "-c", "0"],
                                   capture_output=True, check=False)  # fmt: skip
            if reach.returncode != 0:
                continue
        wrapper = pool.work / "fairacct"
        code = (
            f"import site, sys; site.addsitedir({str(SITE)!r}); sys.path.insert(0, {str(ROOT)!r}); "
            "sys.argv[0] = 'fairacct'; from probes.__main__ import run; run()"
        )
        wrapper.write_text(f'#!/bin/sh\nexec {python} -S -c "{code}" "$@"\n')
        wrapper.chmod(0o755)
        return wrapper
    pytest.skip(f"no {version} the pool's user can run (the master runs the probe as that user)")


@pytest.fixture(scope="module")
def pool() -> Iterator[HTCondorPool]:
    with own_pool(SHARED) as pool:
        yield pool


def probe_pids(pool: HTCondorPool) -> list[int]:
    """The pids of this pool's fairacct probe (its command line, and this pool's CONDOR_CONFIG)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().split(b"\0")
            environ = (proc / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"--condor" in cmdline and b"run" in cmdline and f"CONDOR_CONFIG={pool.condor_config}".encode() in environ:
            found.append(int(proc.name))
    return found


def log_text(pool: HTCondorPool) -> str:
    path = Path(pool.tool("condor_config_val", "LOG").strip()) / "FairacctLog"
    return path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""


def test_condor_master_starts_restarts_and_stops_the_probe(pool: HTCondorPool, tmp_path: Path) -> None:
    fairacct = probe_command(pool)
    # fairacct's own file: only what is its own (a short cadence, for the test: snapshots every 4 s,
    # stored every 2 s rather than every minute, so the store says what the probe saw within seconds),
    # nothing the pool says
    own = pool.work / "fairacct.toml"
    own.write_text('[pool]\nname = "test"\ninterval_s = 4\n[probe]\nflush_every_s = 2\n')
    own.chmod(0o644)
    snippet = example_text("fairacct.config").replace("/opt/fairacct/bin/fairacct", str(fairacct))
    snippet += f"FAIRACCT_CONFIG = {own}\n"
    assert "DAEMON_LIST = $(DAEMON_LIST) FAIRACCT" in snippet
    pool.reconfigure(snippet)

    # the master starts it; it reads the pool's configuration and logs under $(LOG)
    pool.wait_for("the probe's first snapshot in $(LOG)/FairacctLog", lambda: "snapshot: " in log_text(pool), 240)
    (first,) = probe_pids(pool)
    state = Path(pool.tool("condor_config_val", "SPOOL").strip()) / "fairacct"
    assert (state / "outbox.sqlite").exists()

    # a startd SIGKILLed: its slots are billed no longer than twice the pool's UPDATE_INTERVAL (10 s)
    update_interval_s = float(pool.tool("condor_config_val", "UPDATE_INTERVAL").strip())
    assert update_interval_s == 10
    pool.submit(
        "executable = /bin/sleep\narguments = 3600\nrequest_cpus = 2\nrequest_memory = 512\n"
        'requirements = regexp("glidein_cpu", Name)\nqueue 1\n',
        "held_by_the_dead",
    )

    def billed_on_cpu() -> bool:
        return bool(_allocations(state, "glidein_cpu"))

    pool.wait_for("an allocation billed on glidein_cpu", billed_on_cpu, 240)
    startd = pool.cpu_startd()
    os.kill(startd, signal.SIGKILL)
    killed_at = time.time()
    bound = killed_at + 2 * update_interval_s + 1
    # past twice the interval, several snapshots of the dead node stored (the live node's slot
    # records, stored with each snapshot's allocations): none may bill it
    pool.wait_for(
        "three of the probe's snapshots stored after twice the interval",
        lambda: len({t for t in _allocations(state, "glidein_gpu", table="slot") if t > bound}) >= 3,
        120,
    )
    last = max(end for end in _allocations(state, "glidein_cpu"))
    assert last <= bound, (last - killed_at, log_text(pool)[-3000:])

    # SIGKILLed, the probe is started again by the master
    before = len(log_text(pool))
    os.kill(first, signal.SIGKILL)
    pool.wait_for("the master restarting the probe", lambda: [p for p in probe_pids(pool) if p != first] != [], 120)
    (second,) = probe_pids(pool)
    assert second != first
    pool.wait_for("the restarted probe's snapshot", lambda: "INFO snapshot: " in log_text(pool)[before:], 120)

    # condor_off -daemon FAIRACCT stops it (SIGTERM: it says so), and the master leaves it stopped
    def master(tool: str, *args: str) -> None:
        done = subprocess.run([str(pool.release / "sbin" / tool), *args], env=pool.env(), capture_output=True,
                              text=True, timeout=60, check=False)  # fmt: skip
        assert done.returncode == 0, (tool, args, done.stdout, done.stderr)

    master("condor_off", "-daemon", "FAIRACCT")
    pool.wait_for("the probe stopped by condor_off", lambda: not probe_pids(pool), 120)
    assert log_text(pool).rstrip().endswith("fairacct.service INFO stopped"), log_text(pool)[-2000:]
    assert "INFO stopping (SIGTERM)" in log_text(pool)[before:]

    # condor_on starts it again; condor_restart stops it (SIGTERM) and starts a new one
    master("condor_on", "-daemon", "FAIRACCT")
    pool.wait_for("the probe started by condor_on", lambda: len(probe_pids(pool)) == 1, 120)
    (third,) = probe_pids(pool)
    before = len(log_text(pool))
    pool.wait_for("its first snapshot", lambda: "INFO snapshot: " in log_text(pool)[before:], 120)
    # condor_restart -daemon reaches DaemonCore daemons alone (it asks the daemon itself): the master's own
    # restart stops every daemon (the probe with SIGTERM) and starts them again
    master("condor_restart")
    pool.wait_for("a new probe after condor_restart", lambda: [p for p in probe_pids(pool) if p != third] != [], 180)
    assert "INFO stopping (SIGTERM)" in log_text(pool)[before:]


def _allocations(state: Path, node: str, table: str = "allocation") -> list[float]:
    """When each allocation record (or record of ``table``) of ``node``'s slots in the probe's
    store ends (its ``observed_at``, UNIX seconds: it stands for the ``interval_s`` before)."""
    path = state / "fairacct.sqlite"
    if not path.exists():
        return []
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        try:
            rows = db.execute(f"SELECT doc FROM {table}").fetchall()
        except sqlite3.OperationalError:  # the table is made by the first write
            return []
    import orjson

    docs = [orjson.loads(doc) for (doc,) in rows]
    return [float(d["observed_at"]) for d in docs if node in str(d.get("name", ""))]
