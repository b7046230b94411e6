"""The books balance of submitters: what the allocation records held against what the job
records say ran, per submitter and site; the time no snapshot stands for (the gaps).

Pure functions over the tables the store's sums give (:mod:`collector.summaries.audit` asks
for them; a node's books, in canonical units, are :mod:`probes.accounting.audit`'s); times are
UNIX seconds (UTC), durations seconds, amounts in cores, results in core-hours.

**What a snapshot stands for.** A snapshot observed at ``t`` with ``interval_s`` = ``d`` stands
for ``(t - d, t]`` (the probe sets ``d``: the time since its previous snapshot, capped): its
allocation record of ``c`` cores holds ``c x d`` core-seconds, of which the part inside the window counts.
The parts of the window no snapshot stands for are the *gaps* (the probe or the collector was
down: the probe's "unobserved" time, or records lost).

**What a job used.** Every run, nothing while it waited: a job record (read from the history,
:data:`probes.sources.history.RUN_COLUMNS`) carries ``runs`` (the times a shadow started it),
``first_start``, ``earlier_s`` (the wall time of its runs before the last: ``RemoteWallClockTime``
less ``LastRemoteWallClockTime``) and ``[ran_from, ran_to]``: its whole wall time laid end to end
before its last run ended (``ran_to`` = last start + last run's wall time, ``ran_from`` =
last start - ``earlier_s``; ``ran_to - ran_from`` = ``RemoteWallClockTime``). Inside a segment
``[a, b)`` of observed time a job counts ``cpus x (min(ran_to, b) - max(ran_from, a))``. The last
run is where it ran, exactly (a job held, evicted or removed after it ran stops at its last run's
end, not at its removal); the earlier runs lie somewhere in ``(first_start, start)``, each known
only by their sum. Counting them as the ``earlier_s`` before the last start is exact whenever no
edge of an observed segment (the window's, a gap's) falls inside ``(first_start, start)``: each
segment then holds all of them or none, as it does the true runs. When an edge falls inside, the
window holds between 0 and ``earlier_s`` of them, and so does the block: the used time may be off
by up to ``cpus x earlier_s``, which the bound adds for that job (once, however many edges). A
record written before these fields (no ``ran_from``) is counted as before: ``cpus x (min(end, b)
- max(start, a))``, its last run from its start to its completion or removal, one run.

**The sampling bound.** A job holds its dynamic slot over ``[s, e]``; the probe samples at
``t_0 < t_1 < ...`` with ``d_k = t_k - t_(k-1)``, and a sample sees the job when ``s <= t_k <= e``.
With ``t_a`` the first sample at or after ``s`` and ``t_b`` the last at or before ``e``, the
records hold ``c x (t_b - t_(a-1))`` core-seconds against ``c x (e - s)``, so

    held - used = c x [(s - t_(a-1)) - (e - t_b)],  with 0 <= s - t_(a-1) < d_a and 0 <= e - t_b < d_(b+1)

that is ``-c x d_(b+1) < held - used < c x d_a``: a run is over-counted by less than one interval
at its start and under-counted by less than one at its end, never both beyond one interval,
``|held - used| < c x d`` with ``d`` the longest interval around its ends (a run no sample saw
lasted less than ``d``: held 0, used ``< c x d``, within it too). Clipping both sides at the
window's edges, exactly, keeps it. A job of ``n`` runs has ``2n`` ends, each worth less than one
interval, and its runs' errors add: ``|held - used| < n x c x d``. A run clipped by the window (or
by a gap) keeps one end inside and loses nothing at the clipped one (both sides are cut at the same
instant), so a clipped run's error is within the same ``c x d``; ``n`` is ``runs``, all of the
job's, an upper bound on those the window holds. A failed start (a shadow started, the job did not
execute: ``runs`` >= 1, no wall time) may still have a claim a sample saw: one run's worth. Per
submitter and site the difference is thus within

    bound = sum over its jobs of cores x runs x (d_max + lag_s)
            + sum over the jobs whose earlier runs an edge cuts of cores x earlier_s

over the jobs that ran in the window and those that started within ``d_max`` after it (the
sample after the window's end stands partly for time inside it; one run each), with ``d_max`` the
longest snapshot interval of the window and ``lag_s`` what the pool adds to the ends: the
collector hears of a new dynamic slot, or drops a released one's ad, up to about a second late,
and a claim is made a moment before its job starts. The first term is the sampling; the second,
where it applies, what the history does not say (where each earlier run lay). A difference beyond
it is a fault of the books (a job billed that did not run or while it waited, a job that ran
unbilled, records lost or doubled, jobs not yet in the history).

**Each run once; the loss behind a gap.** A job whose wall time spans a gap overlaps several
observed segments: its core-seconds are counted in each, but the job, its runs and its part of
the bound once (a run is one job's one run, on both sides of a gap: :func:`job_core_seconds`'s
``counts``). The gaps themselves (:func:`holes`) are measured like segments: what the job records
say ran inside them, per submitter and site, is the loss a gap may hide (records lost, jobs a
collector outage swallowed whole), named apart (``unobserved_core_hours``), never more than what
ran there (a job counts only up to its end inside the gap).

**Jobs still running.** The history holds a job once it has left the queue: the allocation
records of a job that was still running at its pool's newest snapshot (and has no job record)
are of a job the history cannot hold yet. Their core-hours are set apart as ``open_core_hours``
(:func:`set_open_apart`), not compared: the books of a window that reaches the present balance
with them left out, and say how much is waiting for the history.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = [
    "GAP_TOLERANCE_S",
    "gaps",
    "held_core_seconds",
    "holes",
    "job_core_seconds",
    "observed_segments",
    "set_open_apart",
    "submitter_books",
    "unobserved_only",
]

GAP_TOLERANCE_S = 1.0
"""Uncovered stretches shorter than this are not gaps: Elasticsearch keeps ``observed_at`` and
``interval_s`` in whole seconds, so consecutive snapshots may leave under a second between them."""

KEYS = ("pool", "submitter", "site")
"""What a row of the submitter books is (a job's ``pool`` is None: jobs are matched by submitter and site)."""


def _require(table: pd.DataFrame, columns: list[str], input_name: str) -> None:
    """Raise ``ValueError`` naming ``input_name`` and every column of ``columns`` it lacks."""
    missing = [c for c in columns if c not in table.columns]
    if missing:
        raise ValueError(f"{input_name} is missing columns {missing}")


def observed_segments(snapshots: pd.DataFrame, start: float, end: float) -> pd.DataFrame:
    """The parts of ``[start, end)`` some snapshot stands for, merged: ``start``, ``end``.

    ``snapshots`` (one row per snapshot of any pool): ``observed_at``, ``interval_s`` (seconds);
    each stands for ``(observed_at - interval_s, observed_at]``. Stretches under
    :data:`GAP_TOLERANCE_S` between two are bridged."""
    _require(snapshots, ["observed_at", "interval_s"], "snapshots table")
    ends = pd.to_numeric(snapshots["observed_at"]).to_numpy(dtype=np.float64)
    starts = ends - pd.to_numeric(snapshots["interval_s"]).to_numpy(dtype=np.float64)
    order = np.argsort(starts, kind="stable")
    merged: list[list[float]] = []
    for a, b in zip(np.maximum(starts[order], start), np.minimum(ends[order], end), strict=True):
        if b <= a:
            continue
        if merged and a <= merged[-1][1] + GAP_TOLERANCE_S:
            merged[-1][1] = max(merged[-1][1], float(b))
        else:
            merged.append([float(a), float(b)])
    return pd.DataFrame(merged, columns=["start", "end"], dtype=np.float64)


def gaps(snapshots: pd.DataFrame, start: float, end: float) -> pd.DataFrame:
    """The stretches of ``[start, end)`` no snapshot of a pool stands for, per pool: ``pool``,
    ``start``, ``end``, ``seconds``. ``snapshots``: ``pool``, ``observed_at``, ``interval_s``; a
    window with no snapshot at all is one gap of pool None."""
    _require(snapshots, ["pool", "observed_at", "interval_s"], "snapshots table")
    rows: list[tuple[object, float, float]] = []
    if not len(snapshots):
        rows.append((None, start, end))
    for pool, part in snapshots.groupby("pool", dropna=False, sort=True):
        edge = start
        segments = observed_segments(part, start, end)
        for a, b in zip(segments["start"].to_numpy(np.float64), segments["end"].to_numpy(np.float64), strict=True):
            if a - edge >= GAP_TOLERANCE_S:
                rows.append((pool, edge, float(a)))
            edge = float(b)
        if end - edge >= GAP_TOLERANCE_S:
            rows.append((pool, edge, end))
    out = pd.DataFrame(rows, columns=["pool", "start", "end"])
    out["pool"] = out["pool"].astype(object).where(out["pool"].notna(), None)
    return out.assign(seconds=out["end"] - out["start"])


def held_core_seconds(
    bulk: pd.DataFrame, edges: pd.DataFrame, start: float, end: float, keys: tuple[str, ...] = KEYS
) -> pd.DataFrame:
    """Core-seconds the allocation records hold inside ``[start, end)``, by pool, submitter and site
    (or ``keys``: the same with ``job_id``, for the jobs still running).

    ``bulk``: ``pool``, ``submitter``, ``site``, ``core_s`` (the sum of ``cpus x interval_s`` of
    the records observed in ``[start, end)``). ``edges``: the records that may reach across an
    edge of the window, summed by snapshot: ``pool``, ``submitter``, ``site``, ``observed_at``,
    ``interval_s``, ``cpus`` (those observed within the longest interval after ``start`` and
    after ``end``); each counts ``cpus`` x the part of ``(observed_at - interval_s,
    observed_at]`` inside the window, in place of what ``bulk`` counted of it."""
    _require(bulk, [*keys, "core_s"], "held core-seconds")
    _require(edges, [*keys, "observed_at", "interval_s", "cpus"], "window edges")
    t = pd.to_numeric(edges["observed_at"]).to_numpy(dtype=np.float64)
    d = pd.to_numeric(edges["interval_s"]).to_numpy(dtype=np.float64)
    c = pd.to_numeric(edges["cpus"]).to_numpy(dtype=np.float64)
    inside = np.clip(np.minimum(t, end) - np.maximum(t - d, start), 0.0, None)
    counted = np.where((t >= start) & (t < end), d, 0.0)
    fix = edges[list(keys)].assign(core_s=c * (inside - counted))
    both = pd.concat([bulk[[*keys, "core_s"]], fix], ignore_index=True)
    return _sum_by_keys(both, ["core_s"], list(keys))


def job_core_seconds(
    parts: list[tuple[pd.DataFrame, float, float, bool, bool]], counts: pd.DataFrame | None = None
) -> pd.DataFrame:
    """Core-seconds the completed jobs ran inside observed segments, by submitter and site, with
    their number, cores and runs.

    Each part is ``(rows, a, b, start_clipped, end_clipped)``: the store's sums over the jobs of
    one segment ``[a, b)`` whose wall time starts before ``a`` (``start_clipped``) or not, and
    ends at or after ``b`` (``end_clipped``) or inside; ``rows``: ``submitter``, ``site``,
    ``jobs``, ``cores`` (sum of cpus), ``cores_start`` and ``cores_end`` (sums of cpus x start
    and cpus x end of the wall time: ``ran_from`` and ``ran_to``, or ``start`` and ``end`` for a
    record without them), and optionally ``core_runs`` (sum of cpus x runs) and ``runs``
    (without them: one run a job). A job counts ``cpus x (min(end, b) - max(start, a))``.

    ``counts``: ``submitter``, ``site``, ``jobs``, ``cores``, ``core_runs``, ``runs`` of the jobs
    counted once however many segments they overlap (a run is one job's one run, on both sides
    of a gap: :func:`collector.summaries.audit.submitter_audit` counts each at the first segment
    its wall time overlaps); they replace the parts' counts, which count a job once a segment."""
    frames = []
    for rows, a, b, start_clipped, end_clipped in parts:
        _require(rows, ["submitter", "site", "jobs", "cores", "cores_start", "cores_end"], "job sums")
        cores = pd.to_numeric(rows["cores"]).astype(float)
        jobs = pd.to_numeric(rows["jobs"]).astype(float)
        upper = cores * b if end_clipped else pd.to_numeric(rows["cores_end"]).astype(float)
        lower = cores * a if start_clipped else pd.to_numeric(rows["cores_start"]).astype(float)
        frames.append(
            rows[["submitter", "site"]].assign(
                pool=None,
                used_core_s=upper - lower,
                jobs=jobs,
                cores=cores,
                core_runs=pd.to_numeric(rows["core_runs"]).astype(float) if "core_runs" in rows else cores,
                runs=pd.to_numeric(rows["runs"]).astype(float) if "runs" in rows else jobs,
            )
        )
    if counts is not None:
        _require(counts, ["submitter", "site", *_COUNTS], "job counts")
        frames = [f.assign(**dict.fromkeys(_COUNTS, 0.0)) for f in frames]
        frames.append(
            counts[["submitter", "site"]].assign(
                pool=None, used_core_s=0.0, **{c: pd.to_numeric(counts[c]).astype(float) for c in _COUNTS}
            )
        )
    if not frames:
        return pd.DataFrame(columns=[*KEYS, *_USED])
    return _sum_by_keys(pd.concat(frames, ignore_index=True), list(_USED))


_COUNTS = ("jobs", "cores", "core_runs", "runs")
_USED = ("used_core_s", *_COUNTS)


def holes(segments: pd.DataFrame, start: float, end: float) -> pd.DataFrame:
    """The parts of ``[start, end)`` outside every observed segment (:func:`observed_segments`:
    ``start``, ``end``, in order, disjoint): ``start``, ``end``. What the job records say ran
    there is what the books could not check (the probe or the collector was down, or the
    records of that time are lost)."""
    rows: list[tuple[float, float]] = []
    edge = start
    for a, b in zip(segments["start"].to_numpy(np.float64), segments["end"].to_numpy(np.float64), strict=True):
        if a > edge:
            rows.append((edge, float(a)))
        edge = max(edge, float(b))
    if end > edge:
        rows.append((edge, end))
    return pd.DataFrame(rows, columns=["start", "end"], dtype=np.float64)


def submitter_books(
    held: pd.DataFrame,
    every: pd.DataFrame,
    used: pd.DataFrame,
    *,
    interval_s: float,
    lag_s: float,
    late: pd.DataFrame | None = None,
    unplaced: pd.DataFrame | None = None,
    unobserved: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Per submitter and site: ``held_core_hours`` (allocation records with a job), the
    ``claimed_core_hours`` of claims between two jobs (records without one: not compared),
    ``used_core_hours`` (the completed jobs, every run), ``difference_core_hours`` (held -
    used), ``bound_core_hours`` and ``beyond`` (the difference exceeds it), ``jobs`` and
    ``runs``. The bound (see the module docstring) is ``(interval_s + lag_s)`` x the jobs' cores
    x runs, plus the ``unplaced`` core-seconds. ``held`` (the records with a job) and ``every``
    (all of them): as :func:`held_core_seconds` gives them; ``used``: as
    :func:`job_core_seconds` does. The pool of a row is dropped: jobs carry none, so a
    submitter's bills of every pool meet its jobs.
    ``late``: ``submitter``, ``site``, ``cores`` of the jobs that started within ``interval_s``
    after the window: the first sample that saw one may stand for time inside the window, so
    their cores count in the bound, though they ran none of it.
    ``unplaced``: ``submitter``, ``site``, ``core_s``: cpus x ``earlier_s`` of the jobs whose
    earlier runs' span crosses an edge of an observed segment (their place is not known).
    ``unobserved``: ``submitter``, ``site``, ``used_core_s``, ``jobs``: what the job records say
    ran in the window outside every observed segment (:func:`holes`; :func:`job_core_seconds`
    over them), each job counted once: ``unobserved_core_hours`` and ``unobserved_jobs``, the
    loss a gap may hide, at no more than what ran there (the jobs' ends inside a gap bound it).
    Neither side of the books holds it, so it is named, not compared."""
    keys = ["submitter", "site"]
    used_cols = list(_USED)
    h = _sum_by_keys(held, ["core_s"], keys).rename(columns={"core_s": "held_core_s"})
    c = _sum_by_keys(every, ["core_s"], keys).rename(columns={"core_s": "claimed_core_s"})
    u = used.assign(unplaced_core_s=0.0)
    extra = [u[[*keys, *used_cols, "unplaced_core_s"]]]
    if late is not None and len(late):
        cores = pd.to_numeric(late["cores"]).astype(float)
        extra.append(late[keys].assign(used_core_s=0.0, jobs=0.0, cores=cores, core_runs=cores, runs=0.0))
    if unplaced is not None and len(unplaced):
        extra.append(unplaced[keys].assign(unplaced_core_s=pd.to_numeric(unplaced["core_s"]).astype(float)))
    u = _sum_by_keys(pd.concat(extra, ignore_index=True).fillna(0.0), [*used_cols, "unplaced_core_s"], keys)
    lost = pd.DataFrame(columns=[*keys, "unobserved_core_s", "unobserved_jobs"])
    if unobserved is not None and len(unobserved):
        lost = _sum_by_keys(
            unobserved[keys].assign(
                unobserved_core_s=pd.to_numeric(unobserved["used_core_s"]).astype(float),
                unobserved_jobs=pd.to_numeric(unobserved["jobs"]).astype(float),
            ),
            ["unobserved_core_s", "unobserved_jobs"],
            keys,
        )
    books = (
        _sentinel(h, keys)
        .merge(_sentinel(c, keys), on=keys, how="outer")
        .merge(_sentinel(u, keys), on=keys, how="outer")
        .merge(_sentinel(lost, keys), on=keys, how="outer")
    )
    for k in keys:
        books[k] = books[k].astype(object).where(books[k] != _NONE, None)
    for col in ("held_core_s", "claimed_core_s", *used_cols, "unplaced_core_s", "unobserved_core_s", "unobserved_jobs"):
        books[col] = pd.to_numeric(books[col]).astype(float).fillna(0.0)
    out = books[keys].copy()
    out["held_core_hours"] = books["held_core_s"] / 3600.0
    out["claimed_core_hours"] = np.clip(books["claimed_core_s"] - books["held_core_s"], 0.0, None) / 3600.0
    out["used_core_hours"] = books["used_core_s"] / 3600.0
    out["difference_core_hours"] = out["held_core_hours"] - out["used_core_hours"]
    out["jobs"] = books["jobs"].astype(np.int64)
    out["runs"] = books["runs"].astype(np.int64)
    out["bound_core_hours"] = (books["core_runs"] * (interval_s + lag_s) + books["unplaced_core_s"]) / 3600.0
    out["beyond"] = _beyond(out)
    out["unobserved_core_hours"] = books["unobserved_core_s"] / 3600.0
    out["unobserved_jobs"] = books["unobserved_jobs"].astype(np.int64)
    return out.sort_values(keys, na_position="first", key=_text_key).reset_index(drop=True)


def unobserved_only(books: pd.DataFrame) -> pd.Series:
    """The rows of the books (:func:`submitter_books`, maybe with ``open_core_hours``) that hold
    nothing but what ran in the gaps: no job compared, nothing held, claimed, used, bounded or
    set apart. ``fairacct audit`` shows them (the loss a gap hides); the daily summaries and the
    report's table of compared rows leave them out and say the loss in words."""
    values = ["held_core_hours", "claimed_core_hours", "used_core_hours", "bound_core_hours", "open_core_hours"]
    held = books[[c for c in values if c in books]].astype(float).abs().sum(axis=1)
    lost = books["unobserved_core_hours"] if "unobserved_core_hours" in books else pd.Series(0.0, index=books.index)
    return (held == 0) & (books["jobs"] == 0) & (lost.astype(float) > 0)


def _beyond(books: pd.DataFrame) -> pd.Series:
    """Whether each row's difference exceeds its bound, by more than a relative hair for the
    sums' rounding (cpus x UNIX seconds summed, then subtracted)."""
    slack = 1e-9 * (books["held_core_hours"].abs() + books["used_core_hours"].abs()) + 1e-9
    return books["difference_core_hours"].abs() > books["bound_core_hours"] + slack


def set_open_apart(books: pd.DataFrame, open_held: pd.DataFrame) -> pd.DataFrame:
    """The books (:func:`submitter_books`) with the core-hours of the jobs still running set
    apart: ``open_core_hours`` per submitter and site, taken out of ``held_core_hours`` and so
    out of the difference (``beyond`` again). ``open_held``: ``submitter``, ``site``, ``core_s``
    (held inside the window by the jobs still running at their pool's newest snapshot and not
    in the history: see the module docstring)."""
    keys = ["submitter", "site"]
    opened = _sum_by_keys(open_held.assign(core_s=pd.to_numeric(open_held["core_s"]).astype(float)), ["core_s"], keys)
    merged = _sentinel(books, keys).merge(_sentinel(opened, keys), on=keys, how="left")
    out = books.copy()
    out["open_core_hours"] = merged["core_s"].fillna(0.0).to_numpy(dtype=np.float64) / 3600.0
    out["held_core_hours"] = out["held_core_hours"] - out["open_core_hours"]
    out["difference_core_hours"] = out["held_core_hours"] - out["used_core_hours"]
    out["beyond"] = _beyond(out)
    return out


_NONE = (
    "\uffff(none)"  # a missing key, as a value pandas groups and merges like any other (not NUL: Arrow strings cut it)
)


def _sentinel(frame: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    return frame.assign(**{k: frame[k].astype(object).where(frame[k].notna(), _NONE) for k in keys})


def _sum_by_keys(frame: pd.DataFrame, values: list[str], keys: list[str] | None = None) -> pd.DataFrame:
    """``values`` summed by ``keys`` (pool, submitter and site), a missing key a group of its own."""
    keys = list(KEYS) if keys is None else keys
    out = _sentinel(frame, keys).groupby(keys, sort=True)[values].sum().reset_index()
    for k in keys:
        out[k] = out[k].astype(object).where(out[k] != _NONE, None)
    return out


def _text_key(column: pd.Series) -> pd.Series:
    """Sort names as text, a missing one first."""
    return column.map(lambda v: "" if v is None or v != v else str(v))
