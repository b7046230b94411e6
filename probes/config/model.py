"""The whole file, :class:`ProbeConfig`: its sections, and each part's few settings handed out
(the readers', the penalty's and fairshare's policies, the collector service's)."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, Field, field_validator

from collector.settings import CollectorSettings
from collector.sinks.registry import Opening
from probes.accounting.fairshare import FairsharePolicy, Target
from probes.accounting.penalty import PenaltyPolicy
from probes.accounting.priority import PriorityPolicy
from probes.config.apel import ApelSettings
from probes.config.awards import AwardSettings
from probes.config.collector import collector_store, store_for_collector
from probes.config.credentials import CredentialSettings, SiteSettings
from probes.config.fields import Section
from probes.config.log import LogSettings
from probes.config.machines import DEFAULT_PARTITIONS, MachineSettings, Partition
from probes.config.policies import (
    FairnessSettings,
    FairshareSettings,
    PenaltySettings,
    PrioritySettings,
    SummarySettings,
)
from probes.config.pool import PoolSettings
from probes.config.probe import ProbeSettings
from probes.config.sources import SourceSettings
from probes.config.store import StoreSettings, UpstreamSettings

if TYPE_CHECKING:
    from probes.sources.settings import JobReading, SlotReading

__all__ = ["ProbeConfig", "replaced"]

_Model = TypeVar("_Model", bound=BaseModel)


def replaced(model: _Model, **changes: Any) -> _Model:
    """``model`` with ``changes``, remembering which keys the file gave (``model_copy`` would
    count the changed ones as given: a path made absolute, an option of the command line)."""
    return type(model).model_construct(model.model_fields_set, **{**dict(model), **changes})


class ProbeConfig(Section):
    """The whole configuration file."""

    pool: PoolSettings = Field(default_factory=PoolSettings, description="The pool.")
    sources: SourceSettings = Field(default_factory=SourceSettings, description="Where ads come from.")
    credentials: CredentialSettings = Field(
        default_factory=CredentialSettings, description="Who a job, or a slot's claim, is billed to."
    )
    site: SiteSettings = Field(default_factory=SiteSettings, description="Where a job or slot is.")
    machines: MachineSettings = Field(default_factory=MachineSettings, description="Machine speed and cost.")
    partitions: tuple[Partition, ...] = Field(
        DEFAULT_PARTITIONS, description="Canonical unit definitions, in match order.", strict=False
    )
    store: StoreSettings = Field(default_factory=StoreSettings, description="Where records go.")
    upstream: UpstreamSettings = Field(
        default_factory=UpstreamSettings, description="A Gratia collector job records go to besides the store."
    )
    probe: ProbeSettings = Field(default_factory=ProbeSettings, description="The probe's own state and service.")
    log: LogSettings = Field(default_factory=LogSettings, description="What the services log, and how.")
    penalty: PenaltySettings = Field(default_factory=PenaltySettings, description="The multi-resource penalty.")
    fairshare: FairshareSettings = Field(default_factory=FairshareSettings, description="Maui-style fairshare.")
    priority: PrioritySettings = Field(default_factory=PrioritySettings, description="HTCondor priority sync.")
    summaries: SummarySettings = Field(
        default_factory=SummarySettings, description="Daily summaries computed in the store."
    )
    fairness: FairnessSettings = Field(
        default_factory=FairnessSettings, description="The fairness of the share, per bucket (Sedighi et al. 2014)."
    )
    collector: CollectorSettings = Field(
        default_factory=CollectorSettings, description="The collector service (fairacct collector serve)."
    )
    apel: ApelSettings = Field(
        default_factory=ApelSettings, description="APEL messages for WLCG accounting (fairacct apel)."
    )
    awards: AwardSettings = Field(
        default_factory=AwardSettings, description="The allocation committee's awards (fairacct report and export)."
    )

    @field_validator("partitions")
    @classmethod
    def _unique_names(cls, value: tuple[Partition, ...]) -> tuple[Partition, ...]:
        names = [p.name for p in value]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"partition names must be unique, got {', '.join(map(repr, dupes))} more than once")
        return value

    def slot_reading(self, *, with_class_attributes: bool = False) -> SlotReading:
        """What the startd reader needs of this configuration (with ``with_class_attributes``,
        the machine class attributes are kept as columns too, for pricing)."""
        from probes.sources.settings import SlotReading  # it imports the sections: not at import time

        return SlotReading.of(self, with_class_attributes=with_class_attributes)

    def job_reading(self) -> JobReading:
        """What the history reader needs of this configuration."""
        from probes.sources.settings import JobReading  # it imports the sections: not at import time

        gratia = self.store.kind == "gratia" or bool(self.upstream.url)
        return dataclasses.replace(JobReading.of(self), gratia=gratia)

    def penalty_policy(self) -> PenaltyPolicy:
        """The multi-resource penalty's policy (Klusáček & Rudová 2015) of ``[penalty]``."""
        p = self.penalty
        return PenaltyPolicy(
            resources=tuple(p.resources),
            gpu_weight=p.gpu_weight,
            standard_job=p.standard_job,
            queue_costs=p.queue_costs,
            default_queue_cost=p.default_queue_cost,
        )

    def fairshare_policy(self) -> FairsharePolicy:
        """Maui's fairshare policy (Maui Admin Guide, 6.3) of ``[fairshare]``."""
        f = self.fairshare
        return FairsharePolicy(
            interval_s=f.interval_s,
            depth=f.depth,
            decay=f.decay,
            metric=f.metric,
            percent=f.percent,
            targets={kind: {name: Target.parse(t) for name, t in named.items()} for kind, named in f.targets.items()},
        )

    def priority_policy(self) -> PriorityPolicy:
        """The priority sync's mapping (``[priority]``)."""
        return self.priority.policy()

    @property
    def collector_store_from_probe(self) -> bool:
        """Whether the collector's store is ``[store]``: a file written before ``[collector.store]``
        existed gives it there (see :mod:`probes.config.collector`)."""
        return "store" in self.model_fields_set and "store" not in self.collector.model_fields_set

    def opening(self, *, create: bool = True, timeout_s: float | None = None) -> Opening:
        """How the probe opens ``[store]`` and ``[upstream]`` (:func:`collector.sinks.open_store`): a
        relative ``sqlite:///`` path under ``probe.state_dir``; without ``create`` an embedded store
        that does not exist is an error; ``timeout_s``: seconds a request may take, when not the
        sink's default."""
        return Opening(self.probe.state_dir, create=create, timeout_s=timeout_s)

    def collector_settings(self, store_url: str | None = None) -> CollectorSettings:
        """What the collector service runs with: ``[collector]`` and its store, ``[collector.store]``
        (or ``[store]``, see :attr:`collector_store_from_probe`), whose URL ``store_url`` replaces
        (``collector serve --store``). ConfigError when the store is another collector."""
        store = store_for_collector(self.store) if self.collector_store_from_probe else self.collector.store
        if store_url is not None:
            store = collector_store({**store.model_dump(), "url": store_url}, "collector.store", " (given by --store)")
        return self.collector.model_copy(update={"store": store})

    def resolved(self, base: Path) -> ProbeConfig:
        """This configuration with relative paths taken relative to ``base``."""

        def fix(p: Path) -> Path:
            return p if p.is_absolute() else Path(os.path.normpath(base / p))

        s = self.sources
        c = self.collector
        tls = {k: str(fix(Path(v))) for k in ("tls_cert_file", "tls_key_file") if (v := getattr(c, k))}
        store, credentials = self.store, self.credentials
        return replaced(
            self,
            sources=replaced(
                s,
                status_files=[fix(p) for p in s.status_files],
                idle_files=[fix(p) for p in s.idle_files],
                history=[fix(p) for p in s.history],
            ),
            probe=replaced(self.probe, state_dir=fix(self.probe.state_dir)),
            store=replaced(store, token_file=str(fix(Path(t)))) if (t := store.token_file) else store,
            collector=replaced(c, token_dir=fix(c.token_dir), state_dir=fix(c.state_dir), **tls),
            credentials=(
                replaced(credentials, user_vo_map=str(fix(Path(m)))) if (m := credentials.user_vo_map) else credentials
            ),
            awards=replaced(self.awards, file=str(fix(Path(a)))) if (a := self.awards.file) else self.awards,
        )
