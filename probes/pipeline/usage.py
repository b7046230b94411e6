"""Fair usage: from the configuration and the sources to penalty and fairshare reports.

The math is in :mod:`probes.accounting` (machines, penalty, fairshare: pure functions over
tables). This module reads the inputs (HTCondor history or an SWF workload log; a machines
file or startd ads), applies the configured rules for machine speed and node cost (ClassAd
expressions, evaluated with classad2 in each slot ad or machines-file class), and writes
Maui's ``FS.<epoch>`` window files.
"""

from __future__ import annotations

import math
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

import classad2
import numpy as np
import pandas as pd

from collector.errors import ConfigError
from probes.accounting.fairshare import PRICED_METRICS, FairshareResult, fairshare, job_usage
from probes.accounting.machines import machine_classes, machines_table
from probes.accounting.penalty import Penalties, compare_metrics, job_penalties
from probes.config import ProbeConfig
from probes.errors import SourceError
from probes.files import atomic_write
from probes.pipeline.reading import read_sources
from probes.pipeline.records import with_penalty_usage
from probes.sources.classad import to_classad
from probes.sources.classad_semantics import use_condor_functions
from probes.sources.report import ReadReport
from probes.sources.workloads.alea import read_alea_machines
from probes.sources.workloads.swf import read_swf

__all__ = [
    "FS_TYPES",
    "FairshareReport",
    "PenaltyReport",
    "UsageInputs",
    "alea_machines",
    "fairshare_report",
    "fairshare_usage",
    "fs_files",
    "penalty_report",
    "price_jobs",
    "priced_usage",
    "read_usage_inputs",
    "slot_machines",
    "write_fs_files",
]

_WHITESPACE = re.compile(r"\s+")

FS_TYPES = {"user": "User", "group": "Group", "account": "Account", "class": "Class", "qos": "QOS"}
"""Credential type -> its name in Maui's FS.<epoch> files."""


@dataclass
class UsageInputs:
    """What the penalty and fairshare commands read.

    ``jobs``: the jobs table; ``requests``: its node requests (None: one per job, see
    :func:`probes.accounting.penalty.node_requests`); ``machines``: the machine classes (None
    when none were given); ``reports``: per source, what reading it found; ``notes``: things
    the user should know about how the inputs were read (e.g. the assumed RAM unit).
    """

    jobs: pd.DataFrame
    requests: pd.DataFrame | None
    machines: pd.DataFrame | None
    reports: dict[str, ReadReport] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def read_usage_inputs(
    config: ProbeConfig,
    *,
    swf: str | os.PathLike[str] | None = None,
    machines_file: str | os.PathLike[str] | None = None,
    ram_unit: str | None = None,
    strict: bool | None = None,
    need_machines: bool = True,
) -> UsageInputs:
    """Read the jobs (``swf``, else the configured history) and the machines (``machines_file``,
    an Alea machines file, else the configured status files). The history and the status
    files are read as every command reads them (:func:`~probes.pipeline.reading.read_sources`:
    the same credentials, site mapping, user-vo-map and quarantine)."""
    reports: dict[str, ReadReport] = {}
    notes: list[str] = []
    requests = None
    if swf is not None:
        workload, reports["swf"] = read_swf(swf)
        jobs, requests = workload.jobs, workload.requests
    elif config.sources.history:
        history = read_sources(config, strict=strict, only=("history",))
        assert history.jobs is not None  # a history was named
        jobs, reports["history"] = history.jobs, history.reports["history"]
    else:
        raise ConfigError("no jobs: give --swf or --history, or set sources.history in the configuration")

    machines = None
    if machines_file is not None:
        machines, note = alea_machines(machines_file, config, ram_unit=ram_unit)
        notes.append(note)
    elif config.sources.status_files:
        status = read_sources(config, strict=strict, only=("status_files",))
        assert status.snapshot is not None  # status files were named
        reports["status"] = status.reports["status"]
        machines = slot_machines(status.snapshot.slots, status.snapshot.ads, config)
    elif need_machines:
        raise ConfigError(
            "no machines: give --machines (an Alea machines file) or --status-file, or set sources.status_files"
        )
    if machines is not None and not len(machines):
        raise SourceError("no machine classes in the machines given: nothing to price the jobs against")
    return UsageInputs(jobs=jobs, requests=requests, machines=machines, reports=reports, notes=notes)


def slot_machines(slots: pd.DataFrame, ads: np.ndarray | None, config: ProbeConfig) -> pd.DataFrame:
    """Machine classes of a slots table, with speed and node cost from the configured expressions."""
    slots = slots.copy()
    m = config.machines
    for column, expression in (("speed", m.speed_expression), ("node_cost", m.cost_expression)):
        if expression.strip():
            if ads is None:
                raise ConfigError(
                    f"machines.{column.replace('node_', '')}_expression needs the slot ads, "
                    "which this source did not keep"
                )
            values = _evaluate(expression, [to_classad(a) for a in ads])
            slots[column] = np.where(np.isnan(values), slots[column], values)
    return machine_classes(slots, attributes=m.class_attributes)


def alea_machines(
    path: str | os.PathLike[str], config: ProbeConfig, *, ram_unit: str | None = None
) -> tuple[pd.DataFrame, str]:
    """An Alea machines file as machine classes, with speed and node cost from the configured
    rules (expression, else attribute; a class where the rule is undefined keeps its own)."""
    table, reading = read_alea_machines(path, ram_unit=ram_unit or config.machines.ram_unit)
    m = config.machines
    rules = {
        "speed": m.speed_expression.strip() or m.speed_attribute,
        "node_cost": m.cost_expression.strip() or m.cost_attribute,
    }
    if any(rules.values()):
        ads = [
            classad2.ClassAd(
                {
                    k: v
                    for k, v in {
                        "Name": row["name"], "Nodes": int(row["count"]), "Cpus": float(row["cpus"]),
                        "Speed": float(row["speed"]), "Memory": float(row["memory"]), "GPUs": float(row["gpus"]),
                        "Column7": float(row["column7"]),
                    }.items()
                    if not (isinstance(v, float) and math.isnan(v))
                }
            )
            for row in table.to_dict("records")
        ]  # fmt: skip
        for column, rule in rules.items():
            if rule:
                values = _evaluate(rule, ads)
                table[column] = np.where(np.isnan(values), table[column], values)
        table = machines_table(table, input_name=os.fspath(path)).assign(
            **{c: table[c].to_numpy() for c in ("alea_id", "column7", "source", "line")}
        )
    return table, reading.note


def _evaluate(expression: str, ads: list[classad2.ClassAd]) -> np.ndarray:
    """A ClassAd expression's number in each ad; NaN where it is not a number > 0."""
    use_condor_functions()  # an Alea file's machines are no parsed ads: this may be the first parse
    expr = classad2.ExprTree(expression)
    out = np.full(len(ads), np.nan)
    for i, ad in enumerate(ads):
        value = expr.eval(ad)
        # classad2's Undefined and Error are int enums: they must not pass for numbers
        if isinstance(value, (classad2.Value, bool)):
            continue
        if isinstance(value, (int, float)) and value > 0:
            out[i] = float(value)
    return out


def price_jobs(
    jobs: pd.DataFrame, machines: pd.DataFrame, config: ProbeConfig, *, requests: pd.DataFrame | None = None
) -> Penalties:
    """Every job priced against the machine classes under ``[penalty]`` (Klusáček & Rudová 2015,
    "Multi-resource aware fairsharing for heterogeneous systems"). A speed expression is
    evaluated in slot ads, not in job ads: a job's speed is then its host's class's."""
    if config.machines.speed_expression.strip():
        jobs = jobs.assign(speed=np.nan)
    return job_penalties(jobs, machines, config.penalty_policy(), requests=requests)


def priced_usage(jobs: pd.DataFrame, machines: pd.DataFrame | None, config: ProbeConfig) -> pd.DataFrame:
    """The jobs with ``penalty_usage`` and ``cpu_only_usage``: their usage under the penalty
    and under the cores-only metric it replaces (Klusáček & Rudová 2015, formulas 9 and 1), both
    ``walltime x speed x metric`` in PE-seconds, priced against ``machines`` under ``[penalty]``.
    Without machine classes (no snapshot yet) the jobs are returned as they are: their records
    then carry neither, and summaries count 0 for them."""
    if machines is None or not len(machines) or not len(jobs):
        return jobs
    return with_penalty_usage(jobs, price_jobs(jobs, machines, config).jobs)


def fairshare_usage(
    jobs: pd.DataFrame, machines: pd.DataFrame | None, config: ProbeConfig
) -> tuple[pd.DataFrame, np.ndarray]:
    """Each job's fairshare usage under ``fairshare.metric``: (the jobs, priced when the metric
    prices them against ``machines``; one usage per job)."""
    metric = config.fairshare.metric
    if metric not in PRICED_METRICS:
        return jobs, job_usage(jobs, metric)
    if machines is None:
        raise SourceError(
            f"fairshare.metric {metric!r} prices jobs against the pool's machines, and no slot snapshot succeeded yet"
        )
    priced = price_jobs(jobs, machines, config).jobs
    return priced, job_usage(priced, metric)


@dataclass
class PenaltyReport:
    """The priced jobs (``penalties``), the machine classes, and usage per user under the
    penalty and each metric it replaces (``users``, see
    :func:`probes.accounting.penalty.compare_metrics`)."""

    penalties: Penalties
    machines: pd.DataFrame
    users: pd.DataFrame
    notes: list[str]


def penalty_report(inputs: UsageInputs, config: ProbeConfig) -> PenaltyReport:
    """Price every job of ``inputs`` against its machines (which must be given)."""
    if inputs.machines is None:
        raise ConfigError("no machines: give --machines (an Alea machines file) or --status-file")
    penalties = price_jobs(inputs.jobs, inputs.machines, config, requests=inputs.requests)
    notes = list(inputs.notes)
    if penalties.unchecked:
        pins = ", ".join(
            f"{p} ({n})" for p, n in sorted(penalties.unchecked.items(), key=lambda kv: (-kv[1], kv[0]))[:8]
        )
        notes.append(
            f"{sum(penalties.unchecked.values())} pinned properties name nothing any machine class lists, "
            f"so they could not be checked and were ignored: {pins}"
        )
    return PenaltyReport(
        penalties=penalties, machines=inputs.machines, users=compare_metrics(penalties.jobs, "user"), notes=notes
    )


@dataclass
class FairshareReport:
    """The fairshare state (``result``) and, when machines were given, the priced jobs."""

    result: FairshareResult
    penalties: Penalties | None
    notes: list[str]


def fairshare_report(inputs: UsageInputs, config: ProbeConfig, *, at: float | None = None) -> FairshareReport:
    """Fairshare at ``at`` (UNIX seconds; default: the end of the last job)."""
    policy = config.fairshare_policy()
    notes = list(inputs.notes)
    penalties = None
    jobs = inputs.jobs
    if policy.metric in PRICED_METRICS and inputs.machines is None:
        raise ConfigError(
            f"fairshare.metric {policy.metric!r} prices jobs against the machines: give --machines or --status-file"
        )
    if inputs.machines is not None:
        report = penalty_report(inputs, config)
        penalties, jobs = report.penalties, report.penalties.jobs
        notes = report.notes
    if at is None:
        ends = pd.to_numeric(jobs["end"]).dropna()
        if not len(ends):
            raise SourceError("no job has an end time: give --at to say when the fairshare is evaluated")
        at = float(ends.max())
    result = fairshare(jobs, job_usage(jobs, policy.metric), policy, at=at)
    if result.unplaced:
        notes.append(f"{result.unplaced} job(s) have no end time and count in no window")
    return FairshareReport(result=result, penalties=penalties, notes=notes)


# -- Maui's FS.<epoch> files --------------------------------------------------------------


def fs_files(result: FairshareResult) -> dict[str, str]:
    """The text of Maui's ``FS.<epoch>`` file of each window (Maui Admin Guide, 6.3.2.3): a header,
    a line ``<Type> <name> <usage>`` per credential with usage in the window, then ``TOTAL``.
    Names are written without whitespace (spaces become '_'), as Maui reads them."""
    out: dict[str, str] = {}
    creds = result.credentials
    interval = result.policy.interval_s
    for n, window in result.windows.iterrows():
        start = int(window["start"])
        began = time.strftime("%a %b %d %H:%M:%S", time.gmtime(start))
        lines = [f"# Fairshare Data File (Duration: {interval:.0f} Seconds) Starting: {began}", ""]
        used = creds[creds[f"usage_{n}"] != 0]
        for kind, label in FS_TYPES.items():
            for name, value in used.loc[used["type"] == kind, ["name", f"usage_{n}"]].itertuples(index=False):
                lines.append(f"{label} {_WHITESPACE.sub('_', str(name))} {value:.3f}")
        lines.append(f"TOTAL {window['total']:.2f}")
        out[f"FS.{start}"] = "\n".join(lines) + "\n"
    return out


def write_fs_files(result: FairshareResult, directory: str | os.PathLike[str]) -> list[Path]:
    """Write :func:`fs_files` into ``directory`` (created if needed), each file atomically."""
    target = Path(directory)
    written = []
    try:
        for name, text in fs_files(result).items():
            atomic_write(target / name, text)
            written.append(target / name)
    except OSError as exc:
        raise SourceError(f"{target}: cannot write the fairshare window files ({exc.strerror})") from exc
    return written
