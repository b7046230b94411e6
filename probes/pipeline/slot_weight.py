"""``fairacct slot-weight``: the site's history priced under a metric, the ``SLOT_WEIGHT`` that
approximates it, and the approximation's error on that history.

The math is :mod:`probes.accounting.slot_weight`'s. The history is the jobs of ``--history`` or
``--swf``, priced against the machine classes (``--machines`` or the status files) for the
penalty and the standard job; for ``billed``, the running jobs' bills of the status files'
snapshots (a bill needs what else ran on the node, which a job history does not keep).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Literal, get_args

import pandas as pd

from collector.errors import ConfigError
from probes.accounting.slot_weight import (
    SLOT_RESOURCES,
    SlotWeight,
    SlotWeightError,
    billed_samples,
    class_weights,
    fit_slot_weight,
    slot_samples,
    slot_weight_error,
    standard_job_weight,
)
from probes.config import ProbeConfig
from probes.errors import SourceError
from probes.pipeline.overhead import overhead_report
from probes.pipeline.reading import read_sources
from probes.pipeline.usage import penalty_report, read_usage_inputs

__all__ = ["SLOT_METRICS", "SlotWeightReport", "slot_weight_report"]

SlotMetric = Literal["penalty", "standard-job", "billed"]
SLOT_METRICS: tuple[str, ...] = get_args(SlotMetric)


@dataclass
class SlotWeightReport:
    """The weight fitted (``weight``), its error on the samples it was fitted to, and what
    they were: ``metric``, ``samples`` (:data:`~probes.accounting.slot_weight.SAMPLE_COLUMNS`),
    ``classes`` (machine class names; empty for ``billed``) and notes for the reader."""

    metric: str
    weight: SlotWeight
    error: SlotWeightError
    samples: pd.DataFrame
    classes: list[str]
    notes: list[str] = field(default_factory=list)


def slot_weight_report(
    config: ProbeConfig,
    metric: str,
    *,
    swf: str | os.PathLike[str] | None = None,
    machines_file: str | os.PathLike[str] | None = None,
    ram_unit: str | None = None,
    strict: bool | None = None,
) -> SlotWeightReport:
    """Fit the weight of ``metric`` to the configured (or given) history and measure it."""
    if metric not in SLOT_METRICS:
        raise ConfigError(f"--metric must be one of {', '.join(SLOT_METRICS)}, got {metric!r}")
    policy = config.penalty_policy()
    priced = tuple(r for r in policy.resources if r in SLOT_RESOURCES)
    if metric == "billed":
        if swf is not None or machines_file is not None:
            raise ConfigError(
                "--metric billed fits the bills of slot snapshots: give --status-file, not --swf or --machines"
            )
        if not config.sources.status_files:
            raise ConfigError("--metric billed needs slot snapshots: give --status-file (or set sources.status_files)")
        reading = read_sources(config, strict=strict, only=("status_files",))
        snapshot = None if reading.snapshot is None else overhead_report(reading.snapshot, config, reading.idle)
        if snapshot is None:
            raise SourceError("no slot snapshot could be read from the status files: no bills to fit")
        # several instants were billed instant by instant (the nodes then carry their
        # observed_at): a node's name repeats, so an allocation finds its node by both
        keys = ("observed_at",) if "observed_at" in snapshot.nodes.columns else ()
        samples = billed_samples(snapshot.nodes, snapshot.bills, resources=priced, keys=keys)
        if not len(samples):
            raise SourceError("the snapshots hold no billed allocation (no running job): no bills to fit")
        # the penalty's weight of each node shape: the bills' share of a node is priced that way
        nodes = snapshot.nodes
        shapes = pd.DataFrame({r: nodes[f"total_{r}"].to_numpy() for r in SLOT_RESOURCES}).assign(node_cost=1.0)
        weight = fit_slot_weight(samples, class_weights(shapes.drop_duplicates(), policy), resources=priced)
        instants = f" at {nodes['observed_at'].nunique()} instants" if keys else ""
        notes = [
            f"{len(samples)} billed allocations of {nodes['name'].nunique()} nodes{instants}, "
            "each weighted by the time its snapshot stands for"
        ]
        return SlotWeightReport(metric, weight, slot_weight_error(samples, weight), samples, [], notes)

    inputs = read_usage_inputs(config, swf=swf, machines_file=machines_file, ram_unit=ram_unit, strict=strict)
    report = penalty_report(inputs, config)
    samples = slot_samples(report.penalties, metric, policy=policy)
    if metric == "penalty":
        starts, resources = class_weights(report.machines, policy), priced
    else:
        starts, resources = [standard_job_weight(policy)], tuple(r for r in policy.standard_job if r in SLOT_RESOURCES)
    weight = fit_slot_weight(samples, starts, resources=resources)
    notes = list(report.notes)
    if metric == "penalty" and "gpus" in policy.resources:
        notes.append("the penalty prices GPUs, which SLOT_WEIGHT cannot see: GPU jobs carry that part of the error")
    return SlotWeightReport(
        metric, weight, slot_weight_error(samples, weight), samples, [str(n) for n in report.machines["name"]], notes
    )
