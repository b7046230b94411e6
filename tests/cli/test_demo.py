"""What `make demo` shows a committee at first sight (issue 39, point 6): its commands run here
into a temporary directory on the bundled demo pool (config/demo/: one snapshot, 2026-11-21
22:26:40 UTC, of 72 running jobs holding 445 cores; a history of 60 jobs that completed before it).
The books balance over the demo's own data and say why; no chart is drawn empty; durations and
times read as hours, days and UTC; labels fit their plot; XLSX and CSV are rounded for reading,
Parquet and JSON keep full precision."""

from __future__ import annotations

import json
import math
import re
from html import unescape
from pathlib import Path

import pandas as pd
import pytest

from collector.readable import round_significant
from collector.report.svg import X_LABEL_CHARS
from probes.cli import main

from ..conftest import ROOT

PERIOD = ["--from", "2026-11-01", "--to", "2026-11-30"]
RUNNING_CORES = 445  # the cores of the 72 dynamic slots of config/demo/status.ads
INTERVAL_S = 300  # config/demo.toml's pool.interval_s: what the one snapshot stands for


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


@pytest.fixture
def demo(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    """`make demo`'s commands (and the other export formats) into ``tmp_path``: the directory."""
    config = tmp_path / "demo.toml"
    config.write_text(
        (ROOT / "config/demo.toml")
        .read_text()
        .replace('"demo/', f'"{ROOT}/config/demo/')
        .replace('"../.demo"', f'"{tmp_path / "state"}"')
    )
    common = ["--config", str(config)]
    run(capsys, "probe", "once", *common)
    run(capsys, "summarize", *common, *PERIOD)
    for fmt, name in (("xlsx", "usage.xlsx"), ("csv", "usage.csv"), ("json", "usage.json"), ("parquet", "usage.pq")):
        run(capsys, "export", *common, *PERIOD, "--by", "project,user,site,month", "--format", fmt, "--out",
            str(tmp_path / name))  # fmt: skip
    run(capsys, "report", *common, *PERIOD, "--lab", "--out", str(tmp_path / "report"))
    return tmp_path


def sections(page: str) -> dict[str, str]:
    return {unescape(t): body for t, body in re.findall(r"<section><h2>(.*?)</h2>(.*?)</section>", page, re.S)}


def text(html: str) -> str:
    return unescape(re.sub(r"<[^>]+>", " ", html))


def test_the_demos_books_balance_and_say_why(demo: Path) -> None:
    page = (demo / "report" / "index.html").read_text()
    books = sections(page)["The books: allocation records against completed jobs"]
    said = text(books)
    assert "fault of the books: 18 of 18" not in said
    assert "The books balance: 0 of 18 rows beyond their bound." in said
    # the one snapshot's 445 cores, each standing for 5 minutes: held by jobs the history cannot hold yet
    held = RUNNING_CORES * INTERVAL_S / 3600.0
    assert f"No fault in the {held:.4g} core-hours held by the 72 jobs still running at the newest snapshot" in said
    assert "No completed job ran in the time the snapshots observed (5 min of the period's 30 days)" in said
    assert "the history's 60 jobs of the period ran in the gaps" in said
    cells = re.findall(r"<tr>(.*?)</tr>", books)
    assert len(cells) == 1 + 18
    running = [float(re.findall(r"<td>([^<]*)</td>", row)[8]) for row in cells[1:]]
    assert sum(running) == pytest.approx(held, abs=0.01)  # each shown to 2 decimals


def test_the_exports_books_agree_with_the_report(demo: Path) -> None:
    """The XLSX's ``audit`` sheet (the daily summaries) sets the running jobs apart as the report
    does: a committee that opens both reads the same books."""
    from openpyxl import load_workbook

    book = load_workbook(demo / "usage.xlsx", read_only=True)  # read-only keeps the file open until close()
    try:
        sheet = list(book["audit"].iter_rows(values_only=True))
    finally:
        book.close()
    table = sheet[1 : sheet.index((None,) * len(sheet[0]))]  # the columns' meanings follow a blank row
    rows = [dict(zip(sheet[0], row, strict=True)) for row in table]
    total = rows.pop()  # the books of the whole range: every day's summed
    assert total["day"] == "TOTAL" and total["audit_beyond"] == 0 and total["audit_jobs"] == 0
    assert total["audit_open_core_hours"] == pytest.approx(RUNNING_CORES * INTERVAL_S / 3600.0, rel=1e-5)
    assert len(rows) == 18
    assert [r["audit_beyond"] for r in rows] == [0] * 18
    assert [r["audit_held_core_hours"] for r in rows] == [0] * 18
    held = RUNNING_CORES * INTERVAL_S / 3600.0
    assert sum(r["audit_open_core_hours"] for r in rows) == pytest.approx(held, rel=1e-5)  # each to 6 digits


def test_no_chart_is_drawn_empty(demo: Path) -> None:
    page = (demo / "report" / "index.html").read_text()
    found = sections(page)
    penalty = text(found["Who pays more under the penalty"])
    assert "<svg" not in found["Who pays more under the penalty"]
    assert "Nobody pays more or less: each of the 4 users' share of the pool is the same" in penalty
    assert "<svg" not in found["Starvation per credential"]
    assert "No credential starved: none of the 4 waited" in text(found["Starvation per credential"])
    for title, body in found.items():
        for svg in re.findall(r"<svg.*?</svg>", body, re.S):
            bars = [float(h) for h in re.findall(r'<rect [^>]*height="([0-9.]+)"', svg)]
            lines = re.findall(r"<polyline|<circle", svg)
            assert lines or any(h > 0 for h in bars[: len(bars)]), f"{title}: a chart with nothing drawn"


def test_durations_and_times_read_as_hours_days_and_utc(demo: Path) -> None:
    page = text((demo / "report" / "index.html").read_text())
    assert not re.findall(r"\d\.\d+e[+-]\d+", page), "a number in scientific notation"
    assert (
        "demo 2026-11-01 00:00 UTC to 2026-11-21 22:21:40 UTC (20.9 days); "
        "demo 2026-11-21 22:26:40 UTC to 2026-12-01 00:00 UTC (9.06 days)"
    ) in page
    assert "longest snapshot interval 5 min + 2 s" in page
    # the efficiency table in core-hours, as the rest of the page (not 10^6 core-seconds)
    assert " available_core_hours " in page and "available_core_s" not in page


def test_labels_fit_their_plot_and_keep_their_whole_text(demo: Path) -> None:
    page = (demo / "report" / "index.html").read_text()
    slant = math.sin(math.radians(35))
    for svg in re.findall(r"<svg.*?</svg>", page, re.S):
        height = float(re.search(r'viewBox="0 0 \d+ ([0-9.]+)"', svg).group(1))  # type: ignore[union-attr]
        # a day without data is a band behind a time plot, not a category
        bars = {
            unescape(t.split(" · ")[0])
            for t in re.findall(r'<rect (?![^>]*class="missing")[^>]*><title>([^<]*)</title>', svg)
        }
        for y, shown, whole in re.findall(
            r'<text transform="translate\([0-9.]+ ([0-9.]+)\) rotate\(35\)" class="tick">([^<]*)(?:<title>([^<]*)'
            r"</title>)?</text>",
            svg,
        ):
            shown, whole = unescape(shown), unescape(whole) or unescape(shown)
            assert len(shown) <= X_LABEL_CHARS
            assert float(y) + len(shown) * 6.0 * slant <= height, f"{shown!r} runs off the plot"
            if bars:
                assert whole in bars, f"{shown!r}: its whole text {whole!r} is not a category"
    books = sections(page)["The books: allocation records against completed jobs"]
    assert "core-hours held vs used (submitters @demo.fairacct)" in books
    assert ">group_atlas.bob @ CIT_CMS_T2<" in books  # the submitter's domain said once, in the title
    fairness = sections(page)["Fairness of the share over time"]
    # the whole period on the time axis: the one day with fairness records a point, the 29 others no data
    assert (
        ">2026-11-01<" in fairness and ">2026-11-28<" in fairness and "T22:00:00Z<" not in fairness.split("<table>")[0]
    )
    assert fairness.count(": no data</title>") == 29 and "2026-11-21: no data" not in fairness


def test_xlsx_and_csv_are_rounded_for_reading_parquet_and_json_keep_full_precision(demo: Path) -> None:
    from openpyxl import load_workbook

    book = load_workbook(demo / "usage.xlsx")
    floats = [v for sheet in book.worksheets for row in sheet.iter_rows(values_only=True) for v in row
              if isinstance(v, float)]  # fmt: skip
    assert floats and all(v == round_significant(v, 6) for v in floats)
    assert 0.9999999999999989 not in floats
    notes = {r[0]: r[2] for r in book["columns"].iter_rows(values_only=True) if r and r[0]}
    assert notes["precision"] == (
        "CSV and XLSX: numbers rounded to 6 significant digits for reading; Parquet and JSON keep full precision"
    )
    csv = (demo / "usage.csv").read_text()
    assert all(len(re.sub(r"[^0-9]", "", n).lstrip("0")) <= 6 for n in re.findall(r"\d+\.\d+", csv))
    rows = json.loads((demo / "usage.json").read_text())["rows"]
    parquet = pd.read_parquet(demo / "usage.pq")
    # bob's ATLAS_Analysis at CIT_CMS_T2: 1.66667 in the XLSX, 5/3 core-hours held in JSON and Parquet
    first = rows[0]
    assert (first["project"], first["user"], first["site"]) == ("ATLAS_Analysis", "bob", "CIT_CMS_T2")
    assert first["held_core_hours"] == pytest.approx(5 / 3, rel=1e-14)
    assert parquet.loc[0, "held_core_hours"] == pytest.approx(5 / 3, rel=1e-14)
    header = [c.value for c in book["usage"][1]]
    assert book["usage"][2][header.index("held_core_hours")].value == 1.66667


def test_the_first_screen_answers_a_committee(demo: Path) -> None:
    """Totals first, then usage against each award: the demo's awards (config/demo/awards.csv) for
    November, its records up to the 21st, so each award's rate is its usage over 21 of 30 days."""
    page = (demo / "report" / "index.html").read_text()
    body = page.split("<body>", 1)[1]
    assert body.index('id="totals"') < body.index("<h2>Usage against awards per project") < body.index("<svg")
    assert body.index("<h2>Usage against awards per project") < body.index("True overhead per partition")
    assert body.index("<h2>Per VO") < body.index('<h1 id="details">') < body.index("Who pays more under the penalty")
    totals = text(re.search(r'<p class="totals" id="totals">(.*?)</p>', page, re.S).group(1))  # type: ignore[union-attr]
    # 60 jobs, 1,802.6 core-hours (config/demo/history.ads); the one snapshot's bills and its 57.7 core-hours
    # offered (692 cores x 5 min), 9.75 of them idle in whole canonical units: 16.9%
    assert " 1,802.6 core-hours used and 45.2 billed; 102.7 GPU-hours used and 2.2 billed;" in totals
    assert "60 jobs of 4 users in 4 projects" in totals
    assert "The pool offered 57.7 core-hours" in totals and "16.9% of them (9.8 core-hours) lost to overhead" in totals
    committee = page.split('<section id="committee">', 1)[1].split("<h2>Per VO", 1)[0]
    rows = {
        text(cells[0]).strip(): [text(c).strip() for c in cells]
        for mark, row in re.findall(r"<tr( class=\"\w+\")?>(.*?)</tr>", committee, re.S)
        if (cells := re.findall(r"<td>(.*?)</td>", row))
    }
    # CMS_Production: 709.4 core-hours of a 600 award: 118.2% used; at 709.4 / 21 days, 1,013.5 by the 30th
    assert rows["CMS_Production"][:4] == ["CMS_Production", "cms", "20", "709.4"]
    assert "118.2" in rows["CMS_Production"] and "1,013.5" in rows["CMS_Production"]
    assert rows["CMS_Production"][-1] == "over the core-hours award"
    assert '<tr class="over"><td>CMS_Production</td>' in committee
    # CMS_ML_Training: 774.9 of 1,000 (77.5%), projected 1,107.0: on course to exceed, like its GPU-hours
    assert "77.5" in rows["CMS_ML_Training"] and "1,107.0" in rows["CMS_ML_Training"]
    assert rows["CMS_ML_Training"][-1].startswith("on course to exceed the core-hours award")
    assert rows["ATLAS_Analysis"][-1] == "within its award" and rows["OSG_Chemistry"][1] == "osg"
    assert "1 project over their award, 1 on course to exceed it" in text(committee)
    per_vo = page.split("<h2>Per VO", 1)[1].split("<h2>Per site", 1)[0]
    assert [text(v).strip() for v in re.findall(r"<tr[^>]*><td>(.*?)</td>", per_vo)] == ["cms", "atlas", "osg", "TOTAL"]
    assert "group_" not in per_vo
    # every table ends with its total: 1,802.6 of the 2,300 core-hours awarded (78.4%), 102.7 of 120 GPU-hours
    # (85.6%); per site, the 9.75 core-hours lost of the 57.7 offered (16.9%), not a sum of the sites' shares
    total = [text(c).strip() for c in re.findall(r"<td>(.*?)</td>", committee.split('<tr class="total">')[1])]
    assert total[:4] == ["TOTAL", "\N{EN DASH}", "60", "1,802.6"] and total[7:9] == ["2,300.0", "78.4"]
    assert total[10:12] == ["120.0", "85.6"]
    sites = page.split("<h2>Per site", 1)[1].split("</table>", 1)[0]
    assert re.findall(r"<td>(.*?)</td>", sites.split('<tr class="total">')[1])[-3:] == ["57.7", "9.8", "16.9"]


def test_the_xlsx_holds_the_same_figures_with_totals(demo: Path) -> None:
    from openpyxl import load_workbook

    book = load_workbook(demo / "usage.xlsx")
    assert book.sheetnames == ["usage", "capacity", "columns", "awards", "awards by VO", "apel", "audit"]
    usage = book["usage"]
    header = [c.value for c in usage[1]]
    assert "n_slot_snapshots" not in header and "slot_core_hours" not in header  # capacity: its own sheet
    rows = list(usage.iter_rows(min_row=2, values_only=True))
    assert all(r[header.index("project")] for r in rows[:-1])  # no row without a project among the usage
    total = dict(zip(header, rows[-1], strict=True))
    assert total["month"] == "TOTAL" and total["n_jobs"] == 60 and total["core_hours"] == 1802.62
    assert total["billed_over_held"] == pytest.approx(45.25 / 37.0833, rel=1e-5)
    assert usage.freeze_panes == "B2" and usage[rows.__len__() + 1][0].font.b
    assert usage.column_dimensions["B"].width >= len("CMS_ML_Training")
    assert usage.cell(2, header.index("core_hours") + 1).number_format == '#,##0.00 "core-hours"'
    capacity = list(book["capacity"].iter_rows(values_only=True))
    assert capacity[0] == ("month", "site", "n_slot_snapshots", "slot_core_hours", "overhead_cu_hours",
                           "overhead_cu_hours_fitting_idle")  # fmt: skip
    assert [r[1] for r in capacity[1:-1]] == ["CIT_CMS_T2", "FNAL", "Nebraska", "Purdue", "UCSD"]
    assert capacity[-1][:4] == ("TOTAL", None, 36, 57.6667)
    awards = list(book["awards"].iter_rows(values_only=True))
    head = awards[0]
    production = dict(zip(head, next(r for r in awards if r[0] == "CMS_Production"), strict=True))
    assert production["awarded_core_hours"] == 600 and production["core_award_used_percent"] == 118.238
    assert production["projected_core_hours"] == 1013.47 and production["status"] == "over the core-hours award"
    assert next(r for r in awards if r[0] == "TOTAL")[head.index("awarded_core_hours")] == 2300
    apel = list(book["apel"].iter_rows(values_only=True))
    assert {r[1] for r in apel[1:] if r[0] == "2026-11"} == {"atlas", "cms", "osg"}  # VOs, not groups


def test_without_awards_the_page_shows_usage_alone_and_an_unmapped_group_is_no_vo(demo: Path) -> None:
    from datetime import date

    from collector.exports import Period
    from collector.report.committee import NO_VO, committee_tables
    from collector.report.committee_page import committee_sections
    from collector.sinks.sqlite import EmbeddedStore

    with EmbeddedStore(demo / "state" / "fairacct.sqlite") as store:
        c = committee_tables(store, Period(date(2026, 11, 1), date(2026, 11, 30)), vo_map={"group_cms": "cms"})
    html = committee_sections(c)
    assert "No awards were given" in html and "awarded core-hours" not in html and "status" not in html
    assert c.projects["VO"].tolist() == ["cms", "cms", NO_VO, NO_VO]  # by core-hours: ML, Production, ATLAS, OSG
    assert c.vos["VO"].tolist() == ["cms", NO_VO] and c.vos["n_jobs"].tolist() == [29, 31]
    assert c.notes == [
        f"Accounting group(s) group_atlas, group_osg name no VO in [apel] vo_map: their usage is counted under "
        f"{NO_VO!r}, not sent as a VO."
    ]
    assert html.count("group_atlas") == 1  # said once, in the note


def test_legends_name_what_is_drawn_and_units_are_explained_where_they_first_appear(demo: Path) -> None:
    page = (demo / "report" / "index.html").read_text()
    found = sections(page)

    def legend(body: str) -> list[str]:
        svg = re.search(r"<svg.*?</svg>", body, re.S).group(0)  # type: ignore[union-attr]
        return [unescape(t) for t in re.findall(r'<text x="\d+" y="[0-9.]+" class="tick">([^<]*)</text>', svg)]

    # the demo's one snapshot holds running jobs only: no held nor used bar, so neither in the legend
    assert legend(found["The books: allocation records against completed jobs"]) == ["running"]
    assert "how it is measured</summary>" in found["The books: allocation records against completed jobs"]
    # the slot snapshots are of 2026-11-21 only: one point per series, the 29 other days no data
    overhead = found["Overhead over time per site"]
    assert overhead.count(": no data</title>") == 29 and legend(overhead)[-1] == "no data"
    assert ">unknown<" not in found["Efficiency by site"]  # the one job without a site ran no core-second
    said = {t: text(b) for t, b in found.items()}
    assert "A canonical unit (CU) is the smallest bundle of resources" in said["True overhead per partition"]
    assert (
        "A PE-hour (processor equivalent) counts a job by the resource it takes most of"
        in said["Who pays more under the penalty"]
    )
    assert page.index("A canonical unit (CU) is") < page.index(" CU<") and page.index("A PE-hour") < page.index(
        "penalty_hours"
    )
    assert (
        "No fairshare records in this period: the probe writes them when a fairshare window"
        in said["Fairshare against targets"]
    )


def test_a_yearly_award_in_a_shorter_report_counts_its_days_up_to_the_reports_end(demo: Path) -> None:
    from datetime import date

    from collector.awards import Award
    from collector.exports import Period
    from collector.report.committee import committee_tables
    from collector.sinks.sqlite import EmbeddedStore

    award = Award("CMS_Production", "core_hours", 10_000.0, date(2026, 1, 1), date(2026, 12, 31))
    with EmbeddedStore(demo / "state" / "fairacct.sqlite") as store:
        c = committee_tables(store, Period(date(2026, 11, 1), date(2026, 11, 20)), [award])
    row = c.projects.set_index("project").loc["CMS_Production"]
    # its jobs that ended on the 19th and 20th: 356.81 core-hours (the 21st's are after the report's end),
    # over the 324 days of 2026 up to the 20th, carried to 365 days: 401.96; 3.57% of the 10,000 awarded
    assert c.as_of == date(2026, 11, 20)
    assert row["core_hours"] == pytest.approx(356.808611, rel=1e-6)
    assert row["projected_core_hours"] == pytest.approx(356.808611 * 365 / 324, rel=1e-6)
    assert row["core_award_used_percent"] == pytest.approx(3.56808611, rel=1e-6)
    assert row["status"] == "within its award"
    assert c.projects.set_index("project").loc["ATLAS_Analysis", "status"] == "no award"
