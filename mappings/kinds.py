"""Every record kind, declared once (:mod:`mappings.fields`): the registry the collector, the
index templates and the records' guide read."""

from __future__ import annotations

from mappings.fields import Kind
from mappings.job_kinds import GRATIA, JOB
from mappings.policy_kinds import FAIRNESS, FAIRSHARE, PRIORITY
from mappings.snapshot_kinds import ALLOCATION, GAP, SLOT
from mappings.summary_kind import SUMMARY

__all__ = ["DECLARED"]

DECLARED: dict[str, Kind] = {
    k.name: k for k in (SLOT, ALLOCATION, JOB, FAIRSHARE, FAIRNESS, GAP, PRIORITY, SUMMARY, GRATIA)
}
"""The kinds by name, in the order of ``collector.records.KINDS``."""
