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

from ..collector.conftest import osmem_server  # noqa: F401 - the fixture, its pipe closed at the end
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


@pytest.mark.parametrize("store", ["sqlite", "osmem"])
def test_a_backfill_says_its_jobs_were_stored_already(
    config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], request: pytest.FixtureRequest, store: str
) -> None:
    """Issue 39, point 5: the jobs a backfill reads again were reported as new. The store says
    which of the records sent it held already: the second pass over the last 20 jobs stores none
    anew, in the embedded store and in Elasticsearch (osmem) alike."""
    url = f"sqlite:///{tmp_path}/state/fairacct.sqlite"
    if store == "osmem":
        from collector.sinks.elasticsearch import ElasticsearchSink

        url = request.getfixturevalue("osmem_url")
        with ElasticsearchSink(url) as sink:
            sink.install_templates()
    jobs, _ = read_history([HISTORY])
    ends = np.sort(jobs["end"].to_numpy(dtype=float))
    code, out, err = run(capsys, "probe", "once", "--config", str(config), "--store", url)
    assert code == 0, err
    assert f"\njob: 60 records, 60 sent to {url} (60 new, 0 already stored)\n" in out, out

    since = int(ends[40])  # the last 20 jobs
    code, out, err = run(
        capsys, "probe", "checkpoints", "--config", str(config), "--reset", str(HISTORY), "--since", str(since)
    )
    assert code == 0, err
    code, out, err = run(capsys, "probe", "once", "--config", str(config), "--store", url)
    assert code == 0, err
    assert f"\njob: 20 records, 20 sent to {url} (0 new, 20 already stored)\n" in out, out

    run(capsys, "probe", "checkpoints", "--config", str(config), "--reset", str(HISTORY), "--since", str(since))
    code, out, err = run(capsys, "probe", "once", "--config", str(config), "--store", url, "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert (doc["enqueued"], doc["sent"], doc["new"], doc["already_stored"], doc["untold"]) == (
        {"job": 20},
        {"job": 20},
        {},
        {"job": 20},
        {},
    )


def test_a_backfill_to_a_collector_says_the_collector_cannot_tell(
    config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A collector acknowledges records once they are in its outbox, before its store has them:
    it cannot say which it held already, and probe once says so rather than count them new."""
    from probes.cli.common import probe_name

    from ..collector.server.conftest import Collector, free_port

    jobs, _ = read_history([HISTORY])
    sites = sorted(str(s) for s in jobs["site"].dropna().unique())
    scope = {"probe": probe_name(), "sites": sites, "pools": ["demo"]}  # the records are in this host's name
    settings = {"flush_every_s": 0.2, "probes": [scope]}
    collector = Collector(tmp_path / "collector", free_port(), {probe_name(): "token-one"}, settings).start()
    try:
        token = tmp_path / "token"
        token.write_text("token-one\n")
        token.chmod(0o600)
        url = f"collector+http://127.0.0.1:{collector.port}"
        config.write_text(config.read_text() + f'[store]\nurl = "{url}"\ntoken_file = "{token}"\n')
        code, out, err = run(capsys, "probe", "once", "--config", str(config))
        assert code == 0, err
        assert (
            f"\njob: 60 records, 60 sent to {url}\n  {url} does not say which of the records sent it held already\n"
            in out
        )
        code, out, err = run(capsys, "probe", "checkpoints", "--config", str(config), "--reset", str(HISTORY))
        assert code == 0, err
        code, out, err = run(capsys, "probe", "once", "--config", str(config), "--json")
        assert code == 0, err
        doc = json.loads(out)
        assert (doc["sent"], doc["new"], doc["already_stored"], doc["untold"]) == ({"job": 60}, {}, {}, {"job": 60})
    finally:
        collector.stop()


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
