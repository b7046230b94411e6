"""Maui-style fairshare: usage per credential in decaying windows, targets, caps (Maui Admin
Guide: Adaptive Computing, "Maui Scheduler Administrator's Guide", section 6.3 "Fairshare").

Time is cut into windows of ``interval_s`` seconds that start at multiples of the interval
(UNIX time), as Maui rolls its windows. Window 0 is the one holding ``at`` and ends there;
window n started n intervals earlier. ``depth`` windows count, weighted by ``decay ** n``:

    effective(c) = sum_n d^n U_c[n] / sum_n d^n Total[n]

``Total[n]`` is the usage of every job in window n, credentialed or not: as the guide says (6.3.2.3),
usage is relative to what the system delivered, not to what it could have. A job is spread
evenly over ``[end - walltime, end]``: one that spans a window boundary contributes to each
window in proportion to its time in it, and only its part before ``at`` counts.

The usage metric is a policy choice (Maui's FSPOLICY):

- ``dedicated_ps``: cores dedicated x walltime (requested cores, over all nodes);
- ``dedicated_pes``: processor equivalents (Moab's, against the pool) x walltime;
- ``utilized_ps``: CPU time used;
- ``mrpe``: the multi-resource penalty usage of Klusáček & Rudová 2015, "Multi-resource aware
  fairsharing for heterogeneous systems" (walltime x speed x penalty);
- ``billed``: canonical billing (Andrijauskas et al. 2023, "Defining a canonical unit for
  accounting purposes"): not available yet, bills are not stored per job.

Targets are percentages of the total, per credential, in Maui's FSTARGET syntax: ``20``
(target), ``20+`` (floor: only raises priority), ``20-`` (cap: only lowers it), and the hard
caps ``20%`` (at most 20 % of the delivered usage) and ``5000^`` (at most 5000 units of
decayed usage), which mark a credential as over its cap once it reaches them. The fairshare
priority component is ``target - 100 * effective`` (percentage points), or with the
percentage form (FSPOLICY ending in '%') ``1 - 100 * effective / target``; floors keep it
>= 0, caps <= 0, hard caps at 0; a credential with no target has none (NaN).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal, get_args

import numpy as np
import numpy.typing as npt
import pandas as pd

from probes.accounting._tables import codes, floats, require_columns

__all__ = [
    "CREDENTIALS",
    "METRICS",
    "PRICED_METRICS",
    "FairsharePolicy",
    "FairshareResult",
    "Target",
    "decay_weights",
    "fairshare",
    "job_usage",
    "window_usage",
]

Metric = Literal["dedicated_ps", "dedicated_pes", "utilized_ps", "mrpe", "billed"]
METRICS: tuple[str, ...] = get_args(Metric)
PRICED_METRICS: tuple[str, ...] = ("mrpe", "dedicated_pes")
"""The metrics that price jobs against the pool's machines (a penalty needs machine classes)."""
TargetMode = Literal["target", "floor", "cap", "hard_cap", "hard_cap_absolute"]

CREDENTIALS: Mapping[str, str] = MappingProxyType(
    {"user": "user", "group": "group", "account": "project", "class": "queue", "qos": "qos", "submitter": "submitter"}
)
"""Credential type -> the jobs-table column that names it (Maui's account is a project, its
class a queue; HTCondor's submitter is the name its negotiator charges, ``group.user@uid_domain``)."""

_SUFFIX: Mapping[str, TargetMode] = MappingProxyType(
    {"": "target", "+": "floor", "-": "cap", "%": "hard_cap", "^": "hard_cap_absolute"}
)
_TARGET = re.compile(r"^\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*([-+%^]?)\s*$")
# Maui marks a credential whose usage is more than 5 points from a plain target.
_OFF_TARGET_POINTS = 5.0


@dataclass(frozen=True)
class Target:
    """A fairshare target: ``value`` (a percentage, or usage units for ``hard_cap_absolute``)
    and its ``mode``."""

    value: float
    mode: TargetMode = "target"

    @classmethod
    def parse(cls, text: str | float) -> Target:
        """Read Maui's FSTARGET syntax: ``20``, ``20+``, ``20-``, ``20%``, ``5000^``."""
        if isinstance(text, bool):  # ValueError, not TypeError: it is a bad value in a config file
            raise ValueError(f"expected a target like 20, 20+, 20-, 20% or 5000^, got {text!r}")
        if isinstance(text, (int, float)):
            text = repr(float(text))
        m = _TARGET.match(text)
        if not m or float(m.group(1)) <= 0:
            raise ValueError(
                f"expected a target greater than 0 like 20 (target), 20+ (floor), 20- (cap), "
                f"20% (hard cap, percent of the total) or 5000^ (hard cap, usage), got {text!r}"
            )
        value, mode = float(m.group(1)), _SUFFIX[m.group(2)]
        if mode in ("target", "floor", "cap", "hard_cap") and value > 100:
            raise ValueError(f"a percentage target must be at most 100, got {text!r}")
        return cls(value, mode)

    def __str__(self) -> str:
        suffix = {v: k for k, v in _SUFFIX.items()}[self.mode]
        return f"{self.value:g}{suffix}"


@dataclass(frozen=True)
class FairsharePolicy:
    """Maui's FSINTERVAL (``interval_s``), FSDEPTH (``depth``), FSDECAY (``decay``), FSPOLICY
    (``metric``, and ``percent`` for its '%' form) and the targets: credential type (a key of
    :data:`CREDENTIALS`) -> credential name -> :class:`Target`."""

    interval_s: float = 86400.0
    depth: int = 8
    decay: float = 1.0
    metric: str = "dedicated_ps"
    percent: bool = False
    targets: Mapping[str, Mapping[str, Target]] = field(default_factory=lambda: MappingProxyType({}))

    def __post_init__(self) -> None:
        if not (np.isfinite(self.interval_s) and self.interval_s > 0):
            raise ValueError(f"interval_s must be a number of seconds greater than 0, got {self.interval_s!r}")
        if isinstance(self.depth, bool) or not isinstance(self.depth, (int, np.integer)) or self.depth < 1:
            raise ValueError(f"depth must be a whole number of windows >= 1, got {self.depth!r}")
        if not (0 < self.decay <= 1):
            raise ValueError(f"decay must be greater than 0 and at most 1, got {self.decay!r}")
        if self.metric not in METRICS:
            raise ValueError(f"metric must be one of {', '.join(METRICS)}, got {self.metric!r}")
        unknown = sorted(set(self.targets) - set(CREDENTIALS))
        if unknown:
            raise ValueError(f"targets name unknown credential types {unknown}; expected some of {list(CREDENTIALS)}")
        targets = {
            kind: MappingProxyType({name: t if isinstance(t, Target) else Target.parse(t) for name, t in named.items()})
            for kind, named in self.targets.items()
        }
        object.__setattr__(self, "targets", MappingProxyType(targets))


@dataclass
class FairshareResult:
    """The fairshare state at ``at``.

    ``windows``: one row per window, n = 0 (current) .. depth-1: ``window``, ``start``,
    ``end`` (UNIX seconds; window 0 is counted up to ``at`` only), ``weight`` (decay ** n) and
    ``total`` (every job's usage in it).

    ``credentials``: one row per credential that had usage or has a target, by type in the
    order of :data:`CREDENTIALS` and then by name: ``type``, ``name``, ``usage_<n>`` for each
    window, ``decayed`` (sum_n d^n U[n]), ``effective`` (decayed / decayed total, 0..1),
    ``target`` (percent or usage; NaN: none), ``target_mode`` (or None), ``priority``
    (Maui's fairshare component; NaN without a target), ``over_cap`` (bool) and
    ``off_target`` (Maui's '*': below a floor, above a cap, or more than 5 points from a
    target).

    ``unplaced``: jobs that could not be placed in time (no end time) and count nowhere.
    """

    policy: FairsharePolicy
    at: float
    windows: pd.DataFrame
    credentials: pd.DataFrame
    unplaced: int


def decay_weights(decay: float, depth: int) -> npt.NDArray[np.float64]:
    """``decay ** n`` for n = 0 .. depth-1: the weight of each window."""
    return np.asarray(float(decay) ** np.arange(depth), dtype=np.float64)


def job_usage(jobs: pd.DataFrame, metric: str) -> npt.NDArray[np.float64]:
    """Each job's fairshare usage under ``metric`` (see the module's docstring).

    ``jobs`` needs, per metric: ``dedicated_ps``: ``walltime_s`` and ``cpu_only`` (requested
    cores, as :func:`~probes.accounting.penalty.job_penalties` gives) or else ``cpus`` and
    ``n_hosts``; ``dedicated_pes``: ``walltime_s`` and ``global_pe``; ``utilized_ps``:
    ``cpu_time_s``; ``mrpe``: ``usage``. NaN counts as 0.
    """
    if metric == "billed":
        raise ValueError(
            "fairshare metric 'billed' is not available yet: bills are not stored per job; "
            "use dedicated_ps, dedicated_pes, utilized_ps or mrpe"
        )
    if metric not in METRICS:
        raise ValueError(f"fairshare metric must be one of {', '.join(METRICS)}, got {metric!r}")

    def col(name: str) -> npt.NDArray[np.float64]:
        v = floats(jobs[name])
        v[np.isnan(v)] = 0.0
        return v

    if metric == "dedicated_ps":
        if "cpu_only" in jobs.columns:
            require_columns(jobs, ["walltime_s", "cpu_only"], "jobs table")
            return col("cpu_only") * col("walltime_s")
        require_columns(jobs, ["walltime_s", "cpus", "n_hosts"], "jobs table")
        hosts = col("n_hosts")
        return col("cpus") * np.where(hosts >= 1, hosts, 1.0) * col("walltime_s")
    if metric == "dedicated_pes":
        require_columns(jobs, ["walltime_s", "global_pe"], "jobs table (with the penalty's global_pe)")
        return col("global_pe") * col("walltime_s")
    if metric == "utilized_ps":
        require_columns(jobs, ["cpu_time_s"], "jobs table")
        return col("cpu_time_s")
    require_columns(jobs, ["usage"], "jobs table (with the penalty's usage)")
    return col("usage")


def window_usage(
    jobs: pd.DataFrame,
    usage: npt.ArrayLike,
    *,
    at: float,
    interval_s: float,
    depth: int,
) -> tuple[pd.DataFrame, npt.NDArray[np.float64]]:
    """Spread each job's usage over the windows its run overlaps.

    ``jobs`` needs ``end`` (UNIX seconds) and ``walltime_s`` (seconds); ``usage`` is one
    number per job. Returns ``(windows, contributions)``: the windows (``window``, ``start``,
    ``end``) and a jobs x depth array of what each job contributes to each window. A job with
    no walltime contributes all of it to the window holding its end.
    """
    require_columns(jobs, ["end", "walltime_s"], "jobs table")
    values = np.asarray(usage, dtype=np.float64)
    if values.shape != (len(jobs),):
        raise ValueError(f"usage must have one value per job ({len(jobs)}), got shape {values.shape}")
    start0 = np.floor(at / interval_s) * interval_s
    starts = start0 - interval_s * np.arange(depth)
    ends = np.minimum(starts + interval_s, at)
    windows = pd.DataFrame({"window": np.arange(depth), "start": starts, "end": starts + interval_s})

    end = floats(jobs["end"])
    wall = floats(jobs["walltime_s"])
    wall[~(wall > 0)] = 0.0  # NaN and negative: no walltime
    begin = end - wall
    values = np.where(np.isnan(values), 0.0, values)
    timed = wall > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        rate = np.where(timed, values / wall, 0.0)  # usage per second of run
    # a job with no end has NaN overlaps below: it counts nowhere
    instant = np.flatnonzero(~timed & (values != 0))
    out = np.empty((depth, len(jobs)))  # a contiguous row per window; returned transposed
    for n in range(depth):
        overlap = np.minimum(end, ends[n])
        overlap -= np.maximum(begin, starts[n])
        np.clip(overlap, 0.0, None, out=overlap)
        np.multiply(overlap, rate, out=out[n])
        # a job with no walltime lands whole in the window that holds its end
        e = end[instant]
        out[n, instant] = np.where((e >= starts[n]) & (e < starts[n] + interval_s) & (e <= at), values[instant], 0.0)
    out[np.isnan(out)] = 0.0
    out = out.T
    return windows, out


def fairshare(jobs: pd.DataFrame, usage: npt.ArrayLike, policy: FairsharePolicy, *, at: float) -> FairshareResult:
    """The fairshare state of every credential at ``at`` (UNIX seconds).

    ``jobs`` needs ``end`` and ``walltime_s`` (see :func:`window_usage`) and the columns of
    :data:`CREDENTIALS` it has (``user``, ``group``, ``project``, ``queue``, ``qos``, ``submitter``; a
    missing column or a missing value is no credential of that type). ``usage``: one number
    per job, e.g. from :func:`job_usage`.
    """
    if not np.isfinite(at):
        raise ValueError(f"at must be a time in UNIX seconds, got {at!r}")
    windows, contrib = window_usage(jobs, usage, at=at, interval_s=policy.interval_s, depth=policy.depth)
    weights = decay_weights(policy.decay, policy.depth)
    total = contrib.sum(axis=0)
    windows["weight"] = weights
    windows["total"] = total
    decayed_total = float(total @ weights)

    by_window = np.ascontiguousarray(contrib.T)  # one contiguous row per window, for bincount
    parts = []
    for kind, column in CREDENTIALS.items():
        targets = policy.targets.get(kind, {})
        names: npt.NDArray[np.object_]
        sums: npt.NDArray[np.float64]
        if column in jobs.columns:
            found, names = codes(jobs[column])
            # jobs without this credential go to one extra bin, dropped after: no masking
            bins = np.where(found < 0, len(names), found)
            sums = np.column_stack(
                [np.bincount(bins, weights=by_window[n], minlength=len(names) + 1)[:-1] for n in range(policy.depth)]
            )
            used = sums.any(axis=1)
            names, sums = names[used], sums[used]
        else:
            names, sums = np.array([], dtype=object), np.zeros((0, policy.depth))
        present = set(names.tolist())
        extra = [t for t in targets if t not in present]
        names = np.concatenate([names.astype(str), np.array(extra, dtype=object)]).astype(object)
        sums = np.vstack([sums, np.zeros((len(extra), policy.depth))])
        order = np.argsort(names.astype(str), kind="stable")
        names, sums = names[order], sums[order]
        frame = pd.DataFrame({"type": kind, "name": names})
        for n in range(policy.depth):
            frame[f"usage_{n}"] = sums[:, n]
        frame["decayed"] = sums @ weights
        frame["target"] = [targets[str(x)].value if str(x) in targets else np.nan for x in names]
        frame["target_mode"] = [targets[str(x)].mode if str(x) in targets else None for x in names]
        parts.append(frame)
    creds = pd.concat(parts, ignore_index=True)
    creds["effective"] = creds["decayed"] / decayed_total if decayed_total > 0 else 0.0
    _priorities(creds, policy.percent)
    return FairshareResult(
        policy=policy,
        at=float(at),
        windows=windows,
        credentials=creds,
        unplaced=int(np.isnan(floats(jobs["end"])).sum()),
    )


def _priorities(creds: pd.DataFrame, percent: bool) -> None:
    """Maui's fairshare priority component, over-cap and off-target flags, in place."""
    pct = 100.0 * creds["effective"].to_numpy(dtype=np.float64)
    target = creds["target"].to_numpy(dtype=np.float64)
    mode = creds["target_mode"].to_numpy(dtype=object)
    with np.errstate(divide="ignore", invalid="ignore"):
        raw = 1.0 - pct / target if percent else target - pct
    priority = np.where(mode == "floor", np.maximum(raw, 0.0), raw)
    priority = np.where(mode == "cap", np.minimum(raw, 0.0), priority)
    hard = (mode == "hard_cap") | (mode == "hard_cap_absolute")
    priority = np.where(hard, 0.0, priority)
    creds["priority"] = np.where(np.isnan(target), np.nan, priority)
    # "If the fairshare cap is reached or exceeded, the job is not allowed to run"
    creds["over_cap"] = ((mode == "hard_cap") & (pct >= target)) | (
        (mode == "hard_cap_absolute") & (creds["decayed"].to_numpy(dtype=np.float64) >= target)
    )
    creds["off_target"] = (
        ((mode == "floor") & (pct < target))
        | ((mode == "cap") & (pct > target))
        | ((mode == "target") & (np.abs(pct - target) > _OFF_TARGET_POINTS))
    )
