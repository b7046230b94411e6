"""probe once under outages: nothing read is lost, and the fairshare ledger counts each job once."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from collector.outbox import Outbox
from probes.accounting.fairshare import job_usage
from probes.cli import main
from probes.config import load_config
from probes.sources.checkpoints import COUNTED_KEY, LEDGER_KEY, history_key
from probes.sources.history import read_history
from tests.htcondor_pool import refusing_port

from ..conftest import ROOT

EXIT_QUEUED = 3


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def demo(tmp_path: Path) -> Path:
    """The demo pool's configuration, its state in tmp_path, fairshare windows that hold its jobs."""
    config = tmp_path / "probe.toml"
    text = (
        (ROOT / "config/demo.toml")
        .read_text()
        .replace('"demo/', f'"{ROOT}/config/demo/')
        .replace('"../.demo"', '"state"')
    )
    config.write_text(text + "\n[fairshare]\ninterval_s = 86400\ndepth = 3650\n")
    return config


def ledger_total(state: Path) -> tuple[float, dict[str, float]]:
    with Outbox(state / "outbox.sqlite") as outbox:
        rows = outbox.checkpoint(LEDGER_KEY) or []
        return sum(float(r[-1]) for r in rows), outbox.checkpoint(COUNTED_KEY) or {}


def test_probe_once_queues_its_cycle_when_the_store_is_down(capsys: pytest.CaptureFixture[str], demo: Path) -> None:
    with refusing_port() as port:
        down = f"http://127.0.0.1:{port}"
        code, out, err = run(capsys, "probe", "once", "--config", str(demo), "--store", down)
    assert code == EXIT_QUEUED, err
    assert "fairacct: 172 record(s) queued in the outbox, not sent: " in err and "the next `probe once`" in err
    for kind, n in (("slot", 36), ("allocation", 72), ("job", 60), ("fairness", 4)):
        assert f"\n{kind}: {n} records, 0 sent to {down}, {n} waiting in the outbox\n" in out, out
    with Outbox(demo.parent / "state/outbox.sqlite") as outbox:
        assert outbox.status().depth == {"allocation": 72, "fairness": 4, "job": 60, "slot": 36}

    # the store is back: the queued cycle is sent (its jobs are not read again), nothing twice
    code, out, err = run(capsys, "probe", "once", "--config", str(demo))
    assert code == 0, err
    # every kind drained is said, and where its records came from (issue 50, point 3: "slot: 2 records, 4
    # sent", and the job records drained without a line)
    for kind, n in (("slot", 36), ("allocation", 72), ("job", 60), ("fairness", 4)):
        assert f"\n{kind}: 0 records, {n} sent to sqlite:///" in out, out
        assert f"fairacct.sqlite ({n} new, 0 already stored), at least {n} of them from earlier cycles\n" in out
    with sqlite3.connect(demo.parent / "state/fairacct.sqlite") as db:
        assert [db.execute(f"SELECT count(*) FROM {k}").fetchone()[0] for k in ("slot", "allocation", "job")] == [
            36,
            72,
            60,
        ]


def test_every_kind_says_it_waits_in_the_outbox_during_a_collector_outage(
    capsys: pytest.CaptureFixture[str], demo: Path
) -> None:
    """Issue 39, point 5: a flush stops at the first batch the collector fails (slot's), and
    only slot's line said its records wait; allocation, fairness and job said nothing though
    they wait all the same. Now each kind's line says it, the same way."""
    token = demo.parent / "token"
    token.write_text("secret\n")
    token.chmod(0o600)
    with refusing_port() as port:
        down = f"collector+http://127.0.0.1:{port}"
        demo.write_text(demo.read_text() + f'\n[store]\nurl = "{down}"\ntoken_file = "{token}"\n')
        code, out, err = run(capsys, "probe", "once", "--config", str(demo))
    assert code == EXIT_QUEUED, err
    for kind, n in (("slot", 36), ("allocation", 72), ("job", 60), ("fairness", 4)):
        assert f"\n{kind}: {n} records, 0 sent to {down}, {n} waiting in the outbox\n" in out, out


def test_jobs_read_by_probe_once_reach_the_fairshare_ledger_once(
    capsys: pytest.CaptureFixture[str], demo: Path
) -> None:
    config = load_config(demo)
    jobs, _ = read_history(config.sources.history, config.job_reading())
    expected = float(job_usage(jobs, config.fairshare.metric).sum())
    assert expected > 0

    code, _, err = run(capsys, "probe", "once", "--config", str(demo))
    assert code == 0, err
    total, counted = ledger_total(demo.parent / "state")
    assert total == pytest.approx(expected) and len(counted) == 60

    # the history read again from the start (a renamed schedd, a lost checkpoint): the store
    # keeps each job once by id, and so does the ledger
    with sqlite3.connect(demo.parent / "state/outbox.sqlite") as db:
        db.execute("DELETE FROM checkpoint WHERE source = ?", (history_key(config.sources.history[0]),))
    code, out, err = run(capsys, "probe", "once", "--config", str(demo))
    assert code == 0, err
    assert "\njob: 60 records, 60 sent to sqlite:///" in out and "(0 new, 60 already stored)\n" in out, out
    again, _ = ledger_total(demo.parent / "state")
    assert again == pytest.approx(expected)
