"""What ``fairacct efficiency``, ``fairacct fairness`` and ``fairacct lab`` show: aligned
tables for people, one JSON document for programs (seeds 001 and 002)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from collector.records import iso_utc
from probes.accounting.lab.simulate import LabRun
from probes.cli.views import Section, records, table
from probes.pipeline.analytics import DriftReport, FairnessReport

__all__ = [
    "drift_json",
    "drift_sections",
    "efficiency_json",
    "efficiency_sections",
    "fairness_json",
    "fairness_sections",
    "lab_json",
    "lab_sections",
    "whatif_json",
    "whatif_sections",
]

EFFICIENCY_VIEW = (
    "set", "available_core_s", "dedicated_core_s", "scheduling", "scheduling_cu",
    "jobs", "job_core_s", "used_core_s", "job", "system", "system_cu",
)  # fmt: skip
DRIFT_VIEW = ("jobs", "mixed_jobs", "mixed_share", "dedicated_core_s", "lost_core_s", "lost_share")
WHATIF_VIEW = (
    "policy", "jobs", "scheduling", "job", "system", "delivered", "mixed_jobs", "mixed_share", "oversize",
    "mean_wait_s", "makespan_s", "lost_core_s",
)  # fmt: skip
SHARES_VIEW = ("bucket", "name", "snapshots", "demand_cpus", "allocation_cpus", "served", "share_cpus", "starved")
BUCKETS_VIEW = ("bucket", "credentials", "allocation_cpus", "demand_cpus", "jain_served", "jain_allocation", "starved")
LAB_USERS_VIEW = (
    "policy", "user", "strategy", "submitted", "completion", "starved_slots", "starvation_intervals",
    "longest_starvation",
)  # fmt: skip
LAB_CASE_VIEW = ("policy", "jain_served", "jain_allocation", "starved_slots", "idle_node_slots")
# the human table of a case's allocation shows every tenth slot; --json has every slot
_EVERY = 10


def efficiency_json(frame: pd.DataFrame) -> dict[str, Any]:
    return {"efficiency": records(frame)}


def efficiency_sections(frame: pd.DataFrame, by: str | None) -> list[Section]:
    title = "efficiency (Jackson et al. 2001; core-seconds; scheduling in cores and canonical units)"
    view = ("period", *EFFICIENCY_VIEW) if "period" in frame.columns else EFFICIENCY_VIEW
    return [(title.replace("efficiency", f"efficiency by {by}", 1) if by else title, table(frame, view))]


def drift_json(report: DriftReport) -> dict[str, Any]:
    return {
        "summary": records(report.summary)[0],
        "sets": records(report.sets),
        "users": records(report.users),
        "notes": report.notes,
    }


def drift_sections(report: DriftReport, by: str | None) -> list[Section]:
    """The drift of a history: overall, per set and per user, and what was assumed."""
    title = "drift (Jackson et al. 2001): jobs on nodes of different sets run at the slowest node's pace; core-seconds"
    sections: list[Section] = [
        (title, table(report.summary, (*DRIFT_VIEW, "lost_core_h", "unknown_nodes"))),
        (f"drift per set ({by or 'no --by: one set'})", table(report.sets, ("set", *DRIFT_VIEW))),
        ("drift per user", table(report.users, ("user", *DRIFT_VIEW))),
    ]
    if report.notes:
        sections.append(("drift notes", "\n".join(report.notes)))
    return sections


def whatif_json(frame: pd.DataFrame, cluster: pd.DataFrame) -> dict[str, Any]:
    return {"cluster": records(cluster), "policies": records(frame)}


def whatif_sections(frame: pd.DataFrame, cluster: pd.DataFrame) -> list[Section]:
    return [
        ("cluster (resource sets)", table(cluster, ("set", "speed", "cores"))),
        (
            "node-allocation policies (Jackson et al. 2001; run times scaled by the slowest allocated set)",
            table(frame, WHATIF_VIEW),
        ),
    ]


def _with_bucket(frame: pd.DataFrame) -> pd.DataFrame:
    # what frame.assign(bucket=...) does; pandas-stubs' assign takes no None among a list's values
    out = frame.copy(deep=False)
    out["bucket"] = iso_utc(frame["bucket_start"])
    return out


def fairness_json(report: FairnessReport) -> dict[str, Any]:
    return {
        "shares": records(report.shares),
        "buckets": records(report.buckets),
        "starvation": records(report.intervals),
        "starved": records(report.summary),
    }


def fairness_sections(report: FairnessReport) -> list[Section]:
    sections: list[Section] = [
        ("demand and allocation per bucket and credential (cores)", table(_with_bucket(report.shares), SHARES_VIEW)),
        (
            "Jain's index per bucket (of the served part, and of the allocation)",
            table(_with_bucket(report.buckets), BUCKETS_VIEW),
        ),
    ]
    if len(report.summary):
        sections.append(
            (
                "starvation per credential (seconds)",
                table(report.summary, ("name", "intervals", "starved_s", "longest_s")),
            )
        )
    else:
        sections.append(("starvation", "nobody with demand went without while others were served"))
    return sections


def _lab_tables(runs: Sequence[LabRun]) -> tuple[pd.DataFrame, pd.DataFrame]:
    users = pd.concat([r.users.assign(case=r.case, policy=r.policy) for r in runs], ignore_index=True)
    cases = pd.DataFrame(
        [{"case": r.case, "policy": r.policy, "jain_served": r.jain_served, "jain_allocation": r.jain_allocation,
          "starved_slots": r.starved_slots, "idle_node_slots": r.idle_node_slots} for r in runs]
    )  # fmt: skip
    return users, cases


def lab_json(runs: Sequence[LabRun], table_21: pd.DataFrame) -> dict[str, Any]:
    users, cases = _lab_tables(runs)
    allocation = {
        f"{r.case}/{r.policy}": {u: g["nodes"].tolist() for u, g in r.slots.groupby("user", sort=False)} for r in runs
    }
    return {
        "table_2_1": records(table_21),
        "fraction": runs[0].fraction if runs else None,
        "cases": records(cases),
        "users": records(users),
        "nodes_per_slot": allocation,
    }


def lab_sections(runs: Sequence[LabRun], table_21: pd.DataFrame) -> list[Section]:
    shown = table_21.assign(share=np.floor(table_21["share"] * 100) / 100)  # cut as the seed prints it
    title = "Table 2.1 (formula 2.1, R = 6; shares cut to two decimals as the seed prints them)"
    sections: list[Section] = [(title, table(shown, ("t", "user", "queue", "share", "nodes"), digits=2))]
    users, cases = _lab_tables(runs)
    for case in dict.fromkeys(r.case for r in runs):
        first = next(r for r in runs if r.case == case)
        starved = f"at most {first.fraction:g} of an equal share"
        slots = first.slots.pivot(index="t", columns="user", values="nodes")
        every = slots[(slots.index - 1) % _EVERY == 0].reset_index()
        sections += [
            (f"case {case}: {first.title}", table(cases[cases["case"] == case], LAB_CASE_VIEW)),
            (
                f"case {case}: each user's completion slot and starvation ({starved})",
                table(users[users["case"] == case], LAB_USERS_VIEW),
            ),
            (
                f"case {case}: nodes per user every {_EVERY} slots under {first.policy}",
                table(every, list(every.columns)),
            ),
        ]
    return sections
