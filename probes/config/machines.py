"""``[machines]`` and ``[[partitions]]``: a machine's speed and cost, and the canonical units."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from probes.config.fields import DiskSize, Expression, MemorySize, OptionalExpression, Section

__all__ = ["DEFAULT_PARTITIONS", "MachineSettings", "Partition"]


class MachineSettings(Section):
    speed_attribute: str = Field(
        "",
        description="Slot attribute giving a machine's speed (e.g. HEPSPEC or Mips); jobs read it as "
        "MachineAttr<name>0, drift (efficiency --history) from each node's slot. Empty: speed 1.0.",
    )
    cost_attribute: str = Field("", description="Slot attribute giving a machine's node cost. Empty: cost 1.0.")
    speed_expression: OptionalExpression = Field(
        "",
        description="ClassAd expression giving a machine's speed, evaluated in each slot ad or machines-file "
        'class (e.g. "HEPSPEC / TotalSlotCpus"); it takes precedence over speed_attribute. Empty: none.',
    )
    cost_expression: OptionalExpression = Field(
        "", description="ClassAd expression giving a machine's node cost; precedence over cost_attribute. Empty: none."
    )
    class_attributes: list[str] = Field(
        default_factory=list,
        description="Slot attributes that split machine classes (glideins of one shape collapse into a class "
        "unless these differ); node requests can pin them as NAME=value.",
    )
    ram_unit: Literal["auto", "KB", "MB", "GB"] = Field(
        "auto", description="Unit of RAM in Alea machines files; auto tells KB from GB by the RAM per core."
    )


class Partition(Section):
    name: str = Field(description="Name of the partition, e.g. cpu or gpu.", min_length=1, pattern=r"\S")
    match: Expression = Field(
        "true", description="ClassAd expression over the slot ad; the first partition that matches wins."
    )
    cpus: float | None = Field(None, ge=0, description="Cores in one canonical unit.")
    memory: MemorySize = Field(None, description='Memory in one canonical unit, e.g. "2 GiB" (a number is MiB).')
    disk: DiskSize = Field(None, description='Disk in one canonical unit, e.g. "10 GB" (a number is KiB).')
    gpus: float | None = Field(None, ge=0, description="GPUs in one canonical unit.")

    @model_validator(mode="after")
    def _has_a_threshold(self) -> Partition:
        if not any((getattr(self, r) or 0) > 0 for r in ("cpus", "memory", "disk", "gpus")):
            raise ValueError("a partition needs at least one of cpus, memory, disk, gpus greater than 0")
        return self

    def thresholds(self) -> dict[str, float]:
        """The canonical unit: resource -> amount in HTCondor's units (cores, MiB, KiB, devices)."""
        return {r: float(v) for r in ("cpus", "memory", "disk", "gpus") if (v := getattr(self, r)) and v > 0}


DEFAULT_PARTITIONS = (
    Partition(name="gpu", match="TotalSlotGPUs > 0", gpus=1),
    Partition(name="cpu", match="true", cpus=1, memory=2048),
)
