"""The static HTML report: its tables summed in the store, a page with nothing to fetch, and
what headless Chromium makes of it (a screenshot that is not blank, a console without errors)."""

from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
import zlib
from datetime import date
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from collector.exports import Period
from collector.report import render_page, report_tables, write_report
from collector.sinks import Sink

from .generated import generated_frames

PERIOD = Period(date(2026, 1, 1), date(2026, 1, 10))
CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
    "--disable-sync", "--no-first-run", "--enable-logging=stderr", "--v=0", "--window-size=1100,2400",
]  # fmt: skip


def test_the_report_tables_are_the_sums_of_the_records(generated_store: Sink) -> None:
    tables = report_tables(generated_store, PERIOD)
    frames = generated_frames()
    slots = frames["slot"]
    want = slots.groupby(["partition", "overhead_cu"]).size()
    got = tables.histogram.set_index(["partition", "overhead_cu"])["slot_snapshots"]
    assert got.sort_index().tolist() == want.sort_index().tolist()
    assert tables.overhead["overhead_cu_hours"].sum() == pytest.approx(slots["overhead_cu_hours"].sum())
    bills = frames["allocation"]
    held = (bills["cpus"] * bills["interval_s"] / 3600).groupby(bills["project"]).sum()
    assert tables.projects.set_index("project")["held_core_hours"].sort_index().tolist() == pytest.approx(
        held.sort_index().tolist()
    )
    assert tables.users["change"].sum() == pytest.approx(0.0, abs=1e-9)  # shares move, they do not appear
    assert set(tables.fairshare["name"]) == set(frames["fairshare"]["name"])
    assert tables.fairshare.set_index("name").loc["alice", "target_percent"] == 30.0


def test_the_page_is_self_contained(generated_store: Sink) -> None:
    page = render_page(report_tables(generated_store, PERIOD))
    # the committee's: core-hours and GPU-hours per project, usage per day, held against billed; then
    # the overhead histogram and per day, the penalty and fairshare (no fairness records: said)
    assert page.count("<svg") == 8 and page.count("<table>") == 6 and page.count('<table class="committee">') == 3
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page)  # nothing fetched
    assert "<script" not in page
    for title in ("True overhead per partition", "Overhead over time per site", "Held against billed per project",
                  "Who pays more under the penalty", "Fairshare against targets"):  # fmt: skip
        assert title in page


def fairness_docs() -> list[dict[str, Any]]:
    """Two hourly buckets of 2026-01-02: in the first, a holds 4 cores and b waits for 4 and
    gets nothing (starved; Jain of the served parts 1 and 0: (1+0)^2 / (2 x 1) = 0.5, of the
    allocations 4 and 0: 0.5); in the second both hold 2 and nobody waits (both Jain 1)."""
    from probes.accounting.fairness import bucket_shares, fairness_by_bucket
    from probes.pipeline.records import fairness_docs as docs

    t0 = 1767312000.0  # 2026-01-02T00:00:00Z
    allocations = pd.DataFrame(
        {"observed_at": [t0, t0 + 3600, t0 + 3600], "user": ["a", "a", "b"], "cpus": [4.0, 2.0, 2.0]}
    )
    demand = pd.DataFrame({"observed_at": [t0], "user": ["b"], "cpus": [4.0]})
    shares = bucket_shares(allocations, demand, bucket_s=3600)
    return docs(shares, fairness_by_bucket(shares), pool="p", probe="test")["fairness"].decoded()


@pytest.fixture
def fairness_store(empty_store: Sink) -> Sink:
    empty_store.send("fairness", fairness_docs())
    return empty_store


def test_jain_and_starvation_from_the_fairness_records(fairness_store: Sink) -> None:
    tables = report_tables(fairness_store, PERIOD)
    f = tables.fairness
    assert f["bucket"].tolist() == ["2026-01-02T00:00:00Z", "2026-01-02T01:00:00Z"]
    assert f["jain_served"].tolist() == [0.5, 1.0] and f["jain_allocation"].tolist() == [0.5, 1.0]
    assert f["credentials"].tolist() == [2, 2] and f["starved"].tolist() == [1, 0]
    v = tables.starvation
    assert v[["name", "buckets", "starved_buckets", "starved_hours"]].values.tolist() == [
        ["b", 2, 1, 1.0],
        ["a", 2, 0, 0.0],
    ]
    page = render_page(tables)
    assert "Fairness of the share over time" in page and "Starvation per credential" in page


def _chromium() -> str:
    """The headless browser, or a skip: a test never installs anything (`make browser` does)."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if not found:
        pytest.skip("headless Chromium is not installed: `make browser` (run by .ci/run) installs it")
    return found


def _pixels_vary(png: bytes) -> bool:
    """Whether a PNG holds more than one flat colour: its decompressed scanlines use many values."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    data, at = b"", 8
    while at < len(png):
        (length,) = struct.unpack(">I", png[at : at + 4])
        kind = png[at + 4 : at + 8]
        if kind == b"IDAT":
            data += png[at + 8 : at + 8 + length]
        at += 12 + length
    raw = zlib.decompress(data)
    return len(set(raw)) > 32 and raw.count(0xFF) < 0.98 * len(raw)


@pytest.mark.slow
def test_headless_chromium_shows_the_report_without_console_errors(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    from probes.accounting.lab import run_lab
    from probes.cli.report_figures import report_figures
    from probes.config import ProbeConfig

    from .generated_stores import session_folder, sqlite_copy

    chromium = _chromium()
    # the generated records summarized (all ten days, the period's among them: a day's summaries
    # are its own), and the fairness records (of the day before the period: summarized or not,
    # none of the period's summaries holds them)
    with sqlite_copy(session_folder(tmp_path_factory.getbasetemp()), tmp_path / "store.sqlite") as store:
        store.send("fairness", fairness_docs())
        figures = report_figures(store, ProbeConfig(), PERIOD, run_lab(["1"], fraction=0.1))
        page = write_report(report_tables(store, PERIOD), tmp_path / "report", figures)
    html = page.read_text()
    for title in (
        "Fairness of the share over time",
        "Starvation per credential",
        "Efficiency by site",
        "The books: allocation records against completed jobs",
        "Lab case 1: burst",
    ):
        assert f"<h2>{title}" in html
    # every section drawn, with its table (the committee's three tables shown open, each with its class)
    assert html.count("<svg") == 13 and html.count("<table>") == 11
    shot = tmp_path / "report.png"
    # a home of its own: Chromium writes crash-report settings and dconf under $HOME whatever its profile
    home = {"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "xdg"), "XDG_CACHE_HOME": str(tmp_path / "xdg")}
    done = subprocess.run(
        [chromium, *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile'}", f"--screenshot={shot}", page.as_uri()],
        capture_output=True, text=True, timeout=120, env={**os.environ, **home},
    )  # fmt: skip
    assert done.returncode == 0 and shot.is_file(), done.stderr[-2000:]
    console = [line for line in done.stderr.splitlines() if ":CONSOLE" in line]
    assert console == [], console
    assert _pixels_vary(shot.read_bytes()), "the screenshot is blank"
    if os.environ.get("FAIRACCT_KEEP_SCREENSHOT"):
        shutil.copy(shot, os.environ["FAIRACCT_KEEP_SCREENSHOT"])


def test_a_time_plot_spans_the_period_and_shows_missing_days_as_no_data() -> None:
    from collector.report.svg import line_chart

    nan = float("nan")
    days = ["2026-11-01", "2026-11-02", "2026-11-03", "2026-11-04", "2026-11-05"]
    svg = line_chart(days, {"used": [nan, 2.0, 4.0, nan, 3.0], "idle": [0.0, 0.0, 0.0, nan, 0.0]}, title="t", unit="h")
    # one line joins the 2nd and 3rd days, the 5th is a dot alone; no line climbs from 0 on the 1st or 4th
    assert svg.count("<polyline") == 1 and svg.count("<circle") == 3
    assert svg.count('class="missing"') == 1 and "2026-11-04: no data" in svg  # the day every series misses
    # the legend names what is drawn: "idle" is all 0, so not drawn nor named; "no data" names the band
    legend = re.findall(r'<text x="\d+" y="[0-9.]+" class="tick">([^<]*)</text>', svg)
    assert legend[-2:] == ["used", "no data"] and "idle" not in legend


def test_an_empty_period_is_said_in_a_sentence(empty_store: Sink, tmp_path: Path) -> None:
    from collector.awards import read_awards

    awards = tmp_path / "awards.csv"
    awards.write_text("project,resource,amount,period\nCMS,core_hours,100,2025-12\n")
    page = render_page(report_tables(empty_store, PERIOD, read_awards(awards)))
    committee = page.split('<section id="committee">', 1)[1].split("</section>", 1)[0]
    assert "No job ended and no bill was charged from 2026-01-01 to 2026-01-10" in committee
    assert "<table" not in committee and "<svg" not in committee
    assert "0.0 core-hours used and 0.0 billed" in committee and "0 jobs of 0 users in 0 projects" in committee
    assert "The probe took no slot snapshot in the period: the pool's capacity is not known." in committee
    # the award is of December 2025: outside the period, left out and said so
    assert "Left out: 1 award of the awards file, covering no day of 2026-01-01 to 2026-01-10." in committee
