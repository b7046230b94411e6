"""What a ``summary`` record sums, per source kind, as data: the store computes it, the export and
the report explain it from here.

==============  =====================================================  ==========================
source kind     grouped by (besides the day)                           sums
==============  =====================================================  ==========================
``job``         pool, site, resource name, user, group, project        jobs, wall, core, GPU,
                                                                       memory and CPU hours,
                                                                       penalty and CPU-only usage
``allocation``  pool, site, partition, user, group, project            held and billed
                                                                       resource-hours (seed 003)
``slot``        pool, site, resource name, partition, pilot phase      true overhead CU-hours,
                                                                       with fitting idle demand
==============  =====================================================  ==========================

Job records carry ``penalty_usage`` and ``cpu_only_usage`` (PE-seconds, seed 000) where the
probe priced them; elsewhere those sums are 0.
"""

from __future__ import annotations

from dataclasses import dataclass

from collector.sinks.base import Total

__all__ = ["COLUMNS", "SOURCES", "Column", "Source"]

HOUR = 1.0 / 3600.0
GIB_HOUR = 1.0 / (1024.0 * 3600.0)  # MiB-seconds -> GiB-hours


@dataclass(frozen=True)
class Source:
    """A kind of record that is summarized: what it is grouped by, and its sums."""

    kind: str
    dimensions: tuple[str, ...]
    totals: tuple[Total, ...]


@dataclass(frozen=True)
class Column:
    """A column of summaries and exports: its unit and what it means, for people."""

    name: str
    unit: str
    help: str


SOURCES: dict[str, Source] = {
    s.kind: s
    for s in (
        Source(
            "job",
            ("pool", "site", "resource_name", "user", "group", "project"),
            (
                Total("n_jobs"),
                Total("walltime_hours", ("walltime_s",), HOUR),
                Total("core_hours", ("cpus", "walltime_s"), HOUR),
                Total("gpu_hours", ("gpus", "walltime_s"), HOUR),
                Total("memory_gib_hours", ("memory", "walltime_s"), GIB_HOUR),
                Total("cpu_hours", ("cpu_time_s",), HOUR),
                Total("penalty_hours", ("penalty_usage",), HOUR),
                Total("cpu_only_hours", ("cpu_only_usage",), HOUR),
            ),
        ),
        Source(
            "allocation",
            ("pool", "site", "partition", "user", "group", "project"),
            (
                Total("n_bills"),
                Total("held_core_hours", ("cpus", "interval_s"), HOUR),
                Total("held_memory_gib_hours", ("memory", "interval_s"), GIB_HOUR),
                Total("held_gpu_hours", ("gpus", "interval_s"), HOUR),
                Total("billed_core_hours", ("billed_cpus_hours",)),
                Total("billed_memory_gib_hours", ("billed_memory_hours",), 1.0 / 1024.0),
                Total("billed_gpu_hours", ("billed_gpus_hours",)),
            ),
        ),
        Source(
            "slot",
            ("pool", "site", "resource_name", "partition", "phase"),
            (
                Total("n_slot_snapshots"),
                Total("slot_core_hours", ("total_cpus", "interval_s"), HOUR),
                Total("overhead_cu_hours", ("overhead_cu_hours",)),
                Total("overhead_cu_hours_fitting_idle", ("overhead_cu_hours",), where="fits_idle"),
            ),
        ),
    )
}

COLUMNS: dict[str, Column] = {
    c.name: c
    for c in (
        Column("period", "UTC", "The day (YYYY-MM-DD) or month (YYYY-MM) summed; the whole range when absent."),
        Column("record_kind", "", "The kind of record summed: job (completed jobs), allocation (bills of running jobs), slot (snapshots)."),
        Column("pool", "", "HTCondor pool the probe watched."),
        Column("site", "", "Site of the job or slot (glideinWMS GLIDEIN_Site or the configured attribute)."),
        Column("resource_name", "", "Resource (compute element or cluster) within the site."),
        Column("partition", "", "Canonical-unit partition of the slot (e.g. cpu, gpu)."),
        Column("user", "", "User the job ran as (Owner or the configured attribute)."),
        Column("group", "", "Accounting group of the job."),
        Column("project", "", "Project (allocation) the job is charged to."),
        Column("phase", "", "Pilot phase of the slot (glideinWMS: starting, running, retiring, ...)."),
        Column("n_jobs", "jobs", "Completed jobs."),
        Column("walltime_hours", "hours", "Wall-clock hours of the completed jobs."),
        Column("core_hours", "core-hours", "Cores allocated x wall hours of the completed jobs."),
        Column("gpu_hours", "GPU-hours", "GPUs allocated x wall hours of the completed jobs."),
        Column("memory_gib_hours", "GiB-hours", "Memory allocated (GiB) x wall hours of the completed jobs."),
        Column("cpu_hours", "hours", "CPU time used (user + system) of the completed jobs."),
        Column("penalty_hours", "PE-hours", "Multi-resource penalty usage (seed 000): processor equivalents x normalized wall hours, where priced."),
        Column("cpu_only_hours", "PE-hours", "The same jobs counted by cores only (the metric the penalty replaces), where priced."),
        Column("n_bills", "snapshots", "Running-job snapshots billed (allocation records)."),
        Column("held_core_hours", "core-hours", "Cores held by running jobs x hours between snapshots."),
        Column("held_memory_gib_hours", "GiB-hours", "Memory held by running jobs (GiB) x hours between snapshots."),
        Column("held_gpu_hours", "GPU-hours", "GPUs held by running jobs x hours between snapshots."),
        Column("billed_core_hours", "core-hours", "Cores billed (held plus the node's shared idle cores, seed 003) x hours."),
        Column("billed_memory_gib_hours", "GiB-hours", "Memory billed (held plus the node's shared idle memory) x hours."),
        Column("billed_gpu_hours", "GPU-hours", "GPUs billed x hours."),
        Column("n_slot_snapshots", "snapshots", "Slot snapshots summed."),
        Column("slot_core_hours", "core-hours", "Cores of the slots x hours between snapshots (capacity watched)."),
        Column("overhead_cu_hours", "CU-hours", "True overhead: canonical units idle in every resource at once x hours (seed 003)."),
        Column("overhead_cu_hours_fitting_idle", "CU-hours", "True overhead while some idle job would have fit in it (a scheduling loss)."),
        Column("billed_over_held", "ratio", "Billed core-hours / held core-hours: the rate paid over what was held (1 = no shared idle cores)."),
        Column("penalty_share", "%", "Share of the pool's penalty usage (in the same month or day when the rows are per month or day)."),
        Column("cpu_only_share", "%", "Share of the pool's CPU-only usage (in the same month or day when the rows are per month or day)."),
        Column("penalty_over_cpu_only", "ratio", "Penalty usage / CPU-only usage (> 1: pays more under the penalty)."),
    )
}
