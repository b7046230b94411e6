"""`fairacct probe checkpoints` (issue 25 item 8): list where each history was read up to,
forget one (the next pass reads it whole), backfill one from a date; never while a probe holds
the state directory."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from collector.statelock import hold_state_dir
from probes.cli import main
from probes.sources.history import read_history

from ..conftest import DEMO

HISTORY = DEMO / "history.ads"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "probe.toml"
    path.write_text(
        f'[pool]\nname = "demo"\n[sources]\nhistory = ["{HISTORY}"]\n[probe]\nstate_dir = "{tmp_path / "state"}"\n'
    )
    return path


def jobs_enqueued(capsys: pytest.CaptureFixture[str], config: Path) -> int:
    code, out, err = run(capsys, "probe", "once", "--config", str(config), "--json")
    assert code == 0, err
    return int(json.loads(out)["enqueued"].get("job", 0))


def test_list_forget_and_backfill_a_history_checkpoint(config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    jobs, _ = read_history([HISTORY])
    ends = np.sort(jobs["end"].to_numpy(dtype=float))
    assert jobs_enqueued(capsys, config) == len(jobs) == 60
    assert jobs_enqueued(capsys, config) == 0  # read up to its checkpoint

    code, out, err = run(capsys, "probe", "checkpoints", "--config", str(config), "--json")
    assert code == 0, err
    (row,) = json.loads(out)["checkpoints"]
    assert row["name"] == str(HISTORY) and row["end"] == ends[-1]

    code, out, err = run(capsys, "probe", "checkpoints", "--config", str(config), "--reset", str(HISTORY))
    assert code == 0, err
    assert "checkpoint forgotten; the next pass reads its whole history" in out
    assert jobs_enqueued(capsys, config) == 60

    since = int(ends[40])  # the 20 jobs that ended at or after it (no two end in the same second here)
    assert len(set(ends)) == len(ends)
    code, out, err = run(
        capsys, "probe", "checkpoints", "--config", str(config), "--reset", str(HISTORY), "--since", str(since)
    )
    assert code == 0, err
    assert "the next pass reads the jobs that ended at or after" in out
    assert jobs_enqueued(capsys, config) == int((ends >= since).sum()) == 20


def test_a_checkpoint_is_not_changed_under_a_running_probe(
    config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert jobs_enqueued(capsys, config) == 60
    with hold_state_dir(tmp_path / "state", "probe.state_dir"):  # as `probe run` holds it
        code, _out, err = run(capsys, "probe", "checkpoints", "--config", str(config), "--reset", str(HISTORY))
    assert code == 2 and "is in use by pid" in err
    assert jobs_enqueued(capsys, config) == 0  # untouched


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--since", "2026-11-01"], "--since needs --reset NAME"),
        (["--reset", "cm.example.org"], "no history checkpoint named 'cm.example.org' (there are: "),
    ],
)
def test_mistakes_are_named(config: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str) -> None:
    assert jobs_enqueued(capsys, config) == 60
    code, _out, err = run(capsys, "probe", "checkpoints", "--config", str(config), *argv)
    assert code == 2 and message in err, err


def test_before_any_read_says_so(config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _out, err = run(capsys, "probe", "checkpoints", "--config", str(config))
    assert code == 2 and "this probe has read nothing yet" in err


def test_the_store_option_names_every_kind_of_store(capsys: pytest.CaptureFixture[str]) -> None:
    """--store takes collector+http(s):// too, and says so (issue 25 item 9)."""
    with pytest.raises(SystemExit):
        main(["probe", "once", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "collector+http(s)://" in text and "opensearch+http(s)://" in text and "sqlite:///PATH" in text
