"""The jobs table: one row per completed (or removed) job, from HTCondor's job history.

Inputs: ``condor_history -long`` or ``-json`` dumps, the schedd's history files (ads separated
by ``*** `` banners), and ``PER_JOB_HISTORY_DIR`` directories of ``history.<cluster>.<proc>``
files. Big inputs are streamed in chunks (:mod:`probes.sources.classad`).

What a job held comes from ``CpusProvisioned``/``MemoryProvisioned``/``DiskProvisioned``/
``GPUsProvisioned`` (what the slot gave it) before its ``Request*`` (what it asked for, often
an expression, evaluated only where nothing was provisioned). Credentials and site come from
the attributes named in the configuration. Units: cores, MiB, KiB, devices, UNIX seconds.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mappings.kinds import DECLARED
from probes.accounting import RESOURCES
from probes.sources.classad import AdColumns, Attr, Kind, fallbacks, unique_attrs
from probes.sources.classad.columns import ColumnBuilder
from probes.sources.classad.limits import AMOUNT, INSTANT
from probes.sources.condor_ap import condor_ap_attrs, condor_ap_columns, count_invalid_cpu
from probes.sources.credentials import identities, identity_attrs
from probes.sources.duplicate_jobs import JobsSeen
from probes.sources.history_folder import list_folder, readable
from probes.sources.inputs import FileRange
from probes.sources.job_checks import BILLED, PROVISIONED, REQUEST, set_aside
from probes.sources.kinds import MY_TYPE, AdKind, KindCheck
from probes.sources.report import ReadReport, ReadTally
from probes.sources.run_times import or_default, run_times
from probes.sources.settings import JobReading

__all__ = [
    "JOB_ADS",
    "JOB_COLUMNS",
    "RUN_COLUMNS",
    "VOMS_ATTRIBUTES",
    "history_files",
    "iter_history",
    "job_attrs",
    "job_columns",
    "jobs_table",
    "odd_integers",
    "placed_jobs",
    "read_history",
]

_PROVISIONED, _REQUEST = PROVISIONED, REQUEST
# The slots a parallel-universe job ran on. The schedd's dedicated scheduler writes two lists
# of the slots' Name (slot1@host) when it starts the job (addReconnectAttributes in
# dedicated_scheduler.cpp): ``RemoteHosts``, this proc's nodes, and ``AllRemoteHosts``, which
# the manual documents as "a comma-separated list of all the remote machines running a
# parallel or mpi universe job": the union over the cluster's procs, in every proc's ad.
# RemoteHosts comes first because it is what this ad's RequestCpus and MaxHosts count (the
# schedd sums MaxHosts over the procs): with AllRemoteHosts a cluster of two node specs would
# count each node once per proc. AllRemoteHosts serves where RemoteHosts was not kept; a
# vanilla job has neither and ran on its LastRemoteHost. ``CurrentHosts`` and ``MaxHosts`` are
# counts, not names (CurrentHosts is 0 once the job has left its slots). Only the first list
# present is decoded.
_NODE_LISTS = ("RemoteHosts", "AllRemoteHosts")
# The grid identity of a job's proxy, as the schedd writes it from the job's X.509/VOMS
# credential (and HTCondor-CE keeps it on the routed job): the VO, the first FQAN (VO, group and
# role: "/cms/Role=production/Capability=NULL") and the DN. APEL accounts by them
# (collector/apel); a job submitted without a proxy has none of them.
VOMS_ATTRIBUTES = {"vo": "x509UserProxyVOName", "fqan": "x509UserProxyFirstFQAN", "dn": "x509userproxysubject"}

RUN_COLUMNS = ("runs", "first_start", "earlier_s", "ran_from", "ran_to")
"""What the jobs table says of a job's runs, for the books (:mod:`collector.books`): ``runs``, the
times a shadow started it to run it (``JobRunCount`` less ``NumJobReconnects``, or ``NumJobStarts``
if more: a start that fails before the job executes claims a slot too; a schedd's reconnect is not
a run); ``first_start``, when it first started (``JobStartDate``); ``earlier_s``, the wall time of
its runs before the last; and ``[ran_from, ran_to]``, its whole wall time laid end to end before
its last run ended: ``ran_to`` = ``start`` + the last run's wall time, ``ran_from`` = ``start`` -
``earlier_s``, so ``ran_to - ran_from`` = ``walltime_s``. The run times are what the schedd says
once the run has ended, not the counters a schedd restart resets (a completed job's last run is
``CompletionDate - JobCurrentStartDate``, its whole wall time ``CommittedTime`` if more than
``RemoteWallClockTime``): :mod:`probes.sources.run_times`. Without ``LastRemoteWallClockTime``
(HTCondor before 23), the last run of a job not completed ended at the vacate that followed its
last start (evicted or held), or else at its removal (``EnteredCurrentStatus``). A job that never
started has none of them (``runs`` 0); records written before these columns existed have none
either and are audited as before (``start`` to ``end``)."""

JOB_COLUMNS = (*DECLARED["job"].columns("history"), "source", "line")
"""The jobs table's columns: the job record's fields its declaration says this table makes
(``table="history"``, in its order: mappings/job_kinds.py), and the input's ``source`` and
``line``; with ``JobReading.gratia``, :data:`~probes.sources.condor_ap.GRATIA_COLUMNS` too."""


JOB_ADS = AdKind("Job", ("GlobalJobId",), "job ads (condor_history -long or -json, history files)")


def job_attrs(reading: JobReading) -> list[Attr]:
    """The job attributes the jobs table needs, with the configured credentials and extras."""
    n, s = Kind.NUMBER, Kind.STRING
    attrs = [
        Attr("GlobalJobId", s), Attr("ClusterId", n), Attr("ProcId", n),
        *(Attr(_PROVISIONED[r], n, limits=AMOUNT) for r in RESOURCES),
        *(Attr(_REQUEST[r], n, unless=_PROVISIONED[r], limits=AMOUNT) for r in RESOURCES),
        Attr("JobStatus", n), Attr("ExitCode", n), Attr("QDate", n, limits=INSTANT),
        Attr("JobCurrentStartDate", n, limits=INSTANT), Attr("JobStartDate", n, limits=INSTANT),
        Attr("CompletionDate", n, limits=INSTANT), Attr("EnteredCurrentStatus", n, limits=INSTANT),
        Attr("RemoteWallClockTime", n, limits=AMOUNT), Attr("RemoteUserCpu", n, limits=AMOUNT),
        Attr("RemoteSysCpu", n, limits=AMOUNT),
        Attr("NumJobStarts", n, limits=AMOUNT), Attr("JobRunCount", n, limits=AMOUNT),
        Attr("LastRemoteWallClockTime", n, limits=AMOUNT), Attr("LastVacateTime", n, limits=INSTANT),
        Attr("CommittedTime", n, limits=AMOUNT), Attr("NumJobReconnects", n, limits=AMOUNT),
        Attr("LastRemoteHost", s), Attr("MaxHosts", n, limits=AMOUNT), *fallbacks(_NODE_LISTS, s),
        *(Attr(a, s) for a in VOMS_ATTRIBUTES.values()),
        # who is billed, credentials and site: the first attribute present wins, the others are not read
        *identity_attrs(reading.identity), *fallbacks(reading.queue, s), *fallbacks(reading.qos, s),
        *fallbacks(reading.site_attributes, s), *fallbacks(reading.resource_attributes, s),
    ]  # fmt: skip
    if reading.speed_attribute:
        attrs.append(Attr(f"MachineAttr{reading.speed_attribute}0", n))
    if reading.gratia:  # what OSG's condor-ap reports of the job (probes.sources.condor_ap)
        attrs += condor_ap_attrs()
    attrs += [Attr(a, Kind.ANY) for a in reading.extra_attributes]
    # what a job is billed or counted with must be a number where present, as a slot's amounts are
    return unique_attrs([replace(a, finite=True) if a.name in BILLED and a.kind is Kind.NUMBER else a for a in attrs])


def history_files(path: str | os.PathLike[str]) -> list[Path]:
    """The ``history.<cluster>.<proc>`` files of a PER_JOB_HISTORY_DIR, in job order."""
    return list_folder(path).per_job


def read_history(
    paths: Sequence[str | os.PathLike[str]],
    reading: JobReading = JobReading(),
    *,
    strict: bool = False,
    seen: JobsSeen | None = None,
    now: float | None = None,
) -> tuple[pd.DataFrame, ReadReport]:
    """Read history dumps, history files and per-job history directories into the jobs table.

    Each chunk of ads becomes its rows of the jobs table at once, so the ads of a big history
    are never held whole beside the table made of them. A job is read once: the jobs of
    ``seen`` (the reads before this one in the same run), and a job read again within
    ``paths``, are left out and counted in the report (:mod:`~probes.sources.duplicate_jobs`).
    A job that cannot be billed as read is set aside with its reason (:mod:`~probes.sources.job_checks`;
    ``now``: the time of reading, UTC s, that no job's time may pass; None: the clock's now).
    """
    from probes.sources.classad import collect  # the scanner and numba: only where ads are read

    tally = ReadTally()
    inputs, size = _inputs(paths, tally)
    builder = ColumnBuilder(size)
    seen = JobsSeen() if seen is None else seen
    for columns, done in _job_parts(inputs, reading, tally, strict, seen, _now(now)):
        builder.append(columns, done)
    columns = builder.result() or job_columns(collect((), _attrs(reading)), reading)
    return _frame(columns), tally.report()


def iter_history(
    paths: Sequence[str | os.PathLike[str]],
    reading: JobReading,
    tally: ReadTally,
    *,
    strict: bool = False,
    now: float | None = None,
) -> Iterator[pd.DataFrame]:
    """:func:`read_history` a few chunks at a time: yield the jobs table in parts (of at least
    2,000 rows, the last maybe fewer, none empty), and add what was found besides values to
    ``tally``, whose :meth:`~probes.sources.report.ReadTally.report` is read_history's report
    once the generator is exhausted (the last input's kind is checked after its last part). A
    caller that writes each part out never holds the table. Each job once, as read_history.

    The parts, one after another, are :func:`read_history`'s rows and values; a column's dtype
    is inferred per part (a str column without a value in a part is object there).
    """
    inputs, _ = _inputs(paths, tally)
    batch: list[dict[str, np.ndarray]] = []
    rows = 0
    for columns, _ in _job_parts(inputs, reading, tally, strict, JobsSeen(), _now(now)):
        if len(columns["job_id"]):
            batch.append(columns)
            rows += len(columns["job_id"])
        if rows >= _FRAME_ROWS:
            yield _frame(_joined(batch))
            batch, rows = [], 0
    if rows:
        yield _frame(_joined(batch))


# Chunks (~1,100 jobs each) are joined up to this many rows before they become a table: a table
# costs milliseconds whatever its length (pandas' checks of 35 columns). Larger parts trade
# memory for CPU: four times these rows took several percent less CPU on a long history, for
# some MB more at the peak (bench_cli.py).
_FRAME_ROWS = 2_000


def _joined(parts: Sequence[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    if len(parts) == 1:
        return parts[0]
    return {name: np.concatenate([p[name] for p in parts]) for name in parts[0]}


_Input = tuple[str | os.PathLike[str], list[Path] | None]  # a path, and its per-job files if a directory


def _inputs(paths: Sequence[str | os.PathLike[str]], tally: ReadTally | None = None) -> tuple[list[_Input], int | None]:
    """The inputs of ``paths``: a folder's per-job files as one input and its other ClassAd
    dumps each as its own (see :mod:`~probes.sources.history_folder`; what it skips is named in
    ``tally``), and their length in bytes (None when unknown: a folder's files are not
    stat'ed twice)."""
    inputs: list[_Input] = []
    size: int | None = 0
    for path in paths:
        if os.path.isdir(path):
            folder = list_folder(path)
            if folder.per_job:
                inputs.append((path, folder.per_job))
            inputs += [(dump, None) for dump in folder.dumps]
            if tally is not None:
                tally.skip(folder.skipped)
            size = None
        elif isinstance(path, FileRange):
            inputs.append((path, None))
            if size is not None:
                size += path.stop - path.start
        else:
            inputs.append((path, None))
            if size is not None and os.path.isfile(path):
                size += os.path.getsize(path)
    return inputs, size or None


def _job_parts(
    inputs: Sequence[_Input], reading: JobReading, tally: ReadTally, strict: bool, seen: JobsSeen, now: float
) -> Iterator[tuple[dict[str, np.ndarray], int]]:
    """Each chunk's columns of the jobs table (:func:`job_columns`, its odd integers counted,
    its jobs that cannot be billed as read set aside (:func:`~probes.sources.job_checks.set_aside`,
    at ``now``), and the jobs ``seen`` before left out and counted), and the
    bytes of all ``inputs`` read so far; each input's verdict
    (:meth:`~probes.sources.kinds.KindCheck.verdict`) once its last chunk was yielded."""
    from probes.sources.classad import iter_ad_files, iter_ads, iter_ads_range  # the scanner: only where ads are read

    attrs = _attrs(reading)
    offset = 0
    for path, listed in inputs:
        with ExitStack() as stack:
            plain = path
            if isinstance(path, FileRange):  # a part of a schedd's history file
                parts = iter_ads_range(path, attrs, tally, strict=strict)
            elif listed is not None:
                parts = iter_ad_files(listed, attrs, tally, strict=strict)
            else:
                plain = stack.enter_context(readable(path))  # a .gz: its text
                parts = iter_ads(plain, attrs, tally, strict=strict)
            done = 0
            check = KindCheck(JOB_ADS)
            malformed = len(tally.malformed)
            for part, done in parts:
                ads = check.keep(part, tally)
                columns = job_columns(ads, reading)
                if reading.gratia:
                    count_invalid_cpu(ads, tally)
                if plain != path:  # a decompressed copy: name the file the site has
                    _renamed(columns, tally, malformed, os.fspath(plain), os.fspath(path))
                odd_integers(columns, tally)
                columns = set_aside(columns, ads, tally, strict, now)
                once = seen.first_reads(columns["job_id"], columns["source"], columns["line"], tally)
                yield (columns if once is None else _rows(columns, once)), offset + done
            if plain != path:
                _renamed(None, tally, malformed, os.fspath(plain), os.fspath(path))
            check.verdict(path, len(tally.malformed) - malformed)
            offset += done


def _now(now: float | None) -> float:
    """The time of reading (UTC s): ``now``, or the clock's when None (a read from files)."""
    return time.time() if now is None else now


def _rows(columns: dict[str, np.ndarray], rows: np.ndarray) -> dict[str, np.ndarray]:
    return {name: values[rows] for name, values in columns.items()}


def _renamed(
    columns: dict[str, np.ndarray] | None, tally: ReadTally, first: int, temporary: str, original: str
) -> None:
    """The rows and malformed ads read from the decompressed ``temporary`` copy named after the
    compressed ``original`` (the malformed ones from index ``first`` of the tally)."""
    if columns is not None and len(columns["source"]):
        columns["source"] = np.where(columns["source"] == temporary, original, columns["source"]).astype(object)
    tally.malformed[first:] = [replace(m, path=original) if m.path == temporary else m for m in tally.malformed[first:]]


def _attrs(reading: JobReading) -> list[Attr]:
    return unique_attrs([*job_attrs(reading), MY_TYPE])


def placed_jobs(jobs: pd.DataFrame, tally: ReadTally) -> pd.DataFrame:
    """The jobs of a schedd's history that a checkpoint can place: with a GlobalJobId and an
    end time; the others skipped and counted in ``tally``."""
    usable = jobs["job_id"].notna().to_numpy() & np.isfinite(pd.to_numeric(jobs["end"]).to_numpy(dtype=np.float64))
    if usable.all():
        return jobs
    tally.reject("GlobalJobId or end time: missing, the job was skipped", int((~usable).sum()))
    kept: pd.DataFrame = jobs[usable].reset_index(drop=True)
    return kept


def jobs_table(
    ads: AdColumns, reading: JobReading, tally: ReadTally | None = None, now: float | None = None
) -> pd.DataFrame:
    """Turn job ads (from files or a live schedd) into the jobs table; with ``tally``, without
    the jobs that cannot be billed as read (:func:`~probes.sources.job_checks.set_aside`, at
    ``now``, UTC s, or the clock's now), quarantined in it."""
    columns = job_columns(ads, reading)
    if tally is not None:
        if reading.gratia:
            count_invalid_cpu(ads, tally)
        columns = set_aside(columns, ads, tally, False, _now(now))
    return _frame(columns)


_INTEGER_COLUMNS = frozenset({"cluster", "proc", "status", "exit_code", "n_hosts", "runs"})  # nullable Int64


def _whole(values: np.ndarray) -> np.ndarray:
    """Which values a nullable Int64 column can hold: whole numbers within its range."""
    with np.errstate(invalid="ignore"):
        whole: np.ndarray = np.isfinite(values) & (np.abs(values) < 2.0**63) & (np.floor(values) == values)
    return whole


def odd_integers(columns: dict[str, np.ndarray], tally: ReadTally) -> None:
    """Count the values of the jobs table's integer columns that are not whole numbers within
    range (a ``ClusterId`` of 1e23): they become missing, not an exception."""
    for name in _INTEGER_COLUMNS:
        values = columns[name]
        bad = ~_whole(values) & ~np.isnan(values)
        if bad.any():
            tally.rejects[f"{name}: not a whole number within range, ignored"] += int(bad.sum())


def job_columns(ads: AdColumns, reading: JobReading) -> dict[str, np.ndarray]:
    """The jobs table's columns for ``ads``, as numpy arrays (the integer columns as float64,
    NaN where missing, until :func:`_frame` makes them nullable integers)."""
    global_id = ads["GlobalJobId"]
    columns: dict[str, np.ndarray] = {
        "job_id": global_id,
        "schedd": _schedds(global_id),
        "cluster": ads["ClusterId"],
        "proc": ads["ProcId"],
        **identities(ads.__getitem__, len(ads), reading.identity),
        "queue": _credential(ads, reading.queue),
        "qos": _credential(ads, reading.qos),
    }
    provisioned = np.zeros(len(ads), dtype=bool)
    for r in RESOURCES:
        given = ads[_PROVISIONED[r]]
        provisioned |= ~np.isnan(given)
        asked = ads[_REQUEST[r]]
        value = np.where(np.isnan(given), asked, given)
        if r in ("cpus", "gpus"):  # HTCondor's defaults for a job that says nothing
            value = np.where(np.isnan(value), 1.0 if r == "cpus" else 0.0, value)
        columns[r] = value
    columns["provisioned"] = provisioned
    columns["status"] = ads["JobStatus"]
    columns["exit_code"] = ads["ExitCode"]
    columns["qdate"] = ads["QDate"]
    start = _first(ads["JobCurrentStartDate"], ads["JobStartDate"])
    end = ads["CompletionDate"].copy()
    end[~(end > 0)] = ads["EnteredCurrentStatus"][~(end > 0)]  # removed jobs have CompletionDate 0
    columns["start"] = np.where(start > 0, start, np.nan)
    columns["end"] = end
    times = run_times(ads.__getitem__, columns["start"], end)  # what a schedd restart did not reset
    columns["walltime_s"] = times.pop("walltime_s")
    columns["cpu_time_s"] = or_default(ads["RemoteUserCpu"], 0.0) + or_default(ads["RemoteSysCpu"], 0.0)
    columns.update(times)
    columns["host"] = ads["LastRemoteHost"]
    columns["hosts"] = ads.first([*_NODE_LISTS, "LastRemoteHost"])  # comma-separated slot names
    columns["site"] = ads.first(reading.site_attributes, reading.site_default)
    columns["resource_name"] = ads.first(reading.resource_attributes)
    speed_attr = reading.speed_attribute
    columns["speed"] = ads[f"MachineAttr{speed_attr}0"] if speed_attr else np.full(len(ads), np.nan)
    columns["n_hosts"] = or_default(ads["MaxHosts"], 1.0)
    for column, attr in VOMS_ATTRIBUTES.items():
        columns[column] = ads[attr]
    if reading.gratia:
        columns.update(condor_ap_columns(ads))
    columns["source"] = ads.path
    columns["line"] = ads.line
    for extra in reading.extra_attributes:
        columns[extra] = ads[extra]
    return columns


def _frame(columns: dict[str, np.ndarray]) -> pd.DataFrame:
    """The jobs table of ``columns``, which it empties. Columns of str become pandas' ``str``
    arrays around the same object arrays, not copies: a big table is not held twice while it is
    built."""
    n = len(next(iter(columns.values())))
    arrays: dict[str, Any] = {}
    for name in list(columns):
        values = columns.pop(name)
        if name in _INTEGER_COLUMNS:
            arrays[name] = pd.array(np.where(_whole(values), values, np.nan), dtype="Int64")
        elif values.dtype == object and pd.api.types.infer_dtype(values, skipna=True) == "string":
            # the missing value of pandas' str dtype; the readers' missing strings are None (a NaN
            # stays as it is), and comparing to None costs less than pd.isna on a long column
            values[values == None] = np.nan  # noqa: E711 - elementwise on an object array
            arrays[name] = pd.arrays.StringArray(values, dtype=_STR)  # type: ignore[call-arg]  # pandas-stubs lack its dtype=
        else:
            arrays[name] = values
    return pd.DataFrame(arrays, index=pd.RangeIndex(n), copy=False)


_STR = pd.StringDtype("python", na_value=np.nan)  # what pandas infers for a column of str


def _credential(ads: AdColumns, names: Sequence[str]) -> np.ndarray:
    return ads.first(names) if names else np.full(len(ads), None, dtype=object)


def _schedds(global_ids: np.ndarray) -> np.ndarray:
    """The schedd of each GlobalJobId ("schedd#cluster.proc#qdate"), one str per schedd."""
    try:  # one regex pass over the chunk's ids rather than a Python step per job
        names: Sequence[str | None] = (
            _AFTER_SCHEDD.sub("", "\n".join(global_ids)).split("\n") if len(global_ids) else []
        )
    except TypeError:  # a job without a GlobalJobId
        names = [g.partition("#")[0] if isinstance(g, str) else None for g in global_ids]
    seen: dict[str | None, str | None] = {}
    out = np.empty(len(global_ids), dtype=object)
    out[:] = list(map(seen.setdefault, names, names))
    return out


_AFTER_SCHEDD = re.compile("#[^\n]*")


def _first(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.where(np.isnan(a) | (a <= 0), b, a)
