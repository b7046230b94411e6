"""Shared test fixtures: where the real data lives beside the project.

Tests that read ``../shared`` (real HTCondor dumps, real workloads) skip with a clear reason
when it is absent; the files are never copied into the project.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.htcondor_pool import HTCondorPool, remove, start_pool, unavailable

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"
FIXTURES = SHARED / "fixtures"
DEMO = ROOT / "config" / "demo"


@pytest.fixture(scope="session")
def fixtures() -> Path:
    """../shared/fixtures, or skip."""
    if not FIXTURES.is_dir():
        pytest.skip(f"needs the real fixtures in {FIXTURES} (../shared beside the project), which is absent")
    return FIXTURES


@pytest.fixture(scope="session")
def condor25(fixtures: Path) -> Path:
    """The dumps of a real HTCondor 25.0.13 pool (see ../shared/fixtures/README.md)."""
    return fixtures / "condor25"


@pytest.fixture(scope="session")
def eight_core(fixtures: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """HTCondor's 8-core partitionable slot dump as condor_status -long writes it: HTCondor's test
    suite keeps it without the blank line after its last ad, which a dump cut short lacks (so the
    reader sets that ad aside: tests/sources/test_status.py)."""
    path = tmp_path_factory.mktemp("eight_core") / "status-partitionable8core.ads"
    path.write_bytes((fixtures / "classads/status-partitionable8core.ads").read_bytes() + b"\n")
    return path


@pytest.fixture(scope="session")
def metacentrum() -> Path:
    """../shared/data/metacentrum: real MetaCentrum workloads and Alea machines files, or skip."""
    folder = SHARED / "data" / "metacentrum"
    if not folder.is_dir():
        pytest.skip(f"needs the real workloads in {folder} (../shared beside the project), which is absent")
    return folder


@pytest.fixture(scope="session")
def generated_history(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., Path]:
    """``make(n, malformed=i)``: a ``condor_history -long`` file of ``n`` realistic job ads
    (benchmarks/generate_history.py, seed 0; about 3.7 KB an ad, so 2,000 ads span several of
    the reader's 2 MiB chunks), with ad ``i`` (0-based) malformed if given (its ``User``, an unterminated string).
    Made once per session for each (n, i)."""
    spec = importlib.util.spec_from_file_location("generate_history", ROOT / "benchmarks" / "generate_history.py")
    assert spec is not None and spec.loader is not None
    generator = sys.modules.setdefault(spec.name, importlib.util.module_from_spec(spec))  # its dataclasses look it up
    spec.loader.exec_module(generator)
    folder = tmp_path_factory.mktemp("generated")

    def make(n: int, malformed: int | None = None) -> Path:
        path = folder / f"history-{n}-{malformed}.ads"
        if not path.exists():
            generator.generate(path, n)
            if malformed is not None:
                ads = path.read_text(encoding="ascii").split("\n\n")
                # User: every job has it, and the jobs table always reads it (a submitter's uid domain)
                ads[malformed], cut = re.subn(r'(?m)^User = "([^"]+)"$', r'User = "\1', ads[malformed])
                assert cut == 1, f"ad {malformed} of the generated history has no User to cut"
                path.write_text("\n\n".join(ads), encoding="ascii")
        return path

    return make


# -- the checkout stays clean -------------------------------------------------------------------
# Nothing a test writes may land in the checkout (issue 12: a file named "state/:memory:" did).
# The paths git reports as untracked or ignored are compared before and after the session;
# caches of the tools themselves are expected.
_TOOL_CACHES = (".venv", ".pytest_cache", ".hypothesis", ".mypy_cache", ".ruff_cache", "__pycache__", ".egg-info")


def _stray_paths() -> set[str] | None:
    try:
        out = subprocess.run(
            ["git", "status", "--porcelain", "--ignored=matching", "--untracked-files=normal"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None  # not a git checkout: nothing to compare
    paths = {line[3:] for line in out.splitlines() if line.startswith(("??", "!!"))}
    return {p for p in paths if not any(c in p for c in _TOOL_CACHES)}


def pytest_sessionstart(session: pytest.Session) -> None:
    session.config.stash[_BEFORE] = _stray_paths()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    before, after = session.config.stash.get(_BEFORE, None), _stray_paths()
    if before is None or after is None or session.config.option.collectonly:
        return
    left = sorted(after - before)
    if left:
        session.config.get_terminal_writer().line(f"tests left files in the checkout: {', '.join(left)}", red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


_BEFORE = pytest.StashKey[set[str] | None]()


@pytest.hookimpl(trylast=True)
def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The suite's last lines before pytest's count: which groups of tests did not run and why,
    one line per reason with the modules it skipped, so that a green run that left out the APEL
    server's tests or the live pool's says so where it is read (``-rs`` would list every test)."""
    groups: dict[str, Counter[str]] = {}
    for report in terminalreporter.stats.get("skipped", []):
        if not isinstance(report.longrepr, tuple):  # an xfail: not a group left out
            continue
        path, _, reason = report.longrepr
        module = report.nodeid.split("::")[0] or path
        groups.setdefault(reason.removeprefix("Skipped: "), Counter())[module] += 1
    if not groups:
        return
    total = sum(c.total() for c in groups.values())
    terminalreporter.write_sep("=", f"{total} tests did not run, in {len(groups)} group(s), and why", yellow=True)
    for reason, modules in sorted(groups.items(), key=lambda g: -g[1].total()):
        where = ", ".join(f"{m} ({n})" if n > 1 else m for m, n in sorted(modules.items()))
        terminalreporter.write_line(f"{modules.total()} not run: {reason} [{where}]")


#: The jobs the pool fixture submits: (name, submit description). Short sleeps that finish (for
#: the history), long ones that hold dynamic slots while the session runs (for the allocations),
#: on both startds, with explicit, default and GPU requests; and one larger than any slot, which
#: stays idle (the idle demand).
POOL_JOBS = {
    "finished": "executable = /bin/sleep\narguments = 1\nrequest_cpus = 1\nrequest_memory = 512\nqueue 2\n",
    "running": "executable = /bin/sleep\narguments = 3600\nrequest_cpus = 2\nrequest_memory = 2048\nqueue 1\n",
    "running_gpu": (
        "executable = /bin/sleep\narguments = 3600\nrequest_cpus = 1\nrequest_memory = 4096\nrequest_gpus = 1\n"
        "queue 1\n"
    ),
    "running_default": "executable = /bin/sleep\narguments = 3600\nrequest_cpus = 3\nqueue 1\n",
    "too_large": "executable = /bin/sleep\narguments = 1\nrequest_cpus = 64\nrequest_memory = 1024\nqueue 1\n",
}


@pytest.fixture(scope="session")
def htcondor_pool() -> Iterator[HTCondorPool]:
    """A real HTCondor pool (../shared/htcondor) with the jobs of POOL_JOBS: two finished, three
    running, one idle for good. One per session; stopped and removed at the end."""
    why = unavailable(SHARED)
    if why:
        pytest.skip(why)
    pool = start_pool(SHARED)
    try:
        for name, description in POOL_JOBS.items():
            pool.submit(description, name)

        def settled() -> bool:
            done = pool.tool("condor_history", "-af", "GlobalJobId").split()
            status = pool.tool("condor_q", "-allusers", "-af", "JobStatus").split()
            dynamic = pool.tool("condor_status", "-const", 'SlotType == "Dynamic"', "-af", "Name").split()
            # and the p-slots list those three children alone: a startd advertises a p-slot later
            # than its dynamic slots, and until then its ChildName still holds the finished jobs'
            # (the reader bills the dynamic-slot ads present, but the tests compare dumps of a
            # settled pool)
            listed = pool.tool(
                "condor_status", "-const", 'SlotType == "Partitionable"', "-af", "size(ChildName)"
            ).split()
            return (
                len(done) == 2 and status.count("2") == 3 and status.count("1") == 1
                and len(dynamic) == 3 and sum(int(n) for n in listed if n.isdigit()) == 3
            )  # fmt: skip

        pool.wait_for("2 jobs finished, 3 running in dynamic slots, 1 idle", settled)
        yield pool
    finally:
        remove(pool)


# -- scheduling on xdist's workers (`make test`: -n 6 --dist loadfile --no-loadscope-reorder) ----------
# The live-pool tests mostly wait on their pool's daemons, so the suite runs more workers than
# cores. A module is one unit of work on one worker (--dist loadfile: its module-scoped fixtures,
# an own_pool pool or an osmem-server, made once, and its tests in their order: some read what an
# earlier one stored), and the modules that wait longest come first, so that the short tests fill
# the other workers meanwhile instead of leaving a tail of minutes at the end. An order, never a
# bound: a stale list costs minutes, not a failure.
_LONGEST_FIRST = (  # by --durations on the two-core machine: 140 s, 2 x 100 s, 97 s, 2 x 67 s, 68 s, 57 s
    "tests/service/test_condor_master.py",
    "tests/sources/test_live_unheard.py",
    "tests/sources/test_live_audit_runs.py",
    "tests/sources/test_live_churn.py",
    "tests/sources/test_live_job_life.py",
    "tests/service/test_live_gaps.py",
)


def _rank(item: pytest.Item) -> int:
    """A test's place in the queue: the longest live-pool modules, the other modules with a pool of
    their own, those on the session's pool, slow tests, the rest."""
    module = item.nodeid.split("::")[0]
    if module in _LONGEST_FIRST:
        return _LONGEST_FIRST.index(module)
    if item.module is not None and "own_pool" in vars(item.module):
        return len(_LONGEST_FIRST)
    if "htcondor_pool" in getattr(item, "fixturenames", ()):
        return len(_LONGEST_FIRST) + 1
    return len(_LONGEST_FIRST) + (2 if item.get_closest_marker("slow") else 3)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    rank: dict[str, int] = {}  # a module's: its most urgent test's, so that its tests keep their order
    for item in items:
        module = item.nodeid.split("::")[0]
        rank[module] = min(_rank(item), rank.get(module, len(_LONGEST_FIRST) + 3))
    items.sort(key=lambda item: rank[item.nodeid.split("::")[0]])  # stable: collection order within a rank
