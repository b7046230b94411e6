"""APEL's records of a month, grouped by the store.

The store sums the records of each month (:meth:`~collector.sinks.base.Sink.aggregate`: SQL
``GROUP BY`` in the embedded store, a composite aggregation in Elasticsearch/OpenSearch) by
what makes APEL's keys and the benchmark of the host; only those groups come back. Python
then makes APEL's keys of them (the VO, group and role of an FQAN are not fields a store can
group by) and adds up the groups that these make equal.

From fairacct's ``job`` records (a record per completed job, dated by its end):

- Site: ``--site`` / ``[apel] site``, else the job's ``site``; SubmitHost: its ``schedd`` (on
  an HTCondor-CE, the CE's schedd); GlobalUserName: ``dn`` (x509userproxysubject);
- VO: ``vo`` (x509UserProxyVOName), else the FQAN's VO, else ``[apel] vo_attribute``
  (group, project or user) through ``vo_map``; VOGroup and VORole: of ``fqan``
  (x509UserProxyFirstFQAN);
- NodeCount ``n_hosts``, Processors ``cpus``; WallDuration the sum of ``walltime_s``,
  CpuDuration of ``cpu_time_s``; Earliest/LatestEndTime the least and greatest ``end``;
- NormalisedWallDuration = sum of ``walltime_s`` x the job's host's benchmark per core
  (``speed``: ``MachineAttr<machines.speed_attribute>0``, the speed the penalty of
  Klusáček & Rudová 2015 normalises by), NormalisedCpuDuration alike with ``cpu_time_s``.
  As APEL's, the normalised wall time is per job, not per core: APEL multiplies by
  Processors itself.

From Gratia records (GRACC's fields, dated by ``EndTime``), as OSG's gracc-apel
(opensciencegrid/gracc-apel, ``apel_report.py``) selects and sums them: only the records of
ResourceType ``Batch``, or of Grid ``Local`` (a pilot's payloads are counted through the
pilot's Batch record; a local site's own jobs are not), of the VOs of ``[apel] gratia_vos``
(gracc-apel's ``vo_list`` by default: :data:`GRACC_APEL_VOS`); the others are counted per site
and month in ``left_out`` with the reason. NumberOfJobs is the number of records (GRACC's
``Count``), not ``Njobs``; WallDuration the sum of each record's whole seconds (GRACC's raw
index holds ``WallDuration`` as a ``long``: :class:`~collector.sinks.base.Total` ``whole``);
CpuDuration ``CpuDuration_user`` + ``CpuDuration_system``; every duration written as
gracc-apel's ``int()`` writes it (towards zero). Site ``SiteName``, SubmitHost the host of
``ProbeName`` (``condor-ce:ce.example.org``), GlobalUserName ``DN``, VO ``ReportableVOName``
(else the VO of ``VOName``'s FQAN, else ``VOName``), group and role of ``VOName`` when it is
an FQAN, ``Processors``, ``NodeCount``, and the benchmark per core of the site from ``[apel]
site_benchmarks`` (a Gratia record carries none).

A job (or Gratia record) without a benchmark is never normalised by a factor of 1 or any
other made-up one: it is left out of the summaries and counted, per site and month, in
``unbenchmarked``; the sync message counts, as APEL's client makes it, the jobs the summaries
hold. Records without a site are counted in ``unsited`` and sent nowhere.

The keys are made as APEL's server will key on them (:mod:`collector.apel.keys`): text with its
whitespace collapsed, spellings APEL's collation compares equal merged (``merged``), and a
record with a name longer than APEL's column left out with the reason (``left_out``), never the
rest of its message.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

import numpy as np
import pandas as pd

from collector.apel.identity import parse_fqan
from collector.apel.keys import NAME_KEYS, Merge, clean, merge_spellings, unsendable
from collector.instants import FUTURE_SLACK_S
from collector.sinks.base import Aggregation, Sink, Total

__all__ = [
    "FUTURE",
    "GRACC_APEL_VOS",
    "ApelMonth",
    "ApelOptions",
    "ApelResult",
    "apel_months",
    "apel_table",
    "job_site",
    "latest_end",
    "mapped_vo",
    "month_bounds",
    "months_between",
    "unmapped",
]

Source = Literal["job", "gratia"]

KEYS = (
    "Site", "Year", "Month", "GlobalUserName", "VO", "VOGroup", "VORole", "SubmitHost", "NodeCount", "Processors",
)  # fmt: skip
"""APEL's summary keys (besides Infrastructure, one per run)."""

BENCHMARK_DECIMALS = 3
"""The decimals APEL keeps of a benchmark (``ServiceLevel DECIMAL(10,3)``)."""

GRACC_APEL_VOS = ("atlas", "alice", "belle", "cms", "enmr.eu", "lhcb")
"""The VOs gracc-apel reports to APEL (its ``vo_list``): the default of ``[apel] gratia_vos``."""

NOT_BATCH = "ResourceType not Batch and Grid not Local (gracc-apel counts a payload through its pilot)"
"""Why a Gratia record is not sent: gracc-apel selects ``ResourceType: Batch`` or ``Grid: Local``."""

OTHER_VO = "VO not in [apel] gratia_vos (gracc-apel reports only its listed VOs)"
"""Why a Gratia record of a VO not listed is not sent."""

FUTURE = "ends in the future (APEL refuses the message of a job that does)"
"""Why a job is left out: it ends later than the sender's clock and :data:`FUTURE_SLACK_S`, which
a collector would set aside too, or in a month not yet begun; APEL's loader refuses the whole
message of such a job (or summary)."""

NO_VO = "no VO (no proxy VO, no FQAN, no [apel] vo_attribute value)"
"""Why a job without a VO is left out: APEL would file it under VO 'None', which no VO claims."""


def mapped_vo(value: str | None, vo_map: Mapping[str, str]) -> str | None:
    """The VO ``[apel] vo_map`` names for a ``vo_attribute`` value (an accounting group, say);
    None for none, or for a value it does not name: an accounting group is not a VO, and a WLCG
    portal knows no ``group_cms``."""
    return clean(vo_map.get(value)) if value is not None else None


def unmapped(attribute: str, value: object) -> str:
    """Why a job whose VO would be a ``vo_attribute`` value vo_map does not name is left out."""
    return f"no VO: [apel] vo_map names none for {attribute} {value!r} (not sent as a VO)"


_SUMS = ("WallDuration", "CpuDuration", "NormalisedWallDuration", "NormalisedCpuDuration", "NumberOfJobs", "penalty_s")


@dataclass(frozen=True)
class ApelOptions:
    """What ``[apel]`` and the command line say (see the example configuration, ``fairacct config example``)."""

    source: Source = "job"
    site: str = ""
    benchmark_type: str = "HEPSPEC"
    infrastructure: str = "grid"
    vo_attribute: str = "group"
    vo_map: Mapping[str, str] = field(default_factory=dict)
    site_benchmarks: Mapping[str, float] = field(default_factory=dict)
    gratia_vos: Sequence[str] = GRACC_APEL_VOS
    """The VOs whose Gratia records are sent (compared as APEL compares names: case and spacing aside)."""
    placeholder_site: str = ""
    """The site ``[site] default`` gives a job no attribute places ("unknown"): not a site APEL
    knows, so such a job is unsited (not sent) unless ``site`` names the site."""
    now: float | None = None
    """The sender's clock, UNIX seconds (None: the time of the run); a job ending later than it
    and :data:`~collector.instants.FUTURE_SLACK_S` is left out (:data:`FUTURE`)."""


def latest_end(options: ApelOptions) -> float:
    """The last end time, UNIX seconds, of a job that may be sent (:data:`FUTURE`): the sender's
    clock and the collector's slack, and never in a month that has not begun (APEL refuses a
    summary of a month later than its clock, with no slack)."""
    now = time.time() if options.now is None else options.now
    today = datetime.fromtimestamp(now, UTC)
    after = (today.year + 1, 1) if today.month == 12 else (today.year, today.month + 1)
    next_month = datetime(after[0], after[1], 1, tzinfo=UTC).timestamp()
    return min(now + FUTURE_SLACK_S, next_month - 0.001)


@dataclass
class ApelMonth:
    """What one site reports for one month: its summary records (APEL's field names, plus
    ``penalty_s``, the jobs' penalty usage in PE-seconds, fairacct's own), its sync records (one
    per submit host), and the jobs (and their wall seconds) left out for want of a benchmark."""

    site: str
    year: int
    month: int
    summaries: list[dict[str, Any]]
    sync: list[dict[str, Any]]
    unbenchmarked_jobs: int = 0
    unbenchmarked_wall_s: float = 0.0
    left_out: dict[str, int] = field(default_factory=dict)
    """Jobs of records APEL could not take, by reason (a name longer than its column)."""


def months_between(first: tuple[int, int], last: tuple[int, int]) -> list[tuple[int, int]]:
    """The (year, month) from ``first`` to ``last``, both included."""
    out = []
    year, month = first
    while (year, month) <= last:
        out.append((year, month))
        year, month = (year + 1, 1) if month == 12 else (year, month + 1)
    return out


def month_bounds(year: int, month: int) -> tuple[str, str]:
    """ISO-8601 UTC bounds of a month: its first instant and the next month's."""
    after = (year + 1, 1) if month == 12 else (year, month + 1)
    return f"{year:04d}-{month:02d}-01T00:00:00Z", f"{after[0]:04d}-{after[1]:02d}-01T00:00:00Z"


_GRATIA_KEYS = (
    "SiteName", "ProbeName", "DN", "VOName", "ReportableVOName", "Processors", "NodeCount", "ResourceType", "Grid",
)  # fmt: skip
"""What Gratia records are grouped by: APEL's keys of them, and what gracc-apel selects on."""


def _aggregation(options: ApelOptions, since: str, until: str) -> Aggregation:
    if options.source == "gratia":
        return Aggregation(
            "gratia",
            _GRATIA_KEYS,
            (
                Total("jobs"),  # GRACC's Count, which gracc-apel sends: one a record, whatever its Njobs
                Total("wall_s", ("WallDuration",), whole=True),
                Total("cpu_user_s", ("CpuDuration_user",)),
                Total("cpu_system_s", ("CpuDuration_system",)),
                Total("first_end", ("timestamp",), op="min"),
                Total("last_end", ("timestamp",), op="max"),
            ),
            "month",
            since,
            until,
            ("EndTime",),
        )
    return Aggregation(
        "job",
        tuple(dict.fromkeys(("site", "schedd", "dn", "vo", "fqan", options.vo_attribute, "n_hosts", "cpus", "speed"))),
        (
            Total("jobs"),
            Total("wall_s", ("walltime_s",)),
            Total("cpu_s", ("cpu_time_s",)),
            Total("first_end", ("end",), op="min"),
            Total("last_end", ("end",), op="max"),
            Total("penalty_s", ("penalty_usage",)),
        ),
        "month",
        since,
        until,
    )


def _epoch(value: object, *, ms: bool) -> float:
    """UNIX seconds of a least or greatest time as a store gives it: a job's ``end`` (seconds),
    a Gratia ``timestamp`` (ISO-8601 text in the embedded store, epoch milliseconds from
    Elasticsearch's min/max of a date)."""
    if isinstance(value, str):
        return datetime.fromisoformat(value.replace("Z", "+00:00")).astimezone(UTC).timestamp()
    if value is None:
        return math.nan
    return float(value) / 1000.0 if ms else float(value)  # type: ignore[arg-type]


_text = clean  # every text field with its whitespace as APEL keys on it (collapsed)


def job_site(value: object, options: ApelOptions) -> str | None:
    """The site a job record names, as APEL keys it; None for none or ``[site] default``'s placeholder."""
    site = _text(value)
    return None if site is None or site == _text(options.placeholder_site) else site


def _job_keys(rows: pd.DataFrame, options: ApelOptions) -> pd.DataFrame:
    fqans = [parse_fqan(_text(f)) for f in rows["fqan"]]
    fallback = [_text(v) for v in rows[options.vo_attribute]]
    vos = [
        _text(vo) or fq[0] or mapped_vo(fb, options.vo_map)
        for vo, fq, fb in zip(rows["vo"], fqans, fallback, strict=True)
    ]
    why_no_vo = [
        unmapped(options.vo_attribute, fb) if vo is None and fb is not None else NO_VO
        for vo, fb in zip(vos, fallback, strict=True)
    ]
    # the benchmark as APEL keeps a job's ServiceLevel (DECIMAL(10,3)), so summaries and job
    # messages normalise alike
    benchmark = np.round(pd.to_numeric(rows["speed"], errors="coerce").to_numpy(dtype=np.float64), BENCHMARK_DECIMALS)
    return pd.DataFrame(
        {
            "Site": [options.site or job_site(s, options) for s in rows["site"]],
            "GlobalUserName": [_text(d) for d in rows["dn"]],
            "VO": vos,
            "VOGroup": [f[1] for f in fqans],
            "VORole": [f[2] for f in fqans],
            "SubmitHost": [_text(s) for s in rows["schedd"]],
            "NodeCount": pd.to_numeric(rows["n_hosts"], errors="coerce").fillna(1.0).to_numpy(),
            "Processors": pd.to_numeric(rows["cpus"], errors="coerce").fillna(1.0).to_numpy(),
            "benchmark": benchmark,
            "NumberOfJobs": rows["jobs"].to_numpy(dtype=np.float64),
            "penalty_s": pd.to_numeric(rows["penalty_s"], errors="coerce").fillna(0.0).to_numpy(),
            "no_vo": why_no_vo,
        }
    )


def _gratia_selected(rows: pd.DataFrame, vos: Sequence[object], options: ApelOptions) -> list[str]:
    """Per row, why gracc-apel's query does not select it ("" where it does): its ResourceType
    and Grid, then its VO."""
    listed = {name.casefold() for v in options.gratia_vos if (name := _text(v))}
    out = []
    for kind, grid, vo in zip(rows["ResourceType"], rows["Grid"], vos, strict=True):
        if _text(kind) != "Batch" and _text(grid) != "Local":
            out.append(NOT_BATCH)
        elif not isinstance(vo, str) or vo.casefold() not in listed:
            out.append(OTHER_VO)
        else:
            out.append("")
    return out


def _gratia_keys(rows: pd.DataFrame, options: ApelOptions) -> pd.DataFrame:
    fqans = [parse_fqan(_text(v)) for v in rows["VOName"]]
    sites = [_text(s) for s in rows["SiteName"]]
    vos = [
        _text(r) or fq[0] or _text(v) for r, fq, v in zip(rows["ReportableVOName"], fqans, rows["VOName"], strict=True)
    ]
    return pd.DataFrame(
        {
            "Site": [options.site or s for s in sites],
            "GlobalUserName": [_text(d) for d in rows["DN"]],
            "VO": vos,
            "VOGroup": [f[1] for f in fqans],
            "VORole": [f[2] for f in fqans],
            "SubmitHost": [(_text(p) or "").partition(":")[2] or _text(p) for p in rows["ProbeName"]],
            "NodeCount": pd.to_numeric(rows["NodeCount"], errors="coerce").fillna(1.0).to_numpy(),
            "Processors": pd.to_numeric(rows["Processors"], errors="coerce").fillna(1.0).to_numpy(),
            "benchmark": [
                round(options.site_benchmarks.get(s, math.nan), BENCHMARK_DECIMALS) if s else math.nan for s in sites
            ],
            "NumberOfJobs": rows["jobs"].to_numpy(dtype=np.float64),
            "penalty_s": 0.0,
            "selected": _gratia_selected(rows, vos, options),
        }
    )


def apel_table(rows: Sequence[Mapping[str, Any]], options: ApelOptions) -> pd.DataFrame:
    """APEL's summary records of the groups of one month as the store gives them (the rows of
    :func:`_aggregation`'s query, with ``period`` 'YYYY-MM'), with ``benchmarked`` (False: the
    records of hosts without a benchmark, whose normalised times are NaN) and ``left_out`` (why
    APEL could not take the record, "" where it can: :func:`collector.apel.keys.unsendable`). The
    names are grouped as APEL keys them (:func:`collector.apel.keys.merge_spellings`). Pure."""
    return _apel_table(rows, options)[0]


def _apel_table(rows: Sequence[Mapping[str, Any]], options: ApelOptions) -> tuple[pd.DataFrame, list[Merge]]:
    if not rows:
        columns = [*KEYS, *_SUMS, "EarliestEndTime", "LatestEndTime", "benchmarked", "left_out"]
        return pd.DataFrame(columns=columns), []
    frame = pd.DataFrame(list(rows))
    keys = _gratia_keys(frame, options) if options.source == "gratia" else _job_keys(frame, options)
    period = frame["period"].astype(str)
    keys["Year"] = period.str[:4].astype(int).to_numpy()
    keys["Month"] = period.str[5:7].astype(int).to_numpy()
    wall = pd.to_numeric(frame["wall_s"], errors="coerce").fillna(0.0).to_numpy()
    gratia = options.source == "gratia"
    cpu = (
        sum(pd.to_numeric(frame[c], errors="coerce").fillna(0.0).to_numpy() for c in ("cpu_user_s", "cpu_system_s"))
        if gratia
        else pd.to_numeric(frame["cpu_s"], errors="coerce").fillna(0.0).to_numpy()
    )
    selected = keys.pop("selected").to_numpy() if gratia else np.full(len(frame), "", dtype=object)
    no_vo = np.full(len(frame), NO_VO, dtype=object) if gratia else keys.pop("no_vo").to_numpy()
    benchmark = keys.pop("benchmark").to_numpy(dtype=np.float64)
    known = np.isfinite(benchmark) & (benchmark > 0)
    keys["WallDuration"] = wall
    keys["CpuDuration"] = cpu
    keys["NormalisedWallDuration"] = np.where(known, wall * benchmark, np.nan)
    keys["NormalisedCpuDuration"] = np.where(known, cpu * benchmark, np.nan)
    ms = options.source == "gratia"  # a date's min/max: epoch milliseconds from Elasticsearch
    keys["EarliestEndTime"] = [_epoch(v, ms=ms) for v in frame["first_end"]]
    keys["LatestEndTime"] = [_epoch(v, ms=ms) for v in frame["last_end"]]
    keys["benchmarked"] = known
    keys, merges = merge_spellings(keys)
    keys["left_out"] = [
        why or unsendable(r) or ("" if isinstance(r["VO"], str) else none)
        for why, none, r in zip(selected, no_vo, keys[list(NAME_KEYS)].to_dict("records"), strict=True)
    ]  # "" where the record can be sent
    if len(options.infrastructure) > 20:
        keys["left_out"] = "Infrastructure longer than APEL's 20 characters"
    grouped = keys.groupby([*KEYS, "benchmarked", "left_out"], dropna=False, sort=True)
    sums = grouped[list(_SUMS)].sum(min_count=1)
    sums["EarliestEndTime"] = grouped["EarliestEndTime"].min()
    sums["LatestEndTime"] = grouped["LatestEndTime"].max()
    out = sums.reset_index()
    if gratia:  # gracc-apel writes each sum as Python's int() makes it: towards zero (of the
        # sum to the microsecond, so that 6000 s x 10.123 is 60738, not a binary float's 60737.99...)
        durations = ["WallDuration", "CpuDuration", "NormalisedWallDuration", "NormalisedCpuDuration"]
        out[durations] = np.trunc(np.round(out[durations].to_numpy(dtype=np.float64), 6))
    return out.astype({"NodeCount": np.int64, "Processors": np.int64}), merges


def _records(frame: pd.DataFrame, infrastructure: str) -> list[dict[str, Any]]:
    records = []
    for row in frame.to_dict("records"):
        record = {str(k): (None if isinstance(v, float) and math.isnan(v) else v) for k, v in row.items()}
        record["Infrastructure"] = infrastructure
        del record["benchmarked"], record["left_out"]
        records.append(record)
    return records


def _months(table: pd.DataFrame, options: ApelOptions) -> Iterator[ApelMonth]:
    sited = table[table["Site"].notna()]
    for (site, year, month), part in sited.groupby(["Site", "Year", "Month"], sort=True):
        sendable = part["left_out"] == ""
        good = part[part["benchmarked"] & sendable]
        bad = part[~part["benchmarked"] & sendable]
        left_out = part[~sendable].groupby("left_out", sort=True)["NumberOfJobs"].sum()
        # as APEL's client: the sync record counts what the summaries of the site hold
        per_host = good.groupby("SubmitHost", dropna=False, sort=True)["NumberOfJobs"].sum()
        sync = [
            {"Site": site, "SubmitHost": host if isinstance(host, str) else None, "NumberOfJobs": jobs,
             "Month": month, "Year": year}
            for host, jobs in per_host.items()
        ]  # fmt: skip
        yield ApelMonth(
            str(site),
            int(year),  # type: ignore[call-overload]  # a group key: the Year column's int
            int(month),  # type: ignore[call-overload]
            _records(good, options.infrastructure),
            sync,
            int(bad["NumberOfJobs"].sum()),
            float(bad["WallDuration"].sum()),
            {str(reason): int(jobs) for reason, jobs in left_out.items()},
        )


@dataclass
class ApelResult:
    """The months of a run, and the jobs that no site could be given (sent nowhere)."""

    months: list[ApelMonth]
    unsited_jobs: int = 0
    tables: list[pd.DataFrame] = field(default_factory=list)
    merged: list[Merge] = field(default_factory=list)
    """Spellings of a name sent as one, because APEL's tables compare them equal."""


def apel_months(sink: Sink, months: Sequence[tuple[int, int]], options: ApelOptions) -> ApelResult:
    """APEL's records of each of ``months`` (year, month) of the records in ``sink``, grouped by
    the store a month at a time (a month is always whole: APEL replaces a month with what it
    gets). Months without records give nothing."""
    result = ApelResult([])
    cut = datetime.fromtimestamp(math.floor(latest_end(options)) + 1, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    for year, month in months:
        since, until = month_bounds(year, month)
        sendable = min(until, max(since, cut))  # the ISO texts compare as the times
        table, merges = _apel_table(sink.aggregate(_aggregation(options, since, sendable)), options)
        if sendable < until:  # the jobs ending after the sender's clock: counted, not sent
            future, _ = _apel_table(sink.aggregate(_aggregation(options, sendable, until)), options)
            if len(future):
                table = pd.concat([table, future.assign(left_out=FUTURE)], ignore_index=True)
        result.tables.append(table)
        result.merged.extend(merges)
        result.unsited_jobs += int(table.loc[table["Site"].isna(), "NumberOfJobs"].sum())
        result.months.extend(_months(table, options))
    return result
