"""Shared test fixtures: where the real data lives beside the project.

Tests that read ``../shared`` (real HTCondor dumps, real workloads) skip with a clear reason
when it is absent; the files are never copied into the project.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

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
def metacentrum() -> Path:
    """../shared/data/metacentrum: real MetaCentrum workloads and Alea machines files, or skip."""
    folder = SHARED / "data" / "metacentrum"
    if not folder.is_dir():
        pytest.skip(f"needs the real workloads in {folder} (../shared beside the project), which is absent")
    return folder


# -- the checkout stays clean -------------------------------------------------------------------
# Nothing a test writes may land in the checkout (issue 12: a file named "state/:memory:" did).
# The paths git reports as untracked or ignored are compared before and after the session;
# caches of the tools themselves are expected.
_TOOL_CACHES = (".venv", ".pytest_cache", ".hypothesis", ".mypy_cache", ".ruff_cache", "__pycache__", ".egg-info")


def _stray_paths() -> set[str] | None:
    try:
        out = subprocess.run(
            ["git", "status", "--porcelain", "--ignored=matching", "--untracked-files=normal"],
            cwd=ROOT, capture_output=True, text=True, timeout=60, check=True,
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
