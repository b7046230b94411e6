"""Workload logs in the Standard Workload Format, into the jobs table and node requests.

The Parallel Workloads Archive's SWF has 18 whitespace-separated fields per job; ``;`` starts
a comment (the header: ``; UnixStartTime: 1356994800`` makes relative times absolute); -1
means unknown. MetaCentrum's variant (the Alea simulator's ``wagap-2013.swf``) adds three:

==  =========================  ===========================================================
 1  job number                 ``job_id`` (as text) and ``cluster``
 2  submit time                ``qdate`` (+ UnixStartTime)
 3  wait time                  ``start`` = submit + wait
 4  run time                   ``walltime_s``; ``end`` = start + run
 5  allocated processors       cores when 8 is unknown; CPU time = 6 x 5
 6  average CPU time used      per processor
 8  requested processors       SWF: the job's cores
 9  requested time             ``requested_walltime_s``
10  requested memory           SWF: KB per processor; MetaCentrum: BYTES per node
11  status                     ``swf_status``: 1 completed, 0 failed, 5 cancelled
12  user id                    ``user``
13  group id                   ``group``
15  queue number               ``queue`` (SWF)
16  partition number           ``partition``
19  node ids                   (MetaCentrum: the node of each CPU; not used)
20  queue name                 ``queue`` (MetaCentrum)
21  PBS node specification     MetaCentrum: the node requests, e.g. ``2:ppn=4:cl_zewura#excl``
==  =========================  ===========================================================

Node requests: a plain SWF job asks for its processors, each with its memory (field 10 is
per processor), so it is ``count`` = processors requests of 1 core each. A MetaCentrum job's
node specification is parts joined by ``+``, each ``N:ppn=C`` followed by ``:``-separated
properties: ``cl_NAME`` pins a cluster, a host name (``zewura12.cerit-sc.cz``, ``host=...``)
pins a node, ``^`` negates, ``nodecpusN`` asks for N-core nodes, ``mem=3gb`` is the part's
memory per node (it takes precedence over field 10), and ``#excl`` asks for whole nodes.
Other properties (``brno``, ``nfs4``, ``x86_64``) are kept as pins; see
:func:`probes.accounting.penalty.pin_mask` for how each is matched.

Units on output are HTCondor's: cores, MiB, UNIX seconds.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd

from probes.errors import SourceError
from probes.sources.history import JOB_COLUMNS
from probes.sources.inputs import content_problem, read_input
from probes.sources.report import ReadReport, ReadTally

__all__ = ["SWF_FIELDS", "NodePart", "Workload", "parse_node_spec", "read_lines", "read_swf"]

Variant = Literal["auto", "swf", "metacentrum"]

SWF_FIELDS = (
    "job number", "submit time", "wait time", "run time", "allocated processors", "average CPU time used",
    "used memory", "requested processors", "requested time", "requested memory", "status", "user id",
    "group id", "executable number", "queue number", "partition number", "preceding job number",
    "think time", "node ids", "queue name", "node specification",
)  # fmt: skip
_WIDTH = {"swf": 18, "metacentrum": 21}
_MIB = 1024.0 * 1024.0
_MEM_UNITS = {"b": 1.0, "w": 8.0, "kb": 1024.0, "mb": 1024.0**2, "gb": 1024.0**3, "tb": 1024.0**4}
_MEM = re.compile(r"^([0-9]+(?:\.[0-9]*)?)([a-z]*)$", re.IGNORECASE)
_UNIX_START = re.compile(r"^;\s*UnixStartTime:\s*(-?[0-9]+)", re.IGNORECASE)


@dataclass
class Workload:
    """A workload log read into tables.

    ``jobs``: the jobs table (:data:`probes.sources.history.JOB_COLUMNS`, plus ``swf_status``,
    ``requested_walltime_s`` and ``partition``); ``cpus``/``memory``/``disk``/``gpus`` are the
    per-node amounts of the job's first node request and ``n_hosts`` its number of nodes.
    ``requests``: its node requests (:data:`probes.accounting.penalty.REQUEST_COLUMNS`; ``job``
    is the row's position in ``jobs``). ``variant``: "swf" or "metacentrum".
    """

    jobs: pd.DataFrame
    requests: pd.DataFrame
    variant: str


def read_lines(path: str | os.PathLike[str], what: str) -> list[str]:
    """The lines of a text file, with errors that name the file and what it should hold."""
    name = os.fspath(path)
    data = read_input(path, what)
    problem = content_problem(data, what)
    if problem:
        raise SourceError(f"{name}: {problem}")
    try:
        return data.decode("utf-8").splitlines()
    except UnicodeDecodeError as exc:
        raise SourceError(f"{name}: not UTF-8 text (byte {exc.start}), expected {what}") from exc


def read_swf(path: str | os.PathLike[str], *, variant: Variant = "auto") -> tuple[Workload, ReadReport]:
    """Read an SWF workload log (or MetaCentrum's 21-field variant) into a :class:`Workload`.

    ``variant`` "auto" decides by the number of fields of the first job (18 or 21). A line
    with the wrong number of fields or a field that is not a number raises ``SourceError``
    naming the file, the line and the field: a workload is read whole or not at all, so that
    no job is dropped. Values that are read but not as written (e.g. ``ppn=1.5``) are counted
    in the report's ``rejects`` by reason.
    """
    name = os.fspath(path)
    lines = read_lines(path, "an SWF workload log")
    unix_start = 0.0
    rows: list[list[str]] = []
    numbers: list[int] = []
    width = _WIDTH.get(variant)
    for i, raw in enumerate(lines, 1):
        text = raw.strip()
        if not text:
            continue
        if text.startswith(";"):
            m = _UNIX_START.match(text)
            if m:
                unix_start = float(m.group(1))
            continue
        fields = text.split()
        if width is None:
            if len(fields) not in (18, 21):
                raise SourceError(
                    f"{name} line {i}: expected 18 fields (SWF) or 21 (MetaCentrum's SWF), got {len(fields)}"
                )
            width = len(fields)
            variant = "swf" if width == 18 else "metacentrum"
        if len(fields) != width:
            raise SourceError(f"{name} line {i}: expected {width} fields ({variant} format), got {len(fields)}")
        rows.append(fields)
        numbers.append(i)
    if not rows:
        raise SourceError(f"{name}: no jobs, only comments; expected an SWF workload log")
    assert width is not None
    line = np.asarray(numbers, dtype=np.int64)
    values = _numeric(rows, line, name)
    _check_ranges(values, rows, line, name, unix_start)
    tally = ReadTally(ads=len(rows))
    jobs = _jobs(values, rows, line, name, unix_start, variant)
    if variant == "metacentrum":
        requests = _metacentrum_requests(values, rows, line, name, tally.rejects)
    else:
        requests = _swf_requests(values, tally.rejects)
    first = requests.drop_duplicates("job")
    for r in ("cpus", "memory", "disk", "gpus"):
        jobs[r] = first[r].to_numpy()
    jobs["n_hosts"] = pd.array(
        np.bincount(requests["job"], weights=requests["count"], minlength=len(jobs)), dtype="Int64"
    )
    return Workload(jobs=jobs, requests=requests, variant=variant), tally.report()


def _numeric(rows: list[list[str]], line: np.ndarray, name: str) -> np.ndarray:
    """Fields 1-18 as floats; -1 (and any negative) is unknown (NaN)."""
    try:
        values = np.array([r[:18] for r in rows], dtype=np.float64)
    except ValueError:
        for k, r in enumerate(rows):
            for f, text in enumerate(r[:18]):
                try:
                    float(text)
                except ValueError:
                    raise SourceError(
                        f"{name} line {line[k]}: field {f + 1} ({SWF_FIELDS[f]}): expected a number, got {text!r}"
                    ) from None
        raise  # pragma: no cover - numpy refused something float() accepts
    bad = ~np.isfinite(values)
    if bad.any():
        k, f = np.argwhere(bad)[0]
        raise SourceError(
            f"{name} line {line[k]}: field {f + 1} ({SWF_FIELDS[f]}): expected a number, got {rows[k][f]!r}"
        )
    return np.where(values < 0, np.nan, values)


#: The most nodes or processors a node specification may ask for (a count, not an amount).
_MAX_COUNT = 2.0**31
#: Fields held as integers (the job number, the status): a fraction there is no such thing.
_WHOLE_FIELDS = (1, 11)
#: The last instant a table can hold as a date (9999-12-31T23:59:59Z, UNIX seconds).
MAX_INSTANT = 253402300799.0


def _check_ranges(values: np.ndarray, rows: list[list[str]], line: np.ndarray, name: str, unix_start: float) -> None:
    """Refuse, naming the line and field, a value no job can have: above 2^53 (not exact in a
    float64), a fraction where a whole number is meant, or times that end after year 9999."""

    def refuse(bad: np.ndarray, f: int, expected: str) -> None:
        k = int(np.flatnonzero(bad)[0])
        raise SourceError(
            f"{name} line {line[k]}: field {f} ({SWF_FIELDS[f - 1]}): expected {expected}, got {rows[k][f - 1]!r}"
        )

    with np.errstate(invalid="ignore"):  # NaN (unknown) compares false
        for f in range(1, 19):
            if (values[:, f - 1] >= 2.0**53).any():
                refuse(values[:, f - 1] >= 2.0**53, f, "a number below 2^53")
        for f in _WHOLE_FIELDS:
            column = values[:, f - 1]
            fraction = ~np.isnan(column) & (column != np.floor(column))  # unknown (-1, NaN here) is no fraction
            if fraction.any():
                refuse(fraction, f, "a whole number")
        end = unix_start + np.nansum(values[:, 1:4], axis=1)
        if (end > MAX_INSTANT).any():
            refuse(end > MAX_INSTANT, 2, "submit, wait and run times that end before year 10000")


def _jobs(
    values: np.ndarray, rows: list[list[str]], line: np.ndarray, name: str, unix_start: float, variant: str
) -> pd.DataFrame:
    col = {f: values[:, f - 1] for f in range(1, 19)}
    if np.isnan(col[1]).any():
        k = int(np.flatnonzero(np.isnan(col[1]))[0])
        raise SourceError(
            f"{name} line {line[k]}: field 1 (job number): expected a job number >= 0, got {rows[k][0]!r}"
        )
    n = len(rows)
    qdate = col[2] + unix_start
    start = qdate + col[3]
    end = start + col[4]
    status = col[11]
    queue = np.array([r[19] for r in rows], dtype=object) if variant == "metacentrum" else _ids(col[15])
    frame = pd.DataFrame(
        {
            "job_id": _ids(col[1]),
            "schedd": None,
            "cluster": pd.array(col[1], dtype="Int64"),
            "proc": pd.array(np.zeros(n, dtype=np.int64), dtype="Int64"),
            "user": _ids(col[12]),
            "group": _ids(col[13]),
            "project": None,
            "queue": queue,
            "qos": None,
            "provisioned": False,
            # SWF 1 completed and 0 failed are HTCondor's completed (4); 5 cancelled is removed (3)
            "status": pd.array(np.select([status == 1, status == 0, status == 5], [4, 4, 3], np.nan), dtype="Int64"),
            "exit_code": pd.array(np.select([status == 1, status == 0], [0, 1], np.nan), dtype="Int64"),
            "qdate": qdate,
            "start": start,
            "end": end,
            "walltime_s": np.nan_to_num(col[4], nan=0.0),
            "cpu_time_s": np.nan_to_num(col[6] * col[5], nan=0.0),
            "host": None,
            "site": None,
            "resource_name": None,
            "speed": np.nan,
            "source": name,
            "line": line,
            "swf_status": pd.array(status, dtype="Int64"),
            "requested_walltime_s": col[9],
            "partition": _ids(col[16]),
        }
    )
    for r in ("cpus", "memory", "disk", "gpus", "n_hosts"):
        frame[r] = np.nan
    return frame.reindex(columns=[*JOB_COLUMNS, "swf_status", "requested_walltime_s", "partition"])


def _ids(values: np.ndarray) -> np.ndarray:
    """Whole numbers as text ('62'), unknown as None: SWF's ids are numbers standing for names."""
    out = np.full(len(values), None, dtype=object)
    known = ~np.isnan(values)
    out[known] = [f"{v:.0f}" if v == int(v) else f"{v:g}" for v in values[known]]
    return out


def _cores(values: np.ndarray) -> np.ndarray:
    requested, allocated = values[:, 7], values[:, 4]
    cores = np.where(np.isnan(requested), allocated, requested)
    return np.where(np.isnan(cores) | (cores < 1), 1.0, cores)


def _swf_requests(values: np.ndarray, rejects: Counter[str]) -> pd.DataFrame:
    """A plain SWF job asks for ``processors`` requests of one core and field 10 KB each."""
    procs = _cores(values)
    memory = values[:, 9] / 1024.0  # KB per processor -> MiB
    unknown = int(np.isnan(memory).sum())
    if unknown:
        rejects["field 10 (requested memory) unknown (-1): priced by cores only"] += unknown
    unknown_procs = int((np.isnan(values[:, 7]) & np.isnan(values[:, 4])).sum())
    if unknown_procs:
        rejects["fields 8 and 5 (processors) unknown (-1): read as 1 processor"] += unknown_procs
    n = len(values)
    return pd.DataFrame(
        {
            "job": np.arange(n, dtype=np.int64),
            "count": procs,
            "cpus": 1.0,
            "memory": np.nan_to_num(memory, nan=0.0),
            "disk": np.nan,
            "gpus": 0.0,
            "exclusive": False,
            "properties": [()] * n,
        }
    )


def _metacentrum_requests(
    values: np.ndarray, rows: list[list[str]], line: np.ndarray, name: str, rejects: Counter[str]
) -> pd.DataFrame:
    """Node requests from field 21; field 10 is bytes per node unless a part says ``mem=``."""
    memory = values[:, 9] / _MIB
    cores = _cores(values)
    unknown = int(np.isnan(memory).sum())
    if unknown:
        rejects["field 10 (requested memory) unknown (-1): priced by cores only"] += unknown
    memory = np.nan_to_num(memory, nan=0.0)
    cache: dict[str, tuple[list[NodePart], list[str]]] = {}
    job, count, cpus, mem, excl, props = [], [], [], [], [], []
    for k, r in enumerate(rows):
        spec = r[20]
        if spec not in cache:
            notes: list[str] = []
            try:
                cache[spec] = (parse_node_spec(spec, notes), notes)
            except ValueError as exc:
                raise SourceError(f"{name} line {line[k]}: field 21 (node specification): {exc}") from None
        parts, notes = cache[spec]
        for note in notes:
            rejects[note] += 1
        if not parts:
            rejects["field 21 (node specification) is -1: one node of field 8's processors"] += 1
            parts = [NodePart(1.0, float(cores[k]), None, False, ())]
        elif sum(p.count * p.ppn for p in parts) != cores[k]:
            rejects["field 21 asks for other cores than field 8: the node specification is used"] += 1
        for p in parts:
            job.append(k)
            count.append(p.count)
            cpus.append(p.ppn)
            mem.append(memory[k] if p.memory is None else p.memory)
            excl.append(p.exclusive)
            props.append(p.pins)
    return pd.DataFrame(
        {
            "job": np.asarray(job, dtype=np.int64),
            "count": np.asarray(count, dtype=np.float64),
            "cpus": np.asarray(cpus, dtype=np.float64),
            "memory": np.asarray(mem, dtype=np.float64),
            "disk": np.nan,
            "gpus": 0.0,
            "exclusive": np.asarray(excl, dtype=bool),
            "properties": props,
        }
    )


@dataclass(frozen=True)
class NodePart:
    """One ``+``-separated part of a PBS node specification: ``count`` nodes of ``ppn`` cores,
    ``memory`` MiB each (None: field 10), ``exclusive``, and its pins."""

    count: float
    ppn: float
    memory: float | None
    exclusive: bool
    pins: tuple[str, ...]


def parse_node_spec(spec: str, notes: list[str] | None = None) -> list[NodePart]:
    """Parse a PBS node specification such as ``2:ppn=4:cl_zewura#excl+1:ppn=1``.

    Returns the parts ([] for ``-1``, no specification). Raises ``ValueError`` with what was
    expected. ``notes`` receives a line per value read otherwise than written.
    """
    notes = notes if notes is not None else []
    spec = spec.strip()
    if spec in ("", "-1"):
        return []
    parts = []
    for text in spec.split("+"):
        tokens = [t for t in text.split(":") if t]
        if not tokens:
            raise ValueError(f"empty part in {spec!r}, expected N:ppn=C[:property...]")
        exclusive = False
        clean = []
        for t in tokens:
            if "#" in t:
                t, _, flag = t.partition("#")
                if flag.lower() == "excl":
                    exclusive = True
                elif flag:
                    notes.append(f"field 21: node flag #{flag} is not understood: ignored")
            if t:
                clean.append(t)
        count, ppn, memory, pins = 1.0, 1.0, None, []
        rest = clean
        if clean and clean[0].isdigit():
            count = float(clean[0])
            rest = clean[1:]
            if count < 1:
                raise ValueError(f"node count 0 in {spec!r}, expected at least 1 node")
            if count >= _MAX_COUNT:
                raise ValueError(f"node count {clean[0]} in {spec!r}, expected fewer than 2^31 nodes")
        for t in rest:
            key, eq, value = t.partition("=")
            lowered = key.lower()
            if eq and lowered == "ppn":
                try:
                    ppn = float(value)
                except ValueError:
                    raise ValueError(f"ppn={value!r} in {spec!r}, expected a whole number of processors") from None
                if not ppn < _MAX_COUNT:  # inf and nan too
                    raise ValueError(f"ppn={value} in {spec!r}, expected fewer than 2^31 processors")
                if ppn != int(ppn):
                    notes.append(f"field 21: ppn={value} is not a whole number: read as {int(ppn)}, as TORQUE does")
                    ppn = float(int(ppn))
                if ppn < 1:
                    raise ValueError(f"ppn={value} in {spec!r}, expected at least 1 processor")
            elif eq and lowered == "mem":
                memory = _memory_mib(value, spec)
            elif eq and lowered == "host":
                pins.append(f"host={value}")
            else:
                pins.append(_pin(t))
        parts.append(NodePart(count, ppn, memory, exclusive, tuple(pins)))
    return parts


def _pin(token: str) -> str:
    negated = token.startswith("^")
    body = token[1:] if negated else token
    if body.startswith("cl_") and len(body) > 3:
        pin = f"cluster={body[3:]}"
    elif re.fullmatch(r"nodecpus[0-9]+", body):
        pin = f"cpus={body[8:]}"
    elif "." in body:
        pin = f"host={body}"
    else:
        pin = body
    return f"^{pin}" if negated else pin


def _memory_mib(value: str, spec: str) -> float:
    m = _MEM.match(value.strip())
    unit = m.group(2).lower() if m else ""
    if not m or unit not in _MEM_UNITS:
        raise ValueError(f"mem={value!r} in {spec!r}, expected a size like 3gb, 500mb or 1024kb")
    mib = float(m.group(1)) * _MEM_UNITS[unit] / _MIB
    if not mib < 2.0**53:  # inf too
        raise ValueError(f"mem={value!r} in {spec!r}, expected a size below 2^53 MiB")
    return mib
