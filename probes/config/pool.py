"""``[pool]``: the pool a probe accounts for, and how a live pool is queried."""

from __future__ import annotations

from pydantic import Field, model_validator

from probes.config.fields import OptionalExpression, Section

__all__ = ["PoolSettings"]


class PoolSettings(Section):
    name: str = Field("default", description="Name of the pool, written on every record.")
    interval_s: float = Field(300.0, gt=0, description="Seconds one slot snapshot stands for (the snapshot cadence).")
    max_interval_s: float = Field(
        900.0,
        gt=0,
        description="How long a node missing from the snapshots (a collector restarted, a glidein gone) is "
        "still named in gap records after it was last seen; a node gone longer has left the pool. A snapshot "
        "itself never stands for longer than interval_s: the rest is unobserved, and named per node.",
    )
    update_interval_s: float = Field(
        300.0,
        gt=0,
        description="The startds' UPDATE_INTERVAL (seconds), for the slot ads that do not publish UpdateInterval: "
        "a slot ad not heard from (LastHeardFrom) for twice that is not billed, its node reported as unheard.",
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
        "reads a backlog of up to history_piece jobs, from the checkpoint's position in the history file).",
    )
    history_files: dict[str, str] = Field(
        default_factory=dict,
        description="Schedd name -> its HISTORY file as this host sees it (condor_config_val HISTORY on the "
        "access point): that schedd's history is read from its files and their rotations, not asked of it, "
        "in pieces of history_piece jobs, each committed with its checkpoint: memory bounded by a piece, one "
        "read of the files whatever the backlog. Empty: every schedd is asked (Schedd.history answers whole).",
    )
    history_piece: int = Field(
        50000,
        ge=1,
        description="Jobs of a history pass read, recorded and committed at a time, each part with its "
        "checkpoint: what a backlog holds in memory, and where a pass cut short resumes. A schedd's files "
        "(history_files) are read once in such pieces; a schedd asked whose backlog is longer is asked in "
        "parts of about this many jobs, each part a scan of the backlog by the schedd.",
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

    @model_validator(mode="after")
    def _files_take_no_constraint(self) -> PoolSettings:
        if self.history_files and self.job_constraint.strip():
            raise ValueError(
                "history_files are read whole, job_constraint cannot be applied to them (it is a query's): "
                "leave job_constraint empty, or the files out"
            )
        for name, path in self.history_files.items():
            if not path.strip() or not path.startswith("/"):
                raise ValueError(
                    f"history_files: {name} = {path!r}: expected an absolute path (condor_config_val HISTORY)"
                )
        return self
