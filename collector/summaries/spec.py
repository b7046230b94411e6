"""What a ``summary`` record sums, per source kind, as data: the store computes it, the export and
the report explain it from here.

==============  =====================================================  ==========================
source kind     grouped by (besides the day)                           sums
==============  =====================================================  ==========================
``job``         pool, site, resource name, user, group, project,       jobs, wall, core, GPU,
                submitter                                              memory and CPU hours,
                                                                       penalty and CPU-only usage
``allocation``  pool, site, resource name, partition, user, group,     held and billed
                project, submitter                                     resource-hours (note 1)
``slot``        pool, site, resource name, partition, pilot phase      true overhead CU-hours,
                                                                       with fitting idle demand
``gratia``      GRACC's summary terms: ``VOName``, ``ReportableVOName``,  records, jobs (``Njobs``),
                ``ProjectName``, ``SiteName``, ``ProbeName``,          wall, core (GRACC's
                ``ResourceType``, ``Processors``, ``GPUs``, ``Grid``,  ``CoreHours``), CPU,
                ``DN``, ``CommonName``, ``Host_description``,          user and system CPU
                ``Resource_ExitCode``                                  hours
==============  =====================================================  ==========================

Besides these sums, ``summarize`` writes each day's books balance (:data:`AUDIT`,
:mod:`collector.summaries.audit`): an ``audit`` summary per submitter and site (held, claimed
and used core-hours, their difference, the sampling bound and whether it is beyond) and a
``gap`` summary per pool (the gaps no snapshot stands for: how many, how long).

(1) Bills as Andrijauskas et al. 2023, "Defining a canonical unit for accounting purposes",
section 3.3, define them. The papers are cited in full in :mod:`probes.accounting`.

Job records carry ``penalty_usage`` and ``cpu_only_usage`` (PE-seconds: Klusáček & Rudová 2015,
"Multi-resource aware fairsharing for heterogeneous systems"), priced by
the probe against the machine classes of its latest snapshot; a job read before any snapshot
carries neither, and counts 0 in those sums.

Gratia records (what Gratia probes send, stored with GRACC's field names) are summarized as
GRACC's summarizer does (opensciencegrid/gracc-request, ``src/graccreq/summary_replayer.py``),
with their sums named in GRACC's style and counted in hours, so that they never add into the
job records' sums: a site may report the same jobs both ways. From that query:

* a day is a day of ``EndTime`` (its range filter): a record without one is not counted
  (GRACC's raw pipeline gives every record it keeps an ``EndTime``: collector/gratia/rawdoc.py);
* ``Count`` is the number of records (the bucket's ``doc_count``) and ``Njobs`` the sum of
  their ``Njobs``, 1 for a record without one (its ``missing``): an aggregated record, such as
  the dCache probe's, counts all its jobs in ``Njobs`` and once in ``Count``;
* ``WallHours`` sums each record's whole seconds: GRACC's raw index maps ``WallDuration`` as a
  ``long`` (gracc-docker's ``gracc-stash-raw/gracc-raw-template.json``), which drops a
  record's fraction of a second, and its summaries sum that; ``CpuDuration``,
  ``CpuDuration_user``, ``CpuDuration_system`` and ``CoreHours`` are ``double`` there, and keep
  theirs (``CoreHours`` is computed by the raw pipeline from the fractional ``WallDuration``);
* a record without a term is grouped under GRACC's value for it (:data:`GRATIA_MISSING`:
  ``"N/A"``, 1 processor, 0 GPUs, exit code 0), ``Processors`` and ``Resource_ExitCode`` are
  numbers (integer fields of GRACC's raw index), and a ``ProjectName`` that is missing,
  ``N/A`` or ``unknown`` is the ``VOName`` (its ``addProperties``). Groups that these make
  equal are one summary.
"""

from __future__ import annotations

from dataclasses import dataclass

from collector.sinks.base import Total

__all__ = [
    "AUDIT",
    "AUDIT_DIMENSIONS",
    "COLUMNS",
    "EXPORTED",
    "GRATIA_DIMENSIONS",
    "GRATIA_MISSING",
    "SOURCES",
    "Column",
    "Source",
]

HOUR = 1.0 / 3600.0
GIB_HOUR = 1.0 / (1024.0 * 3600.0)  # MiB-seconds -> GiB-hours


@dataclass(frozen=True)
class Source:
    """A kind of record that is summarized: what it is grouped by, and its sums; the fields a
    record must have to be counted (``requires``); and how the groups the store gives are made
    GRACC's (collector/summaries/run.py): the value of a missing dimension (``missing``), the
    dimensions that are integers (``integers``), and ``fallbacks``: (dimension, the dimension
    it takes instead when missing or one of these lowercased placeholders)."""

    kind: str
    dimensions: tuple[str, ...]
    totals: tuple[Total, ...]
    requires: tuple[str, ...] = ()
    missing: tuple[tuple[str, object], ...] = ()
    integers: tuple[str, ...] = ()
    fallbacks: tuple[tuple[str, str, frozenset[str]], ...] = ()


@dataclass(frozen=True)
class Column:
    """A column of summaries and exports: its unit and what it means, for people."""

    name: str
    unit: str
    help: str


GRATIA_DIMENSIONS = (
    "VOName", "ReportableVOName", "ProjectName", "SiteName", "ProbeName", "ResourceType", "Processors", "GPUs",
    "Grid", "DN", "CommonName", "Host_description", "Resource_ExitCode",
)  # fmt: skip
"""What a summary of Gratia records is a total over, besides its day: GRACC's summary terms and ``GPUs``."""

GRATIA_MISSING: tuple[tuple[str, object], ...] = (
    *((d, "N/A") for d in GRATIA_DIMENSIONS if d not in ("Processors", "GPUs", "Resource_ExitCode")),
    ("Processors", 1), ("GPUs", 0), ("Resource_ExitCode", 0),
)  # fmt: skip
"""GRACC's value of each summary term a record lacks (``unique_terms`` in gracc-request's summary_replayer.py)."""

SOURCES: dict[str, Source] = {
    s.kind: s
    for s in (
        Source(
            "job",
            ("pool", "site", "resource_name", "user", "group", "project", "submitter"),
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
            ("pool", "site", "resource_name", "partition", "user", "group", "project", "submitter"),
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
        Source(
            "gratia",
            GRATIA_DIMENSIONS,
            (
                Total("Count"),
                Total("Njobs", ("Njobs",), missing=1.0),
                Total("WallHours", ("WallDuration",), HOUR, whole=True),  # GRACC's raw WallDuration: a long
                Total("CoreHours", ("CoreHours",)),
                Total("CpuHours", ("CpuDuration",), HOUR),
                Total("CpuUserHours", ("CpuDuration_user",), HOUR),
                Total("CpuSystemHours", ("CpuDuration_system",), HOUR),
            ),
            requires=("EndTime",),
            missing=GRATIA_MISSING,
            integers=("Processors", "Resource_ExitCode"),
            fallbacks=(("ProjectName", "VOName", frozenset({"n/a", "unknown"})),),
        ),
    )
}

AUDIT = "audit"
"""The kind ``summarize`` takes for the daily books balance (not a source: it writes two kinds)."""

AUDIT_DIMENSIONS: dict[str, tuple[str, ...]] = {"audit": ("site", "submitter"), "gap": ("pool",)}
"""The summaries of the daily books and what each is per, besides its day."""

EXPORTED = ("job", "allocation", "slot")
"""The source kinds whose summaries the exports and the report read (fairacct's own records)."""

COLUMNS: dict[str, Column] = {
    c.name: c
    for c in (
        Column("period", "UTC", "The day (YYYY-MM-DD) or month (YYYY-MM) summed; the whole range when absent."),
        Column(
            "record_kind",
            "",
            "The kind of record summed: job (completed jobs), allocation (bills of running jobs), slot (snapshots), "
            "gratia (Gratia job usage records); audit (the day's books: held against used core-hours per "
            "submitter and site), gap (the day's time no snapshot stands for, per pool).",
        ),
        Column("pool", "", "HTCondor pool the probe watched."),
        Column("site", "", "Site of the job or slot (glideinWMS GLIDEIN_Site or the configured attribute)."),
        Column("resource_name", "", "Resource (compute element or cluster) within the site."),
        Column("partition", "", "Canonical-unit partition of the slot (e.g. cpu, gpu)."),
        Column("user", "", "User the job was submitted for (AcctGroupUser, else Owner, or the configured attribute)."),
        Column("group", "", "Accounting group of the job."),
        Column("project", "", "Project (allocation) the job is charged to."),
        Column("phase", "", "Pilot phase of the slot (glideinWMS: starting, running, retiring, ...)."),
        Column(
            "submitter",
            "",
            "Submitter the negotiator charged, as condor_userprio names it: group.user@uid_domain, or user@uid_domain.",
        ),
        Column("n_jobs", "jobs", "Completed jobs."),
        Column("walltime_hours", "hours", "Wall-clock hours of the completed jobs."),
        Column("core_hours", "core-hours", "Cores allocated x wall hours of the completed jobs."),
        Column("gpu_hours", "GPU-hours", "GPUs allocated x wall hours of the completed jobs."),
        Column("memory_gib_hours", "GiB-hours", "Memory allocated (GiB) x wall hours of the completed jobs."),
        Column("cpu_hours", "hours", "CPU time used (user + system) of the completed jobs."),
        Column(
            "penalty_hours",
            "PE-hours",
            "Multi-resource penalty usage (Klusáček & Rudová 2015): processor equivalents x normalized wall hours,"
            " where priced.",
        ),
        Column(
            "cpu_only_hours",
            "PE-hours",
            "The same jobs counted by cores only (the metric the penalty replaces), where priced.",
        ),
        Column("n_bills", "snapshots", "Running-job snapshots billed (allocation records)."),
        Column("held_core_hours", "core-hours", "Cores held by running jobs x hours between snapshots."),
        Column("held_memory_gib_hours", "GiB-hours", "Memory held by running jobs (GiB) x hours between snapshots."),
        Column("held_gpu_hours", "GPU-hours", "GPUs held by running jobs x hours between snapshots."),
        Column(
            "billed_core_hours",
            "core-hours",
            "Cores billed (held plus the node's shared idle cores, Andrijauskas et al. 2023) x hours.",
        ),
        Column(
            "billed_memory_gib_hours", "GiB-hours", "Memory billed (held plus the node's shared idle memory) x hours."
        ),
        Column("billed_gpu_hours", "GPU-hours", "GPUs billed x hours."),
        Column("n_slot_snapshots", "snapshots", "Slot snapshots summed."),
        Column("slot_core_hours", "core-hours", "Cores of the slots x hours between snapshots (capacity watched)."),
        Column(
            "overhead_cu_hours",
            "CU-hours",
            "True overhead: canonical units idle in every resource at once x hours (Andrijauskas et al. 2023).",
        ),
        Column(
            "overhead_cu_hours_fitting_idle",
            "CU-hours",
            "True overhead while some idle job would have fit in it (a scheduling loss).",
        ),
        Column(
            "billed_over_held",
            "ratio",
            "Billed core-hours / held core-hours: the rate paid over what was held (1 = no shared idle cores).",
        ),
        Column(
            "penalty_share",
            "%",
            "Share of the pool's penalty usage (in the same month or day when the rows are per month or day).",
        ),
        Column(
            "cpu_only_share",
            "%",
            "Share of the pool's CPU-only usage (in the same month or day when the rows are per month or day).",
        ),
        Column("penalty_over_cpu_only", "ratio", "Penalty usage / CPU-only usage (> 1: pays more under the penalty)."),
        Column(
            "audit_held_core_hours",
            "core-hours",
            "Audit: cores held by running jobs (allocation records with a job) x hours, clipped to the day.",
        ),
        Column("audit_jobs", "jobs", "Audit: completed jobs that ran in the day (the bound counts their cores)."),
        Column(
            "audit_claimed_core_hours",
            "core-hours",
            "Audit: cores held by claims between two jobs (allocation records without a job) x hours; not compared.",
        ),
        Column(
            "audit_used_core_hours",
            "core-hours",
            "Audit: cores x wall hours of the completed jobs, clipped to the day and to the time snapshots observed.",
        ),
        Column(
            "audit_difference_core_hours",
            "core-hours",
            "Audit: held core-hours minus used core-hours.",
        ),
        Column(
            "audit_bound_core_hours",
            "core-hours",
            "Audit: the sampling bound, cores x (longest snapshot interval + lag) summed over the jobs.",
        ),
        Column("audit_beyond", "", "Audit: the difference is beyond the sampling bound (a fault of the books)."),
        Column("audit_interval_s", "seconds", "Audit: the longest snapshot interval of the day."),
        Column("audit_lag_s", "seconds", "Audit: what the bound allows the pool at each end of a job."),
        Column("n_gaps", "gaps", "Gaps: stretches of the day no snapshot of the pool stands for (probe down)."),
        Column("gap_seconds", "seconds", "Gaps: their total length."),
        Column("VOName", "", "Gratia: the virtual organization of the job (its VOMS FQAN when the probe sent one)."),
        Column("ReportableVOName", "", "Gratia: the VO name as reported (the probe's mapping of VOName)."),
        Column("ProjectName", "", "Gratia: the project the job is charged to (its VOName when none, N/A or unknown)."),
        Column("SiteName", "", "Gratia: the site the probe reports for."),
        Column("ProbeName", "", "Gratia: the probe that sent the record (type:host)."),
        Column("ResourceType", "", "Gratia: Batch, Payload, BatchPilot, AWSVM, ..."),
        Column("Processors", "cores", "Gratia: processors of the job (1 when the record has none, as GRACC)."),
        Column("GPUs", "GPUs", "Gratia: GPUs of the job, where the probe sends them (0 otherwise, as GRACC)."),
        Column("Grid", "", "Gratia: the grid (OSG, Local, ...)."),
        Column("DN", "", "Gratia: the distinguished name of the job's credential."),
        Column("CommonName", "", "Gratia: the common name of the job's credential."),
        Column("Host_description", "", "Gratia: the description of the host the job ran on."),
        Column("Resource_ExitCode", "", "Gratia: the job's exit code (0 when the record has none, as GRACC)."),
        Column("Count", "records", "Gratia records summed (GRACC's Count: one per record, whatever its Njobs)."),
        Column(
            "Njobs",
            "jobs",
            "Gratia: jobs summed, each record's Njobs (an aggregated record counts several), 1 where it has none.",
        ),
        Column("WallHours", "hours", "Gratia: WallDuration summed, in hours."),
        Column("CoreHours", "core-hours", "Gratia: WallDuration x Processors / 3600 (GRACC's CoreHours) summed."),
        Column("CpuHours", "hours", "Gratia: CpuDuration (user + system) summed, in hours."),
        Column("CpuUserHours", "hours", "Gratia: CpuDuration_user summed, in hours."),
        Column("CpuSystemHours", "hours", "Gratia: CpuDuration_system summed, in hours."),
    )
}
