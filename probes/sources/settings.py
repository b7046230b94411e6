"""The few settings the readers take: which attributes name what, and nothing else.

A reader is handed a :class:`SlotReading` or :class:`JobReading`, never the whole
configuration, so it can be called (and tested) from anything that knows these few facts.
Each setting is a key of the configuration (:mod:`probes.config`), named on its line here:
its default is that key's default, written once there, and :meth:`SlotReading.of` and
:meth:`JobReading.of` read it from a configuration (``ProbeConfig.slot_reading()`` and
``job_reading()`` call them).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any, Protocol

from pydantic import BaseModel

from probes.config.credentials import CredentialSettings, SiteSettings
from probes.config.machines import DEFAULT_PARTITIONS, MachineSettings, Partition
from probes.config.pool import PoolSettings
from probes.config.sources import SourceSettings
from probes.sources.credentials import JOB_IDENTITY, SLOT_IDENTITY, Identity

__all__ = ["Configuration", "JobReading", "SlotReading"]


class Configuration(Protocol):
    """What the readers' settings are read from: :class:`probes.config.ProbeConfig` (which
    imports this module, so it is not named here)."""

    @property
    def pool(self) -> PoolSettings: ...
    @property
    def sources(self) -> SourceSettings: ...
    @property
    def credentials(self) -> CredentialSettings: ...
    @property
    def site(self) -> SiteSettings: ...
    @property
    def machines(self) -> MachineSettings: ...
    @property
    def partitions(self) -> Sequence[Partition]: ...


_DEFAULTS: dict[str, BaseModel] = {
    "pool": PoolSettings(),
    "sources": SourceSettings(),
    "credentials": CredentialSettings(),
    "site": SiteSettings(),
    "machines": MachineSettings(),
}


def _frozen(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def _setting(section: str, key: str) -> Any:
    """A reading setting that is the configuration's ``[section] key``: its default is that
    key's default (a list as a tuple), and ``of`` reads it there."""
    return field(default=_frozen(getattr(_DEFAULTS[section], key)), metadata={"key": (section, key)})


def _partitions(partitions: Iterable[Partition]) -> tuple[tuple[str, str], ...]:
    return tuple((p.name, p.match) for p in partitions)


def _read(reading: type[Any], config: Configuration) -> dict[str, Any]:
    """The values of ``reading``'s settings in ``config``, each from its key."""
    values = {}
    for f in fields(reading):
        if "key" in f.metadata:
            section, key = f.metadata["key"]
            values[f.name] = _frozen(getattr(getattr(config, section), key))
    return values


@dataclass(frozen=True)
class SlotReading:
    """What the startd reader needs: the pool's name and snapshot cadence (written on every row),
    the startds' update interval (when a slot ad is stale),
    the attributes naming site, resource, speed and cost, the slot attributes naming who holds
    a claim (:class:`~probes.sources.credentials.Identity`), the extra attributes kept as
    columns, and the partitions as ``(name, ClassAd match expression)`` in match order."""

    pool: str = _setting("pool", "name")
    interval_s: float = _setting("pool", "interval_s")
    update_interval_s: float = _setting("pool", "update_interval_s")
    site_attributes: tuple[str, ...] = _setting("site", "attributes")
    resource_attributes: tuple[str, ...] = _setting("site", "resource_attributes")
    site_default: str = _setting("site", "default")
    speed_attribute: str = _setting("machines", "speed_attribute")
    cost_attribute: str = _setting("machines", "cost_attribute")
    extra_attributes: tuple[str, ...] = _setting("sources", "slot_attributes")
    partitions: tuple[tuple[str, str], ...] = _partitions(DEFAULT_PARTITIONS)  # the configuration's [[partitions]]
    submitter: tuple[str, ...] = _setting("credentials", "slot_submitter")
    user: tuple[str, ...] = _setting("credentials", "slot_user")
    group: tuple[str, ...] = _setting("credentials", "slot_group")
    project: tuple[str, ...] = _setting("credentials", "slot_project")

    @classmethod
    def of(cls, config: Configuration, *, with_class_attributes: bool = False) -> SlotReading:
        """The settings of ``config`` (with ``with_class_attributes``, the machine class
        attributes are kept as columns too, for pricing)."""
        reading = cls(**_read(cls, config), partitions=_partitions(config.partitions))
        if with_class_attributes:
            extra = dict.fromkeys([*reading.extra_attributes, *config.machines.class_attributes])
            reading = replace(reading, extra_attributes=tuple(extra))
        return reading

    @property
    def identity(self) -> Identity:
        """Who holds a claim, from the slot's attributes."""
        return Identity(self.submitter, self.user, self.group, self.project, SLOT_IDENTITY.domain)


@dataclass(frozen=True)
class JobReading:
    """What the history and queue readers need: the job attributes naming the submitter and
    each credential (the first present wins), site and resource, the speed attribute of the
    hosts (read as ``MachineAttr<name>0``), the extra attributes kept as columns, and whether
    condor-ap's reading of each job is wanted (``gratia``: a Gratia sender's records carry it; a
    probe that does not report to GRACC does not pay for reading it)."""

    submitter: tuple[str, ...] = _setting("credentials", "submitter")
    user: tuple[str, ...] = _setting("credentials", "user")
    group: tuple[str, ...] = _setting("credentials", "group")
    project: tuple[str, ...] = _setting("credentials", "project")
    queue: tuple[str, ...] = _setting("credentials", "queue")
    qos: tuple[str, ...] = _setting("credentials", "qos")
    site_attributes: tuple[str, ...] = _setting("site", "attributes")
    resource_attributes: tuple[str, ...] = _setting("site", "resource_attributes")
    site_default: str = _setting("site", "default")
    speed_attribute: str = _setting("machines", "speed_attribute")
    extra_attributes: tuple[str, ...] = _setting("sources", "job_attributes")
    gratia: bool = False  # condor-ap's reading too (probes.sources.condor_ap): the probe reports to GRACC

    @classmethod
    def of(cls, config: Configuration) -> JobReading:
        """The settings of ``config``."""
        return cls(**_read(cls, config))

    @property
    def identity(self) -> Identity:
        """Who a job is, from its own attributes."""
        return Identity(self.submitter, self.user, self.group, self.project, JOB_IDENTITY.domain)
