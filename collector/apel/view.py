"""The committee's side by side: per VO and month, what the site reports to APEL (jobs, wall
hours, normalised wall hours, the jobs left out for want of a benchmark) beside fairacct's own
measures of the same work (penalty hours of the jobs, billed core-hours of the running jobs'
allocations), all summed by the store.

The allocation records (bills) carry no VOMS identity: their VO is ``[apel] vo_attribute``
through ``vo_map``, as for a job without one, so the two columns agree where the VOs come
from the site's groups or projects.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from collector.apel.grouping import ApelOptions, apel_months, mapped_vo, month_bounds
from collector.sinks.base import Aggregation, Sink, Total

__all__ = ["VIEW_COLUMNS", "apel_view"]

VIEW_COLUMNS = {
    "month": "The month (YYYY-MM, UTC) the jobs ended in.",
    "VO": "The VO as APEL gets it (x509UserProxyVOName, the FQAN's VO, else [apel] vo_attribute through vo_map; "
    "(none): no VO).",
    "apel_jobs": "Jobs in the APEL summaries (jobs on hosts with a benchmark).",
    "apel_wall_hours": "APEL's WallDuration, in hours.",
    "apel_normalised_wall_hours": "APEL's NormalisedWallDuration, in benchmark-hours (wall x benchmark per core).",
    "unbenchmarked_jobs": "Jobs on hosts without a benchmark: not normalised, not in the APEL summaries.",
    "left_out_jobs": "Jobs not sent: without a site or a VO, with a name longer than APEL's column, or Gratia records "
    "gracc-apel would not send (not Batch nor Grid Local, a VO not in [apel] gratia_vos).",
    "penalty_hours": "fairacct: multi-resource penalty usage of the jobs, PE-hours (Klusacek & Rudova 2015).",
    "billed_core_hours": "fairacct: core-hours billed to the running jobs' allocations (Andrijauskas et al. 2023).",
}


def apel_view(sink: Sink, months: Sequence[tuple[int, int]], options: ApelOptions) -> pd.DataFrame:
    """One row per month and VO of ``months``, columns :data:`VIEW_COLUMNS`."""
    result = apel_months(sink, months, options)
    frames = []
    for table in result.tables:
        if not len(table):
            continue
        sendable = (table["left_out"] == "") & table["Site"].notna()
        t = table.assign(
            month=[f"{y:04d}-{m:02d}" for y, m in zip(table["Year"], table["Month"], strict=True)],
            VO=table["VO"].fillna("(none)"),
            apel_jobs=table["NumberOfJobs"].where(table["benchmarked"] & sendable, 0.0),
            apel_wall_hours=table["WallDuration"].where(table["benchmarked"] & sendable, 0.0) / 3600.0,
            apel_normalised_wall_hours=table["NormalisedWallDuration"].where(sendable, 0.0).fillna(0.0) / 3600.0,
            unbenchmarked_jobs=table["NumberOfJobs"].where(~table["benchmarked"] & sendable, 0.0),
            left_out_jobs=table["NumberOfJobs"].where(~sendable, 0.0),
            penalty_hours=table["penalty_s"] / 3600.0,
        )
        frames.append(t)
    columns = list(VIEW_COLUMNS)
    jobs = (
        pd.concat(frames).groupby(["month", "VO"], as_index=False)[columns[2:-1]].sum()
        if frames
        else pd.DataFrame(columns=columns[:-1])
    )
    bills = []
    for year, month in months:
        since, until = month_bounds(year, month)
        query = Aggregation(
            "allocation",
            (options.vo_attribute,),
            (Total("billed_core_hours", ("billed_cpus_hours",)),),
            "month",
            since,
            until,
        )
        for row in sink.aggregate(query):
            value = row[options.vo_attribute]
            vo = mapped_vo(value, options.vo_map) or "(none)"  # an accounting group vo_map does not name is no VO
            bills.append({"month": row["period"], "VO": vo, "billed_core_hours": row["billed_core_hours"]})
    billed = (
        pd.DataFrame(bills).groupby(["month", "VO"], as_index=False)["billed_core_hours"].sum()
        if bills
        else pd.DataFrame(columns=["month", "VO", "billed_core_hours"])
    )
    view = jobs.merge(billed, on=["month", "VO"], how="outer").fillna(0.0)
    for c in ("apel_jobs", "unbenchmarked_jobs", "left_out_jobs"):
        view[c] = view[c].astype("int64")
    return view[columns].sort_values(["month", "VO"], kind="stable").reset_index(drop=True)
