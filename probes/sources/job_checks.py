"""The rules of the jobs table (issue 51): every job ad read is used as read or set aside with its
reason, and a value taken by default is counted, never billed in silence.

- A value a job is billed or counted with (:data:`BILLED`) present but not a finite number as
  HTCondor writes it (``undefined``, a string, ``Infinity``, ``8 GB``, ``0x10``) sets the job
  aside where the reader converts it (:attr:`~probes.sources.classad.Attr.finite`, as a slot's
  amounts; :mod:`probes.sources.values`).
- One absent is taken as HTCondor means it, and counted (:func:`count_defaults`): no
  ``RequestCpus`` is 1 core, no ``RemoteWallClockTime`` or CPU time is 0 s.
- A CPU time no cores can give (:func:`~probes.sources.impossible_jobs.impossible_cpu`) is left
  out, 0 s credited and counted: the job's wall time and cores stand (condor-ap sends it too).
- A job whose values contradict each other (:mod:`~probes.sources.impossible_jobs`), or whose
  times are after the time of reading (:mod:`~probes.sources.future`), is quarantined with the
  reason by :func:`set_aside`: a job dated 2090 no longer moves fairshare's instant to 2090.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from probes.sources.classad import AdColumns
from probes.sources.classad.model import expr_text
from probes.sources.future import from_the_future
from probes.sources.impossible_jobs import CLOCK_SLACK_S, CPU_OVERUSE, impossible_cpu, impossible_jobs
from probes.sources.report import Malformed, ReadTally

__all__ = ["BILLED", "DEFAULTS", "count_defaults", "set_aside"]

PROVISIONED = {"cpus": "CpusProvisioned", "memory": "MemoryProvisioned", "disk": "DiskProvisioned",
               "gpus": "GPUsProvisioned"}  # fmt: skip
REQUEST = {"cpus": "RequestCpus", "memory": "RequestMemory", "disk": "RequestDisk", "gpus": "RequestGPUs"}

BILLED = frozenset({
    *PROVISIONED.values(), *REQUEST.values(), "JobStatus", "QDate", "JobCurrentStartDate", "JobStartDate",
    "CompletionDate", "EnteredCurrentStatus", "RemoteWallClockTime", "RemoteUserCpu", "RemoteSysCpu", "MaxHosts",
})  # fmt: skip
"""The attributes a job is billed or counted with (cores, memory, disk, devices, status, times,
wall and CPU time, hosts): present, each must be a finite number as HTCondor writes it."""

#: The times of a job checked against the reading's clock, in the order a reason names them.
TIMES = ("QDate", "JobStartDate", "JobCurrentStartDate", "CompletionDate", "EnteredCurrentStatus")

DEFAULTS = {
    "RemoteWallClockTime": "absent, read as 0 s (no wall time billed)",
    "RemoteUserCpu": "absent, read as 0 s",
    "RemoteSysCpu": "absent, read as 0 s",
    "JobStatus": "absent, the job's status is unknown (null)",
}
"""What an absent value of a job is read as, by attribute: each counted in the read's report."""
_CPU_LEFT_OUT = (
    f"RemoteUserCpu + RemoteSysCpu: more than {CPU_OVERUSE:g} times its cores' worth over its wall time "
    f"(plus {CLOCK_SLACK_S:g} s), left out (0 s credited)"
)
_NO_CPUS = "RequestCpus: absent (and no CpusProvisioned), HTCondor's default of 1 core billed"


def count_defaults(ads: AdColumns, tally: ReadTally, rows: np.ndarray | None = None) -> None:
    """Count in ``tally`` each value of ``ads`` (its ``rows``, all if None) taken by default."""
    for name, reason in DEFAULTS.items():
        missing = np.isnan(ads[name] if rows is None else ads[name][rows])
        if missing.any():
            tally.rejects[f"{name}: {reason}"] += int(missing.sum())
    cpus = np.isnan(ads[PROVISIONED["cpus"]]) & np.isnan(ads[REQUEST["cpus"]])
    if rows is not None:
        cpus = cpus[rows]
    if cpus.any():
        tally.rejects[_NO_CPUS] += int(cpus.sum())


def set_aside(
    columns: dict[str, np.ndarray], ads: AdColumns, tally: ReadTally, strict: bool, now: float
) -> dict[str, np.ndarray]:
    """``columns`` (the jobs table's, of ``ads``) without the jobs whose times or status are
    impossible (:func:`~probes.sources.impossible_jobs.impossible_jobs`) or after ``now`` (the
    time of reading, UTC s; :func:`~probes.sources.future.from_the_future`), each quarantined in
    ``tally`` with its file, line and why (the first raised when ``strict``); the others'
    defaults counted (:func:`count_defaults`) and a CPU time no cores can give left out (0 s,
    counted: :func:`~probes.sources.impossible_jobs.impossible_cpu`)."""
    reasons = from_the_future({name: ads[name] for name in TIMES}, now)
    for row, why in impossible_jobs(columns, ads["JobStartDate"]).items():
        reasons.setdefault(row, why)
    keep = np.ones(len(columns["job_id"]), dtype=bool)
    for row, reason in sorted(reasons.items()):
        text = f"GlobalJobId = {expr_text(str(columns['job_id'][row]))}\n" + "".join(
            f"{name} = {ads[name][row]:.17g}\n" for name in _SHOWN if not np.isnan(ads[name][row])
        )
        why = reason if reason.endswith("skipped") else f"{reason}; the job was skipped"
        m = tally.add_malformed(Malformed(str(columns["source"][row]), int(columns["line"][row]), why, text))
        if strict:
            raise m.error()
        keep[row] = False
    count_defaults(ads, tally, None if keep.all() else keep)
    kept = columns if keep.all() else _rows(columns, keep)
    if (beyond := impossible_cpu(kept)).any():
        kept["cpu_time_s"] = np.where(beyond, 0.0, kept["cpu_time_s"])
        tally.rejects[_CPU_LEFT_OUT] += int(beyond.sum())
    return kept


# what a quarantined job is shown with (the rest of its ad is in its input)
_SHOWN = ("JobStatus", *TIMES, "RemoteWallClockTime", "RemoteUserCpu", "RemoteSysCpu")


def _rows(columns: Mapping[str, np.ndarray], rows: np.ndarray) -> dict[str, np.ndarray]:
    return {name: values[rows] for name, values in columns.items()}
