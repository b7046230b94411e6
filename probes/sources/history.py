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
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from collector.errors import SourceError
from probes.config import ProbeConfig
from probes.sources.classad import AdColumns, Attr, Kind, ReadReport, fallbacks, read_ad_files, read_ads, unique_attrs
from probes.sources.credentials import group_of

__all__ = ["JOB_COLUMNS", "history_files", "jobs_table", "job_attrs", "read_history"]

RESOURCES = ("cpus", "memory", "disk", "gpus")
_PROVISIONED = {"cpus": "CpusProvisioned", "memory": "MemoryProvisioned", "disk": "DiskProvisioned", "gpus": "GPUsProvisioned"}
_REQUEST = {"cpus": "RequestCpus", "memory": "RequestMemory", "disk": "RequestDisk", "gpus": "RequestGPUs"}
_PER_JOB_FILE = re.compile(r"history\.(\d+)\.(\d+)")

JOB_COLUMNS = (
    "job_id", "schedd", "cluster", "proc", "user", "group", "project", "queue", "qos",
    *RESOURCES, "provisioned", "status", "exit_code", "qdate", "start", "end", "walltime_s", "cpu_time_s",
    "host", "site", "resource_name", "speed", "n_hosts", "source", "line",
)  # fmt: skip


def job_attrs(config: ProbeConfig) -> list[Attr]:
    """The job attributes the jobs table needs, with the configured credentials and extras."""
    n, s = Kind.NUMBER, Kind.STRING
    creds = config.credentials
    attrs = [
        Attr("GlobalJobId", s), Attr("ClusterId", n), Attr("ProcId", n),
        *(Attr(_PROVISIONED[r], n) for r in RESOURCES),
        *(Attr(_REQUEST[r], n, unless=_PROVISIONED[r]) for r in RESOURCES),
        Attr("JobStatus", n), Attr("ExitCode", n), Attr("QDate", n),
        Attr("JobCurrentStartDate", n), Attr("JobStartDate", n), Attr("CompletionDate", n), Attr("EnteredCurrentStatus", n),
        Attr("RemoteWallClockTime", n), Attr("RemoteUserCpu", n), Attr("RemoteSysCpu", n),
        Attr("LastRemoteHost", s), Attr("MaxHosts", n),
        # credentials and site: the first attribute present wins, the others are not read
        *(a for names in (creds.user, creds.group, creds.project, creds.queue, creds.qos) for a in fallbacks(names, s)),
        *fallbacks(config.site.attributes, s), *fallbacks(config.site.resource_attributes, s),
    ]  # fmt: skip
    if config.machines.speed_attribute:
        attrs.append(Attr(f"MachineAttr{config.machines.speed_attribute}0", n))
    attrs += [Attr(a, Kind.ANY) for a in config.sources.job_attributes]
    return unique_attrs(attrs)


def history_files(path: str | os.PathLike[str]) -> list[Path]:
    """The ``history.<cluster>.<proc>`` files of a PER_JOB_HISTORY_DIR, in job order."""
    files = []
    for entry in os.scandir(path):
        m = _PER_JOB_FILE.fullmatch(entry.name)
        if m and entry.is_file():
            files.append(((int(m.group(1)), int(m.group(2))), Path(entry.path)))
    return [p for _, p in sorted(files)]


def read_history(
    paths: Sequence[str | os.PathLike[str]],
    config: ProbeConfig | None = None,
    *,
    strict: bool = False,
) -> tuple[pd.DataFrame, ReadReport]:
    """Read history dumps, history files and per-job history directories into the jobs table."""
    config = config or ProbeConfig()
    attrs = job_attrs(config)
    parts, report = [], ReadReport()
    for path in paths:
        if os.path.isdir(path):
            files = history_files(path)
            if not files:
                raise SourceError(f"{os.fspath(path)}: no history.<cluster>.<proc> files in this directory")
            cols, rep = read_ad_files(files, attrs, strict=strict)
        else:
            cols, rep = read_ads(path, attrs, strict=strict)
        parts.append(cols)
        report.merge(rep)
    ads = AdColumns.concat(parts, attrs)
    del parts
    return jobs_table(ads, config), report


def jobs_table(ads: AdColumns, config: ProbeConfig) -> pd.DataFrame:
    """Turn job ads (from files or a live schedd) into the jobs table."""
    creds = config.credentials
    global_id = ads["GlobalJobId"]
    frame = pd.DataFrame(
        {
            "job_id": global_id,
            "schedd": _schedds(global_id),
            "cluster": _int(ads["ClusterId"]),
            "proc": _int(ads["ProcId"]),
            "user": _credential(ads, creds.user),
            "group": _group(ads, creds.group),
            "project": _credential(ads, creds.project),
            "queue": _credential(ads, creds.queue),
            "qos": _credential(ads, creds.qos),
        },
        copy=False,  # the arrays are new: no need to hold them twice
    )
    provisioned = np.zeros(len(ads), dtype=bool)
    for r in RESOURCES:
        given = ads[_PROVISIONED[r]]
        provisioned |= ~np.isnan(given)
        asked = ads[_REQUEST[r]]
        value = np.where(np.isnan(given), asked, given)
        if r in ("cpus", "gpus"):  # HTCondor's defaults for a job that says nothing
            value = np.where(np.isnan(value), 1.0 if r == "cpus" else 0.0, value)
        frame[r] = value
    frame["provisioned"] = provisioned
    frame["status"] = _int(ads["JobStatus"])
    frame["exit_code"] = _int(ads["ExitCode"])
    frame["qdate"] = ads["QDate"]
    start = _first(ads["JobCurrentStartDate"], ads["JobStartDate"])
    end = ads["CompletionDate"].copy()
    end[~(end > 0)] = ads["EnteredCurrentStatus"][~(end > 0)]  # removed jobs have CompletionDate 0
    frame["start"] = np.where(start > 0, start, np.nan)
    frame["end"] = end
    frame["walltime_s"] = np.nan_to_num(ads["RemoteWallClockTime"], nan=0.0)
    frame["cpu_time_s"] = np.nan_to_num(ads["RemoteUserCpu"], nan=0.0) + np.nan_to_num(ads["RemoteSysCpu"], nan=0.0)
    frame["host"] = ads["LastRemoteHost"]
    frame["site"] = ads.first(config.site.attributes, config.site.default)
    frame["resource_name"] = ads.first(config.site.resource_attributes)
    speed_attr = config.machines.speed_attribute
    frame["speed"] = ads[f"MachineAttr{speed_attr}0"] if speed_attr else np.nan
    frame["n_hosts"] = _int(np.nan_to_num(ads["MaxHosts"], nan=1.0))
    frame["source"] = ads.path
    frame["line"] = ads.line
    for extra in config.sources.job_attributes:
        frame[extra] = ads[extra]
    return frame


def _credential(ads: AdColumns, names: Sequence[str]) -> np.ndarray:
    return ads.first(names) if names else np.full(len(ads), None, dtype=object)


def _group(ads: AdColumns, names: Sequence[str]) -> np.ndarray:
    """The accounting group; from ``AccountingGroup`` ('group_cms.alice') the user is dropped."""
    out = np.full(len(ads), None, dtype=object)
    for name in names:
        missing = np.flatnonzero(pd.isna(out))
        if not len(missing):
            break
        values = ads[name][missing]
        if name.lower() == "accountinggroup":
            values = np.array([group_of(v) for v in values] + [None], dtype=object)[:-1]
        out[missing] = values
    return out



def _schedds(global_ids: np.ndarray) -> list[str | None]:
    """The schedd of each GlobalJobId ("schedd#cluster.proc#qdate"), one str per schedd."""
    seen: dict[str, str] = {}
    out: list[str | None] = []
    for g in global_ids:
        name = g.partition("#")[0] if isinstance(g, str) else None
        out.append(seen.setdefault(name, name) if name is not None else None)
    return out


def _first(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.where(np.isnan(a) | (a <= 0), b, a)


def _int(values: np.ndarray) -> pd.array:
    return pd.array(np.where(np.isnan(values), np.nan, values), dtype="Int64")
