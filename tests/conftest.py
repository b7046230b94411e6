"""Shared test fixtures: where the real data lives beside the project.

Tests that read ``../shared`` (real HTCondor dumps, real workloads) skip with a clear reason
when it is absent; the files are never copied into the project.
"""

from __future__ import annotations

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
