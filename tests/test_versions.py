"""Each build has a version of its own, and a later wheel installed over an earlier one upgrades it
(issue 50, point 1): every build was 0.1.0, and ``pip install fairacct-*.whl`` over the previous
release said "already installed" and kept the old code.

The wheels are built from a clone of this repository at two revisions (a commit made in the clone
stands for the work between releases), and from a ``git archive`` tarball (no ``.git``), and
installed as the upgrading guide (docs/upgrading.md) says, into a virtual environment that borrows this one's
site-packages for the dependencies (nothing is downloaded)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
from pathlib import Path

import pytest
from packaging.version import Version

from .conftest import ROOT

pytestmark = pytest.mark.slow

_GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@example.org", "-c", "commit.gpgsign=false"]


def _run(*args: str | Path, cwd: Path, env: dict[str, str] | None = None) -> str:
    done = subprocess.run([str(a) for a in args], capture_output=True, text=True, cwd=cwd, env=env, timeout=600)
    assert done.returncode == 0, f"{args}: {done.stderr[-2000:]}"
    return done.stdout


def _wheel(source: Path, out: Path) -> Path:
    _run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", out, source, cwd=out)
    (wheel,) = out.glob("fairacct-*.whl")
    return wheel


def _outside() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs git and this tree's repository")
    where = tmp_path_factory.mktemp("versions") / "clone"
    _run("git", "clone", "-q", "--no-hardlinks", ROOT, where, cwd=where.parent)
    return where


def test_a_later_wheel_installed_over_an_earlier_one_upgrades_it(clone: Path, tmp_path: Path) -> None:
    release = (clone / "RELEASE").read_text().strip()
    (tmp_path / "a").mkdir()
    earlier = _wheel(clone, tmp_path / "a")
    _run(*_GIT, "commit", "-q", "--allow-empty", "-m", "work between releases", cwd=clone)
    (tmp_path / "b").mkdir()
    later = _wheel(clone, tmp_path / "b")
    head = _run("git", "rev-parse", "--short=10", "HEAD", cwd=clone).strip()
    v_earlier, v_later = (Version(w.name.split("-")[1]) for w in (earlier, later))
    assert v_later > v_earlier >= Version(release)
    assert v_later.is_postrelease and v_later.local == f"g{head}"

    venv = tmp_path / "venv"
    _run(sys.executable, "-m", "venv", "--without-pip", venv, cwd=tmp_path)
    site = next((venv / "lib").glob("python*/site-packages"))
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    pip = (sys.executable, "-m", "pip", "--python", venv / "bin/python", "install", "--no-deps", "-q")
    said = []
    for wheel in (earlier, later):  # what the upgrading guide (docs/upgrading.md) says an operator types
        _run(*pip, wheel, cwd=tmp_path)
        said.append(_run(venv / "bin/fairacct", "--version", cwd=tmp_path, env=_outside()).strip())
    assert said == [f"fairacct {v_earlier}", f"fairacct {v_later}"]


def test_a_tarball_without_git_names_its_revision(clone: Path, tmp_path: Path) -> None:
    archive = tmp_path / "fairacct.tar"
    _run("git", "archive", "--format=tar", "--prefix=src/", "-o", archive, "HEAD", cwd=clone)
    with tarfile.open(archive) as tar:
        tar.extractall(tmp_path, filter="data")
    assert not (tmp_path / "src" / ".git").exists()
    (tmp_path / "dist").mkdir()
    wheel = _wheel(tmp_path / "src", tmp_path / "dist")
    head = _run("git", "rev-parse", "--short", "HEAD", cwd=clone).strip()
    release = (clone / "RELEASE").read_text().strip()
    assert Version(wheel.name.split("-")[1]) == Version(f"{release}+g{head}")
