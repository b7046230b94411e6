"""The report as one static HTML page: the plots (inline SVG) and the tables behind them, styles
inline, no script and nothing fetched, so it opens from a file anywhere, offline.

Sections computed outside the collector (the probe's analytics: efficiency by resource set,
the fair-share lab) come in as :class:`Figure` objects, drawn with the same plots."""

from __future__ import annotations

import math
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from html import escape
from pathlib import Path

import pandas as pd

from collector.exports.table import Period
from collector.filemode import as_umask_allows
from collector.readable import counted
from collector.report.committee_page import committee_sections
from collector.report.svg import bar_chart, line_chart
from collector.report.tables import ReportTables
from collector.summaries.spec import COLUMNS

__all__ = ["NOTHING_TO_DRAW", "Figure", "render_page", "write_report"]


NOTHING_TO_DRAW = "Nothing to draw: every value in this period is 0 (the table below holds them)."


@dataclass(frozen=True)
class Figure:
    """A section made elsewhere: its title, one sentence of what it shows, its plot (an
    ``<svg>`` of :mod:`collector.report.svg`, "" when it has nothing to draw), the table behind
    it, the sentence said in place of a plot with nothing to draw (``blank``), and how it is
    measured (``more``, behind a click: the section's first words are what it found)."""

    title: str
    what: str
    plot: str
    table: pd.DataFrame
    blank: str = NOTHING_TO_DRAW
    more: str = ""


_STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 24px auto; max-width: 1160px; padding: 0 16px; color: #222; }
body { background: #fff; }
h1 { font-size: 22px; } h2 { font-size: 17px; margin-top: 36px; border-bottom: 1px solid #ddd; }
svg { width: 100%; height: auto; background: #fafafa; border: 1px solid #eee; }
svg .title { font-size: 13px; font-weight: 600; } svg .tick { font-size: 10px; fill: #555; }
svg .grid { stroke: #e4e4e4; } svg .axis { stroke: #888; }
table { border-collapse: collapse; margin: 12px 0; font-size: 12px; }
table { display: block; overflow-x: auto; max-width: 100%; }
th, td { border: 1px solid #ddd; padding: 3px 8px; text-align: right; } th { background: #f2f2f2; }
td:first-child, th:first-child { text-align: left; }
p.note { color: #666; } p.blank { padding: 12px; background: #fafafa; border: 1px solid #eee; }
details { margin: 8px 0; } svg text title { pointer-events: auto; }
p.totals { font-size: 15px; padding: 10px 12px; background: #f4f7fd; border: 1px solid #c9d6f2; }
table.committee th { white-space: normal; max-width: 110px; vertical-align: bottom; }
table.committee td:last-child, table.committee th:last-child { text-align: left; }
table.committee tr.over td { background: #fde2dd; font-weight: 600; }
table.committee tr.course td { background: #fff4d6; }
table.committee tr.total td { font-weight: 600; border-top: 2px solid #888; }
section#committee svg { max-width: 900px; }
"""


def _table(frame: pd.DataFrame, empty: str = "") -> str:
    if frame.empty:
        return f'<p class="note blank">{escape(empty or "No records in this period.")}</p>'
    head = "".join(
        f'<th title="{escape(COLUMNS[c].help) if c in COLUMNS else ""}">{escape(str(c))}</th>' for c in frame.columns
    )
    rows = []
    for row in frame.itertuples(index=False):
        cells = "".join(f"<td>{_cell(v)}</td>" for v in row)
        rows.append(f"<tr>{cells}</tr>")
    return (
        f"<details><summary>the table ({counted(len(frame), 'row')})</summary>"
        f"<table><tr>{head}</tr>{''.join(rows)}</table></details>"
    )


def _cell(value: object) -> str:
    if value is None or (isinstance(value, float) and value != value):
        return "\N{EN DASH}"
    if isinstance(value, float):
        return f"{value:,.2f}"
    return escape(str(value))


def _names(values: pd.Series) -> list[str]:
    """Category labels: a record without the field is '(none)'."""
    return ["(none)" if v is None or v != v else str(v) for v in values]


def _section(
    title: str, what: str, plot: str, frame: pd.DataFrame, blank: str = NOTHING_TO_DRAW, empty: str = "",
    more: str = "",
) -> str:  # fmt: skip
    """A section: the plot, or ``blank`` said in its place when it has nothing to draw (an empty
    chart reads as a broken page); no records at all is the table's to say (``empty``, or a
    generic sentence); ``more``: how it is measured, behind a click."""
    body = "" if frame.empty else plot or f'<p class="note blank">{escape(blank)}</p>'
    detail = f"<details><summary>how it is measured</summary><p>{escape(more)}</p></details>" if more else ""
    return f"<section><h2>{escape(title)}</h2><p>{escape(what)}</p>{detail}{body}{_table(frame, empty)}</section>"


_CU = (
    "A canonical unit (CU) is the smallest bundle of resources a partition hands out (by default 1 core with "
    "2 GiB of memory, or 1 GPU); a node's true overhead is the number of whole CUs idle in every resource at "
    "once (Andrijauskas et al. 2023), and its CU-hours are those CUs times the hours they stayed idle."
)
_PE = (
    "A PE-hour (processor equivalent) counts a job by the resource it takes most of, in cores: a job that takes "
    "1 core and half a 32-core node's memory is 16 PEs, weighted by its node's cost, times its wall hours "
    "normalized by the node's speed (machines.speed_attribute, a benchmark per core: on a host of 10 HEPSPEC "
    "per core a core-hour is 10 PE-hours). PE-hours compare users with each other, not with core-hours."
)


def _period_days(period: Period) -> list[str]:
    """Every UTC day of ``period``, ISO: a time plot spans the whole period."""
    n = (period.last - period.first).days + 1
    return [str(period.first + timedelta(days=i)) for i in range(n)]


def _per_day(days: list[str], frame: pd.DataFrame, value: str, day: str = "day") -> list[float]:
    """``frame[value]`` summed per day of ``days``: NaN (missing, never 0) on a day without a row."""
    if frame.empty:
        return [math.nan] * len(days)
    summed = frame.groupby(frame[day].astype(str).str[:10])[value].sum()
    return [float(summed[d]) if d in summed.index else math.nan for d in days]


def _committee_part(t: ReportTables) -> list[str]:
    """The committee's answer first: totals, awards per project, VO and site, then usage per day
    over the whole period and held against billed per project."""
    days = _period_days(t.period)
    d = t.days
    sections = [committee_sections(t.committee)]
    sections.append(_section(
        "Usage per day",
        "Core-hours of the jobs that ended each day (used) and of the running jobs' bills (billed), over every day "
        "of the period; a grey band is a day without any record (no data, not 0).",
        # a day without snapshots billed nothing because nothing was seen: missing, not 0
        line_chart(days, {"used core-hours": _per_day(days, d, "core_hours"),
                          "billed core-hours": _per_day(days, d.loc[d["n_slot_snapshots"] > 0], "billed_core_hours")},
                   title="core-hours per day (UTC)", unit="core-hours"), d,
        "No core-hour used or billed on any day of the period.",
    ))  # fmt: skip
    p = t.projects
    sections.append(_section(
        "Held against billed per project",
        "Core-hours the running jobs of each project held, and what they were billed: held plus a proportional "
        "share of the idle cores of their nodes (Andrijauskas et al. 2023), while the probe took snapshots.",
        bar_chart(_names(p["project"]),
                  {"held core-hours": p["held_core_hours"].tolist(),
                   "billed core-hours": p["billed_core_hours"].tolist()},
                  title="core-hours per project", unit="core-hours"), p,
        "No core-hours held or billed in this period.",
    ))  # fmt: skip
    return sections


def _overhead_part(t: ReportTables) -> list[str]:
    days = _period_days(t.period)
    h = t.histogram
    parts = sorted(h["partition"].astype(str).unique()) if not h.empty else []
    cus = sorted(h["overhead_cu"].unique()) if not h.empty else []
    counts = {
        p: [
            float(h.loc[(h["partition"].astype(str) == p) & (h["overhead_cu"] == c), "slot_snapshots"].sum())
            for c in cus
        ]
        for p in parts
    }
    o = t.overhead
    series = {str(s): _per_day(days, o.loc[o["site"].astype(str) == str(s)], "overhead_cu_hours")
              for s in sorted(o["site"].astype(str).unique())}  # fmt: skip
    if not o.empty:
        series["fitting idle, all sites"] = _per_day(days, o, "overhead_cu_hours_fitting_idle")
    return [
        _section(
            "True overhead per partition",
            f"Slot snapshots by their true overhead, in whole canonical units. {_CU}",
            bar_chart([f"{c:g} CU" for c in cus], counts, title="slot snapshots by true overhead (CU)",
                      unit="snapshots"), h,
            "No slot snapshot in this period.",
        ),
        _section(
            "Overhead over time per site",
            "CU-hours of true overhead per day and site, and the part of it beside idle jobs that would have fit, "
            "over every day of the period; a grey band is a day without slot snapshots (no data, not 0).",
            line_chart(days, series, title="true overhead per day (UTC)", unit="CU-hours"), o,
            "No true overhead on any day: no node was idle in every resource at once by a whole canonical unit.",
        ),
    ]  # fmt: skip


def _fairness_part(t: ReportTables) -> list[str]:
    days = _period_days(t.period)
    u = t.users
    f = t.fairshare
    labels = [f"{a}:{b}" for a, b in zip(f["type"], f["name"], strict=True)]
    b = t.fairness
    per_day = b.assign(day=b["bucket"].astype(str).str[:10])
    jain = {
        "Jain, served part": per_day.groupby("day")["jain_served"].mean() if len(b) else pd.Series(dtype=float),
        "Jain, allocation": per_day.groupby("day")["jain_allocation"].mean() if len(b) else pd.Series(dtype=float),
    }
    v = t.starvation
    return [
        _section(
            "Who pays more under the penalty",
            "Each user's share of the pool under the multi-resource penalty minus their share under a CPU-only "
            f"count (Klusáček & Rudová 2015), in percentage points: above 0 pays more. {_PE}",
            bar_chart(_names(u["user"]), {"share change": u["change"].tolist()},
                      title="change of share under the penalty", unit="percentage points"), u,
            f"Nobody pays more or less: each of the {len(u)} users' share of the pool is the same under the penalty "
            "as under a CPU-only count (change 0 for all): cores are the resource every job asks most of.",
        ),
        _section(
            "Fairshare against targets",
            "Each credential's decayed effective usage at the last window of the period, beside its target "
            "(Maui Admin Guide, 6.3).",
            bar_chart(labels, {"effective usage": f["effective_percent"].astype(float).tolist(),
                               "target": f["target_percent"].astype(float).fillna(0.0).tolist()},
                      title="fairshare usage and target", unit="% of the pool"), f,
            "Every credential's effective usage and target are 0 at the last window.",
            "No fairshare records in this period: the probe writes them when a fairshare window "
            "(fairshare.interval_s) closes while it runs, and none closed (a single probe once, as the demo's, "
            "closes none).",
        ),
        _section(
            "Fairness of the share over time",
            "Jain's index across the users with demand or allocation (Sedighi et al. 2014), the mean of each day's "
            "buckets: of the part of what each wanted that it got (1 when all got the same part) and of the cores "
            "allocated (1/n when one took all). A grey band is a day without fairness records.",
            line_chart(days, {k: [float(s[d]) if d in s.index else math.nan for d in days] for k, s in jain.items()},
                       title="Jain's index per day (UTC)", unit="index (0..1)"), b,
            "Jain's index is 0 in every bucket: nobody was allocated anything.",
        ),
        _section(
            "Starvation per credential",
            "Hours in which a credential had idle jobs waiting and got nothing (or at most the configured fraction "
            "of an equal share) while others were served.",
            bar_chart(_names(v["name"]), {"starved hours": v["starved_hours"].tolist()},
                      title="starved hours per credential", unit="hours"), v,
            f"No credential starved: none of the {len(v)} waited with idle jobs while getting nothing (or at most "
            "the configured fraction of an equal share).",
        ),
    ]  # fmt: skip


def render_page(t: ReportTables, figures: Sequence[Figure] = (), appendix: Sequence[Figure] = ()) -> str:
    """The report's HTML (one document, everything inline): the committee's part first, then the
    details (true overhead, the penalty, fairness) and ``figures``, then the ``appendix``."""
    sections = _committee_part(t)
    sections.append(
        '<h1 id="details">Details: overhead, the penalty and fairness</h1><p class="note">How the pool was used '
        "and shared, for its operators and for a committee that asks why: true overhead in canonical units, the "
        "multi-resource penalty in PE-hours, fairshare and the fairness of the share.</p>"
    )
    sections += _overhead_part(t) + _fairness_part(t)
    sections += [_section(f.title, f.what, f.plot, f.table, f.blank, more=f.more) for f in figures]
    if appendix:  # synthetic cases beside a site's data would read as the site's: set apart and said so
        sections.append(
            '<h1 id="appendix">Appendix: synthetic cases, not this site\'s data</h1><p class="note">'
            "The fair-share lab's cases (Sedighi et al. 2014), simulated by fairacct to show how each policy "
            "behaves; nothing below was read from this site's pool or store.</p>"
        )
        sections += [_section(f.title, f.what, f.plot, f.table, f.blank, more=f.more) for f in appendix]
    title = f"fairacct report, {t.period.first} to {t.period.last}"
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>'
        f'<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<style>{_STYLE}</style></head><body><h1>{escape(title)}</h1>"
        f'<p class="note">UTC days, both included. Summed in the store from the daily summaries and the records.</p>'
        f"{''.join(sections)}</body></html>\n"
    )


def write_report(
    tables: ReportTables,
    directory: str | os.PathLike[str],
    figures: Sequence[Figure] = (),
    appendix: Sequence[Figure] = (),
) -> Path:
    """Write ``index.html`` into ``directory`` (atomically); return its path. ``appendix``:
    sections that are not the site's data (the lab's synthetic cases), set apart at the end."""
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / "index.html"
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".index.", suffix=".tmp")
    as_umask_allows(fd)  # a web server serves it: readable as the umask says, not 0600 as mkstemp makes it
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(render_page(tables, figures, appendix))
    os.replace(tmp, target)
    return target
