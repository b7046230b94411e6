"""The compiled scanner from a read-only install, run by an account without a writable home
(issue 25 item 2): numba must be given a cache it can write, or every command fails."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from probes.cli import scanner_cache

FAIRACCT = Path(sys.executable).parent / "fairacct"
NOBODY = 65534


def _as_nobody(args: list[str], cwd: Path, tmpdir: Path) -> subprocess.CompletedProcess[str]:
    """``fairacct args`` as uid/gid 65534 with HOME=/nonexistent. The tests run as root, with a
    venv whose interpreter may live under root's 0700 home: the process keeps only
    CAP_DAC_READ_SEARCH, so it can read the install as a world-readable one but write nothing
    it does not own, as a system account would."""
    if os.geteuid() != 0:
        pytest.skip("needs root to run a command as an unprivileged user (setpriv)")
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("needs setpriv (util-linux) to run a command as an unprivileged user")
    env = {"PATH": "/usr/bin:/bin", "HOME": "/nonexistent", "TMPDIR": str(tmpdir), "LANG": "C.UTF-8"}
    command = [
        setpriv, f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
        "--inh-caps=+dac_read_search", "--ambient-caps=+dac_read_search", "--", str(FAIRACCT), *args,
    ]  # fmt: skip
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def _owned_by_nobody(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    os.chown(path, NOBODY, NOBODY)
    path.chmod(0o700)
    return path


def test_config_check_as_a_system_account_caches_the_scanner_in_the_state_dir(tmp_path: Path) -> None:
    state = _owned_by_nobody(tmp_path / "state")
    tmp = _owned_by_nobody(tmp_path / "tmp")
    config = tmp_path / "probe.toml"
    config.write_text(f'[probe]\nstate_dir = "{state}"\n')
    tmp_path.chmod(0o755)
    done = _as_nobody(["config", "check", "--config", str(config)], tmp_path, tmp)
    assert done.returncode == 0, done.stderr
    assert "no locator available" not in done.stderr
    assert (state / "numba-cache").is_dir()
    assert (state / "numba-cache").stat().st_uid == NOBODY
    assert not list(tmp.iterdir())  # the state directory served: nothing in the temporary one


def test_without_a_configuration_the_cache_is_a_private_temporary_directory(tmp_path: Path) -> None:
    tmp = _owned_by_nobody(tmp_path / "tmp")
    tmp_path.chmod(0o755)
    done = _as_nobody(["config", "check"], tmp, tmp)
    assert done.returncode == 0, done.stderr
    cache = tmp / f"fairacct-numba-{NOBODY}"
    assert cache.is_dir()
    assert cache.stat().st_mode & 0o777 == 0o700


def test_a_directory_others_can_write_is_never_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # numba loads pickles from its cache: a shared directory would run another user's code
    shared = tmp_path / f"fairacct-numba-{os.getuid()}"
    shared.mkdir()
    shared.chmod(0o777)
    monkeypatch.setattr(scanner_cache, "_numba_places_writable", lambda: False)
    monkeypatch.setattr(scanner_cache.tempfile, "tempdir", str(tmp_path))
    environ: dict[str, str] = {}
    chosen = scanner_cache.choose(None, environ=environ)
    assert chosen is not None and chosen != shared
    assert environ[scanner_cache.ENV] == str(chosen)
    assert chosen.stat().st_mode & 0o077 == 0


def test_an_operators_numba_cache_dir_is_kept(tmp_path: Path) -> None:
    environ = {scanner_cache.ENV: str(tmp_path)}
    assert scanner_cache.choose(None, environ=environ) is None
    assert environ == {scanner_cache.ENV: str(tmp_path)}


@pytest.mark.parametrize(
    ("argv", "expected"),
    [(["probe", "run", "--config", "a.toml"], "a.toml"), (["--config=b.toml", "x"], "b.toml"), (["slots"], None)],
)
def test_config_file_is_found_before_parsing(argv: list[str], expected: str | None) -> None:
    assert scanner_cache.config_file(argv) == expected
