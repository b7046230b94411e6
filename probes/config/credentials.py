"""``[credentials]`` and ``[site]``: who a job, or a slot's claim, is billed to, and where it ran.

The credentials' defaults are the identities :mod:`probes.sources.credentials` describes (the
negotiator's own rules); the readers' settings (:mod:`probes.sources.settings`) take theirs here.
"""

from __future__ import annotations

from pydantic import Field

from probes.config.fields import Section
from probes.sources.credentials import JOB_IDENTITY, SLOT_IDENTITY

__all__ = ["CredentialSettings", "SiteSettings"]


class CredentialSettings(Section):
    submitter: list[str] = Field(
        list(JOB_IDENTITY.submitter),
        description="Job attributes naming the submitter as the negotiator does (condor_userprio); the first "
        "present wins, and a name without @ gets the uid domain of the job's User.",
    )
    user: list[str] = Field(
        list(JOB_IDENTITY.user),
        description="Job attributes naming the user; the first present wins. From AccountingGroup the last "
        "component, from any other '@uid_domain' is dropped.",
    )
    group: list[str] = Field(
        list(JOB_IDENTITY.group),
        description="Job attributes naming the accounting group; from AccountingGroup ('group.user') "
        "the last component, the user, is dropped.",
    )
    project: list[str] = Field(list(JOB_IDENTITY.project), description="Job attributes naming the project.")
    queue: list[str] = Field(
        ["MachineAttrGLIDEIN_SiteWMS_Queue0"], description="Job attributes naming the queue or class."
    )
    qos: list[str] = Field(default_factory=list, description="Job attributes naming the QOS.")
    slot_submitter: list[str] = Field(
        list(SLOT_IDENTITY.submitter),
        description="Slot attributes naming the submitter of a claim's job (AccountingGroup carries it whole "
        "on HTCondor 25, where RemoteUser is the owner); the p-slot's Child<name> lists too.",
    )
    slot_user: list[str] = Field(
        list(SLOT_IDENTITY.user),
        description="Slot attributes naming the user of a claim's job, read as the job's user attributes are; "
        "AcctGroupUser is there when STARTD_JOB_ATTRS copies it.",
    )
    slot_group: list[str] = Field(
        list(SLOT_IDENTITY.group), description="Slot attributes naming the accounting group of a claim's job."
    )
    slot_project: list[str] = Field(
        list(SLOT_IDENTITY.project),
        description="Slot attributes naming the project of a claim's job (there when STARTD_JOB_ATTRS copies it).",
    )
    user_vo_map: str = Field(
        "",
        description="A Gratia user-vo-map file ('account vo' lines, #voi/#VOc headers): jobs and bills without "
        "a project get their account's VO. Empty: none.",
    )
    vo_from_unix_group: bool = Field(
        True,
        description="condor-ap's MapUnknownToGroup, for the VO of the Gratia record: a job without a VO whose "
        "owner the user-vo-map does not name gets the owner's Unix group on this host (the owner's name where the "
        "host has no such account).",
    )


class SiteSettings(Section):
    attributes: list[str] = Field(
        ["MATCH_EXP_JOB_GLIDEIN_Site", "MachineAttrGLIDEIN_Site0", "GLIDEIN_Site"],
        description="Attributes naming the site (job ads, then slot ads); the first present wins.",
    )
    resource_attributes: list[str] = Field(
        ["MATCH_EXP_JOB_GLIDEIN_ResourceName", "MachineAttrGLIDEIN_ResourceName0", "GLIDEIN_ResourceName"],
        description="Attributes naming the resource (compute element); the first present wins.",
    )
    default: str = Field("unknown", description="Site of slots and jobs that no attribute places.")
