"""One probe cycle: read the configured sources into tables and store them as records.

``read_sources`` is the I/O of a cycle; ``table_docs`` turns a table into documents with
deterministic ids (the fields that identify the fact, so re-reading the same dump stores it
once) and ISO-8601 UTC times; ``run_once`` does both against a store.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pandas as pd

from collector.store import EmbeddedStore, record_id
from probes.config import ProbeConfig
from probes.sources.classad import ReadReport
from probes.sources.history import read_history
from probes.sources.queue import read_idle, running_job_ids
from probes.sources.status import Snapshot, read_status

__all__ = ["CycleResult", "read_sources", "run_once", "table_docs"]

SCHEMA_VERSION = 1

# kind -> (fields that identify the fact, the record's own time, time fields to render)
RECORD_KINDS: dict[str, tuple[tuple[str, ...], str, tuple[str, ...]]] = {
    "slot": (("pool", "name", "observed_at"), "observed_at", ("observed_at", "glidein_to_retire", "glidein_to_die")),
    "allocation": (("pool", "name", "job_id", "observed_at"), "observed_at", ("observed_at",)),
    "job": (("job_id", "end"), "end", ("qdate", "start", "end")),
}


@dataclass
class CycleResult:
    """The tables a cycle read and what reading them found."""

    snapshot: Snapshot | None = None
    idle: pd.DataFrame | None = None
    jobs: pd.DataFrame | None = None
    reports: dict[str, ReadReport] = field(default_factory=dict)
    stored: dict[str, int] = field(default_factory=dict)


def read_sources(config: ProbeConfig, *, strict: bool | None = None) -> CycleResult:
    """Read every source the configuration names."""
    strict = config.sources.strict if strict is None else strict
    result = CycleResult()
    src = config.sources
    if src.status_files:
        result.snapshot, result.reports["status"] = read_status(src.status_files, config, strict=strict)
    if src.idle_files:
        running = running_job_ids(result.snapshot.allocations) if result.snapshot is not None else None
        result.idle, result.reports["idle"] = read_idle(src.idle_files, running=running, strict=strict)
    if src.history:
        result.jobs, result.reports["history"] = read_history(src.history, config, strict=strict)
    return result


def run_once(config: ProbeConfig, store: EmbeddedStore, *, probe: str, strict: bool | None = None) -> CycleResult:
    """Read the sources and store slots, allocations and jobs as records."""
    result = read_sources(config, strict=strict)
    tables: dict[str, pd.DataFrame | None] = {
        "slot": result.snapshot.slots if result.snapshot else None,
        "allocation": result.snapshot.allocations if result.snapshot else None,
        "job": result.jobs,
    }
    for kind, frame in tables.items():
        if frame is not None and len(frame):
            result.stored[kind] = store.put(kind, table_docs(kind, frame, probe=probe), time_field=RECORD_KINDS[kind][1])
    return result


def table_docs(kind: str, frame: pd.DataFrame, *, probe: str) -> list[dict[str, Any]]:
    """Documents for the rows of a table: flat JSON, ids from the identifying fields."""
    id_fields, _, time_fields = RECORD_KINDS[kind]
    ids = [record_id(kind, *key) for key in frame[list(id_fields)].itertuples(index=False, name=None)]
    out = frame.drop(columns=[c for c in ("source", "line") if c in frame.columns]).copy()
    for col in time_fields:
        if col in out.columns:
            out[f"{col}_iso"] = iso_utc(out[col])
    docs: list[dict[str, Any]] = json.loads(out.to_json(orient="records", double_precision=15))
    for doc, id_ in zip(docs, ids):
        doc.update(id=id_, kind=kind, schema_version=SCHEMA_VERSION, probe=probe)
    return docs


def iso_utc(seconds: Sequence[float] | pd.Series) -> list[str | None]:
    """UNIX seconds -> ISO-8601 UTC ('2026-11-21T14:00:00Z'); missing stays None."""
    values = pd.to_numeric(pd.Series(seconds), errors="coerce").to_numpy(dtype=np.float64)
    return [
        None if np.isnan(v) or v <= 0 else datetime.fromtimestamp(float(v), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        for v in values
    ]
