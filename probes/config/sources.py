"""``[sources]``: where ads come from (files, or the pool itself) and what is kept of them."""

from __future__ import annotations

from pydantic import Field

from probes.config.fields import LaxPath, Section

__all__ = ["SourceSettings"]


class SourceSettings(Section):
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
