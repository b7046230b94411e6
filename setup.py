"""The version of a build, from the repository (``pyproject.toml`` declares it dynamic).

A release is the commit that last changed ``RELEASE`` (its one line, e.g. ``0.2.0``): a build of
that commit is that version. A build N commits later is ``0.2.0.postN+g<revision>`` (``.dirty``
added when the tree has changes), so each build between releases has a version of its own, newer
than the release before it: ``pip install`` of a later wheel over an earlier one upgrades it.

Without git (a tarball): the version a source distribution recorded (``PKG-INFO``), else the
revision ``git archive`` wrote into ``ARCHIVE`` (``export-subst`` in ``.gitattributes``) as
``0.2.0+g<revision>``, else ``0.2.0+unknown``; never the previous release's number.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from setuptools import setup

HERE = Path(__file__).resolve().parent


def _git(*args: str) -> str | None:
    try:
        done = subprocess.run(["git", "-C", str(HERE), *args], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):  # no git on this machine
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def _from_git(release: str) -> str | None:
    # the tree must be this repository's own (not a parent's, when unpacked inside another checkout)
    top = _git("rev-parse", "--show-toplevel")
    if top is None or Path(top).resolve() != HERE:
        return None
    released = _git("log", "-1", "--format=%H", "--", "RELEASE")
    head = _git("rev-parse", "--short=10", "HEAD")
    if not released or not head:  # RELEASE not committed yet, or a shallow clone without it
        return f"{release}+g{head}" if head else None
    since = int(_git("rev-list", "--count", f"{released}..HEAD") or 0)
    dirty = bool(_git("status", "--porcelain", "--untracked-files=no"))
    version = release if since == 0 else f"{release}.post{since}"
    local = [f"g{head}"] if since or dirty else []
    if dirty:
        local.append("dirty")
    return f"{version}+{'.'.join(local)}" if local else version


def _without_git(release: str) -> str:
    pkg_info = HERE / "PKG-INFO"
    if pkg_info.is_file():
        for line in pkg_info.read_text(encoding="utf-8").splitlines():
            if line.startswith("Version: "):
                return line.removeprefix("Version: ").strip()
    archive = (HERE / "ARCHIVE").read_text(encoding="utf-8").strip() if (HERE / "ARCHIVE").is_file() else ""
    if archive and not archive.startswith("$Format"):
        return f"{release}+g{archive}"
    return f"{release}+unknown"


def version() -> str:
    release = (HERE / "RELEASE").read_text(encoding="utf-8").strip()
    return _from_git(release) or _without_git(release)


setup(version=version())
