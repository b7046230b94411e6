"""A command imports what it uses (issue 26, part 2): one that reads no ClassAd loads neither
the compiled scanner nor numba (0.2-0.3 CPU-s of a short command), nor the HTCondor bindings;
one that opens no Elasticsearch store loads no HTTP client; none loads the services' web server
or scheduler. Each command runs as a process, through the entry point, and lists the modules it
imported as it exits; a command that reads ClassAds must list the scanner, or the check could
not fail."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from probes.cli import main

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "config" / "demo"

SCANNER = {"probes.sources.classad.kernel", "numba", "llvmlite"}
"""The compiled ClassAd scanner and its compiler."""
NEVER_WITHOUT_ADS = {*SCANNER, "probes.sources.classad.long", "htcondor2"}
"""What a command that reads no ClassAd must not import."""
NEVER_WITHOUT_A_SERVICE = {"uvicorn", "starlette", "apscheduler"}
"""The services' web server and scheduler: only ``probe run`` and ``collector`` need them."""
NEVER_ON_SQLITE = {"elastic_transport", "httpx"}
"""The Elasticsearch clients: not for a command whose store is the embedded SQLite file."""

# runs the entry point as the `fairacct` script does, and writes the imported modules' names as
# it leaves: the entry point runs the exit handlers before it skips the interpreter's teardown
_RUN = """
import atexit, sys
listing = sys.argv.pop(1)
atexit.register(lambda: open(listing, "w").write("\\n".join(sorted(sys.modules))))
from probes.__main__ import run
run()
"""


def imported(tmp_path: Path, *argv: str) -> set[str]:
    """The modules ``fairacct ARGV`` imported, run as a process (exit code 0, else the test fails)."""
    listing = tmp_path / "modules.txt"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-c", _RUN, str(listing), *argv]
    done = subprocess.run(cmd, capture_output=True, env=env, cwd=tmp_path, timeout=300, check=False)
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    return set(listing.read_text().split())


def assert_none(modules: set[str], banned: set[str]) -> None:
    # a submodule counts as its package (numba.core is numba)
    found = sorted(m for m in modules if m in banned or m.split(".")[0] in banned)
    assert not found, f"imported {found[:10]}"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> str:
    """An embedded store with the summaries of two days (none: it holds no record)."""
    url = f"sqlite:///{tmp_path_factory.mktemp('store') / 'store.sqlite'}"
    assert main(["summarize", "--store", url, "--from", "2026-11-01", "--to", "2026-11-02"]) == 0
    return url


@pytest.fixture
def demo_config(tmp_path: Path) -> Path:
    """The demo pool's configuration, its state in tmp_path."""
    config = tmp_path / "demo.toml"
    text = (ROOT / "config" / "demo.toml").read_text()
    config.write_text(text.replace('"demo/', f'"{DEMO}/').replace('"../.demo"', f'"{tmp_path / "state"}"'))
    (tmp_path / "state").mkdir()
    return config


PERIOD = ("--from", "2026-11-01", "--to", "2026-11-02")

STORE_COMMANDS: list[tuple[str, Sequence[str]]] = [
    ("summarize", ["summarize", *PERIOD]),
    ("export", ["export", *PERIOD, "--by", "project,month", "--format", "csv", "--out", "usage.csv"]),
    ("report", ["report", *PERIOD, "--out", "report"]),
    ("records", ["records", "job"]),
]


@pytest.mark.parametrize(("name", "argv"), STORE_COMMANDS, ids=[n for n, _ in STORE_COMMANDS])
def test_a_command_on_the_store_loads_no_scanner_and_no_http_client(
    tmp_path: Path, store: str, name: str, argv: Sequence[str]
) -> None:
    modules = imported(tmp_path, *argv, "--store", store)
    assert "collector.sinks.sqlite" in modules  # it did open the store
    assert_none(modules, NEVER_WITHOUT_ADS | NEVER_WITHOUT_A_SERVICE | NEVER_ON_SQLITE)


def test_help_version_and_config_check_load_nothing_heavy(tmp_path: Path, demo_config: Path) -> None:
    for argv in (["--help"], ["--version"]):  # answered before the commands' modules are imported
        assert_none(imported(tmp_path, *argv), {*NEVER_WITHOUT_ADS, "pandas", "pydantic", *NEVER_ON_SQLITE})
    assert_none(imported(tmp_path, "jobs", "--help"), NEVER_WITHOUT_ADS)  # its options, not its reader
    modules = imported(tmp_path, "config", "check", "--config", str(demo_config))
    assert "probes.config" in modules
    assert_none(modules, NEVER_WITHOUT_ADS | NEVER_WITHOUT_A_SERVICE | NEVER_ON_SQLITE)


@pytest.mark.parametrize("command", ["fairshare", "penalty"])
def test_fair_usage_of_a_workload_loads_no_scanner(tmp_path: Path, metacentrum: Path, command: str) -> None:
    """wagap-2013 to its fairshare report: the command the issue profiled (numba was 15.9 % of it)."""
    swf, machines = metacentrum / "wagap-2013.swf", metacentrum / "wagap-2013.machines"
    modules = imported(tmp_path, command, "--swf", str(swf), "--machines", str(machines))
    assert "probes.sources.workloads.swf" in modules
    assert_none(modules, NEVER_WITHOUT_ADS | NEVER_WITHOUT_A_SERVICE | NEVER_ON_SQLITE)


@pytest.mark.parametrize(
    "argv",
    [
        ["jobs", "--history", str(DEMO / "history.ads"), "--json"],
        ["slots", "--status-file", str(DEMO / "status.ads")],
    ],
    ids=["jobs --history", "slots --status-file"],
)
def test_a_command_that_reads_classads_does_load_the_scanner(tmp_path: Path, argv: Sequence[str]) -> None:
    """The other side, so that the checks above can fail: the scanner is loaded where ads are read."""
    modules = imported(tmp_path, *argv)
    assert modules >= SCANNER
    assert_none(modules, NEVER_WITHOUT_A_SERVICE | NEVER_ON_SQLITE)


def test_probe_once_loads_the_scanner(tmp_path: Path, demo_config: Path) -> None:
    modules = imported(tmp_path, "probe", "once", "--config", str(demo_config))
    assert modules >= SCANNER and "probes.pipeline.cycle" in modules


def test_the_scanner_compiling_is_announced_when_numba_comes_after_the_announcement(tmp_path: Path) -> None:
    """The command line enters ``announce_compiling`` before any module imports numba: the
    listener is installed just before the scanner's module is imported, so a cold cache is still
    said. A stand-in scanner, compiled for the first time in a fresh process."""
    (tmp_path / "fairacct_stand_in.py").write_text(
        "import numba\n\n@numba.njit(cache=True)\ndef twice(x):\n    return 2 * x\n", encoding="utf-8"
    )
    script = (
        "import sys\n"
        "from probes.cli.compiling import announce_compiling\n"
        "assert 'numba' not in sys.modules\n"
        "with announce_compiling(modules=['fairacct_stand_in'], kernel='fairacct_stand_in'):\n"
        "    import fairacct_stand_in\n"
        "    assert fairacct_stand_in.twice(2) == 4\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(tmp_path)])}
    for said in (True, False):  # the second process finds it in numba's cache beside the module
        done = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, env=env, cwd=tmp_path, timeout=300, check=False
        )
        assert done.returncode == 0, done.stderr.decode()
        expected = "fairacct: compiling the ClassAd scanner once (about a minute; later runs load it from numba's cache"
        assert done.stderr.decode().startswith(expected) == said, done.stderr.decode()
