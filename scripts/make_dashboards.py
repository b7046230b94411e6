"""Write mappings/kibana/dashboards.ndjson: fairacct's Kibana / OpenSearch Dashboards saved
objects (index patterns, visualizations, dashboards). Deterministic: run it after changing a
visualization here, never edit the NDJSON by hand. mappings/kibana/overhead.ndjson (the slot
index pattern and the overhead histogram by partition) is kept as it is and referenced."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parent.parent / "mappings" / "kibana" / "dashboards.ndjson"
REF = "kibanaSavedObjectMeta.searchSourceJSON.index"

PATTERNS = {
    "fairacct-allocation": ("fairacct-allocation-*", "fairacct bills (allocations)"),
    "fairacct-job": ("fairacct-job-*", "fairacct completed jobs"),
    "fairacct-summary": ("fairacct-summary-*", "fairacct daily summaries"),
    "fairacct-fairshare": ("fairacct-fairshare-*", "fairacct fairshare windows"),
    "fairacct-all": ("fairacct-*", "fairacct records of every kind"),
}


def pattern(id_: str, title: str, name: str) -> dict[str, Any]:
    return {
        "id": id_,
        "type": "index-pattern",
        "attributes": {"title": title, "name": name, "timeFieldName": "timestamp"},
        "references": [],
    }


def metric(id_: str, kind: str, field: str | None, label: str) -> dict[str, Any]:
    params: dict[str, Any] = {"customLabel": label}
    if field is not None:
        params["field"] = field
    return {"id": id_, "enabled": True, "type": kind, "schema": "metric", "params": params}


def terms(id_: str, field: str, schema: str, size: int = 20) -> dict[str, Any]:
    return {
        "id": id_, "enabled": True, "type": "terms", "schema": schema,
        "params": {"field": field, "orderBy": "1", "order": "desc", "size": size, "otherBucket": True,
                   "otherBucketLabel": "other", "missingBucket": True, "missingBucketLabel": f"no {field}"},
    }  # fmt: skip


def histogram(id_: str, field: str) -> dict[str, Any]:
    return {"id": id_, "enabled": True, "type": "histogram", "schema": "segment",
            "params": {"field": field, "interval": 1, "min_doc_count": False, "has_extended_bounds": False,
                       "extended_bounds": {}}}  # fmt: skip


def days(id_: str) -> dict[str, Any]:
    return {"id": id_, "enabled": True, "type": "date_histogram", "schema": "segment",
            "params": {"field": "timestamp", "interval": "d", "min_doc_count": 1, "extended_bounds": {}}}  # fmt: skip


def vis(id_: str, title: str, description: str, chart: str, index: str, aggs: list[dict[str, Any]]) -> dict[str, Any]:
    metrics = [a for a in aggs if a["schema"] == "metric"]
    state = {
        "title": title, "type": chart, "aggs": aggs,
        "params": {
            "type": chart, "addTooltip": True, "addLegend": True, "legendPosition": "right", "times": [],
            "addTimeMarker": False, "grid": {"categoryLines": False},
            "categoryAxes": [{"id": "CategoryAxis-1", "type": "category", "position": "bottom", "show": True,
                              "scale": {"type": "linear"}, "labels": {"show": True, "truncate": 100}, "title": {}}],
            "valueAxes": [{"id": "ValueAxis-1", "name": "LeftAxis-1", "type": "value", "position": "left", "show": True,
                           "scale": {"type": "linear", "mode": "normal"},
                           "labels": {"show": True, "rotate": 0, "filter": False, "truncate": 100},
                           "title": {"text": metrics[0]["params"]["customLabel"]}}],
            "seriesParams": [{"show": True, "type": "line" if chart == "line" else "histogram", "mode": "normal",
                              "data": {"label": m["params"]["customLabel"], "id": m["id"]}, "valueAxis": "ValueAxis-1",
                              "drawLinesBetweenPoints": True, "showCircles": True} for m in metrics],
        },
    }  # fmt: skip
    search = {"query": {"query": "", "language": "kuery"}, "filter": [], "indexRefName": REF}
    return {
        "id": id_, "type": "visualization",
        "attributes": {"title": title, "description": description, "version": 1, "uiStateJSON": "{}",
                       "visState": json.dumps(state, separators=(",", ":")),
                       "kibanaSavedObjectMeta": {"searchSourceJSON": json.dumps(search, separators=(",", ":"))}},
        "references": [{"id": index, "name": REF, "type": "index-pattern"}],
    }  # fmt: skip


def two_sums(
    id_: str,
    title: str,
    description: str,
    index: str,
    first: tuple[str, str],
    second: tuple[str, str],
    by: str,
    how: str = "sum",
) -> dict[str, Any]:
    """Bars of two metrics (field, label) side by side, one pair per value of ``by``."""
    aggs = [metric("1", how, *first), metric("2", how, *second), terms("3", by, "segment")]
    return vis(id_, title, description, "histogram", index, aggs)


def dashboard(id_: str, title: str, description: str, panels: list[str]) -> dict[str, Any]:
    layout = []
    for i, _ in enumerate(panels):
        layout.append({"version": "8.0.0", "type": "visualization",
                       "gridData": {"x": 24 * (i % 2), "y": 15 * (i // 2), "w": 24, "h": 15, "i": str(i + 1)},
                       "panelIndex": str(i + 1), "embeddableConfig": {}, "panelRefName": f"panel_{i}"})  # fmt: skip
    return {
        "id": id_, "type": "dashboard",
        "attributes": {"title": title, "description": description, "version": 1, "timeRestore": False,
                       "panelsJSON": json.dumps(layout, separators=(",", ":")),
                       "optionsJSON": json.dumps({"useMargins": True, "hidePanelTitles": False}),
                       "kibanaSavedObjectMeta": {"searchSourceJSON": json.dumps(
                           {"query": {"query": "", "language": "kuery"}, "filter": []})}},
        "references": [{"id": p, "name": f"panel_{i}", "type": "visualization"} for i, p in enumerate(panels)],
    }  # fmt: skip


def objects() -> list[dict[str, Any]]:
    out = [pattern(i, t, n) for i, (t, n) in PATTERNS.items()]
    out += [
        vis("fairacct-overhead-cu-by-site", "fairacct: true overhead (CU) by site",
            "Slot snapshots by whole canonical units idle in every resource at once, stacked by site.",
            "histogram", "fairacct-slot",
            [metric("1", "count", None, "slot snapshots"), histogram("2", "overhead_cu"), terms("3", "site", "group")]),
        vis("fairacct-overhead-cu-by-phase", "fairacct: true overhead (CU) by pilot phase",
            "Slot snapshots by true overhead, stacked by glideinWMS pilot phase.",
            "histogram", "fairacct-slot",
            [metric("1", "count", None, "slot snapshots"), histogram("2", "overhead_cu"),
             terms("3", "phase", "group")]),
        vis("fairacct-overhead-cu-hours-over-time",
            "fairacct: overhead CU-hours per day, with and without fitting idle demand",
            "Daily summaries: CU-hours of true overhead, and the part beside idle jobs that would have fit.",
            "line", "fairacct-summary",
            [metric("1", "sum", "overhead_cu_hours", "overhead CU-hours"),
             metric("2", "sum", "overhead_cu_hours_fitting_idle", "with fitting idle demand (CU-hours)"), days("3")]),
        two_sums("fairacct-held-vs-billed-per-project", "fairacct: held against billed core-hours per project",
                 "Daily summaries: core-hours held by each project's jobs and core-hours billed "
                 "(held plus a share of idle cores, Andrijauskas et al. 2023).",
                 "fairacct-summary", ("held_core_hours", "held core-hours"), ("billed_core_hours", "billed core-hours"),
                 "project"),
        two_sums("fairacct-penalty-vs-cpu-only-per-user", "fairacct: penalty against CPU-only usage per user",
                 "Daily summaries: multi-resource penalty usage (Klusáček & Rudová 2015) beside the CPU-only count, "
                 "in PE-hours.",
                 "fairacct-summary", ("penalty_hours", "penalty PE-hours"), ("cpu_only_hours", "CPU-only PE-hours"),
                 "user"),
        two_sums("fairacct-fairshare-vs-target", "fairacct: fairshare usage against targets",
                 "Fairshare windows: each credential's effective (decayed) usage share beside its target.",
                 "fairacct-fairshare", ("effective", "effective usage (fraction)"), ("target", "target (%)"), "name",
                 how="max"),
        vis("fairacct-ingest-per-probe", "fairacct: records stored per probe",
            "Records of every kind per day and probe: what each probe (and the collector) delivered.",
            "histogram", "fairacct-all",
            [metric("1", "count", None, "records"), days("2"), terms("3", "probe", "group")]),
        two_sums("fairacct-used-vs-billed-per-project", "fairacct: core-hours used against billed per project",
                 "Daily summaries: cores x walltime of the completed jobs (used) beside the running jobs' bills "
                 "(billed), in core-hours: what the report's awards table compares with each award.",
                 "fairacct-summary", ("core_hours", "used core-hours"), ("billed_core_hours", "billed core-hours"),
                 "project"),
        two_sums("fairacct-gpu-used-vs-billed-per-project", "fairacct: GPU-hours used against billed per project",
                 "Daily summaries: GPUs x walltime of the completed jobs (used) beside the running jobs' bills "
                 "(billed), in GPU-hours.",
                 "fairacct-summary", ("gpu_hours", "used GPU-hours"), ("billed_gpu_hours", "billed GPU-hours"),
                 "project"),
        vis("fairacct-jobs-per-site", "fairacct: core-hours of completed jobs per site",
            "Daily summaries: core-hours of completed jobs per site.",
            "histogram", "fairacct-summary",
            [metric("1", "sum", "core_hours", "core-hours"), terms("2", "site", "segment")]),
    ]  # fmt: skip
    out += [
        dashboard("fairacct-operators", "fairacct: true overhead (site operators)",
                  "Where the pool's resources sat idle in every dimension at once, "
                  "and whether idle jobs would have fit.",
                  ["fairacct-overhead-cu-by-partition", "fairacct-overhead-cu-by-site", "fairacct-overhead-cu-by-phase",
                   "fairacct-overhead-cu-hours-over-time", "fairacct-ingest-per-probe"]),
        dashboard("fairacct-committee", "fairacct: usage, bills and fair share (allocation committees)",
                  "Used against billed core-hours and GPU-hours per project, held against billed per project, "
                  "penalty against CPU-only per user, fairshare against targets.",
                  ["fairacct-used-vs-billed-per-project", "fairacct-gpu-used-vs-billed-per-project",
                   "fairacct-held-vs-billed-per-project", "fairacct-penalty-vs-cpu-only-per-user",
                   "fairacct-fairshare-vs-target", "fairacct-jobs-per-site"]),
    ]  # fmt: skip
    return out


if __name__ == "__main__":
    OUT.write_text(
        "".join(json.dumps(o, separators=(",", ":"), sort_keys=True) + "\n" for o in objects()), encoding="utf-8"
    )
    print(f"wrote {OUT}")
