"""An :class:`~collector.sinks.base.Aggregation` as a composite aggregation, and its buckets as rows.

The cluster does the work: one ``composite`` aggregation whose sources are the period (a
``date_histogram`` of ``timestamp``, by calendar day or month, in UTC) and a ``terms`` source
per grouped field (``missing_bucket``, so records without the field form their own group, as
SQL's NULL does), with one metric per total, paged by ``after_key``.

Totals that are a product of two fields cannot be a script (servers that forbid scripts, such
as osmem, refuse them): ``sum(v * w)`` is ``weighted_avg(v, weight w) * sum(w)``, both metrics
the server computes. A missing value counts as 0 in both, as in the embedded store.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from collector.sinks.base import Aggregation, Total

__all__ = ["PAGE_SIZE", "composite_body", "page_rows"]

PAGE_SIZE = 1000  # buckets per request
_PERIOD = {"day": ("1d", "%Y-%m-%d"), "month": ("1M", "%Y-%m")}


def _metrics(total: Total, n: int) -> dict[str, Any]:
    """The metric aggregations of one total, named ``t<n>`` (and ``t<n>w`` for the weight sum)."""
    if total.op != "sum":  # a least or greatest value (a date field's in epoch milliseconds)
        return {f"t{n}": {total.op: {"field": total.fields[0]}}}
    if not total.fields:
        inner: dict[str, Any] = {}  # the bucket's doc_count
    elif len(total.fields) == 1:
        inner = {f"t{n}": {"sum": {"field": total.fields[0], "missing": total.missing}}}
    else:
        value, weight = total.fields
        inner = {
            f"t{n}": {
                "weighted_avg": {"value": {"field": value, "missing": 0}, "weight": {"field": weight, "missing": 0}}
            },
            f"t{n}w": {"sum": {"field": weight, "missing": 0}},
        }
    if total.where is None:
        return inner
    return {f"t{n}f": {"filter": {"term": {total.where: True}}, **({"aggs": inner} if inner else {})}}


def composite_body(query: Aggregation, after: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The search body of one page of ``query`` (the page after ``after``, a previous ``after_key``)."""
    sources: list[dict[str, Any]] = []
    if query.period is not None:
        interval = _PERIOD[query.period][0]
        sources.append(
            {"period": {"date_histogram": {"field": "timestamp", "calendar_interval": interval, "time_zone": "UTC"}}}
        )
    sources += [
        {f"g{i}": {"terms": {"field": field, "missing_bucket": True}}} for i, field in enumerate(query.group_by)
    ]
    if not sources:  # the whole range in one bucket: group by nothing but the kind itself
        sources.append({"all": {"terms": {"field": "kind", "missing_bucket": True}}})
    composite: dict[str, Any] = {"size": PAGE_SIZE, "sources": sources}
    if after is not None:
        composite["after"] = dict(after)
    aggs: dict[str, Any] = {}
    for n, total in enumerate(query.totals):
        aggs.update(_metrics(total, n))
    bounds = {k: v for k, v in (("gte", query.since), ("lt", query.until)) if v is not None}
    filters: list[dict[str, Any]] = [{"range": {"timestamp": bounds}}] if bounds else []
    filters += [{"exists": {"field": f}} for f in query.requires]
    for f, low, high in query.ranges:
        limits = {k: v for k, v in (("gte", low), ("lt", high)) if v is not None}
        filters.append({"range": {f: limits}} if limits else {"exists": {"field": f}})
    if len(filters) > 1:
        where: dict[str, Any] = {"bool": {"filter": filters}}
    else:
        where = filters[0] if filters else {"match_all": {}}
    return {
        "size": 0,
        "track_total_hits": False,
        "query": where,
        "aggs": {"groups": {"composite": composite, **({"aggs": aggs} if aggs else {})}},
    }


def page_rows(query: Aggregation, answer: Mapping[str, Any]) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """The rows of one page of buckets, and the ``after_key`` of the next page (None: the last)."""
    groups = answer.get("aggregations", {}).get("groups", {})
    buckets = groups.get("buckets", [])
    rows = []
    for bucket in buckets:
        key = bucket["key"]
        row: dict[str, Any] = {}
        if query.period is not None:
            moment = datetime.fromtimestamp(float(key["period"]) / 1000.0, UTC)
            row["period"] = moment.strftime(_PERIOD[query.period][1])
        for i, field in enumerate(query.group_by):
            row[field] = key.get(f"g{i}")
        for n, total in enumerate(query.totals):
            if total.op != "sum":
                row[total.name] = bucket[f"t{n}"].get("value")
                continue
            scope = bucket[f"t{n}f"] if total.where is not None else bucket
            row[total.name] = (
                int(scope.get("doc_count", 0)) if not total.fields else _value(total, n, scope) * total.scale
            )
        rows.append(row)
    after = groups.get("after_key") if len(buckets) >= PAGE_SIZE else None
    return rows, after


def _value(total: Total, n: int, scope: Mapping[str, Any]) -> float:
    if len(total.fields) == 1:
        return float(scope[f"t{n}"].get("value") or 0.0)
    mean = scope[f"t{n}"].get("value") or 0.0
    weight = scope[f"t{n}w"].get("value") or 0.0
    return float(mean) * float(weight)
