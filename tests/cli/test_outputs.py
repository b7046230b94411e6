"""The outputs' commands on the demo pool: summarize, export, report; their errors."""

from __future__ import annotations

import json
from contextlib import closing
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import openpyxl
import pandas as pd
import pytest

from probes.cli import main

from ..conftest import ROOT

DAYS = ("--from", "2026-11-01", "--to", "2026-11-30")  # the demo pool's snapshot and history


@pytest.fixture(scope="module")
def demo_config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo pool stored by one probe cycle, and its configuration."""
    folder = tmp_path_factory.mktemp("demo")
    config = folder / "demo.toml"
    config.write_text(
        (ROOT / "config/demo.toml")
        .read_text()
        .replace('"demo/', f'"{ROOT}/config/demo/')
        .replace('"../.demo"', '"state"')
    )
    assert main(["probe", "once", "--config", str(config), "--json"]) == 0
    return config


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_summarize_export_and_report_the_demo_pool(
    demo_config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    code, out, err = run(capsys, "summarize", "--config", str(demo_config), *DAYS, "--json")
    assert code == 0, err
    assert err == ""  # no progress bar when stderr is not a terminal
    made = json.loads(out)["summaries"]
    assert set(made) == {"job", "allocation", "slot", "gratia", "audit", "gap"} and all(
        made[k] > 0 for k in ("job", "allocation", "slot", "audit", "gap")
    )  # the demo's one snapshot stands for 300 s of its day: the rest is a gap
    assert made["gratia"] == 0 and json.loads(out)["deleted"] == dict.fromkeys(made, 0)  # no Gratia records in the demo
    path = tmp_path / "usage.csv"
    code, out, err = run(
        capsys, "export", "--config", str(demo_config), *DAYS, "--by", "site,month", "--out", str(path)
    )
    assert code == 0, err
    assert out.startswith("wrote ") and str(path) in out
    table = pd.read_csv(path, encoding="utf-8")
    jobs = json.loads((lambda r: r[1])(run(capsys, "records", "job", "--config", str(demo_config), "--json")))
    assert table["n_jobs"].sum() == len(jobs)
    assert table["core_hours"].sum() == pytest.approx(sum(j["cpus"] * j["walltime_s"] for j in jobs) / 3600, rel=1e-5)
    code, out, err = run(
        capsys, "report", "--config", str(demo_config), *DAYS, "--lab", "--out", str(tmp_path / "report")
    )
    assert code == 0, err
    page = (tmp_path / "report" / "index.html").read_text()
    # the demo pool's jobs are priced against its slots' classes (every user's share the same under
    # the penalty as CPU-only: said, not drawn); it has closed no fairshare window yet; its snapshot
    # has fairness records (nobody starved: said) and efficiency by site, the books (fairacct audit),
    # and with --lab the lab's six cases are drawn in an appendix after it all; first, the committee's
    # awards (core-hours and GPU-hours per project), usage per day and held against billed
    assert page.count("<svg") == 2 + 1 + 1 + 2 + 1 + 1 + 1 + 6 and "No records in this period" not in page
    assert page.count("No fairshare records in this period: the probe writes them when a fairshare window") == 1
    assert page.count('class="note blank"') == 3
    assert "<h2>Efficiency by site" in page and "<h2>Lab case 5: early riser" in page
    assert "<h2>The books: allocation records against completed jobs" in page
    site, _, appendix = page.partition("Appendix: synthetic cases, not this site's data")
    assert appendix and "Lab case" not in site and appendix.count("<h2>Lab case") == 6
    code, _out, err = run(capsys, "report", "--config", str(demo_config), *DAYS, "--out", str(tmp_path / "site"))
    assert code == 0, err
    site_only = (tmp_path / "site" / "index.html").read_text()
    assert "Lab case" not in site_only and "Appendix" not in site_only  # the site's report: its own data only
    assert site_only.count("<svg") == 2 + 1 + 1 + 2 + 1 + 1 + 1
    assert table["penalty_hours"].sum() >= table["cpu_only_hours"].sum() > 0
    # the XLSX shows each day's books beside the usage: the demo's submitters, held against used (the demo's
    # one snapshot holds running jobs only: set apart, as the report sets them apart)
    xlsx = tmp_path / "usage.xlsx"
    code, out, err = run(capsys, "export", "--config", str(demo_config), *DAYS, "--format", "xlsx", "--out", str(xlsx))
    assert code == 0, err
    sheet = openpyxl.load_workbook(xlsx)["audit"]
    header = [c.value for c in sheet[1]]
    assert header[:3] == ["day", "submitter", "site"] and "audit_used_core_hours" in header
    assert sheet.cell(2, header.index("audit_held_core_hours") + 1).value == 0
    assert sheet.cell(2, header.index("audit_open_core_hours") + 1).value > 0


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["summarize", "--from", "2026-11-30", "--to", "2026-11-01"], "--to (2026-11-01) is before --from"),
        (
            ["export", "--from", "2026-11-30", "--to", "2026-11-01", "--out", "x.csv"],
            "--to (2026-11-01) is before --from",
        ),
        (["export", *DAYS, "--by", "planet", "--out", "x.csv"], "--by: expected some of"),
        (
            ["report", "--from", "yesterday", "--to", "2026-11-01", "--out", "r"],
            "--from: expected UNIX seconds or an ISO-8601 time",
        ),
        (["dashboards", "install", "--url", "ftp://kibana"], "--url: expected http(s)://HOST:PORT"),
    ],
)
def test_errors_name_the_option(
    demo_config: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    code, _out, err = run(capsys, *argv, "--config", str(demo_config))
    assert code in (1, 2), err
    assert message in err and "Traceback" not in err


def test_make_demo_ends_by_pointing_at_the_report_and_the_export() -> None:
    """The demo target runs nothing but fairacct (Python) and ends with where its outputs are."""
    text = (ROOT / "Makefile").read_text()
    recipe = text.split("\ndemo:", 1)[1].split("\n\n", 1)[0].splitlines()[1:]
    commands = [line.strip().lstrip("@") for line in recipe]
    assert all(c.startswith(("$(BIN)/fairacct ", "echo")) for c in commands), commands
    assert "report/index.html" in commands[-2] and "usage.xlsx" in commands[-1]


@pytest.mark.parametrize("tty", [True, False])
def test_the_progress_bar_is_drawn_on_a_terminal_only(tty: bool) -> None:
    import io

    from probes.cli.progress import progress_bar

    class Stream(io.StringIO):
        def isatty(self) -> bool:
            return tty

    stream = Stream()
    with progress_bar(3, "summarizing", stream=stream) as advance:
        for _ in range(3):
            advance(1)
    assert ("summarizing" in stream.getvalue()) is tty


@pytest.mark.parametrize("command", ["export", "report"])
def test_a_missing_store_is_an_error_naming_its_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    """Not a new empty store and "0 rows" with exit 0 (issue 25 item 3)."""
    missing = tmp_path / "nowhere" / "fairacct.sqlite"
    code, _out, err = run(capsys, command, "--store", f"sqlite:///{missing}", *DAYS, "--out", str(tmp_path / "o"))
    assert code == 1, err
    assert str(missing) in err and "Traceback" not in err
    assert not missing.exists() and not (tmp_path / "o").exists()


def test_an_export_before_any_summary_says_how_to_make_them(
    demo_config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The demo store has records; a range with records but no summaries is an error that says
    to summarize it (or to export --raw), not an empty file (issue 25 item 3)."""
    store = tmp_path / "copy.sqlite"
    import sqlite3

    source = demo_config.parent / "state" / "fairacct.sqlite"
    with sqlite3.connect(source) as a, sqlite3.connect(store) as b:
        a.backup(b)  # a copy of the demo store, its summaries deleted
    with sqlite3.connect(store) as db:
        if db.execute("select name from sqlite_master where name = 'summary'").fetchone():
            db.execute("delete from summary")
    out_file = tmp_path / "usage.csv"
    code, _out, err = run(capsys, "export", "--store", f"sqlite:///{store}", *DAYS, "--out", str(out_file))
    assert code == 1, err
    assert "no daily summaries from 2026-11-01 to 2026-11-30" in err
    assert "fairacct summarize --from 2026-11-01 --to 2026-11-30" in err and "--raw" in err
    assert not out_file.exists()
    code, _out, err = run(capsys, "export", "--store", f"sqlite:///{store}", *DAYS, "--raw", "--out", str(out_file))
    assert code == 0, err
    assert pd.read_csv(out_file)["n_jobs"].sum() > 0


@pytest.mark.parametrize("section", ["collector.store", "store"])
def test_a_collectors_config_finds_its_store_under_collector_state_dir(
    demo_config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], section: str
) -> None:
    """A relative sqlite:/// store of a collector's configuration is under collector.state_dir,
    where the service keeps it, not under probe.state_dir (issue 25 item 3); the store is the
    collector's, [collector.store], or [store] in a file written before it (issue 38)."""
    import sqlite3

    state = tmp_path / "collector-state"
    state.mkdir()
    with (  # a connection's own context ends a transaction; closing() closes it
        closing(sqlite3.connect(demo_config.parent / "state" / "fairacct.sqlite")) as a,
        closing(sqlite3.connect(state / "store.sqlite")) as b,
    ):
        a.backup(b)
    config = tmp_path / "collector.toml"
    config.write_text(f'[collector]\nstate_dir = "{state}"\n[{section}]\nurl = "sqlite:///store.sqlite"\n')
    assert run(capsys, "summarize", "--config", str(config), *DAYS)[0] == 0
    out_file = tmp_path / "usage.csv"
    code, _out, err = run(capsys, "export", "--config", str(config), *DAYS, "--out", str(out_file))
    assert code == 0, err
    assert pd.read_csv(out_file)["n_jobs"].sum() > 0
    code, out, err = run(capsys, "records", "job", "--config", str(config), "--json")
    assert code == 0, err
    assert len(json.loads(out)) == pd.read_csv(out_file)["n_jobs"].sum()
    assert not (tmp_path / "state").exists()  # nothing made under the probe's default state_dir


def test_the_report_gets_the_mode_the_umask_gives(
    demo_config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A web server serves it: 0644 under umask 022, not 0600 (issue 25 item 4)."""
    import os

    old = os.umask(0o022)
    try:
        code, _out, err = run(capsys, "report", "--config", str(demo_config), *DAYS, "--out", str(tmp_path / "r"))
    finally:
        os.umask(old)
    assert code == 0, err
    assert (tmp_path / "r" / "index.html").stat().st_mode & 0o777 == 0o644


def _jobs(day: date, n: int, first: int = 0) -> list[dict[str, Any]]:
    """``n`` job records that ended at noon of ``day``, an hour on one core each."""
    noon = datetime(day.year, day.month, day.day, 12, tzinfo=UTC)
    return [
        {"id": f"job-{day}-{i}", "kind": "job", "schema_version": 1, "probe": "p", "timestamp": f"{day}T12:00:00Z",
         "end": int(noon.timestamp()), "user": "alice", "project": "atlas", "site": "S", "cpus": 1.0,
         "walltime_s": 3600.0}
        for i in range(first, first + n)
    ]  # fmt: skip


@pytest.mark.parametrize("config_of", ["probe", "collector"])
def test_an_export_across_the_summaries_horizon_refuses_and_says_the_ways_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], config_of: str
) -> None:
    """Issue 54, point 10: ten jobs older than the horizon (the days the service re-summarizes)
    beside ten recent ones, only the recent day summarized, as the service leaves them: the export
    said 10 jobs and exited 0. It refuses now, names the horizon, the day and both ways out, and
    writes nothing; --raw says 20, and once the old day is summarized by hand the export does too.
    Records stored for that day afterwards (a backfill) make it refuse again."""
    from collector.sinks.sqlite import EmbeddedStore

    today = datetime.now(UTC).date()
    old, recent = today - timedelta(days=40), today - timedelta(days=1)
    store = tmp_path / "state" / "store.sqlite"
    store.parent.mkdir()
    with EmbeddedStore(store) as sink:
        sink.send("job", _jobs(old, 10) + _jobs(recent, 10))
    config = tmp_path / "fairacct.toml"
    if config_of == "probe":
        config.write_text(f'[summaries]\nnightly_days = 30\n[probe]\nstate_dir = "{store.parent}"\n'
                          '[store]\nurl = "sqlite:///store.sqlite"\n')  # fmt: skip
        key = "summaries.nightly_days = 30"
    else:
        config.write_text(f'[collector]\nstate_dir = "{store.parent}"\nsummaries_nightly_days = 30\n'
                          '[collector.store]\nurl = "sqlite:///store.sqlite"\n')  # fmt: skip
        key = "collector.summaries_nightly_days = 30"
    days = ("--from", str(old), "--to", str(recent))
    assert run(capsys, "summarize", "--config", str(config), "--from", str(recent), "--to", str(recent))[0] == 0

    out_file = tmp_path / "usage.csv"
    code, _out, err = run(capsys, "export", "--config", str(config), *days, "--by", "project", "--out", str(out_file))
    assert code == 1, err
    horizon = today - timedelta(days=29)
    assert err == (
        f"fairacct: sqlite:///{store}: the daily summaries of 1 day(s) from {old} to {old} do not count the records "
        f"stored for them ({old}: 10 job records, 0 summarized). Those days are before the summaries' horizon, "
        f"{horizon} ({key}: the service re-summarizes the last 30 days), so an export of the summaries would count "
        "them short; nothing was written. Export the records with --raw, or summarize those days first: "
        f"`fairacct summarize --from {old} --to {old}` with the same --config\n"
    )
    assert not out_file.exists()

    code, _out, err = run(capsys, "export", "--config", str(config), *days, "--by", "project", "--raw",
                          "--out", str(out_file))  # fmt: skip
    assert code == 0, err
    assert pd.read_csv(out_file)[["n_jobs", "core_hours"]].to_dict("records") == [{"n_jobs": 20, "core_hours": 20.0}]

    assert run(capsys, "summarize", "--config", str(config), "--from", str(old), "--to", str(old))[0] == 0
    code, _out, err = run(capsys, "export", "--config", str(config), *days, "--by", "project", "--out", str(out_file))
    assert code == 0, err
    assert pd.read_csv(out_file)[["n_jobs", "core_hours"]].to_dict("records") == [{"n_jobs": 20, "core_hours": 20.0}]

    with EmbeddedStore(store) as sink:  # three more jobs of the old day, after it was summarized
        sink.send("job", _jobs(old, 3, first=10))
    out_file.unlink()
    code, _out, err = run(capsys, "export", "--config", str(config), *days, "--by", "project", "--out", str(out_file))
    assert code == 1 and f"({old}: 13 job records, 10 summarized)" in err and not out_file.exists()


def test_awards_from_the_command_line_and_a_group_without_a_vo(
    demo_config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--awards`` (a TOML file) in place of the configuration's; a group ``[apel] vo_map`` does
    not name is no VO in the XLSX and the report: its usage apart, the group said once."""
    import openpyxl

    from collector.report.committee import NO_VO

    config = demo_config.with_name("unmapped.toml")  # beside the demo's: the same store
    text = demo_config.read_text()
    assert ', group_osg = "osg"' in text
    config.write_text(text.replace(', group_osg = "osg"', ""))
    awards = tmp_path / "awards.toml"
    awards.write_text(
        '[[award]]\nproject = "OSG_Chemistry"\nresource = "core_hours"\namount = 10\nperiod = "2026-11"\n'
    )
    assert run(capsys, "summarize", "--config", str(config), *DAYS)[0] == 0
    xlsx = tmp_path / "usage.xlsx"
    code, _out, err = run(capsys, "export", "--config", str(config), *DAYS, "--format", "xlsx", "--awards", str(awards),
                          "--out", str(xlsx))  # fmt: skip
    assert code == 0, err
    book = openpyxl.load_workbook(xlsx)
    apel = [r for r in book["apel"].iter_rows(values_only=True)]
    assert {r[1] for r in apel[1:] if r[0] == "2026-11"} == {"atlas", "cms", NO_VO}
    said = [str(v) for r in apel for v in r if v is not None and "group_osg" in str(v)]
    assert said == [
        f"Accounting group(s) group_osg name no VO in [apel] vo_map: counted under {NO_VO!r}, not as a VO, and not "
        "sent to APEL."
    ]
    rows = list(book["awards"].iter_rows(values_only=True))
    status = {r[0]: (r[1], r[rows[0].index("awarded_core_hours")], r[-1]) for r in rows[1:] if r[0] and r[-1]}
    # OSG_Chemistry: 25.6 core-hours used of the 10 awarded; the others have none
    assert status["OSG_Chemistry"] == (NO_VO, 10, "over the core-hours award")
    assert status["CMS_Production"] == ("cms", None, "no award")
    code, _out, err = run(capsys, "export", "--config", str(config), *DAYS, "--awards", str(awards), "--out",
                          str(tmp_path / "usage.csv"))  # fmt: skip
    assert code == 2 and "--awards: only --format xlsx carries the awards (an awards sheet), not --format csv" in err
    assert not (tmp_path / "usage.csv").exists()
    code, _out, err = run(capsys, "report", "--config", str(config), *DAYS, "--awards", str(awards), "--out",
                          str(tmp_path / "report"))  # fmt: skip
    assert code == 0, err
    page = (tmp_path / "report" / "index.html").read_text()
    assert "1 award. <b>1 project over their award, 0 on course to exceed it</b>" in page
    committee = page.split('<section id="committee">', 1)[1].split("</section>", 1)[0]
    assert committee.count("group_osg") == 1 and "(no VO: group not mapped)" in committee


def test_audit_to_a_day_includes_that_day_as_report_and_export_do(
    demo_config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 50, point 5: ``audit --to 2026-11-30`` ended at that day's first second (the day
    excluded) where ``report`` and ``export --to 2026-11-30`` include it; a time stays the
    instant the window ends."""
    capsys.readouterr()
    code, out, err = run(capsys, "audit", "--config", str(demo_config), *DAYS, "--json")
    assert code == 0, err
    assert (json.loads(out)["from"], json.loads(out)["to"]) == ("2026-11-01T00:00:00Z", "2026-12-01T00:00:00Z")
    code, out, err = run(
        capsys, "audit", "--config", str(demo_config), "--from", "2026-11-01", "--to", "2026-11-30T00:00:00Z", "--json"
    )
    assert code == 0, err
    assert json.loads(out)["to"] == "2026-11-30T00:00:00Z"
