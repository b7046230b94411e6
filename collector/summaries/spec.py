"""What a ``summary`` record sums, per source kind, as data: the store computes it, the export and
the report explain it from here. The data are the kinds' declarations (``mappings/``): a source
kind is grouped by its ``DIMENSION`` fields, and summed by the ``summary`` fields whose ``sums``
name it, whose units and meanings are the columns' (:data:`COLUMNS`).

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

from dataclasses import dataclass, replace

from collector.sinks.base import Total
from mappings.fields import ENVELOPE
from mappings.kinds import DECLARED

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


GRATIA_DIMENSIONS = DECLARED["gratia"].group_by
"""What a summary of Gratia records is a total over, besides its day: GRACC's summary terms and ``GPUs``."""

GRATIA_MISSING: tuple[tuple[str, object], ...] = (
    *((d, "N/A") for d in GRATIA_DIMENSIONS if d not in ("Processors", "GPUs", "Resource_ExitCode")),
    ("Processors", 1), ("GPUs", 0), ("Resource_ExitCode", 0),
)  # fmt: skip
"""GRACC's value of each summary term a record lacks (``unique_terms`` in gracc-request's summary_replayer.py)."""


def _source(kind: str) -> Source:
    """The summaries of ``kind`` as the declarations say them: grouped by its ``DIMENSION``
    fields, summed by the ``summary`` fields whose ``sums`` name it."""
    sums = [(f.name, f.sums) for f in DECLARED["summary"].fields if f.sums is not None and f.sums.kind == kind]
    totals = tuple(Total(name, s.fields, s.scale, s.where, s.missing, whole=s.whole) for name, s in sums)
    source = Source(kind, DECLARED[kind].group_by, totals)
    if kind == "gratia":  # GRACC's ways with its groups (see the module docstring)
        source = replace(
            source,
            requires=("EndTime",),
            missing=GRATIA_MISSING,
            integers=("Processors", "Resource_ExitCode"),
            fallbacks=(("ProjectName", "VOName", frozenset({"n/a", "unknown"})),),
        )
    return source


SOURCES: dict[str, Source] = {
    kind: _source(kind) for kind in dict.fromkeys(f.sums.kind for f in DECLARED["summary"].fields if f.sums)
}
"""The summarized kinds, as their declarations (``mappings/``) say: each is grouped by its
``DIMENSION`` fields, and summed by the ``summary`` fields whose ``sums`` name it."""

AUDIT = "audit"
"""The kind ``summarize`` takes for the daily books balance (not a source: it writes two kinds)."""

AUDIT_DIMENSIONS: dict[str, tuple[str, ...]] = {"audit": ("site", "submitter"), "gap": ("pool",)}
"""The summaries of the daily books and what each is per, besides its day."""

EXPORTED = ("job", "allocation", "slot")
"""The source kinds whose summaries the exports and the report read (fairacct's own records)."""

_EXPORTED_ONLY = (
    Column("period", "UTC", "The day (YYYY-MM-DD) or month (YYYY-MM) summed; the whole range when absent."),
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
)

COLUMNS: dict[str, Column] = {
    c.name: c
    for c in (
        *_EXPORTED_ONLY,
        *(Column(f.name, f.unit, f.doc) for f in DECLARED["summary"].fields if f not in ENVELOPE and f.name != "day"),
    )
}
"""The columns of summaries and exports, for people: the ``summary`` fields' units and meanings
(their declaration, ``mappings/``) and the columns the exports compute from them."""
