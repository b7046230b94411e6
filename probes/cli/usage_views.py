"""What the penalty and fairshare commands show: tables, Maui's ``diagnose -f``, and JSON.

The JSON shapes are a contract other tools read: keys are added, never renamed or removed.
``penalty``: ``{"jobs": [{"job_id", "user", "group", "queue", "penalty", "cpu_only",
"standard_job", "global_pe", "walltime", "speed", "usage", "unmatched", ...}], "users":
{user: usage}, ...}``; ``fairshare``: ``{"windows": [{"start", "end", "total", ...}],
"credentials": [{"type", "name", "usage": [...], "effective", "target", "priority",
"over_cap", ...}], ...}``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from collector.records import iso_utc
from probes.accounting._tables import scalar_float
from probes.accounting.fairshare import CREDENTIALS, FairshareResult
from probes.cli.views import Section, records, table
from probes.pipeline.usage import FairshareReport, PenaltyReport

__all__ = ["diagnose_f", "fairshare_json", "fairshare_sections", "penalty_json", "penalty_sections"]

JOBS_SHOWN = 200  # more jobs than this are left to --json
MACHINE_VIEW = ("name", "count", "cpus", "memory", "disk", "gpus", "node_cost", "speed")
JOB_VIEW = (
    "job_id", "user", "queue", "cpus", "memory", "gpus", "n_hosts", "penalty", "cpu_only", "standard_job",
    "global_pe", "walltime_s", "speed_used", "usage", "unmatched", "priced_on",
)  # fmt: skip
USER_VIEW = (
    "user", "jobs", "usage_h", "cpu_only_h", "standard_job_h", "global_pe_h",
    "share", "cpu_only_share", "standard_job_share", "global_pe_share", "change", "ratio",
)  # fmt: skip
UNKNOWN_USER = "(unknown)"
_POLICY_NAMES = {
    "dedicated_ps": "DEDICATEDPS",
    "dedicated_pes": "DEDICATEDPES",
    "utilized_ps": "UTILIZEDPS",
    "mrpe": "MRPE",
}
_MAUI_HEADERS = {
    "user": "USER", "group": "GROUP", "account": "ACCT", "class": "CLASS", "qos": "QOS",
    "submitter": "SUBMITTER",  # HTCondor's: the negotiator's name, after Maui's five
}  # fmt: skip


def _number(value: Any) -> float | None:
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else float(value)


def _user(value: Any) -> str:
    return UNKNOWN_USER if value is None or (isinstance(value, float) and math.isnan(value)) else str(value)


def _priced_on(report: PenaltyReport) -> pd.Series:
    requests = report.penalties.requests
    return requests.groupby("job", sort=True)["priced_on"].agg(lambda v: list(dict.fromkeys(v)))


# -- penalty --------------------------------------------------------------------------------


def penalty_json(report: PenaltyReport) -> dict[str, Any]:
    jobs = report.penalties.jobs
    requests = report.penalties.requests
    view = pd.DataFrame(
        {
            "job_id": jobs["job_id"].to_numpy(),
            "user": jobs["user"].to_numpy(),
            "group": jobs["group"].to_numpy(),
            "project": jobs["project"].to_numpy(),
            "queue": jobs["queue"].to_numpy(),
            "qos": jobs["qos"].to_numpy(),
            "penalty": jobs["penalty"].to_numpy(),
            "cpu_only": jobs["cpu_only"].to_numpy(),
            "standard_job": jobs["standard_job"].to_numpy(),
            "global_pe": jobs["global_pe"].to_numpy(),
            "queue_cost": jobs["queue_cost"].to_numpy(),
            "walltime": jobs["walltime_s"].to_numpy(),
            "speed": jobs["speed_used"].to_numpy(),
            "speed_known": jobs["speed_known"].to_numpy(),
            "usage": jobs["usage"].to_numpy(),
            "unmatched": jobs["unmatched"].to_numpy(),
            "ran_on": jobs["ran_on"].to_numpy(),
        }
    )
    docs = records(view)
    nodes = np.bincount(requests["job"], weights=requests["count"], minlength=len(jobs))
    for doc, on, n in zip(docs, _priced_on(report).reindex(range(len(jobs))), nodes, strict=True):
        doc["priced_on"] = on
        doc["nodes"] = float(n)
    users = report.users
    machines = report.machines
    machine_docs = records(machines[list(MACHINE_VIEW)])
    for doc, hosts in zip(machine_docs, machines["hosts"], strict=True):
        doc["hosts"] = len(hosts)
    return {
        "jobs": docs,
        "users": {_user(u): float(v) for u, v in zip(users["user"], users["usage"], strict=True)},
        "by_user": [{**d, "user": _user(d["user"])} for d in records(users)],
        "machines": machine_docs,
        "summary": _penalty_summary(report),
        "notes": report.notes,
    }


def _penalty_summary(report: PenaltyReport) -> dict[str, Any]:
    jobs = report.penalties.jobs
    users = report.users
    more = users[users["ratio"] > 1 + 1e-9]
    return {
        "jobs": len(jobs),
        "unmatched": int(jobs["unmatched"].sum()),
        "speed_unknown": int((~jobs["speed_known"]).sum()),
        "users": len(users),
        "users_paying_more": [_user(u) for u in more["user"]],
        "usage": float(jobs["usage"].sum()),
        "cpu_only_usage": float(users["cpu_only_usage"].sum()),
        "unchecked_pins": report.penalties.unchecked,
    }


def penalty_sections(report: PenaltyReport) -> list[Section]:
    jobs = report.penalties.jobs
    machines = report.machines
    sections: list[Section] = [
        (f"{len(machines)} machine classes (memory MiB, disk KiB)", table(machines, MACHINE_VIEW))
    ]
    if len(jobs) <= JOBS_SHOWN:
        shown = jobs.assign(
            priced_on=_priced_on(report).reindex(range(len(jobs))).map(lambda v: ",".join(v)).to_numpy()
        )
        title = f"penalties of {len(jobs)} jobs (processor equivalents; usage = walltime x speed x penalty, PE-seconds)"
        sections.append((title, table(shown, JOB_VIEW)))
    else:
        sections.append(
            (f"penalties of {len(jobs)} jobs", f"({len(jobs)} jobs: more than {JOBS_SHOWN}; --json gives each one)")
        )
    users = _hours(report.users)
    title = "usage by user under the penalty and the metrics it replaces (PE-hours; shares of each total in %)"
    sections.append((title, table(users, USER_VIEW, digits=2)))
    sections.append(("who pays more under the penalty than under cpu_only", _who_pays_more(report)))
    lost = jobs[jobs["unmatched"]]
    if len(lost):
        requests = report.penalties.requests
        who = jobs[["job_id", "user"]].reset_index(drop=True)  # requests point at row positions
        bad = requests[~requests["fits"]].merge(who, left_on="job", right_index=True)
        view = (
            "job_id",
            "user",
            "count",
            "cpus",
            "memory",
            "gpus",
            "exclusive",
            "properties",
            "priced_on",
            "priced_as",
            "price",
        )
        sections.append(
            (
                f"{len(lost)} job(s) fit no machine class: priced on the class they ran on, else the nearest",
                table(bad, view),
            )
        )
    unknown = int((~jobs["speed_known"]).sum())
    notes = [*report.notes]
    if unknown:
        notes.append(
            f"{unknown} of {len(jobs)} jobs ran on hosts of unknown speed: their walltime is taken at speed 1.0"
        )
    if notes:
        sections.append(("notes", "\n".join(notes)))
    return sections


def _hours(users: pd.DataFrame) -> pd.DataFrame:
    out = users.copy()
    out["user"] = out["user"].map(_user)
    for metric in ("usage", "cpu_only", "standard_job", "global_pe"):
        source = "usage" if metric == "usage" else f"{metric}_usage"
        out[f"{metric}_h"] = out[source] / 3600.0
    return out


def _who_pays_more(report: PenaltyReport) -> str:
    users = report.users
    more = users[users["ratio"] > 1 + 1e-9].sort_values("change", ascending=False)
    if not len(more):
        return f"nobody: the penalty charges each of the {len(users)} users exactly what cpu_only does"
    lines = [
        f"{len(more)} of {len(users)} users pay more under the penalty than under cpu_only (their jobs hold memory,",
        "GPUs or whole nodes beyond their cores, or run in costlier queues or on costlier nodes);",
        f"together their share of the pool's usage goes from {more['cpu_only_share'].sum():.2f} % "
        f"to {more['share'].sum():.2f} %.",
        "",
    ]
    view = more.assign(user=more["user"].map(_user))
    lines.append(table(view, ("user", "jobs", "ratio", "cpu_only_share", "share", "change"), digits=2))
    gain = users[users["change"] < -1e-9]
    if len(gain):
        most = gain.sort_values("change").head(5)
        fall = ", ".join(f"{_user(u)} ({c:+.2f} points)" for u, c in zip(most["user"], most["change"], strict=True))
        lines += ["", f"{len(gain)} users see their share fall, most: " + fall]
    return "\n".join(lines)


# -- fairshare ------------------------------------------------------------------------------


def fairshare_json(report: FairshareReport) -> dict[str, Any]:
    result = report.result
    windows = result.windows
    window_docs = [
        {
            "window": int(w), "start": float(s), "end": float(e), "total": float(t), "weight": float(wt),
            "start_iso": si, "end_iso": ei,
        }
        for w, s, e, t, wt, si, ei in zip(
            windows["window"], windows["start"], windows["end"], windows["total"], windows["weight"],
            iso_utc(windows["start"]), iso_utc(windows["end"]), strict=True,
        )
    ]  # fmt: skip
    creds = result.credentials
    usage = creds[[f"usage_{n}" for n in range(result.policy.depth)]].to_numpy(dtype=np.float64)
    cred_docs = []
    for row, u in zip(creds.itertuples(index=False), usage, strict=True):
        cred_docs.append(
            {
                "type": row.type,
                "name": str(row.name),
                "usage": [float(x) for x in u],
                "decayed": scalar_float(row.decayed),
                "effective": scalar_float(row.effective),
                "target": _number(row.target),
                "target_mode": row.target_mode if isinstance(row.target_mode, str) else None,
                "priority": _number(row.priority),
                "over_cap": bool(row.over_cap),
                "off_target": bool(row.off_target),
            }
        )
    policy = result.policy
    return {
        "windows": window_docs,
        "credentials": cred_docs,
        "at": result.at,
        "at_iso": iso_utc([result.at])[0],
        "policy": {
            "interval_s": policy.interval_s,
            "depth": policy.depth,
            "decay": policy.decay,
            "metric": policy.metric,
            "percent": policy.percent,
        },
        "unplaced": result.unplaced,
        "notes": report.notes,
    }


def _duration(seconds: float) -> str:
    """Maui's [D:]HH:MM:SS."""
    s = round(seconds)
    days, s = divmod(s, 86400)
    hours, s = divmod(s, 3600)
    minutes, s = divmod(s, 60)
    text = f"{hours:02d}:{minutes:02d}:{s:02d}"
    return f"{days}:{text}" if days else text


def _target_text(target: float, mode: Any) -> str:
    if not isinstance(mode, str) or math.isnan(target):
        return "-------"
    suffix = {"target": "", "floor": "+", "cap": "-", "hard_cap": "%", "hard_cap_absolute": "^"}[mode]
    return f"{target:.2f}{suffix}"[:7]


def diagnose_f(result: FairshareResult) -> str:
    """Maui's ``diagnose -f`` report: per credential, its decay-weighted percentage of the
    delivered usage, its target, and its percentage of each window's total; a '*' after a
    name marks a credential below its floor, above its cap or more than 5 points off its
    target. Windows with no usage are left out, as Maui does."""
    policy = result.policy
    windows = result.windows
    shown = [int(n) for n, t in zip(windows["window"], windows["total"], strict=True) if t > 0]
    lines = [
        "FairShare Information",
        "",
        f"Depth: {policy.depth} intervals   Interval Length: {_duration(policy.interval_s)}   "
        f"Decay Rate: {policy.decay:.2f}",
        "",
        f"FS Policy: {_POLICY_NAMES.get(policy.metric, policy.metric.upper())}{'%' if policy.percent else ''}",
        "",
        f"{'FSInterval':<14} {'  %   ':>7} {'Target':>7}" + "".join(f" {n:>7d}" for n in shown),
        f"{'FSWeight':<14} {'-------':>7} {'-------':>7}" + "".join(f" {windows['weight'][n]:7.4f}" for n in shown),
        f"{'TotalUsage':<14} {100.0:7.2f} {'-------':>7}"
        + "".join(f" {windows['total'][n] / 3600.0:7.1f}" for n in shown),
    ]
    creds = result.credentials
    totals = windows["total"].to_numpy()
    for kind in CREDENTIALS:
        part = creds[(creds["type"] == kind) & ((creds["decayed"] > 0) | creds["target_mode"].notna())]
        if not len(part):
            continue
        lines += ["", _MAUI_HEADERS[kind], "-------------"]
        for row in part.itertuples(index=False):
            name = f"{row.name}*" if row.off_target else str(row.name)
            cells = []
            for n in shown:
                u = getattr(row, f"usage_{n}")
                cells.append(f" {100.0 * u / totals[n]:7.2f}" if u > 0 else " -------")
            lines.append(
                f"{name:<14} {100.0 * scalar_float(row.effective):7.2f} "
                f"{_target_text(scalar_float(row.target), row.target_mode):>7}" + "".join(cells)
            )
    return "\n".join(lines)


def fairshare_sections(report: FairshareReport, *, written: list[str] | None = None) -> list[Section]:
    result = report.result
    sections: list[Section] = [
        ("diagnose -f (usage in % of the delivered total; TotalUsage in hours)", diagnose_f(result))
    ]
    creds = result.credentials
    targeted = creds[creds["target_mode"].notna()]
    # from the selection, not from ``creds``: assigning a Series to an empty frame adopts its index
    targeted = targeted.assign(percent=100.0 * targeted["effective"])
    if len(targeted):
        view = ("type", "name", "percent", "target", "target_mode", "priority", "over_cap", "off_target")
        title = (
            "fairshare priority of credentials with targets ("
            + ("1 - usage/target" if result.policy.percent else "target - usage, in points")
            + ")"
        )
        sections.append((title, table(targeted, view, digits=2)))
    at = iso_utc([result.at])[0]
    sections.append(
        ("evaluated at", f"{at} ({result.at:.0f}); window 0 started {iso_utc([result.windows['start'][0]])[0]}")
    )
    notes = list(report.notes)
    if written:
        notes.append(f"Maui fairshare window files written: {', '.join(written)}")
    if notes:
        sections.append(("notes", "\n".join(notes)))
    return sections
