"""What an allocation committee asks first, summed in the store: the period's totals, and per
project, VO and site the core-hours and GPU-hours used (cores x walltime of the completed jobs)
and billed (the running jobs' bills: held plus a share of their nodes' idle cores), beside each
project's awards (:mod:`collector.awards`): the share of the award used and where the project
ends its award's period at its current rate.

The current rate is the award's usage over the days from its first to the last day of the period
that holds any record (the *as-of* day): a store that was fed until the 21st of a 30-day month
projects usage x 30 / 21, not x 30 / 30. A project's VO comes from its jobs' ``vo_attribute``
(the accounting group by default) through ``vo_map``, as for APEL; a value the map does not
name is no VO: its usage is set apart as unmapped, and the value said once in the notes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date

import numpy as np
import pandas as pd

from collector.awards import Award
from collector.exports.table import Period, usage_table
from collector.readable import counted
from collector.sinks.base import Aggregation, Sink, Total
from mappings.fields import HOUR

__all__ = ["NO_VO", "Committee", "committee_tables", "vo_of"]

NO_VO = "(no VO: group not mapped)"
"""The VO column's value for usage whose accounting group ``vo_map`` does not name."""

_USED = {"core": "core_hours", "gpu": "gpu_hours"}
_BILLED = {"core": "billed_core_hours", "gpu": "billed_gpu_hours"}


@dataclass(frozen=True)
class Committee:
    """The committee's figures of ``period``. ``totals``: the period's sums (keys as the column
    names, units in them); ``projects``, ``vos``, ``sites``: one row each, with used, billed
    and (projects, VOs) awarded core-hours and GPU-hours, the share of the award used
    (``*_award_used_percent``), the projection to the award period's end
    (``projected_*_hours``) and ``status``; ``as_of``: the last day with records (None: no
    record in the period); ``awards``: the awards read (empty: usage alone); ``notes``:
    sentences the page and the sheet say once (groups without a VO, awards outside the period)."""

    period: Period
    totals: dict[str, float]
    projects: pd.DataFrame
    vos: pd.DataFrame
    sites: pd.DataFrame
    as_of: date | None
    awards: tuple[Award, ...] = ()
    notes: list[str] = field(default_factory=list)


def vo_of(values: Sequence[object], vo_map: Mapping[str, str]) -> tuple[list[str], list[str]]:
    """The VO of each accounting-group (or ``vo_attribute``) value through ``vo_map``, :data:`NO_VO`
    for a value it does not name, and those values, once each in order (for the notes)."""
    vos, unmapped = [], []
    for v in values:
        name = None if v is None or (isinstance(v, float) and v != v) else str(v)
        if name is not None and name in vo_map:
            vos.append(vo_map[name])
        else:
            vos.append(NO_VO)
            if name is not None and name not in unmapped:
                unmapped.append(name)
    return vos, unmapped


def _named(vo_attribute: str) -> str:
    """What the values ``vo_map`` maps are, for a note: accounting groups unless the site said otherwise."""
    return "Accounting group(s)" if vo_attribute == "group" else f"{vo_attribute.capitalize()}(s)"


def _as_of(sink: Sink, period: Period) -> date | None:
    days = usage_table(sink, period, ["day"])
    busy = days.loc[(days["n_jobs"] > 0) | (days["n_bills"] > 0) | (days["n_slot_snapshots"] > 0), "day"]
    return date.fromisoformat(str(max(busy))[:10]) if len(busy) else None


def _lost(by: tuple[str, ...], period: Period) -> Aggregation:
    """The core-hours lost to true overhead: the cores of the whole canonical units idle in every
    resource at once, times each snapshot's interval (capacity is in core-hours, so the loss is too)."""
    return Aggregation("slot", by, (Total("lost", ("overhead_cpus", "interval_s"), HOUR),), None, period.since,
                       period.until)  # fmt: skip


def _totals(sink: Sink, period: Period, everything: pd.DataFrame) -> dict[str, float]:
    projects = usage_table(sink, period, ["project"])
    users = usage_table(sink, period, ["user"])
    lost = sink.aggregate(_lost((), period))
    row = everything.iloc[0] if len(everything) else pd.Series(dtype=float)
    capacity = float(row.get("slot_core_hours", 0.0))
    overhead = float(lost[0]["lost"] or 0.0) if lost else 0.0
    return {
        "core_hours": float(row.get("core_hours", 0.0)),
        "billed_core_hours": float(row.get("billed_core_hours", 0.0)),
        "gpu_hours": float(row.get("gpu_hours", 0.0)),
        "billed_gpu_hours": float(row.get("billed_gpu_hours", 0.0)),
        "jobs": float(row.get("n_jobs", 0)),
        "users": float(users["user"].notna().sum()),
        "projects": float(projects.loc[(projects["n_jobs"] > 0) | (projects["n_bills"] > 0), "project"].notna().sum()),
        "capacity_core_hours": capacity,
        "overhead_core_hours": overhead,
        "overhead_percent": 100.0 * overhead / capacity if capacity > 0 else float("nan"),
    }


def _award_usage(sink: Sink, awards: Sequence[Award], period: Period) -> pd.DataFrame:
    """Per project and resource, over the awards: amount, used from each award's first day to the
    report's last (a yearly award in a monthly report counts nothing after the month), and the
    projection to the award's end at the rate of those days up to the last that holds a record."""
    rows = []
    used_by: dict[tuple[date, date], tuple[pd.DataFrame, date | None]] = {}
    for a in awards:
        window = Period(a.first, min(a.last, period.last))
        key = (window.first, window.last)
        if key not in used_by:
            used_by[key] = (usage_table(sink, window, ["project"]).set_index("project"), _as_of(sink, window))
        table, as_of = used_by[key]
        used = float(table[_USED[a.resource.split("_")[0]]].astype(float).get(a.project, 0.0))
        # no record in the award's days so far: no rate to carry
        projected = float("nan") if as_of is None else used * a.days / ((as_of - a.first).days + 1)
        rows.append({"project": a.project, "resource": a.resource.split("_")[0], "awarded": a.amount, "used": used,
                     "projected": projected})  # fmt: skip
    frame = pd.DataFrame(rows, columns=["project", "resource", "awarded", "used", "projected"])
    return frame.groupby(["project", "resource"], as_index=False).sum(min_count=1)


def _with_awards(table: pd.DataFrame, key: str, usage: pd.DataFrame, given: bool) -> pd.DataFrame:
    """``table`` (per ``key``) with, per resource, awarded hours, the share of the award used
    and the projection, from ``usage`` (per ``key`` and resource), and the status."""
    out = table.copy()
    status = pd.Series("", index=out.index, dtype=object)
    for r in ("core", "gpu"):
        mine = usage.loc[usage["resource"] == r].set_index(key)
        awarded = out[key].map(mine["awarded"]).astype(float)
        used = out[key].map(mine["used"]).astype(float)
        projected = out[key].map(mine["projected"]).astype(float)
        out[f"awarded_{r}_hours"] = awarded
        out[f"{r}_award_used_percent"] = 100.0 * used / awarded
        out[f"projected_{r}_hours"] = projected
        over = (used > awarded).to_numpy()
        course = (projected > awarded).to_numpy() & ~over
        unit = "core-hours" if r == "core" else "GPU-hours"
        status = status.where(~over, status + f"over the {unit} award; ")
        status = status.where(~course, status + f"on course to exceed the {unit} award; ")
    if given:
        has = out[[f"awarded_{r}_hours" for r in ("core", "gpu")]].notna().any(axis=1)
        said = pd.Series(np.where(has, "within its award", "no award"), index=out.index, dtype=object)
        status = status.where(status != "", said)
    out["status"] = status.str.rstrip("; ")
    return out


def committee_tables(
    sink: Sink, period: Period, awards: Sequence[Award] = (), *, vo_attribute: str = "group",
    vo_map: Mapping[str, str] | None = None,
) -> Committee:  # fmt: skip
    """The committee's figures of ``period`` (see :class:`Committee`)."""
    vo_map = vo_map or {}
    everything = usage_table(sink, period, [])
    as_of = _as_of(sink, period)
    mine = [a for a in awards if a.first <= period.last and a.last >= period.first]
    notes = []
    if len(mine) < len(awards):
        notes.append(
            f"Left out: {counted(len(awards) - len(mine), 'award')} of the awards file, covering no day of "
            f"{period.first} to {period.last}."
        )
    columns = ["n_jobs", "core_hours", "billed_core_hours", "gpu_hours", "billed_gpu_hours"]
    by_project = usage_table(sink, period, ["project", vo_attribute] if vo_attribute != "project" else ["project"])
    by_project = by_project.loc[(by_project["n_jobs"] > 0) | (by_project["n_bills"] > 0)]
    vos, unmapped = vo_of(by_project[vo_attribute].tolist(), vo_map)
    by_project = by_project.assign(VO=vos)
    # a project's VO: the one of most of its core-hours (a project in two groups is rare, and one row)
    main_vo = by_project.sort_values("core_hours", ascending=False).groupby("project", dropna=False)["VO"].first()
    projects = by_project.groupby("project", dropna=False, as_index=False)[columns].sum()
    projects.insert(1, "VO", projects["project"].map(main_vo).fillna(NO_VO))
    awarded = {a.project for a in mine}
    missing = sorted(awarded - set(projects["project"].dropna().astype(str)))
    if missing:  # an award with no usage yet is the committee's first question: shown at 0, not left out
        extra = pd.DataFrame({"project": missing, "VO": NO_VO, **{c: 0.0 for c in columns}})
        projects = pd.concat([projects, extra], ignore_index=True)
    usage = _award_usage(sink, mine, period)
    projects = _with_awards(projects, "project", usage, bool(mine))
    projects = projects.sort_values(["core_hours", "project"], ascending=[False, True]).reset_index(drop=True)
    vo_usage = usage.assign(VO=usage["project"].map(projects.set_index("project")["VO"]).fillna(NO_VO))
    vo_usage = vo_usage.groupby(["VO", "resource"], as_index=False)[["awarded", "used", "projected"]].sum(min_count=1)
    vo_table = projects.groupby("VO", as_index=False)[columns].sum()
    vo_table = _with_awards(vo_table, "VO", vo_usage, bool(mine)).sort_values("core_hours", ascending=False)
    sites = usage_table(sink, period, ["site"])
    sites = sites.loc[(sites[["n_jobs", "n_bills", "n_slot_snapshots"]] > 0).any(axis=1),
                      ["site", *columns, "slot_core_hours"]]  # fmt: skip
    sites = sites.rename(columns={"slot_core_hours": "capacity_core_hours"})
    lost = {r["site"]: float(r["lost"] or 0.0) for r in sink.aggregate(_lost(("site",), period))}
    sites["overhead_core_hours"] = sites["site"].map(lost).fillna(0.0).astype(float)
    capacity = sites["capacity_core_hours"].astype(float)
    sites["overhead_percent"] = 100.0 * sites["overhead_core_hours"] / capacity.where(capacity > 0)
    if unmapped:
        notes.append(
            f"{_named(vo_attribute)} {', '.join(unmapped)} name no VO in [apel] vo_map: their usage is counted under "
            f"{NO_VO!r}, not sent as a VO."
        )
    return Committee(
        period, _totals(sink, period, everything), projects, vo_table.reset_index(drop=True),
        sites.reset_index(drop=True), as_of, tuple(mine), notes,
    )  # fmt: skip
