"""The tables behind the report, each summed in the store: the overhead histogram from the slot
records, everything else from the daily summaries (through the committee's usage table), and
fairshare against targets from the last window of each credential in the period."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pandas as pd

from collector.awards import Award
from collector.exports.table import Period, usage_table
from collector.records import iso_utc
from collector.report.committee import Committee, committee_tables
from collector.sinks.base import Aggregation, Sink, Total

__all__ = ["ReportTables", "report_tables"]


@dataclass(frozen=True)
class ReportTables:
    """``histogram``: slot snapshots and CU-hours per partition and overhead (CU);
    ``overhead``: CU-hours of true overhead per day and site (with fitting idle demand);
    ``projects``: held and billed core-hours per project; ``users``: penalty against CPU-only
    usage per user; ``fairshare``: each credential's effective usage (%) and target (%) at
    the last window of the period; ``fairness``: per bucket of the fairness records (Sedighi
    et al. 2014), the credentials, Jain's index of the served part and of the allocation (0 where
    nobody was allocated anything) and how many were starved; ``starvation``: per credential,
    its buckets, starved buckets and starved hours; ``days``: per day with records, the jobs,
    used and billed core-hours and GPU-hours; ``committee``: the committee's figures (totals,
    usage against awards per project, VO and site: :class:`~collector.report.committee.Committee`).
    ``overhead`` holds only the days and sites with slot snapshots: a day without is missing, not 0."""

    period: Period
    histogram: pd.DataFrame
    overhead: pd.DataFrame
    projects: pd.DataFrame
    users: pd.DataFrame
    fairshare: pd.DataFrame
    fairness: pd.DataFrame
    starvation: pd.DataFrame
    days: pd.DataFrame
    committee: Committee


def report_tables(
    sink: Sink, period: Period, awards: Sequence[Award] = (), *, vo_attribute: str = "group",
    vo_map: Mapping[str, str] | None = None,
) -> ReportTables:  # fmt: skip
    """The report's tables for ``period`` (see :class:`ReportTables`), the committee's against
    ``awards``, its VOs from ``vo_attribute`` through ``vo_map`` (``[apel]``'s)."""
    rows = sink.aggregate(
        Aggregation(
            "slot", ("partition", "overhead_cu"),
            (Total("slot_snapshots"), Total("overhead_cu_hours", ("overhead_cu_hours",))),
            None, period.since, period.until,
        )
    )  # fmt: skip
    histogram = pd.DataFrame(rows, columns=["partition", "overhead_cu", "slot_snapshots", "overhead_cu_hours"])
    histogram = histogram.sort_values(
        ["partition", "overhead_cu"], key=lambda c: c.astype(str) if c.name == "partition" else c
    )
    by_site = usage_table(sink, period, ["site", "day"])
    overhead = by_site.loc[
        by_site["n_slot_snapshots"] > 0,
        ["day", "site", "n_slot_snapshots", "overhead_cu_hours", "overhead_cu_hours_fitting_idle"],
    ].reset_index(drop=True)
    projects = usage_table(sink, period, ["project"])
    projects = projects.loc[
        projects["n_bills"] > 0, ["project", "held_core_hours", "billed_core_hours", "billed_over_held"]
    ]
    users = usage_table(sink, period, ["user"])
    users = users.loc[
        users["cpu_only_hours"] > 0,
        ["user", "core_hours", "penalty_hours", "cpu_only_hours", "penalty_share", "cpu_only_share"],
    ]
    users = users.assign(change=users["penalty_share"] - users["cpu_only_share"]).sort_values("change", ascending=False)
    return ReportTables(
        period, histogram.reset_index(drop=True), overhead, projects.reset_index(drop=True),
        users.reset_index(drop=True),
        _fairshare(sink, period), *_fairness(sink, period), _days(sink, period),
        committee_tables(sink, period, awards, vo_attribute=vo_attribute, vo_map=vo_map),
    )  # fmt: skip


def _days(sink: Sink, period: Period) -> pd.DataFrame:
    """Per day with any record: jobs, used and billed core-hours and GPU-hours."""
    days = usage_table(sink, period, ["day"])
    days = days.loc[(days[["n_jobs", "n_bills", "n_slot_snapshots"]] > 0).any(axis=1)]
    columns = ["day", "n_jobs", "core_hours", "n_slot_snapshots", "billed_core_hours", "gpu_hours", "billed_gpu_hours"]
    return days[columns].reset_index(drop=True)


def _fairness(sink: Sink, period: Period) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Jain's index per bucket and starvation per credential, summed in the store from the
    fairness records (each carries its bucket's Jain indices, so their mean is the bucket's)."""
    per_bucket = Aggregation(
        "fairness", ("bucket_start",),
        (Total("credentials"), Total("jain_served", ("jain_served",)), Total("jain_allocation", ("jain_allocation",)),
         Total("starved", where="starved")),
        None, period.since, period.until,
    )  # fmt: skip
    buckets = pd.DataFrame(
        sink.aggregate(per_bucket), columns=["bucket_start", "credentials", "jain_served", "jain_allocation", "starved"]
    )
    buckets = buckets.sort_values("bucket_start").reset_index(drop=True)
    n = buckets["credentials"].to_numpy(dtype=float)
    buckets["jain_served"] = buckets["jain_served"].to_numpy(dtype=float) / n
    buckets["jain_allocation"] = buckets["jain_allocation"].to_numpy(dtype=float) / n
    buckets.insert(0, "bucket", iso_utc(buckets["bucket_start"]))
    per_name = Aggregation(
        "fairness", ("type", "name"),
        (Total("buckets"), Total("starved_buckets", where="starved"), Total("end", ("bucket_end",), where="starved"),
         Total("start", ("bucket_start",), where="starved")),
        None, period.since, period.until,
    )  # fmt: skip
    names = pd.DataFrame(
        sink.aggregate(per_name), columns=["type", "name", "buckets", "starved_buckets", "end", "start"]
    )
    names["starved_hours"] = (names["end"].to_numpy(dtype=float) - names["start"].to_numpy(dtype=float)) / 3600.0
    names = names.drop(columns=["end", "start"]).sort_values(["starved_hours", "name"], ascending=[False, True])
    return buckets.drop(columns="bucket_start"), names.reset_index(drop=True)


def _fairshare(sink: Sink, period: Period) -> pd.DataFrame:
    """Each credential's state at the last fairshare window that started in the period."""
    columns = ["type", "name", "window_start_iso", "effective_percent", "target_percent"]
    docs = sink.query("fairshare", since=period.since, until=period.until, limit=10_000)
    if not docs:
        return pd.DataFrame(columns=columns)
    frame = pd.DataFrame(docs)
    last = frame.sort_values("window_start").groupby(["type", "name"], sort=True).tail(1)
    target = pd.to_numeric(last.get("target", pd.Series(index=last.index, dtype=float)), errors="coerce")
    out = last.assign(
        effective_percent=100.0 * pd.to_numeric(last["effective"], errors="coerce"), target_percent=target
    )
    return out[columns].sort_values(["type", "name"]).reset_index(drop=True)
