"""The few settings the readers take: which attributes name what, and nothing else.

A reader is handed a :class:`SlotReading` or :class:`JobReading`, never the whole
configuration, so it can be called (and tested) from anything that knows these few facts.
:meth:`probes.config.ProbeConfig.slot_reading` and ``job_reading`` build them from the TOML
file; the defaults here are the configuration's defaults (a test holds them equal).
"""

from __future__ import annotations

from dataclasses import dataclass

from probes.sources.credentials import JOB_IDENTITY, SLOT_IDENTITY, Identity

__all__ = ["JobReading", "SlotReading"]

SITE_ATTRIBUTES = ("MATCH_EXP_JOB_GLIDEIN_Site", "MachineAttrGLIDEIN_Site0", "GLIDEIN_Site")
RESOURCE_ATTRIBUTES = (
    "MATCH_EXP_JOB_GLIDEIN_ResourceName", "MachineAttrGLIDEIN_ResourceName0", "GLIDEIN_ResourceName",
)  # fmt: skip


@dataclass(frozen=True)
class SlotReading:
    """What the startd reader needs: the pool's name and snapshot cadence (written on every row),
    the attributes naming site, resource, speed and cost, the slot attributes naming who holds
    a claim (:class:`~probes.sources.credentials.Identity`), the extra attributes kept as
    columns, and the partitions as ``(name, ClassAd match expression)`` in match order."""

    pool: str = "default"
    interval_s: float = 300.0
    site_attributes: tuple[str, ...] = SITE_ATTRIBUTES
    resource_attributes: tuple[str, ...] = RESOURCE_ATTRIBUTES
    site_default: str = "unknown"
    speed_attribute: str = ""
    cost_attribute: str = ""
    extra_attributes: tuple[str, ...] = ()
    partitions: tuple[tuple[str, str], ...] = (("gpu", "TotalSlotGPUs > 0"), ("cpu", "true"))
    submitter: tuple[str, ...] = SLOT_IDENTITY.submitter
    user: tuple[str, ...] = SLOT_IDENTITY.user
    group: tuple[str, ...] = SLOT_IDENTITY.group
    project: tuple[str, ...] = SLOT_IDENTITY.project

    @property
    def identity(self) -> Identity:
        """Who holds a claim, from the slot's attributes."""
        return Identity(self.submitter, self.user, self.group, self.project, SLOT_IDENTITY.domain)


@dataclass(frozen=True)
class JobReading:
    """What the history and queue readers need: the job attributes naming the submitter and
    each credential (the first present wins), site and resource, the speed attribute of the
    hosts (read as ``MachineAttr<name>0``) and the extra attributes kept as columns."""

    submitter: tuple[str, ...] = JOB_IDENTITY.submitter
    user: tuple[str, ...] = JOB_IDENTITY.user
    group: tuple[str, ...] = JOB_IDENTITY.group
    project: tuple[str, ...] = JOB_IDENTITY.project
    queue: tuple[str, ...] = ("MachineAttrGLIDEIN_SiteWMS_Queue0",)
    qos: tuple[str, ...] = ()
    site_attributes: tuple[str, ...] = SITE_ATTRIBUTES
    resource_attributes: tuple[str, ...] = RESOURCE_ATTRIBUTES
    site_default: str = "unknown"
    speed_attribute: str = ""
    extra_attributes: tuple[str, ...] = ()

    @property
    def identity(self) -> Identity:
        """Who a job is, from its own attributes."""
        return Identity(self.submitter, self.user, self.group, self.project, JOB_IDENTITY.domain)
