"""The probe's configuration: one TOML file, described once here and validated on load.

Every setting is a pydantic field with its type, default, constraint and help text (the
collector service's, the ``[collector]`` section, in :mod:`collector.settings`); the TOML
validation, the command-line overrides (``OVERRIDES``) and the documented example
(``fairacct config example``, checked against this module by the tests) all follow from it.
Errors name the file, the key's path and what was expected::

    demo.toml: partitions[0].memory: expected a size like "2 GiB", "512 MiB" or "4 GB", got '2 gigs'

Relative paths in the file are taken relative to the file's own directory, so a configuration
means the same thing from wherever it is used. Help texts cite papers by the short forms of
:mod:`probes.accounting`'s References.
"""

from __future__ import annotations

import difflib
import math
import os
import tomllib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import classad2
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    Strict,
    ValidationError,
    field_validator,
    model_validator,
)

from collector.errors import ConfigError
from collector.settings import CollectorSettings
from collector.sinks import check_url
from probes.accounting.fairshare import CREDENTIALS, FairsharePolicy, Target
from probes.accounting.penalty import PenaltyPolicy
from probes.accounting.priority import PriorityPolicy
from probes.sources.credentials import JOB_IDENTITY, SLOT_IDENTITY
from probes.sources.settings import RESOURCE_ATTRIBUTES, SITE_ATTRIBUTES, JobReading, SlotReading
from probes.units import parse_size

__all__ = [
    "DEFAULT_PARTITIONS",
    "OVERRIDES",
    "ApelSettings",
    "CollectorSection",
    "CredentialSettings",
    "FairnessSettings",
    "FairshareSettings",
    "MachineSettings",
    "Override",
    "Partition",
    "PenaltySettings",
    "PoolSettings",
    "PrioritySettings",
    "ProbeConfig",
    "ProbeSettings",
    "SiteSettings",
    "SourceSettings",
    "StoreSettings",
    "SummarySettings",
    "apply_overrides",
    "load_config",
    "parse_config",
]

MIB = 1024**2
KIB = 1024


def _expression(text: str) -> str:
    """A ClassAd expression, checked by parsing it with classad2."""
    try:
        classad2.ExprTree(text)
    except classad2.ClassAdException as exc:
        raise ValueError(f"expected a ClassAd expression, got {text!r} (classad2 cannot parse it)") from exc
    return text


def _size(unit: int, what: str) -> BeforeValidator:
    def parse(value: Any) -> float | None:
        if value is None:
            return None
        try:
            return parse_size(value, unit)
        except ValueError as exc:
            raise ValueError(str(exc)) from None

    return BeforeValidator(parse)


Expression = Annotated[str, BeforeValidator(lambda v: _expression(v) if isinstance(v, str) else v)]
OptionalExpression = Annotated[
    str, BeforeValidator(lambda v: _expression(v) if isinstance(v, str) and v.strip() else v)
]


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


LaxPath = Annotated[Path, Strict(False)]  # a TOML string becomes a Path
MemorySize = Annotated[float | None, _size(MIB, "memory")]
DiskSize = Annotated[float | None, _size(KIB, "disk")]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class PoolSettings(_Section):
    name: str = Field("default", description="Name of the pool, written on every record.")
    interval_s: float = Field(300.0, gt=0, description="Seconds one slot snapshot stands for (the snapshot cadence).")
    max_interval_s: float = Field(
        900.0,
        gt=0,
        description="Longest time one live snapshot may stand for: a snapshot stands for the real time since "
        "the previous successful one, capped here (a probe that was down did not observe its pool).",
    )
    collectors: list[str] = Field(
        default_factory=list,
        description='Collectors to query ("host:port"); an entry "cm1:9618, cm2:9618" lists replicas of one pool, '
        "tried in order. Every entry is queried and ads seen twice are kept once. Empty: COLLECTOR_HOST.",
    )
    slot_constraint: OptionalExpression = Field(
        "",
        description="ClassAd constraint on the startd ads queried (partitionable, static and dynamic slots). "
        "Empty: all.",
    )
    child_lists: bool = Field(
        False,
        description="Where the collector's answer holds no dynamic-slot ads at all, bill each partitionable "
        "slot from its Child* lists: only for a slot_constraint that leaves dynamic slots out. Off: a node's "
        "allocations are its dynamic-slot ads, none in an answer without them (a pool between two claims).",
    )
    schedds: list[str] = Field(
        default_factory=list,
        description="Names of the schedds to read (idle jobs, history). Empty: every schedd the collectors know.",
    )
    job_constraint: OptionalExpression = Field(
        "", description="ClassAd constraint added to the queue and history queries of every schedd. Empty: none."
    )
    history_match: int = Field(
        10000,
        ge=1,
        description="Jobs of a schedd's history answer converted at a time (one Schedd.history call a pass "
        "reads the whole backlog, from the checkpoint's position in the history file).",
    )
    history_lookback_s: float = Field(
        3600.0,
        ge=0,
        description="For a checkpoint of a probe before positions (an end time): its last scan stops at the "
        "first job that ended this long before it, then the checkpoint is a position.",
    )
    timeout_s: float = Field(
        60.0, gt=0, description="Seconds a collector or schedd has to answer one query (also HTCondor's QUERY_TIMEOUT)."
    )
    token_file: str = Field(
        "",
        description="File holding an IDTOKEN the collectors are queried with (a SecurityContext). "
        "Empty: HTCondor's own.",
    )
    condor_config: str = Field(
        "", description="HTCondor configuration file to read instead of CONDOR_CONFIG. Empty: CONDOR_CONFIG."
    )

    @model_validator(mode="after")
    def _cap_covers_the_cadence(self) -> PoolSettings:
        if self.max_interval_s < self.interval_s:
            raise ValueError(
                f"max_interval_s ({self.max_interval_s:g}) must be at least interval_s ({self.interval_s:g})"
            )
        return self


class SourceSettings(_Section):
    status_files: list[LaxPath] = Field(
        default_factory=list, description="condor_status -long or -json dumps: the slots and dynamic slots."
    )
    idle_files: list[LaxPath] = Field(
        default_factory=list,
        description="condor_q -long dumps (idle jobs are demand), or condor_q -autocluster -long dumps.",
    )
    history: list[LaxPath] = Field(
        default_factory=list,
        description="condor_history -long or -json dumps, history files, or PER_JOB_HISTORY_DIR directories.",
    )
    slot_attributes: list[str] = Field(
        default_factory=list, description="Extra slot attributes copied into the slots table as columns."
    )
    job_attributes: list[str] = Field(
        default_factory=list, description="Extra job attributes copied into the jobs table as columns."
    )
    strict: bool = Field(False, description="Stop at the first malformed ad instead of quarantining it.")
    evaluation_budget_s: float = Field(
        0.25,
        gt=0,
        description="Seconds an ad's expressions that call a regular expression may take to evaluate (in a "
        "worker process); an ad past it is quarantined. A job's ad is written by its user.",
    )
    live: bool = Field(
        False,
        description="Read the pool itself through htcondor2 (see [pool]) instead of the files above, "
        "which must then be empty.",
    )


class CredentialSettings(_Section):
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


class SiteSettings(_Section):
    attributes: list[str] = Field(
        list(SITE_ATTRIBUTES),
        description="Attributes naming the site (job ads, then slot ads); the first present wins.",
    )
    resource_attributes: list[str] = Field(
        list(RESOURCE_ATTRIBUTES),
        description="Attributes naming the resource (compute element); the first present wins.",
    )
    default: str = Field("unknown", description="Site of slots and jobs that no attribute places.")


class MachineSettings(_Section):
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


class PenaltySettings(_Section):
    resources: list[Literal["cpus", "memory", "disk", "gpus"]] = Field(
        ["cpus", "memory"],
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


class FairshareSettings(_Section):
    interval_s: float = Field(86400.0, gt=0, description="Seconds per fairshare window (Maui's FSINTERVAL).")
    depth: int = Field(8, ge=1, description="Windows that count (Maui's FSDEPTH).")
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


class PrioritySettings(_Section):
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


class Partition(_Section):
    name: str = Field(description="Name of the partition, e.g. cpu or gpu.")
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


class StoreSettings(_Section):
    url: str = Field(
        "sqlite:///fairacct.sqlite",
        description="sqlite:///PATH (embedded, PATH relative to state_dir), http(s)://... (Elasticsearch), "
        "opensearch+http(s)://... (OpenSearch) or collector+https://HOST[:PORT] "
        "(a fairacct collector, with token_file).",
    )
    index_prefix: str = Field("fairacct", description="Elasticsearch indices are <index_prefix>-<kind>-YYYY.MM.")
    api_key_file: str = Field("", description="File holding an Elasticsearch API key (never put the key itself here).")
    api_key_env: str = Field("", description="Environment variable holding an Elasticsearch API key.")
    username: str = Field("", description="User for basic auth (with password_file or password_env).")
    password_file: str = Field("", description="File holding the basic-auth password.")
    password_env: str = Field("", description="Environment variable holding the basic-auth password.")
    ca_file: str = Field("", description="CA bundle to verify the cluster's (or the collector's) certificate.")
    token_file: str = Field(
        "",
        description="File holding this probe's bearer token for a collector+http(s):// store (never the token itself).",
    )
    install_templates: bool = Field(
        False,
        description="Install fairacct's index templates when they are missing or outdated (checked at the first "
        "flush and after every reconnect). Off by default: templates change a shared cluster's schema and need "
        "its manage_index_templates privilege, so the store's operator runs `fairacct mappings install`; "
        "records wait in the outbox meanwhile.",
    )

    @field_validator("url")
    @classmethod
    def _a_store_there_is_a_sink_for(cls, value: str) -> str:
        try:
            check_url(value)
        except ConfigError as exc:
            raise ValueError(str(exc).removeprefix("store.url: ")) from None
        return value

    def auth(self) -> dict[str, str]:
        """The sink's settings that are set, as the sink names them (secrets by reference, never
        by value): the Elasticsearch sink's, or the collector sink's; nothing for the embedded store."""
        if self.url.startswith("collector+"):
            return {"token_file": self.token_file} | ({"ca_file": self.ca_file} if self.ca_file else {})
        if not self.url.startswith(("http", "opensearch")):
            return {}
        names = {
            "index_prefix": "prefix", "api_key_file": "api_key_file", "api_key_env": "api_key_env",
            "username": "username", "password_file": "password_file", "password_env": "password_env",
            "ca_file": "ca_certs_file",
        }  # fmt: skip
        return {sink_name: getattr(self, ours) for ours, sink_name in names.items() if getattr(self, ours)}


class ProbeSettings(_Section):
    state_dir: LaxPath = Field(
        Path("state"), description="Directory for the embedded store, the outbox, checkpoints and quarantine."
    )
    history_every_s: float = Field(900.0, gt=0, description="Seconds between history reads of the service (probe run).")
    flush_every_s: float = Field(60.0, gt=0, description="Seconds between outbox flushes to the store.")
    misfire_grace_s: float = Field(
        60.0,
        gt=0,
        description="A run of the service that is late by more than this is skipped (coalesced) rather than run late.",
    )
    health_address: str = Field("127.0.0.1", description="Address the /healthz and /metrics endpoint listens on.")
    health_port: int = Field(0, ge=0, le=65535, description="Port of the /healthz and /metrics endpoint; 0: off.")
    stop_timeout_s: float = Field(
        30.0,
        gt=0,
        description="Seconds SIGTERM may take: running jobs and one last flush, then what is left waits in the "
        "outbox for the next start. Keep it well under the unit's TimeoutStopSec (120).",
    )


class FairnessSettings(_Section):
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


class SummarySettings(_Section):
    recent_days: int = Field(
        7, ge=0, description="The service re-summarizes this many last days (today included) every every_s; 0: never."
    )
    every_s: float = Field(900.0, gt=0, description="Seconds between re-summaries of the last recent_days days.")
    nightly_days: int = Field(
        365,
        ge=0,
        description="Once a day the service re-summarizes this many last days, for very late records; 0: never.",
    )


class ApelSettings(_Section):
    site: str = Field(
        "",
        description="Site name APEL knows (GOCDB) for every message; empty: each record's own site "
        "(the job's [site] attributes, a Gratia record's SiteName).",
    )
    benchmark_type: Literal["HEPscore23", "HEPSPEC"] = Field(
        "HEPSPEC",
        description="What machines.speed_attribute (the hosts' benchmark per core) measures: HEPscore23 or HEPSPEC "
        "(HS06). APEL reads a v0.3 summary as HEPSPEC; a HEPscore23 site sends the v0.4 normalised summary.",
    )
    infrastructure: str = Field(
        "grid", description="APEL's Infrastructure (InfrastructureType of job records): grid or local."
    )
    vo_attribute: Literal["group", "project", "user"] = Field(
        "group", description="Job record field giving the VO of a job without x509UserProxyVOName or FQAN."
    )
    vo_map: dict[str, str] = Field(
        default_factory=dict,
        description='VO of each value of vo_attribute (e.g. group_cms = "cms"); a value not named is the VO itself.',
    )
    site_benchmarks: dict[str, Annotated[float, Field(gt=0)]] = Field(
        default_factory=dict,
        description="Benchmark per core of each SiteName, for Gratia records (they carry none); "
        "a site not named is not normalised.",
    )
    outgoing: str = Field(
        "", description="Directory queue (dirq QueueSimple) ssmsend sends from; empty: --out or standard output."
    )


class CollectorSection(CollectorSettings):
    """The collector service's settings (:class:`collector.settings.CollectorSettings`, where
    they are described), with the bodies' sizes read as operators write them ("64 MiB")."""

    @field_validator("max_body_size", "max_records_body_size", mode="before")
    @classmethod
    def _a_size(cls, value: Any) -> Any:
        return parse_size(value, 1) if isinstance(value, (int, float, str)) else value


class ProbeConfig(_Section):
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
    probe: ProbeSettings = Field(default_factory=ProbeSettings, description="The probe's own state and service.")
    penalty: PenaltySettings = Field(default_factory=PenaltySettings, description="The multi-resource penalty.")
    fairshare: FairshareSettings = Field(default_factory=FairshareSettings, description="Maui-style fairshare.")
    priority: PrioritySettings = Field(default_factory=PrioritySettings, description="HTCondor priority sync.")
    summaries: SummarySettings = Field(
        default_factory=SummarySettings, description="Daily summaries computed in the store."
    )
    fairness: FairnessSettings = Field(
        default_factory=FairnessSettings, description="The fairness of the share, per bucket (Sedighi et al. 2014)."
    )
    collector: CollectorSection = Field(
        default_factory=CollectorSection, description="The collector service (fairacct collector serve)."
    )
    apel: ApelSettings = Field(
        default_factory=ApelSettings, description="APEL messages for WLCG accounting (fairacct apel)."
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
        extra = self.sources.slot_attributes
        c = self.credentials
        if with_class_attributes:
            extra = list(dict.fromkeys([*extra, *self.machines.class_attributes]))
        return SlotReading(
            pool=self.pool.name,
            interval_s=self.pool.interval_s,
            site_attributes=tuple(self.site.attributes),
            resource_attributes=tuple(self.site.resource_attributes),
            site_default=self.site.default,
            speed_attribute=self.machines.speed_attribute,
            cost_attribute=self.machines.cost_attribute,
            extra_attributes=tuple(extra),
            partitions=tuple((p.name, p.match) for p in self.partitions),
            submitter=tuple(c.slot_submitter),
            user=tuple(c.slot_user),
            group=tuple(c.slot_group),
            project=tuple(c.slot_project),
        )

    def job_reading(self) -> JobReading:
        """What the history reader needs of this configuration."""
        c = self.credentials
        return JobReading(
            submitter=tuple(c.submitter),
            user=tuple(c.user),
            group=tuple(c.group),
            project=tuple(c.project),
            queue=tuple(c.queue),
            qos=tuple(c.qos),
            site_attributes=tuple(self.site.attributes),
            resource_attributes=tuple(self.site.resource_attributes),
            site_default=self.site.default,
            speed_attribute=self.machines.speed_attribute,
            extra_attributes=tuple(self.sources.job_attributes),
        )

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

    def resolved(self, base: Path) -> ProbeConfig:
        """This configuration with relative paths taken relative to ``base``."""

        def fix(p: Path) -> Path:
            return p if p.is_absolute() else Path(os.path.normpath(base / p))

        s = self.sources
        sources = s.model_copy(
            update={
                "status_files": [fix(p) for p in s.status_files],
                "idle_files": [fix(p) for p in s.idle_files],
                "history": [fix(p) for p in s.history],
            }
        )
        probe = self.probe.model_copy(update={"state_dir": fix(self.probe.state_dir)})
        c = self.collector
        collector = c.model_copy(
            update={"token_dir": fix(c.token_dir), "state_dir": fix(c.state_dir)}
            | {k: str(fix(Path(v))) for k in ("tls_cert_file", "tls_key_file") if (v := getattr(c, k))}
        )
        store = self.store.model_copy(update={"token_file": str(fix(Path(t)))} if (t := self.store.token_file) else {})
        credentials = self.credentials.model_copy(
            update={"user_vo_map": str(fix(Path(m)))} if (m := self.credentials.user_vo_map) else {}
        )
        return self.model_copy(
            update={
                "sources": sources,
                "probe": probe,
                "store": store,
                "collector": collector,
                "credentials": credentials,
            }
        )


# -- command-line overrides --------------------------------------------------------------------


@dataclass(frozen=True)
class Override:
    """A command-line option that replaces one setting."""

    option: str
    section: str
    key: str
    metavar: str
    help: str
    many: bool = True


OVERRIDES = (
    Override("--status-file", "sources", "status_files", "FILE", "condor_status -long/-json dump (repeatable)"),
    Override("--idle-file", "sources", "idle_files", "FILE", "condor_q -long dump of the queue (repeatable)"),
    Override(
        "--history", "sources", "history", "FILE|DIR", "condor_history dump, history file or directory (repeatable)"
    ),
    Override(
        "--store",
        "store",
        "url",
        "URL",
        "sqlite:///PATH, http(s)://... (Elasticsearch), opensearch+http(s)://... or collector+http(s)://... "
        "(a fairacct collector)",
        many=False,
    ),
)


def apply_overrides(config: ProbeConfig, values: Mapping[str, Any]) -> ProbeConfig:
    """Replace settings by command-line values (keyed by the option's dest name); paths from
    the command line are relative to the working directory."""
    for o in OVERRIDES:
        value = values.get(o.option.lstrip("-").replace("-", "_"))
        if value is None or value == []:
            continue
        section = getattr(config, o.section)
        if o.many:
            value = [Path(v).absolute() for v in value]
        config = config.model_copy(update={o.section: section.model_copy(update={o.key: value})})
    return config


# -- loading -------------------------------------------------------------------------------------


def load_config(path: str | os.PathLike[str] | None) -> ProbeConfig:
    """Read and validate a configuration file; None gives the defaults (relative to the cwd)."""
    if path is None:
        return ProbeConfig().resolved(Path.cwd())
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such configuration file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot be read ({exc})") from None
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    return parse_config(raw, str(path)).resolved(path.parent.absolute())


def parse_config(raw: Mapping[str, Any], source: str = "<config>") -> ProbeConfig:
    hostile = list(_hostile_values(raw, ""))
    if hostile:
        raise ConfigError("\n".join(f"{source}: {p}" for p in hostile))
    try:
        return ProbeConfig.model_validate(raw)
    except ValidationError as exc:
        problems = [_describe(err, raw) for err in exc.errors(include_url=False)]
        raise ConfigError("\n".join(f"{source}: {p}" for p in problems)) from None


#: The longest duration a ``*_s`` key may give: about 31 years. A scheduler's timers and
#: ``datetime.timedelta`` overflow long before 1e308, and nothing a probe does waits longer.
MAX_SECONDS = 1e9


def _hostile_values(value: Any, key: str) -> Iterator[str]:
    """What no key may hold, whatever its type, for the commands to refuse as the check does
    (issue 29): a NUL character (no path, name or expression has one, and the OS refuses it at
    run time), a number that is not finite (TOML's ``inf``, ``nan``), an integer beyond 64 bits,
    a duration (``*_s``) beyond :data:`MAX_SECONDS`. Yields one problem per bad value."""
    if isinstance(value, Mapping):
        for k, v in value.items():
            yield from _hostile_values(v, f"{key}.{k}" if key else str(k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _hostile_values(v, f"{key}[{i}]")
    elif isinstance(value, str):
        if "\0" in value:
            yield f"{key}: a NUL character cannot be in a value (a path, a name or an expression), got {value!r}"
    elif isinstance(value, bool):
        return
    elif isinstance(value, float) and not math.isfinite(value):
        yield f"{key}: expected a finite number, got {value!r}"
    elif isinstance(value, int) and not -(2**63) <= value < 2**63:
        yield f"{key}: expected an integer within 64 bits, got {value!r}"
    elif isinstance(value, (int, float)) and key.endswith("_s") and abs(value) > MAX_SECONDS:
        yield f"{key}: expected at most {MAX_SECONDS:g} seconds (about 31 years), got {value!r}"


_TYPES = {
    "string_type": "a string",
    "bool_type": "true or false",
    "list_type": "a list",
    "tuple_type": "a list of tables ([[partitions]])",
    "float_type": "a number",
    "float_parsing": "a number",
    "int_type": "an integer",
    "model_type": "a table",
    "model_attributes_type": "a table",
    "dict_type": "a table",
    "path_type": "a path (a string)",
}


def _describe(err: Mapping[str, Any], raw: Mapping[str, Any]) -> str:
    loc = [p for p in err["loc"] if p not in ("function-after", "function-before")]
    key = _key_path(loc)
    kind = err["type"]
    got = err.get("input")
    if kind == "extra_forbidden":
        parent = _model_at(loc[:-1])
        hint = ""
        if parent is not None:
            close = difflib.get_close_matches(str(loc[-1]), list(parent.model_fields), n=1)
            hint = f"; did you mean '{close[0]}'?" if close else f"; expected one of {', '.join(parent.model_fields)}"
        return f"{key}: unknown key{hint}"
    if kind == "missing":
        return f"{key}: required key is missing"
    if kind in ("value_error", "assertion_error"):
        message = str(err["ctx"]["error"]) if "ctx" in err else err["msg"]
        return f"{key}: {message}" if key else message
    if kind in _TYPES:
        return f"{key}: expected {_TYPES[kind]}, got {got!r}"
    if kind in ("greater_than", "greater_than_equal"):
        bound = err["ctx"].get("gt", err["ctx"].get("ge"))
        word = "greater than" if kind == "greater_than" else "at least"
        return f"{key}: expected a number {word} {bound:g}, got {got!r}"
    if kind in ("less_than", "less_than_equal"):
        bound = err["ctx"].get("lt", err["ctx"].get("le"))
        word = "less than" if kind == "less_than" else "at most"
        return f"{key}: expected a number {word} {bound:g}, got {got!r}"
    if kind == "literal_error":
        return f"{key}: expected {err['ctx']['expected']}, got {got!r}"
    return f"{key}: {err['msg']}, got {got!r}"


def _key_path(loc: Sequence[Any]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def _model_at(loc: Sequence[Any]) -> type[BaseModel] | None:
    """The settings class at a key path, to suggest keys that exist there."""
    model: Any = ProbeConfig
    for part in loc:
        if isinstance(part, int):
            continue
        field = model.model_fields.get(part)
        if field is None:
            return None
        annotation = field.annotation
        args = getattr(annotation, "__args__", ())
        candidates = [annotation, *args]
        model = next((c for c in candidates if isinstance(c, type) and issubclass(c, BaseModel)), None)
        if model is None:
            return None
    return model if isinstance(model, type) else None
