"""The accounting's policies: ``[penalty]`` (Klusáček & Rudová 2015), ``[fairshare]`` (Maui),
``[priority]`` (the negotiator's sync), ``[fairness]`` (Sedighi et al. 2014) and ``[summaries]``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, model_validator

from probes.accounting.fairshare import CREDENTIALS, Target
from probes.accounting.priority import PriorityPolicy
from probes.config.fields import KIB, MIB, Section
from probes.units import parse_size

__all__ = ["FairnessSettings", "FairshareSettings", "PenaltySettings", "PrioritySettings", "SummarySettings"]


def _standard_job(value: Any) -> Any:
    """{cpus = 1, memory = "1 GiB"}: resource -> amount, sizes for memory and disk."""
    if not isinstance(value, Mapping):
        return value
    units = {"cpus": None, "memory": MIB, "disk": KIB, "gpus": None}
    out = {}
    for resource, amount in value.items():
        if resource not in units:
            raise ValueError(f"unknown resource {resource!r}; expected some of {', '.join(units)}")
        unit = units[resource]
        if unit is not None and not isinstance(amount, bool):
            try:
                amount = parse_size(amount, unit)
            except ValueError as exc:
                raise ValueError(f"{resource}: {exc}") from None
        if isinstance(amount, bool) or not isinstance(amount, (int, float)) or amount < 0:
            raise ValueError(f"{resource}: expected an amount >= 0, got {amount!r}")
        out[resource] = float(amount)
    if not any(v > 0 for v in out.values()):
        raise ValueError("the standard job needs at least one resource greater than 0")
    return out


def _fairshare_metric(value: Any) -> Any:
    if value == "billed":
        raise ValueError(
            "'billed' is not available yet: bills are not stored per job; "
            "use dedicated_ps, dedicated_pes, utilized_ps or mrpe"
        )
    if isinstance(value, str) and value not in ("dedicated_ps", "dedicated_pes", "utilized_ps", "mrpe"):
        raise ValueError(f"expected one of dedicated_ps, dedicated_pes, utilized_ps, mrpe, got {value!r}")
    return value


def _fairshare_targets(value: Any) -> Any:
    """{user = {alice = "20+"}}: each target checked with Maui's FSTARGET syntax."""
    if not isinstance(value, Mapping):
        return value
    out: dict[str, dict[str, str]] = {}
    for kind, named in value.items():
        if kind not in CREDENTIALS:
            raise ValueError(f"unknown credential type {kind!r}; expected some of {', '.join(CREDENTIALS)}")
        if not isinstance(named, Mapping):
            raise ValueError(f"{kind}: expected a table of name = target, got {named!r}")
        out[kind] = {}
        for name, target in named.items():
            try:
                out[kind][str(name)] = str(Target.parse(target))
            except ValueError as exc:
                raise ValueError(f"{kind}.{name}: {exc}") from None
    return out


class PenaltySettings(Section):
    resources: list[Literal["cpus", "memory", "disk", "gpus"]] = Field(
        ["cpus", "memory"],
        min_length=1,
        description="Resources in the max of the multi-resource penalty (Klusáček & Rudová 2015, formula 7).",
    )
    gpu_weight: float = Field(
        1.0, ge=0, description="Relaxation weight of the GPU share when gpus is among the resources."
    )
    standard_job: Annotated[dict[str, float], BeforeValidator(_standard_job)] = Field(
        default_factory=lambda: {"cpus": 1.0, "memory": 1024.0},
        description="The standard job of the standard-job metric (also Slurm's MAX_TRES), "
        'e.g. {cpus = 1, memory = "1 GiB"}.',
    )
    queue_costs: dict[str, Annotated[float, Field(gt=0)]] = Field(
        default_factory=dict, description="Queue (class) name -> queue cost; the penalty is multiplied by it."
    )
    default_queue_cost: float = Field(1.0, gt=0, description="Cost of a queue that queue_costs does not name.")


class FairshareSettings(Section):
    interval_s: float = Field(86400.0, gt=0, description="Seconds per fairshare window (Maui's FSINTERVAL).")
    depth: int = Field(
        8, ge=1, le=10_000, description="Windows that count (Maui's FSDEPTH); at most 10,000 (27 years of days)."
    )
    decay: float = Field(1.0, gt=0, le=1, description="Weight factor per window of age (Maui's FSDECAY); 1: no decay.")
    metric: Annotated[str, BeforeValidator(_fairshare_metric)] = Field(
        "dedicated_ps",
        description="Usage metric (Maui's FSPOLICY): dedicated_ps, dedicated_pes, utilized_ps or mrpe "
        "(billed: not yet).",
    )
    percent: bool = Field(
        False, description="Priority as 1 - usage/target instead of target - usage (FSPOLICY ending in '%')."
    )
    targets: Annotated[dict[str, dict[str, str]], BeforeValidator(_fairshare_targets)] = Field(
        default_factory=dict,
        description='Credential type -> name -> target: "20", "20+" (floor), "20-" (cap), "20%" '
        'or "5000^" (hard caps).',
    )


class PrioritySettings(Section):
    mode: Literal["factor", "priority"] = Field(
        "factor",
        description="Both bring each submitter's effective priority (real priority x factor, what orders the "
        "negotiator) to priority_at_target * usage / target: factor sets the priority factor (-setfactor), "
        "priority the real priority (-setprio).",
    )
    credential: Literal["user", "group", "account", "class", "qos", "submitter"] = Field(
        "user",
        description="The fairshare credential type the targets name; its submitters are the negotiator names its "
        "jobs ran under (submitter: the negotiator's names themselves).",
    )
    pattern: str = Field(".*@.*", description="Regular expression a submitter's whole name must match to be touched.")
    factor_min: float = Field(1.0, ge=1, description="Lowest priority factor set (HTCondor requires >= 1).")
    factor_max: float = Field(1e6, ge=1, description="Highest priority factor set.")
    priority_at_target: float = Field(
        1e5, gt=0, description="Effective priority a credential exactly at its fairshare target is brought to."
    )
    max_factor_ratio: float = Field(2.0, ge=1, description="A factor moves at most by this ratio per sync.")
    max_priority_ratio: float = Field(2.0, ge=1, description="A real priority moves at most by this ratio per sync.")
    sync: bool = Field(False, description="The probe service syncs the negotiator every every_s seconds.")
    every_s: float = Field(3600.0, gt=0, description="Seconds between two syncs of the probe service.")

    @model_validator(mode="before")
    @classmethod
    def _removed(cls, raw: Any) -> Any:
        # said once and clearly: these set accumulated usage, which the negotiator never orders by
        if isinstance(raw, dict):
            if raw.get("mode") == "usage":
                raise ValueError(
                    'mode "usage" was removed: the accumulated usage it set (condor_userprio -setaccum) does not '
                    'change whom the negotiator serves; use "priority" (the real priority, -setprio) or "factor"'
                )
            removed = (("factor_at_target", "priority_at_target"), ("max_usage_change_s", "max_priority_ratio"))
            for key, instead in removed:
                if key in raw:
                    raise ValueError(f"{key} was removed with mode usage; see {instead} (README, priority sync)")
        return raw

    @model_validator(mode="after")
    def _valid(self) -> PrioritySettings:
        self.policy()  # the mapping's own checks: factor range, pattern
        return self

    def policy(self) -> PriorityPolicy:
        """The priority sync's mapping of these settings."""
        return PriorityPolicy(
            self.mode, self.pattern, self.credential, self.factor_min, self.factor_max, self.priority_at_target,
            self.max_factor_ratio, self.max_priority_ratio,
        )  # fmt: skip


class FairnessSettings(Section):
    bucket_s: float = Field(
        3600.0,
        gt=0,
        description="Seconds per fairness bucket (Sedighi et al. 2014); buckets start at multiples of it (UNIX time).",
    )
    fraction: float = Field(
        0.0,
        ge=0,
        le=1,
        description="A credential with idle demand is starved at or below this fraction of an equal share; "
        "0: got nothing.",
    )


class SummarySettings(Section):
    recent_days: int = Field(
        7, ge=0, description="The service re-summarizes this many last days (today included) every every_s; 0: never."
    )
    every_s: float = Field(900.0, gt=0, description="Seconds between re-summaries of the last recent_days days.")
    nightly_days: int = Field(
        365,
        ge=0,
        description="Once a day the service re-summarizes this many last days, for very late records; 0: never.",
    )
