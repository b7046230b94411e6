"""The wheel a site installs works outside the checkout (issue 12, item 1): before, it had no
index templates, and `mappings install` failed with ".../site-packages/mappings/slot.json:
cannot read the slot index template".

The wheel is built from this tree and installed, without its dependencies, into a new virtual
environment whose only other path is this environment's site-packages (for the dependencies,
already installed here; nothing is downloaded). It runs from a directory outside the checkout,
so nothing of the checkout is importable."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from osmem_server import OsmemServer

from .collector.conftest import osmem_server  # noqa: F401 - the fixture
from .conftest import DEMO, ROOT

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = tmp_path_factory.mktemp("wheel")
    # built from a copy: setuptools writes build/ beside the sources, and the checkout stays clean
    source = where / "src"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(
        ".git", ".venv", "build", "*.egg-info", "__pycache__", ".hypothesis", ".*_cache", "state", ".demo"
    ))  # fmt: skip
    build = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(where / "dist"),
            str(source),
        ],
        capture_output=True,
        text=True,
        cwd=where,
    )
    if build.returncode != 0 and "setuptools" in build.stderr and "No module named" in build.stderr:
        pytest.skip(f"cannot build a wheel without build isolation here: {build.stderr[-300:]}")
    assert build.returncode == 0, build.stderr
    (wheel,) = (where / "dist").glob("fairacct-*.whl")
    venv = where / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next((venv / "lib").glob("python*/site-packages"))
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(venv / "bin/python"), "install", "-q", "--no-deps", str(wheel)],
        check=True,
        capture_output=True,
        cwd=where,
    )
    assert (site / "mappings" / "slot.json").is_file()
    return venv


def _outside() -> dict[str, str]:
    """This environment without what would make the checkout importable (pytest-xdist's workers
    put the rootdir on ``PYTHONPATH``)."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}


def _fairacct(venv: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(venv / "bin/fairacct"), *args], capture_output=True, text=True, cwd=cwd, env=_outside(), timeout=600
    )


def test_the_installed_probe_installs_templates_and_runs_a_cycle(
    installed: Path,
    tmp_path: Path,
    osmem_server: OsmemServer,  # noqa: F811 - the fixture
) -> None:
    url = osmem_server.url
    done = _fairacct(installed, tmp_path, "mappings", "install", "--store", url)
    assert done.returncode == 0, done.stderr
    assert "installed templates: fairacct-slot" in done.stdout
    where = _fairacct(installed, tmp_path, "--version")
    assert where.returncode == 0
    config = tmp_path / "probe.toml"
    config.write_text(f'[sources]\nstatus_files = ["{DEMO}/status.ads"]\n[probe]\nstate_dir = "{tmp_path}/state"\n')
    cycle = _fairacct(installed, tmp_path, "probe", "once", "--config", str(config), "--store", url)
    assert cycle.returncode == 0, cycle.stderr
    assert f"slot: 36 records, 36 sent to {url} (36 new, 0 already stored)" in cycle.stdout
    probe_path = subprocess.run(
        [
            str(installed / "bin/python"),
            "-c",
            "import probes, mappings; print(probes.__file__, list(mappings.__path__))",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=_outside(),
        check=True,
    ).stdout
    assert str(ROOT) not in probe_path  # the installed copy ran, not the checkout


def test_the_wheel_ships_the_example_configuration_and_the_units(installed: Path, tmp_path: Path) -> None:
    """`--help` points at `fairacct config example`, which works from the wheel alone (issue 25
    item 8): the files are those of config/, and the example passes `config check`."""
    help_text = _fairacct(installed, tmp_path, "slots", "--help").stdout
    assert "`fairacct config example`" in " ".join(help_text.split())
    printed = _fairacct(installed, tmp_path, "config", "example")
    assert printed.returncode == 0, printed.stderr
    assert printed.stdout == (ROOT / "config" / "example.toml").read_text()
    written = _fairacct(installed, tmp_path, "config", "example", "--write", str(tmp_path / "etc"))
    assert written.returncode == 0, written.stderr
    for name in ("example.toml", "fairacct-probe.service", "fairacct-collector.service", "fairacct.config"):
        assert (tmp_path / "etc" / name).read_text() == (ROOT / "config" / name).read_text(), name
    checked = _fairacct(installed, tmp_path, "config", "check", "--config", str(tmp_path / "etc" / "example.toml"))
    assert checked.returncode == 0, checked.stderr
    again = _fairacct(installed, tmp_path, "config", "example", "--write", str(tmp_path / "etc"))
    assert again.returncode == 0 and again.stderr.count("exists, kept as it is") == 4
