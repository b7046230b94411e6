"""APEL's individual job records (``fairacct apel --kind jobs``) and what APEL's server makes of
them.

A job record is loaded by APEL's server as its ``JobRecord`` reads it (``apel/db/records/job.py``)
and summed by its summariser (``SummariseJobs`` in ``schemas/server.sql``), so a record is made
here as the server will hold it:

- its FQAN, when it is one, decides its VO, group and role (the server reads them from the FQAN
  and ignores the ``VO`` field sent beside it: :func:`collector.apel.identity.parse_fqan`);
- its times are whole seconds, cut towards the past as the store dates a job (an end of
  ``23:59:59.6`` on a month's last day stays in that month), its durations whole seconds;
- its key is APEL's, ``(Site, LocalJobId, EndTime)`` under ``utf8mb4_general_ci``: of two
  jobs of a site whose ids differ only in case and that end in the same second, APEL would
  keep one, so the second is left out, with the reason;
- a job that ends in the future, has no benchmark, a field APEL cannot take (``%%``, too long,
  a duration, core or node count beyond the ``INT`` APEL loads it through) or none of its
  mandatory fields is left out of its message alone, with the reason.

:func:`job_summaries` is the server's summariser over those records: per key and benchmark
value, ``ROUND(SUM(wall x ServiceLevel))``, then the rows of a key summed (APEL's
``VNormalisedSuperSummaries``); what fairacct reports of a jobs-kind month is that.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

import pandas as pd

from collector.apel.grouping import (
    BENCHMARK_DECIMALS,
    FUTURE,
    NO_VO,
    ApelOptions,
    job_site,
    latest_end,
    mapped_vo,
    month_bounds,
    unmapped,
)
from collector.apel.identity import is_fqan, parse_fqan
from collector.apel.keys import NAME_KEYS, clean, general_ci_key, merge_spellings, unsendable
from collector.apel.messages import KINDS
from collector.sinks.base import Sink

__all__ = [
    "APEL_INT_MAX",
    "NO_BENCHMARK",
    "SAME_KEY",
    "WHOLE_FIELDS",
    "job_key",
    "job_records",
    "job_summaries",
    "summary_group",
]

NO_BENCHMARK = "no benchmark"
"""Why a job is left out of the job messages: its host has no benchmark (APEL would make one up)."""

SAME_KEY = "LocalJobId equal, under APEL's collation, to another job's of the site ending the same second"
"""Why a job is left out: APEL keys job records by site, id and end, and would keep one of the two."""

APEL_INT_MAX = 2_147_483_647
"""The greatest value of the ``INT`` parameters APEL's server loads a job's durations (seconds),
cores and nodes through (``ReplaceJobRecord``): a CPU time of 1,024 cores over 25 days is more,
and would make MariaDB refuse the whole message."""

WHOLE_FIELDS = ("WallDuration", "CpuDuration", "Processors", "NodeCount")
"""A job record's whole numbers, each within 0 and :data:`APEL_INT_MAX` (their columns are unsigned)."""

SUMMARY_KEYS = (
    "Site", "Year", "Month", "GlobalUserName", "VO", "VOGroup", "VORole", "SubmitHost", "Infrastructure", "NodeCount",
    "Processors",
)  # fmt: skip
"""The keys of APEL's summaries of job records (``VNormalisedSuperSummaries``, without the benchmark type)."""


def job_key(record: Mapping[str, Any]) -> tuple[str, str, int]:
    """A job record's key in APEL's ``JobRecords``: site and id as its collation weighs them, end second."""
    return general_ci_key(str(record["Site"])), general_ci_key(str(record["LocalJobId"])), int(record["EndTime"])


def summary_group(record: Mapping[str, Any]) -> list[Any]:
    """The key of the row APEL's summariser makes a job record part of (``HybridSuperSummaries``:
    site, month, names, submit host, infrastructure, benchmark, nodes and cores), names as its
    collation weighs them, as JSON values: a row the summariser never removes, even when no job
    is left in it."""
    year, month = _year_month(int(record["EndTime"]))
    names = (general_ci_key(str(record.get(k) if record.get(k) is not None else "None")) for k in NAME_KEYS)
    return [
        *names, year, month, str(record.get("InfrastructureType")), general_ci_key(str(record["ServiceLevelType"])),
        f"{float(record['ServiceLevel']):.{BENCHMARK_DECIMALS}f}", int(record.get("NodeCount") or 0),
        int(record.get("Processors") or 0),
    ]  # fmt: skip


def _second(value: object) -> int | None:
    """A time as APEL's DATETIME holds it: whole UNIX seconds, towards the past."""
    return math.floor(value) if isinstance(value, (int, float)) and math.isfinite(value) else None


def _whole(value: object) -> int | None:
    """A duration as the message writes it: whole seconds (``render``'s rounding)."""
    return round(float(value)) if isinstance(value, (int, float)) and math.isfinite(value) else None


def _no_vo(doc: Mapping[str, Any], options: ApelOptions) -> str:
    """Why a job without a VO is left out: its ``vo_attribute`` value vo_map does not name, or none."""
    value = clean(doc.get(options.vo_attribute))
    return NO_VO if value is None else unmapped(options.vo_attribute, value)


def _record(doc: Mapping[str, Any], site: str, speed: float, options: ApelOptions) -> dict[str, Any]:
    fqan = clean(doc.get("fqan"))
    if fqan is not None and is_fqan(fqan):
        vo, group, role = parse_fqan(fqan)  # the server's reading, whatever VO is sent beside it
    else:
        fqan, group, role = None, None, None
        fallback = clean(doc.get(options.vo_attribute))
        vo = clean(doc.get("vo")) or mapped_vo(fallback, options.vo_map)
    host = clean(doc.get("host"))
    end = _second(doc.get("end"))
    start = _second(doc.get("start"))
    return {
        "Site": site,
        "SubmitHost": clean(doc.get("schedd")),
        "MachineName": host.partition("@")[2] or host if host else None,
        "Queue": clean(doc.get("queue")),
        "LocalJobId": clean(doc.get("job_id")),
        "LocalUserId": clean(doc.get("user")),
        "GlobalUserName": clean(doc.get("dn")),
        "FQAN": fqan,
        "VO": vo,
        "VOGroup": group,
        "VORole": role,
        "WallDuration": _whole(doc.get("walltime_s")),
        "CpuDuration": _whole(doc.get("cpu_time_s")),
        "Processors": _whole(doc.get("cpus")),
        "NodeCount": _whole(doc.get("n_hosts")),
        "StartTime": start if start is not None else end,
        "EndTime": end,
        "InfrastructureDescription": "APEL-HTCondor-fairacct",
        "InfrastructureType": options.infrastructure,
        "ServiceLevelType": options.benchmark_type,
        "ServiceLevel": round(float(speed), BENCHMARK_DECIMALS),
    }


def _out_of_range(record: Mapping[str, Any]) -> str | None:
    """Why APEL's server cannot load ``record``'s numbers, or None (its loader refuses a job
    that starts after it ends, MariaDB a number past its column)."""
    for name in WHOLE_FIELDS:
        value = record.get(name)
        if value is not None and not 0 <= value <= APEL_INT_MAX:
            return f"{name} outside APEL's 0 to {APEL_INT_MAX:,}"
    if record["StartTime"] > record["EndTime"]:
        return "StartTime after EndTime"
    return None


def job_records(
    sink: Sink, year: int, month: int, options: ApelOptions
) -> tuple[list[dict[str, Any]], dict[tuple[str, str], int]]:
    """APEL's individual job records of the ``job`` records of a month (those with a site and a
    benchmark that APEL can take, each name spelled once as APEL keys it), and the jobs left
    out, per (site, reason). The records are read, not grouped: one message record per job."""
    since, until = month_bounds(year, month)
    latest = latest_end(options)
    mandatory = KINDS["jobs"].mandatory
    records: list[dict[str, Any]] = []
    left_out: dict[tuple[str, str], int] = {}

    def leave(site: str, reason: str) -> None:
        left_out[site, reason] = left_out.get((site, reason), 0) + 1

    for doc in sink.query("job", since=since, until=until):
        site = options.site or job_site(doc.get("site"), options)
        speed = doc.get("speed")
        if site is None:
            continue
        if not isinstance(speed, (int, float)) or not math.isfinite(speed) or speed <= 0:
            leave(site, NO_BENCHMARK)
            continue
        end = doc.get("end")
        if isinstance(end, (int, float)) and end > latest:
            leave(site, FUTURE)
            continue
        record = _record(doc, site, speed, options)
        absent = next((f"no {name}" for name in mandatory if record.get(name) is None), None)
        reason = (
            absent or _out_of_range(record) or (_no_vo(doc, options) if record["VO"] is None else unsendable(record))
        )
        if reason:
            leave(site, reason)
            continue
        records.append(record)
    if not records:
        return records, left_out
    # one spelling per name, as the summaries send it (APEL's lookup tables keep the first one)
    frame, _ = merge_spellings(pd.DataFrame(records).assign(NumberOfJobs=1.0))
    for record, names in zip(records, frame[list(NAME_KEYS)].to_dict("records"), strict=True):
        record.update({str(k): v if isinstance(v, str) else None for k, v in names.items()})
    kept: list[dict[str, Any]] = []
    seen: set[tuple[str, str, int]] = set()
    for record in records:
        key = job_key(record)
        if key in seen:
            leave(record["Site"], SAME_KEY)
            continue
        seen.add(key)
        kept.append(record)
    return kept, left_out


def _normalised(seconds: Sequence[int], level: float) -> int:
    """``ROUND(SUM(IF(s > 0, s, 0) * ServiceLevel))`` as MariaDB computes it: exact decimals, halves away from zero."""
    total = sum(Decimal(max(s, 0)) for s in seconds) * Decimal(f"{level:.{BENCHMARK_DECIMALS}f}")
    return int(total.quantize(Decimal(1), rounding=ROUND_HALF_UP))


def job_summaries(records: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """What APEL's summariser makes of ``records`` (:func:`job_records`' of one or more months):
    one row per :data:`SUMMARY_KEYS` (names as APEL's collation groups them, spelled as the
    first record spells them), with ``NumberOfJobs``, ``WallDuration``, ``CpuDuration``,
    ``NormalisedWallDuration``, ``NormalisedCpuDuration`` (each benchmark value's rows rounded,
    then summed, as APEL's server does), ``EarliestEndTime`` and ``LatestEndTime``."""
    groups: dict[tuple[Any, ...], dict[float, list[Mapping[str, Any]]]] = {}
    shown: dict[tuple[Any, ...], dict[str, Any]] = {}
    for r in records:
        row = {
            "Site": r["Site"], "Year": _year_month(r["EndTime"])[0], "Month": _year_month(r["EndTime"])[1],
            "GlobalUserName": r.get("GlobalUserName"), "VO": r.get("VO"), "VOGroup": r.get("VOGroup"),
            "VORole": r.get("VORole"), "SubmitHost": r.get("SubmitHost"), "Infrastructure": r.get("InfrastructureType"),
            "NodeCount": r.get("NodeCount") or 0, "Processors": r.get("Processors") or 0,
        }  # fmt: skip
        key = tuple(general_ci_key(v) if isinstance(v, str) else v for v in row.values())
        shown.setdefault(key, row)
        groups.setdefault(key, {}).setdefault(float(r["ServiceLevel"]), []).append(r)
    out = []
    for key, per_level in groups.items():
        jobs = [r for part in per_level.values() for r in part]
        out.append(
            {
                **shown[key],
                "NumberOfJobs": len(jobs),
                "WallDuration": sum(int(r["WallDuration"]) for r in jobs),
                "CpuDuration": sum(int(r["CpuDuration"]) for r in jobs),
                "NormalisedWallDuration": sum(
                    _normalised([int(r["WallDuration"]) for r in part], level) for level, part in per_level.items()
                ),
                "NormalisedCpuDuration": sum(
                    _normalised([int(r["CpuDuration"]) for r in part], level) for level, part in per_level.items()
                ),
                "EarliestEndTime": min(int(r["EndTime"]) for r in jobs),
                "LatestEndTime": max(int(r["EndTime"]) for r in jobs),
            }
        )
    return out


def _year_month(end: int) -> tuple[int, int]:
    stamp = pd.Timestamp(end, unit="s")
    return int(stamp.year), int(stamp.month)
