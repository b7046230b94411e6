"""A real HTCondor 25.0.13 personal pool for the tests of the live path.

``../shared/htcondor/`` holds a relocatable HTCondor and the scripts that start and stop a
two-startd pool on loopback (see its README). :func:`start_pool` unpacks it into a fresh
directory, starts the pool on a free port and returns a :class:`HTCondorPool` that runs the
command-line tools against it, submits jobs as the pool's user, stops and resumes its
collector, and stops the pool. :func:`unavailable` says why a machine cannot run one, so that
the fixture skips with that reason instead of failing.

Run as root (as CI does), the daemons and the jobs run as ``condorpool`` (start-pool.sh
creates it): HTCondor runs no job as root. Run as another user, they run as that user.
"""

from __future__ import annotations

import contextlib
import os
import platform
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

__all__ = ["POOL_USER", "HTCondorPool", "free_port", "remove", "start_pool", "unavailable"]

POOL_USER = "condorpool"


def unavailable(shared: Path) -> str | None:
    """Why this machine cannot run the pool of ``shared``/htcondor, or None when it can."""
    folder = shared / "htcondor"
    tarball = folder / "htcondor-min.tar.xz"
    if not tarball.is_file():
        return f"needs the HTCondor tarball {tarball} (../shared beside the project), which is absent"
    if platform.system() != "Linux" or platform.machine() != "x86_64":
        return f"the HTCondor in {folder} is built for Linux x86_64, this is {platform.system()} {platform.machine()}"
    if shutil.which("tar") is None or shutil.which("xz") is None:
        return "unpacking the HTCondor tarball needs tar and xz, which are not installed"
    if os.geteuid() == 0 and shutil.which("runuser") is None:
        return "run as root, jobs are submitted as the pool's user with runuser, which is not installed"
    return None


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now (another test's server may take it before
    it is used: for a port that must refuse, :func:`refusing_port`)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def refusing_port() -> Iterator[int]:
    """A TCP port on 127.0.0.1 that refuses every connection while the block lasts: bound, never
    listening, so that no other test's server takes it meanwhile (at a load of 10, one did)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield int(s.getsockname()[1])


@dataclass
class HTCondorPool:
    """A running personal pool: its install (``release``), its work directory and port."""

    release: Path
    work: Path
    port: int
    scripts: Path

    @property
    def condor_config(self) -> Path:
        return self.work / "condor_config"

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def env(self) -> dict[str, str]:
        return {**os.environ, "CONDOR_CONFIG": str(self.condor_config)}

    def tool(self, name: str, *args: str, timeout: float = 60) -> str:
        """Run one of the pool's tools (``condor_q``, ...) and return what it printed."""
        done = subprocess.run(
            [str(self.release / "bin" / name), *args],
            env=self.env(), capture_output=True, text=True, timeout=timeout, check=False,
        )  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"{name} {' '.join(args)}: exit {done.returncode}: {done.stderr.strip()}")
        return done.stdout

    def submit(self, description: str, name: str, *, user: str = POOL_USER) -> int:
        """Submit ``description`` as the pool's user (or, run as root, as another existing
        ``user``: its jobs still run as the pool's user, whom the daemons run as), from a
        directory the pool's user can write; the cluster id."""
        folder = self.work / "submit"
        folder.mkdir(exist_ok=True)
        path = folder / f"{name}.sub"
        path.write_text(description, encoding="utf-8")
        command = [str(self.release / "bin" / "condor_submit"), "-terse", str(path)]
        if os.geteuid() == 0:  # HTCondor runs no job as root: submit as the user the daemons run as
            shutil.chown(folder, POOL_USER)
            shutil.chown(path, POOL_USER)
            folder.chmod(0o755)
            path.chmod(0o644)  # another user reads it
            command = ["runuser", "-u", user, "--", "env", f"CONDOR_CONFIG={self.condor_config}", *command]
        elif user != POOL_USER:
            raise PermissionError(f"submitting as {user} needs root (runuser); this runs as uid {os.geteuid()}")
        done = subprocess.run(
            command, cwd=folder, env=self.env(), capture_output=True, text=True, timeout=60, check=False
        )
        if done.returncode != 0:
            raise RuntimeError(f"condor_submit {path}: exit {done.returncode}: {done.stderr.strip()}")
        return int(done.stdout.split(".")[0])  # -terse prints "cluster.first - cluster.last"

    def reconfigure(self, settings: str, timeout: float = 60) -> None:
        """Add ``settings`` (HTCondor configuration lines) to this pool's configuration and
        reconfigure its daemons; return once the negotiator, the schedd and every startd say
        they read it (their ``DaemonLastReconfigTime``)."""
        time.sleep(1.1)  # a reconfiguration in the second the daemons started would not show
        before = int(time.time())
        with self.condor_config.open("a", encoding="utf-8") as config:
            config.write(f"\n# added by a test\n{settings.strip()}\n")
        subprocess.run(
            [str(self.release / "sbin" / "condor_reconfig")],
            env=self.env(), capture_output=True, timeout=60, check=True,
        )  # fmt: skip

        def read() -> bool:
            times = [
                self.tool("condor_status", *query, "-af", "DaemonLastReconfigTime").split()
                for query in (["-negotiator"], ["-schedd"], ["-const", "PartitionableSlot =?= true"])
            ]
            return all(t and all(v.isdigit() and int(v) >= before for v in t) for t in times)

        self.wait_for("the daemons read the new configuration", read, timeout)

    def wait_for(self, what: str, ready: Callable[[], bool], timeout: float = 120) -> None:
        """Poll ``ready`` every half second until it holds; fail naming ``what`` after ``timeout``."""
        deadline = time.monotonic() + timeout
        while not ready():
            if time.monotonic() > deadline:
                raise TimeoutError(f"the HTCondor pool in {self.work}: {what} did not happen within {timeout:g} s")
            time.sleep(0.5)

    def daemon_pid(self, daemon: str, *, local_name: bool | None = None) -> int:
        """The pid of this pool's ``daemon`` (e.g. ``condor_collector``): the process whose
        executable is this install's copy, so that no other pool's daemon is ever touched.
        ``local_name``: only one started with (True) or without (False) ``-local-name``."""
        exe = (self.release / "sbin" / daemon).resolve()
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit():
                continue
            try:
                mine = Path(os.readlink(proc / "exe")) == exe
                if mine and local_name is not None:
                    mine = local_name == (b"-local-name" in (proc / "cmdline").read_bytes())
                if mine:
                    return int(proc.name)
            except OSError:
                continue
        raise LookupError(f"no {daemon} of the pool in {self.work} is running ({exe})")

    def cpu_startd(self) -> int:
        """The pid of glidein_cpu's startd: this pool's condor_startd without ``-local-name
        STARTD2`` (glidein_gpu's)."""
        return self.daemon_pid("condor_startd", local_name=False)

    def pause_collector(self) -> int:
        """Stop the collector (SIGSTOP): it accepts connections and never answers. Its pid."""
        pid = self.daemon_pid("condor_collector")
        os.kill(pid, signal.SIGSTOP)
        return pid

    def resume_collector(self, pid: int) -> None:
        os.kill(pid, signal.SIGCONT)

    def stop(self) -> None:
        subprocess.run(
            [str(self.scripts / "stop-pool.sh"), str(self.work)], capture_output=True, timeout=120, check=False
        )


def start_pool(shared: Path) -> HTCondorPool:
    """Unpack ``shared``/htcondor's tarball into a new directory and start a pool from it."""
    scripts = shared / "htcondor"
    # not under pytest's tmp_path: its parents are private to root, and the daemons run as the pool's user
    top = Path(tempfile.mkdtemp(prefix="fairacct-pool-"))
    top.chmod(0o755)
    subprocess.run(["tar", "-xJf", str(scripts / "htcondor-min.tar.xz"), "-C", str(top)], check=True, timeout=120)
    pool = HTCondorPool(top / "htcondor-min", top / "pool", free_port(), scripts)
    done = subprocess.run(
        [str(scripts / "start-pool.sh"), str(pool.release), str(pool.work), str(pool.port)],
        capture_output=True, text=True, timeout=150, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        pool.stop()
        raise RuntimeError(f"start-pool.sh {pool.work} {pool.port}: exit {done.returncode}: {done.stderr.strip()}")
    return pool


def remove(pool: HTCondorPool) -> None:
    """Stop the pool and remove everything it unpacked and wrote."""
    pool.stop()
    shutil.rmtree(pool.release.parent, ignore_errors=True)


@contextlib.contextmanager
def own_pool(shared: Path) -> Iterator[HTCondorPool]:
    """A pool of a test module's own (for tests that would disturb the session's pool: its
    counts of jobs, its configuration), stopped and removed at the end; a skip, with the
    reason, where ../shared/htcondor cannot run one."""
    why = unavailable(shared)
    if why:
        pytest.skip(why)
    pool = start_pool(shared)
    try:
        yield pool
    finally:
        remove(pool)
