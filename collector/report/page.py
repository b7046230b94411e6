"""The report as one static HTML page: the plots (inline SVG) and the tables behind them, styles
inline, no script and nothing fetched, so it opens from a file anywhere, offline.

Sections computed outside the collector (the probe's analytics: efficiency by resource set,
the fair-share lab) come in as :class:`Figure` objects, drawn with the same plots."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape
from pathlib import Path

import pandas as pd

from collector.filemode import as_umask_allows
from collector.report.svg import bar_chart, line_chart
from collector.report.tables import ReportTables
from collector.summaries.spec import COLUMNS

__all__ = ["NOTHING_TO_DRAW", "Figure", "render_page", "write_report"]


NOTHING_TO_DRAW = "Nothing to draw: every value in this period is 0 (the table below holds them)."


@dataclass(frozen=True)
class Figure:
    """A section made elsewhere: its title, one sentence of what it shows, its plot (an
    ``<svg>`` of :mod:`collector.report.svg`, "" when it has nothing to draw), the table behind
    it, and the sentence said in place of a plot with nothing to draw (``blank``)."""

    title: str
    what: str
    plot: str
    table: pd.DataFrame
    blank: str = NOTHING_TO_DRAW


_STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 24px auto; max-width: 1000px; color: #222; background: #fff; }
h1 { font-size: 22px; } h2 { font-size: 17px; margin-top: 36px; border-bottom: 1px solid #ddd; }
svg { width: 100%; height: auto; background: #fafafa; border: 1px solid #eee; }
svg .title { font-size: 13px; font-weight: 600; } svg .tick { font-size: 10px; fill: #555; }
svg .grid { stroke: #e4e4e4; } svg .axis { stroke: #888; }
table { border-collapse: collapse; margin: 12px 0; font-size: 12px; }
th, td { border: 1px solid #ddd; padding: 3px 8px; text-align: right; } th { background: #f2f2f2; }
td:first-child, th:first-child { text-align: left; }
p.note { color: #666; } p.blank { padding: 12px; background: #fafafa; border: 1px solid #eee; }
details { margin: 8px 0; } svg text title { pointer-events: auto; }
"""


def _table(frame: pd.DataFrame) -> str:
    if frame.empty:
        return '<p class="note">No records in this period.</p>'
    head = "".join(
        f'<th title="{escape(COLUMNS[c].help) if c in COLUMNS else ""}">{escape(str(c))}</th>' for c in frame.columns
    )
    rows = []
    for row in frame.itertuples(index=False):
        cells = "".join(f"<td>{_cell(v)}</td>" for v in row)
        rows.append(f"<tr>{cells}</tr>")
    return (
        f"<details><summary>the table ({len(frame)} rows)</summary>"
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


def _section(title: str, what: str, plot: str, frame: pd.DataFrame, blank: str = NOTHING_TO_DRAW) -> str:
    """A section: the plot, or ``blank`` said in its place when it has nothing to draw (an empty
    chart reads as a broken page); no records at all is the table's to say."""
    body = "" if frame.empty else plot or f'<p class="note blank">{escape(blank)}</p>'
    return f"<section><h2>{escape(title)}</h2><p>{escape(what)}</p>{body}{_table(frame)}</section>"


def _bucket(iso: object) -> str:
    """A bucket's ISO-8601 start as a plot's label: ``2026-11-21 22:00`` (UTC, said in the title)."""
    text = str(iso)
    return text[:16].replace("T", " ") if len(text) >= 16 and text[10:11] == "T" else text


def render_page(t: ReportTables, figures: Sequence[Figure] = (), appendix: Sequence[Figure] = ()) -> str:
    """The report's HTML (one document, everything inline), ``figures`` after the store's sections."""
    sections = []
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
    sections.append(_section(
        "True overhead per partition",
        "Slot snapshots by their true overhead: whole canonical units idle in every resource at once "
        "(Andrijauskas et al. 2023).",
        bar_chart([f"{c:g} CU" for c in cus], counts, title="slot snapshots by overhead (CU)", unit="snapshots"), h,
        "No slot snapshot in this period.",
    ))  # fmt: skip
    o = t.overhead
    days = sorted(o["day"].unique()) if not o.empty else []
    wide = (
        o.pivot_table(index="day", columns="site", values="overhead_cu_hours", aggfunc="sum").reindex(days).fillna(0.0)
        if not o.empty
        else pd.DataFrame()
    )
    series = {str(s): wide[s].tolist() for s in wide.columns}
    if not o.empty:
        series["idle fit, all sites"] = (
            o.groupby("day")["overhead_cu_hours_fitting_idle"].sum().reindex(days).fillna(0.0).tolist()
        )
    sections.append(_section(
        "Overhead over time per site",
        "CU-hours of true overhead per day and site, and the part of it beside idle jobs that would have fit.",
        line_chart([str(d) for d in days], series, title="true overhead per day", unit="CU-hours"), o,
        "No true overhead on any day: no node was idle in every resource at once by a whole canonical unit.",
    ))  # fmt: skip
    p = t.projects
    sections.append(_section(
        "Held against billed per project",
        "Core-hours the jobs of each project held, and what they were billed: held plus a proportional share of "
        "the idle cores of their nodes (Andrijauskas et al. 2023).",
        bar_chart(_names(p["project"]),
                  {"held": p["held_core_hours"].tolist(), "billed": p["billed_core_hours"].tolist()},
                  title="core-hours per project", unit="core-hours"), p,
        "No core-hours held or billed in this period.",
    ))  # fmt: skip
    u = t.users
    sections.append(_section(
        "Who pays more under the penalty",
        "Each user's share of the pool under the multi-resource penalty minus their share under a CPU-only count "
        "(Klusáček & Rudová 2015), in percentage points: above 0 pays more.",
        bar_chart(_names(u["user"]), {"share change": u["change"].tolist()}, title="change of share under the penalty",
                  unit="percentage points"), u,
        f"Nobody pays more or less: each of the {len(u)} users' share of the pool is the same under the penalty "
        "as under a CPU-only count (change 0 for all): cores are the resource every job asks most of.",
    ))  # fmt: skip
    f = t.fairshare
    labels = [f"{a}:{b}" for a, b in zip(f["type"], f["name"], strict=True)]
    sections.append(_section(
        "Fairshare against targets",
        "Each credential's decayed effective usage at the last window of the period, beside its target "
        "(Maui Admin Guide, 6.3).",
        bar_chart(labels, {"effective usage": f["effective_percent"].astype(float).tolist(),
                           "target": f["target_percent"].astype(float).fillna(0.0).tolist()},
                  title="fairshare usage and target", unit="% of the pool"), f,
        "Every credential's effective usage and target are 0 at the last window.",
    ))  # fmt: skip
    b = t.fairness
    sections.append(_section(
        "Fairness of the share over time",
        "Jain's index per bucket across the users with demand or allocation (Sedighi et al. 2014): of the part "
        "of what each wanted that it got (1 when all got the same part, as a queue-proportional share always "
        "gives) and of the cores allocated (1/n when one took all).",
        line_chart([_bucket(x) for x in b["bucket"]],
                   {"Jain, served part": b["jain_served"].tolist(), "Jain, allocation": b["jain_allocation"].tolist()},
                   title="Jain's index per bucket (its start, UTC)", unit="index (0..1)"), b,
        "Jain's index is 0 in every bucket: nobody was allocated anything.",
    ))  # fmt: skip
    v = t.starvation
    sections.append(_section(
        "Starvation per credential",
        "Hours in which a credential had idle jobs waiting and got nothing (or at most the configured fraction of an "
        "equal share) while others were served.",
        bar_chart(_names(v["name"]), {"starved": v["starved_hours"].tolist()}, title="starved hours per credential",
                  unit="hours"), v,
        f"No credential starved: none of the {len(v)} waited with idle jobs while getting nothing (or at most the "
        "configured fraction of an equal share).",
    ))  # fmt: skip
    sections += [_section(f.title, f.what, f.plot, f.table, f.blank) for f in figures]
    if appendix:  # synthetic cases beside a site's data would read as the site's: set apart and said so
        sections.append(
            '<h1 id="appendix">Appendix: synthetic cases, not this site\'s data</h1><p class="note">'
            "The fair-share lab's cases (Sedighi et al. 2014), simulated by fairacct to show how each policy "
            "behaves; nothing below was read from this site's pool or store.</p>"
        )
        sections += [_section(f.title, f.what, f.plot, f.table, f.blank) for f in appendix]
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
