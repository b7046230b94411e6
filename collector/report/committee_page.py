"""The committee's part of the report, first on the page: the period's totals in one paragraph,
usage against each award per project (over-award rows marked in words and colour), the same per
VO and per site, and a chart of used, projected and awarded hours per project."""

from __future__ import annotations

import math
from html import escape

import pandas as pd

from collector.exports.sheets import TOTAL, with_total
from collector.readable import counted
from collector.report.committee import Committee
from collector.report.svg import bar_chart

__all__ = ["HEADERS", "committee_sections"]

# the committee's tables, their columns and headers (units in every header of a number); the XLSX's meanings
HEADERS = {
    "project": "project",
    "VO": "VO",
    "site": "site",
    "n_jobs": "jobs",
    "core_hours": "used core-hours",
    "billed_core_hours": "billed core-hours",
    "awarded_core_hours": "awarded core-hours",
    "core_award_used_percent": "core award used (%)",
    "projected_core_hours": "projected core-hours at the award's end",
    "gpu_hours": "used GPU-hours",
    "billed_gpu_hours": "billed GPU-hours",
    "awarded_gpu_hours": "awarded GPU-hours",
    "gpu_award_used_percent": "GPU award used (%)",
    "projected_gpu_hours": "projected GPU-hours at the award's end",
    "capacity_core_hours": "capacity core-hours",
    "overhead_core_hours": "core-hours lost to overhead",
    "overhead_percent": "lost to overhead (%)",
    "status": "status",
}
_AWARDS = ("awarded_core_hours", "core_award_used_percent", "projected_core_hours", "awarded_gpu_hours",
           "gpu_award_used_percent", "projected_gpu_hours", "status")  # fmt: skip


def _number(value: object) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "\N{EN DASH}"
    if isinstance(value, str):
        return escape(value)
    if isinstance(value, int):  # counts (jobs): to_dict gives Python ints
        return f"{value:,}"
    v = float(value)  # type: ignore[arg-type]
    return f"{v:,.1f}"  # hours and percents to a tenth: a committee reads 1,107.0 and 77.5, not 1,107.02


def _table(frame: pd.DataFrame, css: str) -> str:
    """A table shown open (the committee's figures are the page's answer, not behind a click),
    its total row last; a row over its award gets the class ``over``, one on course to exceed it
    ``course``, the total ``total``."""
    head = "".join(f"<th>{escape(HEADERS.get(c, c))}</th>" for c in frame.columns)
    rows = []
    keys = [c for c in frame.columns if c in ("project", "VO", "site")]
    for record in with_total(frame, keys).to_dict("records"):
        status = str(record.get("status", "") or "")
        mark = ' class="over"' if "over the" in status else ' class="course"' if "on course" in status else ""
        mark = ' class="total"' if record[frame.columns[0]] == TOTAL else mark
        cells = "".join(f"<td>{_number(record[c])}</td>" for c in frame.columns)
        rows.append(f"<tr{mark}>{cells}</tr>")
    return f'<table class="{css}"><tr>{head}</tr>{"".join(rows)}</table>'


def _totals(c: Committee) -> str:
    t = c.totals
    pool = (
        f"The pool offered {t['capacity_core_hours']:,.1f} core-hours in the snapshots the probe took, "
        f"{t['overhead_percent']:.1f}% of them ({t['overhead_core_hours']:,.1f} core-hours) lost to overhead."
        if t["capacity_core_hours"] > 0
        else "The probe took no slot snapshot in the period: the pool's capacity is not known."
    )
    return (
        f'<p class="totals" id="totals"><b>Totals, {c.period.first} to {c.period.last}:</b> '
        f"{t['core_hours']:,.1f} core-hours used and {t['billed_core_hours']:,.1f} billed; "
        f"{t['gpu_hours']:,.1f} GPU-hours used and {t['billed_gpu_hours']:,.1f} billed; "
        f"{t['jobs']:,.0f} jobs of {t['users']:,.0f} users in {t['projects']:,.0f} projects. {pool}</p>"
    )


def _awards_sentence(c: Committee) -> str:
    if not c.awards:
        return (
            '<p class="note" id="no-awards">No awards were given ([awards] file in the configuration, or --awards): '
            "this page shows usage alone, without a share of an award or a projection.</p>"
        )
    as_of = (
        f"The current rate is each award's usage from its first day to {c.as_of}, the last day with records; "
        f"the projection carries it to the award's last day."
        if c.as_of
        else "No record in the period: nothing to project."
    )
    over = int(c.projects["status"].str.contains("over the").sum())
    course = int(c.projects["status"].str.contains("on course").sum())
    return (
        f"<p>{counted(len(c.awards), 'award')}. <b>{counted(over, 'project')} over their award, {course} on course to "
        f"exceed it</b> "
        f"(marked in the table). Used: cores x walltime of the completed jobs; billed: what the running jobs' "
        f"bills charged (held cores plus a share of their nodes' idle cores, Andrijauskas et al. 2023), counted "
        f"only while the probe took snapshots. {escape(as_of)}</p>"
    )


def _chart(c: Committee, resource: str, unit: str) -> str:
    p = c.projects
    used = p[f"{resource}_hours"].astype(float)
    series = {f"used {unit}": used.tolist()}
    if c.awards:
        series[f"projected {unit}"] = p[f"projected_{resource}_hours"].astype(float).fillna(0.0).tolist()
        series[f"awarded {unit}"] = p[f"awarded_{resource}_hours"].astype(float).fillna(0.0).tolist()
    else:
        series[f"billed {unit}"] = p[f"billed_{resource}_hours"].astype(float).tolist()
    names = ["(none)" if v is None or v != v else str(v) for v in p["project"]]
    return bar_chart(names, series, title=f"{unit} per project, {c.period.first} to {c.period.last}", unit=unit)


def committee_sections(c: Committee) -> str:
    """The committee's part of the page (see the module docstring)."""
    gpu = bool(c.totals["gpu_hours"] or any(a.resource == "gpu_hours" for a in c.awards))
    keep = [col for col in c.projects.columns if (c.awards or col not in _AWARDS) and (gpu or "gpu" not in col)]
    notes = "".join(f'<p class="note">{escape(n)}</p>' for n in c.notes)
    charts = _chart(c, "core", "core-hours") + (_chart(c, "gpu", "GPU-hours") if gpu else "")
    vo_keep = [col for col in c.vos.columns if col in keep or col == "VO"]
    site_keep = [col for col in c.sites.columns if gpu or "gpu" not in col]
    if not len(c.projects):  # an empty period is said in a sentence, not shown as tables of nothing
        return (
            f'<section id="committee">{_totals(c)}<h2>Usage against awards per project</h2>'
            f'<p class="note blank" id="nothing">No job ended and no bill was charged from {c.period.first} to '
            f"{c.period.last}: there is no usage to hold against an award.</p>{notes}</section>"
        )
    projects = _table(c.projects[keep], "committee")
    return (
        f'<section id="committee">{_totals(c)}<h2>Usage against awards per project</h2>{_awards_sentence(c)}'
        f"{projects}{notes}{charts}"
        f"<h2>Per VO</h2><p>The projects' usage and awards summed per VO (the accounting group of their jobs "
        f"through [apel] vo_map).</p>{_table(c.vos[vo_keep], 'committee')}"
        f"<h2>Per site</h2><p>Usage where it ran, beside the capacity the probe's snapshots saw and the share of "
        f"it lost to true overhead (whole canonical units idle in every resource at once). Awards are per project, "
        f"not per site.</p>{_table(c.sites[site_keep], 'committee')}</section>"
    )
