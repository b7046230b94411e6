"""The outputs' commands on the demo pool: summarize, export, report; their errors."""

from __future__ import annotations

import json
from pathlib import Path

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
    table = pd.read_csv(path, encoding="utf-8-sig")
    jobs = json.loads((lambda r: r[1])(run(capsys, "records", "job", "--config", str(demo_config), "--json")))
    assert table["n_jobs"].sum() == len(jobs)
    assert table["core_hours"].sum() == pytest.approx(sum(j["cpus"] * j["walltime_s"] for j in jobs) / 3600, rel=1e-5)
    code, out, err = run(capsys, "report", "--config", str(demo_config), *DAYS, "--out", str(tmp_path / "report"))
    assert code == 0, err
    page = (tmp_path / "report" / "index.html").read_text()
    # the demo pool's jobs are priced against its slots' classes (penalty against CPU-only usage
    # is drawn); it has closed no fairshare window yet; its snapshot has fairness records and
    # efficiency by site, the books (fairacct audit) and the lab's six cases are drawn
    assert page.count("<svg") == 4 + 2 + 1 + 1 + 6 and page.count("No records in this period") == 1
    assert "<h2>Efficiency by site" in page and "<h2>Lab case 5: early riser" in page
    assert "<h2>The books: allocation records against completed jobs" in page
    assert table["penalty_hours"].sum() >= table["cpu_only_hours"].sum() > 0
    # the XLSX shows each day's books beside the usage: the demo's submitters, held against used
    xlsx = tmp_path / "usage.xlsx"
    code, out, err = run(capsys, "export", "--config", str(demo_config), *DAYS, "--format", "xlsx", "--out", str(xlsx))
    assert code == 0, err
    sheet = openpyxl.load_workbook(xlsx)["audit"]
    header = [c.value for c in sheet[1]]
    assert header[:3] == ["day", "submitter", "site"] and "audit_used_core_hours" in header
    assert sheet.cell(2, header.index("audit_held_core_hours") + 1).value > 0


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
