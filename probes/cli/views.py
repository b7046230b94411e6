"""What the command line shows: aligned tables for people, one JSON document for programs.

The JSON shapes of ``overhead`` and ``bill`` are a contract other tools read: keys are added,
never renamed or removed.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TextIO

import numpy as np
import orjson
import pandas as pd

from collector.outbox import OutboxStatus
from collector.records import iso_utc
from probes.accounting import RESOURCES, CanonicalUnit
from probes.pipeline.lane import Delivery
from probes.pipeline.overhead import OverheadReport
from probes.pipeline.reading import Reading
from probes.sources.frames import stack
from probes.sources.report import ReadReport

__all__ = [
    "JOB_STATUS",
    "MISSING",
    "Section",
    "bill_json",
    "bill_sections",
    "docs_table",
    "jobs_section",
    "left_out_lines",
    "outbox_view",
    "overhead_json",
    "overhead_sections",
    "read_counts",
    "read_json",
    "read_sections",
    "records",
    "records_summary",
    "render",
    "table",
    "unbilled_nodes",
    "units_text",
    "write_read_json",
    "write_tables_json",
]

Section = tuple[str, str]

SLOT_VIEW = (
    "name", "slot_type", "site", "partition", "total_cpus", "total_memory", "total_gpus",
    "unallocated_cpus", "unallocated_memory", "unallocated_gpus", "n_dynamic",
)  # fmt: skip
ALLOCATION_VIEW = ("name", "parent", "job_id", "submitter", "user", "project", "cpus", "memory", "gpus")
IDLE_VIEW = (
    "schedd",
    "autocluster_id",
    "request_cpus",
    "request_memory",
    "request_disk",
    "request_gpus",
    "count",
    "submitter",
)
JOB_VIEW = (
    "job_id",
    "user",
    "group",
    "project",
    "cpus",
    "memory",
    "gpus",
    "status",
    "walltime_s",
    "cpu_time_s",
    "site",
)
OVERHEAD_VIEW = (
    "name", "partition", "site", "phase", "overhead_cu", "fits_idle",
    "unallocated_cpus", "unallocated_memory", "unallocated_gpus", "overhead_cu_hours",
)  # fmt: skip
NODE_VIEW = ("name", "partition", "overhead_cu", "n_allocations", "rate_cpus", "rate_memory", "rate_gpus")
BILL_VIEW = ("name", "user", "cpus", "memory", "gpus", "billed_cpus", "billed_memory", "billed_gpus")
SHOWN = ("cpus", "memory", "gpus")  # disk is billed too, but rarely what a person looks at


MISSING = "-"
"""How a missing value is shown in every table (JSON says null)."""

JOB_STATUS = {1: "idle", 2: "running", 3: "removed", 4: "completed", 5: "held", 6: "transferring", 7: "suspended"}
"""HTCondor's JobStatus, as a word."""


def render(sections: Sequence[Section]) -> str:
    return "\n".join(f"== {title}\n{body}\n" for title, body in sections)


def table(
    frame: pd.DataFrame,
    columns: Sequence[str],
    *,
    digits: int = 3,
    limit: int | None = None,
    what: str = "rows",
    rows: int | None = None,
) -> str:
    """An aligned table of ``columns``; whole floats print as integers. With ``limit``, its
    first ``limit`` rows and a line saying how many ``what`` more there are, of ``rows`` when
    ``frame`` holds only the first rows of a table (default: ``len(frame)``)."""
    if not len(frame):
        return "(none)"
    rows = len(frame) if rows is None else rows
    more = rows - limit if limit and rows > limit else 0
    view = (frame.head(limit) if limit and more else frame).reindex(columns=list(columns))
    for col in view.columns:
        if pd.api.types.is_float_dtype(view[col]) and view[col].notna().any():
            if (view[col].dropna() % 1 == 0).all():
                view[col] = view[col].astype("Int64")
            else:
                view[col] = view[col].round(digits)
    if "status" in view.columns and pd.api.types.is_numeric_dtype(view["status"]):
        view["status"] = view["status"].map(JOB_STATUS).fillna(view["status"])
    # one spelling of a missing value, whatever the column's type (None, NaN, <NA>)
    view = view.astype(object).where(view.notna(), MISSING)
    return view.to_string(index=False) + (f"\n... {more:,} more {what} (use --json or --limit)" if more else "")


def records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """Rows as JSON-ready dicts (NaN becomes null)."""
    return json.loads(frame.to_json(orient="records", double_precision=15))  # type: ignore[no-any-return]


# -- the tables a cycle read ---------------------------------------------------------------


def read_sections(result: Reading, *, slots: bool = True, limit: int | None = None) -> list[Section]:
    """The tables a read gave, each of at most ``limit`` rows (None: all)."""
    sections = []
    if result.snapshot is not None and slots:
        s, a = result.snapshot.slots, result.snapshot.allocations
        sections.append((f"{len(s)} slots (partitionable and static)", table(s, SLOT_VIEW, limit=limit, what="slots")))
        sections.append(
            (f"{len(a)} allocations (dynamic slots)", table(a, ALLOCATION_VIEW, limit=limit, what="allocations"))
        )
    if result.idle is not None:
        sections.append((_idle_title(result.idle), table(result.idle, IDLE_VIEW, limit=limit, what="autoclusters")))
    if result.jobs is not None:
        sections.append(jobs_section([result.jobs], limit=limit))
    return sections


def jobs_section(parts: Iterable[pd.DataFrame], *, limit: int | None = None) -> Section:
    """The jobs table of ``parts`` (frames of the same columns, in order), of at most ``limit``
    rows (None: all): only those rows are kept while the others are counted, so a history read
    a part at a time (:func:`~probes.sources.history.iter_history`) is never held whole."""
    kept: list[pd.DataFrame] = []
    rows = 0
    for frame in parts:
        if limit is None or rows < limit:
            kept.append(frame if limit is None else frame.head(limit - rows))
        rows += len(frame)
    shown = kept[0] if len(kept) == 1 else stack(kept, JOB_VIEW)
    return f"{rows} jobs", table(shown, JOB_VIEW, limit=limit, what="jobs", rows=rows)


def _idle_title(idle: pd.DataFrame) -> str:
    jobs = int(idle["count"].sum()) if len(idle) else 0
    return f"{len(idle)} autoclusters of idle jobs ({jobs} jobs)"


def read_json(result: Reading, *, slots: bool = True, limit: int | None = None) -> dict[str, Any]:
    """The tables a read gave (each of at most ``limit`` rows; None: all) and what was read, as
    one JSON document; :func:`write_read_json` writes the same document without holding it."""
    out: dict[str, Any] = {
        name: records(_first(frame, limit)) for name, frame in _read_tables(result, slots=slots).items()
    }
    return out | {"read": read_counts(result.reports)}


def write_read_json(out: TextIO, result: Reading, *, slots: bool = True, limit: int | None = None) -> None:
    """:func:`read_json`'s document, written to ``out`` a few thousand rows at a time (see
    :func:`write_tables_json`): a 200,000-job history never becomes one string or a list of
    200,000 dicts."""
    tables = {name: [frame] for name, frame in _read_tables(result, slots=slots).items()}
    write_tables_json(out, tables, result.reports, limit=limit)


def write_tables_json(
    out: TextIO,
    tables: Mapping[str, Iterable[pd.DataFrame]],
    reports: Mapping[str, ReadReport] | Callable[[], Mapping[str, ReadReport]],
    *,
    limit: int | None = None,
) -> None:
    """:func:`read_json`'s document of ``tables``, each given as its parts (frames of the same
    columns, in order), written to ``out`` as they come, one row per line; at most ``limit``
    rows of each (None: all), though every part is taken, for the counts. The counts of
    ``reports`` are written last, once every part was taken; for parts read as they are taken
    (:func:`~probes.sources.history.iter_history`), which complete their reports only then,
    ``reports`` is a function that gives them (their tallies' reports), called at that point.

    The rows are encoded as :func:`records` encodes them (pandas' encoder, 15 significant
    digits), so the values are the same, and a row's text does not depend on the part it is in."""
    out.write("{")
    for name, parts in tables.items():
        out.write(f"{json.dumps(name)}: [")
        left = limit
        before = "\n"
        for frame in parts:
            if left is not None:
                frame = frame.head(left)
                left -= len(frame)
            for first in range(0, len(frame), _JSON_SLICE):
                part = frame.iloc[first : first + _JSON_SLICE].to_json(
                    orient="records", lines=True, double_precision=15
                )
                # pandas escapes every "/" as "\/" (a path reads "\/home\/..."); each "/" of its output
                # is preceded by that backslash, so this undoes exactly those escapes
                out.write(before + part.rstrip("\n").replace("\n", ",\n").replace("\\/", "/"))
                before = ",\n"
        out.write("\n],\n")
    counts = read_counts(reports() if callable(reports) else reports)
    out.write(f'"read": {orjson.dumps(counts).decode()}}}\n')


_JSON_SLICE = 2_000  # rows encoded at once: 1 MB of a jobs table's text, 15 MB of pandas' work space (50 at 10,000)


def _first(frame: pd.DataFrame, limit: int | None) -> pd.DataFrame:
    # not frame.head(None): that copies the whole table (50 MB of a 200,000-job history)
    return frame if limit is None else frame.head(limit)


def _read_tables(result: Reading, *, slots: bool) -> dict[str, pd.DataFrame]:
    tables = {}
    if result.snapshot is not None and slots:
        tables["slots"], tables["allocations"] = result.snapshot.slots, result.snapshot.allocations
    if result.idle is not None:
        tables["idle"] = result.idle.drop(columns=["example_job"])
    if result.jobs is not None:
        tables["jobs"] = result.jobs
    return tables


def read_counts(reports: Mapping[str, ReadReport]) -> dict[str, Any]:
    """Per source: ads read, set aside (``malformed``; by reason: ``set_aside``), ``rejects``."""
    return {
        what: {"ads": r.ads, "evaluated": r.evaluated, "malformed": len(r.malformed), "rejects": dict(r.rejects)}
        | ({"set_aside": dict(Counter(m.reason for m in r.malformed))} if r.malformed else {})
        | ({"duplicates": r.duplicates, "duplicate_jobs": list(r.duplicate_jobs)} if r.duplicates else {})
        for what, r in reports.items()
    }


# -- overhead ------------------------------------------------------------------------------


def overhead_json(report: OverheadReport) -> dict[str, Any]:
    s = report.slots
    per_slot = pd.DataFrame(
        {
            "name": s["name"],
            "machine": s["machine"],
            "site": s["site"],
            "partition": s["partition"],
            "phase": s["phase"],
            "overhead_cu": s["overhead_cu"],
            "overhead_cu_hours": s["overhead_cu_hours"],
            "fits_idle": s["fits_idle"],
            "unmatched": s["unmatched"],
        }
    )
    slots = records(per_slot)
    for doc, total, free in zip(slots, _resources(s, "total_"), _resources(s, "unallocated_"), strict=True):
        doc["total"], doc["unallocated"] = total, free
    counts = s["overhead_cu"].dropna().astype(int).value_counts().sort_index()
    return {
        "slots": slots,
        "histogram": {str(cu): int(n) for cu, n in counts.items()},
        "histogram_by": records(report.histogram),
        "totals": {
            "slots": len(s),
            "overhead_cu": int(s["overhead_cu"].fillna(0).sum()),
            "overhead_cu_hours": float(s["overhead_cu_hours"].fillna(0).sum()),
            "unmatched_slots": int(s["unmatched"].sum()),
        },
        "idle_cross_check": dict(report.overlap) if report.overlap is not None else None,
    }


def _resources(frame: pd.DataFrame, prefix: str) -> list[dict[str, float | None]]:
    values = frame[[f"{prefix}{r}" for r in RESOURCES]].to_numpy(dtype=np.float64)
    return [{r: (None if np.isnan(v) else float(v)) for r, v in zip(RESOURCES, row, strict=True)} for row in values]


_UNIT_NAMES = {"cpus": "core(s)", "memory": "MiB", "disk": "KiB", "gpus": "GPU(s)"}


def units_text(units: Mapping[str, CanonicalUnit]) -> str:
    """``cpu: 1 core(s) and 2048 MiB`` per partition, in match order."""
    return "\n".join(
        f"{name}: "
        + " and ".join(f"{amount:g} {_UNIT_NAMES[r]}" for r, amount in unit.thresholds.items() if amount > 0)
        for name, unit in units.items()
    )


def overhead_sections(report: OverheadReport, *, per_slot: bool = True) -> list[Section]:
    s = report.slots
    sections: list[Section] = []
    if report.units:
        sections.append(
            (
                "canonical units (true overhead is counted in whole units idle in every resource at once)",
                units_text(report.units),
            )
        )
    if per_slot:
        sections.append((f"true overhead of {len(s)} slots, in canonical units (CU)", table(s, OVERHEAD_VIEW)))
    hist = s.assign(overhead_cu=s["overhead_cu"].astype("Int64")).pivot_table(
        index=["partition", "phase"], columns="overhead_cu", values="name", aggfunc="size", fill_value=0, observed=True
    )
    hist.columns = [f"{c} CU" for c in hist.columns]
    sections.append(("slots by true overhead (columns: CU of overhead)", hist.to_string()))
    hours = s.groupby(["partition", "phase"], observed=True)["overhead_cu_hours"].sum().round(3)
    sections.append(("CU-hours of true overhead by partition and phase", hours.to_string()))
    unmatched = s.loc[s["unmatched"], "name"].tolist()
    if unmatched:
        sections.append(("slots that match no partition (no overhead computed)", "\n".join(unmatched)))
    if report.overlap is not None:
        o = report.overlap
        sections.append(
            (
                "idle-job cross-check",
                (
                    f"{o['suspicious_slots']} slots with overhead had idle jobs that fit: "
                    f"{o['suspicious_cu_hours']:.3f} CU-hours\n"
                    f"{o['other_slots']} slots with overhead and no fitting idle job: "
                    f"{o['other_cu_hours']:.3f} CU-hours"
                ),
            )
        )
    return sections


# -- bills ---------------------------------------------------------------------------------


def bill_json(nodes: pd.DataFrame, bills: pd.DataFrame) -> dict[str, Any]:
    node_docs = records(nodes[["name", "partition", "overhead_cu", "n_allocations"]])
    for doc, rate, unattributed in zip(
        node_docs, _resources(nodes, "rate_"), _resources(nodes, "unattributed_"), strict=True
    ):
        doc["rate"], doc["unattributed"] = rate, unattributed
    alloc_docs = records(bills[["name", "parent", "job_id", "user", "group", "orphan"]])
    hours = bills[[f"billed_{r}_hours" for r in RESOURCES]].to_numpy(dtype=np.float64)
    for doc, held, billed, h in zip(
        alloc_docs, _resources(bills, ""), _resources(bills, "billed_"), hours, strict=True
    ):
        doc["allocated"], doc["billed"] = held, billed
        doc["billed_hours"] = {r: (None if np.isnan(v) else float(v)) for r, v in zip(RESOURCES, h, strict=True)}
    unbilled = unbilled_nodes(nodes, bills)
    return {
        "nodes": node_docs,
        "allocations": alloc_docs,
        "unbilled_nodes": len(unbilled),
        "incomplete_nodes": unbilled,
    }


def unbilled_nodes(nodes: pd.DataFrame, bills: pd.DataFrame) -> list[str]:
    """The nodes left unbilled, by name: those ``incomplete`` (an ad of theirs quarantined, or
    their dynamic slots holding more than they have), and those whose own ad was quarantined (the
    parents of orphan allocations)."""
    flagged = {str(n) for n in nodes.loc[nodes["incomplete"].fillna(False).astype(bool), "name"]}
    orphans = bills["orphan"].fillna(False).astype(bool) if "orphan" in bills.columns else bills["parent"].isna()
    return sorted(flagged | {str(p) for p in bills.loc[orphans, "parent"].dropna()})


def bill_sections(nodes: pd.DataFrame, bills: pd.DataFrame, *, per_job: bool = True) -> list[Section]:
    title = f"rates of {len(nodes)} nodes (bill / allocation; '-' where nothing is allocated)"
    unbilled = unbilled_nodes(nodes, bills)
    if unbilled:
        named = ", ".join(unbilled[:10]) + (f" and {len(unbilled) - 10} more" if len(unbilled) > 10 else "")
        title += (
            f"; {len(unbilled)} node(s) left unbilled (incomplete: an ad quarantined, or the node contradicts "
            f"itself; see the quarantine): {named}"
        )
    sections = [(title, table(nodes, NODE_VIEW))]
    if per_job:
        sections.append((f"bills of {len(bills)} allocations", table(bills, BILL_VIEW)))
    by_user = bills.groupby("user", dropna=False)[[f"billed_{r}_hours" for r in SHOWN]].sum()
    held = bills.assign(**{f"held_{r}_hours": bills[r] * bills["interval_s"] / 3600 for r in SHOWN})
    by_user = held.groupby("user", dropna=False)[[f"held_{r}_hours" for r in SHOWN]].sum().join(by_user)
    title = "resource-hours held and billed, by user (core-hours, MiB-hours, GPU-hours)"
    shown = by_user.reset_index()
    sections.append((title, table(shown, list(shown.columns))))
    return sections


# -- records and the outbox ------------------------------------------------------------------


def records_summary(enqueued: Mapping[str, int], delivery: Delivery, url: str) -> str:
    """What became of a cycle's records (``enqueued``, by kind) once delivered to ``url``; each
    kind's line says how many of its records the outbox holds after the delivery, however the
    delivery stopped (a flush stops at the first batch the store fails: the kinds after it were
    not tried, and wait all the same). Of the records sent, it says how many the store did not
    hold before and how many it held already (a backfill reads jobs again), when the store
    tells; a last line says when it does not (the collector)."""
    flushed = delivery.flushed
    lines = []
    # every kind the delivery touched is said: one the cycle made none of, sent from the outbox
    # (records an earlier cycle left waiting), has its line too, and says where its records came from
    touched = [k for k in (*flushed.sent, *flushed.retried, *flushed.dead) if k not in enqueued] if flushed else []
    for kind, n in {**enqueued, **dict.fromkeys(touched, 0)}.items():
        sent = flushed.sent.get(kind, 0) if flushed else 0
        line = f"{kind}: {n} records, {sent} sent to {url}"
        if flushed and sent and not flushed.untold(kind):
            line += f" ({flushed.new.get(kind, 0)} new, {flushed.already_stored.get(kind, 0)} already stored)"
        if sent > n:
            line += f", at least {sent - n} of them from earlier cycles"
        if waiting := delivery.status.depth.get(kind, 0):
            line += f", {waiting} waiting in the outbox"
        if flushed and flushed.dead.get(kind):
            line += f", {flushed.dead[kind]} refused (dead letters)"
        lines.append(line)
    if flushed and any(flushed.untold(kind) for kind in flushed.sent):
        # the collector and Gratia acknowledge a record once it is in their own queue, before a store has it
        lines.append(f"  {url} does not say which of the records sent it held already")
    if flushed and flushed.left_out:
        lines += left_out_lines(flushed.left_out)
    if flushed and flushed.errors:
        lines += [f"  {e}" for e in flushed.errors]
    elif delivery.unsent:
        lines.append(f"  not sent: {delivery.unsent}")
    return "\n".join(lines) or "no records"


def left_out_lines(left_out: Mapping[str, int]) -> list[str]:
    """The job records a Gratia sender acknowledged without sending them, by reason."""
    if not (total := sum(left_out.values())):
        return []
    head = f"  {total} job record(s) not sent to the Gratia collector, as condor-ap leaves them out:"
    return [head, *(f"    {n} {why}" for why, n in sorted(left_out.items()))]


def outbox_view(status: OutboxStatus, dead: Sequence[dict[str, Any]]) -> tuple[dict[str, Any], str]:
    oldest = iso_utc([status.oldest])[0] if status.oldest else None
    doc = {
        "depth": status.depth,
        "oldest": oldest,
        "dead_letters": status.dead_letters,
        "recent_dead_letters": list(dead),
    }
    lines = [
        f"waiting: {sum(status.depth.values())} ({', '.join(f'{k} {n}' for k, n in status.depth.items()) or 'none'})",
        f"oldest waiting since: {oldest or '-'}",
        f"dead letters: {sum(status.dead_letters.values())}",
        *(f"  {d['kind']} {d['id']}: {d['error']}" for d in dead),
    ]
    return doc, "\n".join(lines)


RECORD_VIEWS = {
    "slot": (
        "timestamp",
        "name",
        "site",
        "partition",
        "phase",
        "overhead_cu",
        "unallocated_cpus",
        "unallocated_memory",
        "unallocated_gpus",
    ),
    "allocation": (
        "timestamp",
        "name",
        "user",
        "group",
        "cpus",
        "memory",
        "gpus",
        "billed_cpus",
        "billed_memory",
        "billed_gpus",
    ),
    "job": ("timestamp", "job_id", "user", "group", "project", "site", "cpus", "memory", "gpus", "walltime_s"),
}


def docs_table(kind: str, docs: Sequence[dict[str, Any]]) -> str:
    frame = pd.DataFrame.from_records(list(docs))
    columns = RECORD_VIEWS.get(kind) or tuple(c for c in frame.columns if c not in ("doc",))[:10]
    return f"{len(docs)} {kind} records\n" + table(frame, columns)
