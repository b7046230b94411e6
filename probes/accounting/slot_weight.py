"""A ``SLOT_WEIGHT`` for HTCondor's negotiator that approximates a fairacct metric.

The negotiator charges a submitter ``SLOT_WEIGHT x wall time`` for each slot it holds, and
HTCondor lets ``SLOT_WEIGHT`` use only the slot's ``Cpus`` (cores), ``Memory`` (MiB) and
``Disk`` (KiB). fairacct's metrics charge a node request, per second of its wall time, a
*rate*:

- ``penalty`` (Klusáček & Rudová 2015, "Multi-resource aware fairsharing for heterogeneous
  systems"): ``queue_cost x speed x PE``, PE being its price on the cheapest class
  it fits, ``max over r of w_r x req_r / avail_i,r x avail_i,cpus x node_cost_i``;
- ``standard-job``: ``speed x max over r of req_r / standard_r``;
- ``billed`` (Andrijauskas et al. 2023, "Defining a canonical unit for accounting purposes"): the
  share of its node an allocation was billed, priced as the penalty prices a request,
  ``max over r of billed_r / total_r x total_cpus`` (see :func:`billed_samples`).

On one machine class these are a max of linear terms, so the weight is sought in that form:

    SLOT_WEIGHT = max({Cpus * a, Memory * b, Disk * c})      (a, b, c >= 0)

which is exact for the penalty on one class (``a = node_cost``, ``b = avail_cpus x node_cost /
avail_memory``) and for the standard job (``a = 1 / standard_cpus`` ...) where speeds and queue
costs are 1. Over several classes (and speeds, queue costs, GPUs, which the negotiator does not
see) no weight of that form is exact in general: the coefficients then minimize the usage
charged to the wrong requests, ``sum of count x walltime x |weight - rate|`` (node-seconds
weigh: the long and wide requests that make most of the usage count most; an absolute error,
not a squared one, so that a few whole-node requests cannot pull every other job's weight
off: on the MetaCentrum workload, least squares left almost every job more than 5 % off, this
fit only a few in a hundred). The fit alternates two exact steps (:func:`fit_slot_weight`):
with the coefficients fixed, each sample's term in the max is known; with the terms fixed, each
coefficient is a weighted median. It starts from the best three of the candidates given (each
class's exact weight) and each resource's own fit, and keeps the best weight it met: a local
search, good on the few machine classes of a site.

A samples table (what the fit and the error take) has one row per node request: ``job``
(the job's row position), ``user``, ``count`` (nodes), ``cpus``, ``memory``, ``disk`` (one
node's request: cores, MiB, KiB), ``walltime_s`` (seconds) and ``rate`` (the metric per node
and second).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd

from probes.accounting._tables import RESOURCES, floats, require_columns
from probes.accounting.billing import _parent_positions, _slot_index
from probes.accounting.penalty import Penalties, PenaltyPolicy

__all__ = [
    "SAMPLE_COLUMNS",
    "SLOT_RESOURCES",
    "SlotWeight",
    "SlotWeightError",
    "billed_samples",
    "class_weights",
    "fit_slot_weight",
    "slot_samples",
    "slot_weight_error",
    "standard_job_weight",
]

SLOT_RESOURCES = ("cpus", "memory", "disk")
"""The resources ``SLOT_WEIGHT`` may use, in the order of its terms."""

SAMPLE_COLUMNS = ("job", "user", "count", *SLOT_RESOURCES, "walltime_s", "rate")
"""A samples table's columns (see the module's docstring)."""

_ATTRIBUTE = {"cpus": "Cpus", "memory": "Memory", "disk": "Disk"}
# What is printed is what is measured: coefficients are rounded to this many significant
# digits before the error is computed (1/4096 = 0.000244140625 still prints exactly).
_DIGITS = 10
_MAX_ROUNDS = 100
_DESCENTS = 3
_WITHIN = 0.05  # a job's weight "matches" its metric within 5 %


def _round(value: float) -> float:
    return float(f"{value:.{_DIGITS}g}") if value > 0 and math.isfinite(value) else 0.0


@dataclass(frozen=True)
class SlotWeight:
    """``max({Cpus * cpus, Memory * memory, Disk * disk})``: the coefficients are the weight of
    a core, a MiB and a KiB (0: the resource takes no part)."""

    cpus: float = 0.0
    memory: float = 0.0
    disk: float = 0.0

    def __post_init__(self) -> None:
        for r in SLOT_RESOURCES:
            v = getattr(self, r)
            if not (math.isfinite(v) and v >= 0):
                raise ValueError(f"the {r} coefficient of a slot weight must be a number >= 0, got {v!r}")
            object.__setattr__(self, r, _round(float(v)))

    @classmethod
    def of(cls, coefficients: npt.ArrayLike) -> SlotWeight:
        c = np.asarray(coefficients, dtype=np.float64)
        return cls(*(float(x) for x in c))

    def coefficients(self) -> npt.NDArray[np.float64]:
        return np.array([self.cpus, self.memory, self.disk], dtype=np.float64)

    def expression(self) -> str:
        """The weight in ClassAd syntax (``max`` takes a list there), e.g.
        ``max({Cpus * 1, Memory * 0.000244140625})``; ``0`` when every coefficient is 0."""
        terms = [f"{_ATTRIBUTE[r]} * {getattr(self, r):.{_DIGITS}g}" for r in SLOT_RESOURCES if getattr(self, r) > 0]
        if not terms:
            return "0"
        return terms[0] if len(terms) == 1 else "max({" + ", ".join(terms) + "})"

    def rates(self, slots: pd.DataFrame) -> npt.NDArray[np.float64]:
        """The weight of each row of ``slots`` (``cpus``, ``memory``, ``disk``: cores, MiB,
        KiB; missing amounts are 0), as the negotiator computes it."""
        return np.asarray(np.max(_features(slots, "slots table") * self.coefficients(), axis=1), dtype=np.float64)


def _features(table: pd.DataFrame, input_name: str) -> npt.NDArray[np.float64]:
    require_columns(table, SLOT_RESOURCES, input_name)
    x = np.column_stack([floats(table[r]) for r in SLOT_RESOURCES]) if len(table) else np.zeros((0, 3))
    x[np.isnan(x)] = 0.0
    return x


def class_weights(machines: pd.DataFrame, policy: PenaltyPolicy) -> list[SlotWeight]:
    """The weight that is the penalty on each machine class (the class's formula 7 with a slot
    for request): ``w_r x avail_cpus x node_cost / avail_r`` for r in the penalty's resources
    that a slot has (GPUs it cannot have: they are left out). ``machines`` needs ``cpus``,
    ``memory``, ``disk`` and ``node_cost``; an unknown (NaN) or zero amount takes no part."""
    require_columns(machines, [*SLOT_RESOURCES, "node_cost"], "machines table")
    weights = policy.weights()
    node = machines["cpus"].to_numpy(dtype=np.float64) * machines["node_cost"].to_numpy(dtype=np.float64)
    out = []
    for i in range(len(machines)):
        coef = []
        for r in SLOT_RESOURCES:
            cap = float(machines[r].iloc[i])
            coef.append(weights[r] * node[i] / cap if r in weights and cap > 0 else 0.0)
        out.append(SlotWeight.of(coef))
    return out


def standard_job_weight(policy: PenaltyPolicy) -> SlotWeight:
    """The weight that is the standard-job metric: ``1 / standard_r`` per resource (GPUs left out)."""
    return SlotWeight(**{r: 1.0 / v for r, v in policy.standard_job.items() if r in SLOT_RESOURCES})


def slot_samples(penalties: Penalties, metric: str, *, policy: PenaltyPolicy) -> pd.DataFrame:
    """The samples (:data:`SAMPLE_COLUMNS`) of priced jobs under ``metric`` (``penalty`` or
    ``standard-job``): one per node request of :func:`~probes.accounting.penalty.job_penalties`'
    output, whose ``jobs`` need ``user``, ``walltime_s``, ``queue_cost`` and ``speed_used``.
    """
    jobs, req = penalties.jobs, penalties.requests
    require_columns(jobs, ["user", "walltime_s", "queue_cost", "speed_used"], "jobs table")
    require_columns(req, ["job", "count", *RESOURCES, "price"], "requests table")
    job = req["job"].to_numpy(dtype=np.int64)
    speed = jobs["speed_used"].to_numpy(dtype=np.float64)[job]
    if metric == "penalty":
        rate = jobs["queue_cost"].to_numpy(dtype=np.float64)[job] * req["price"].to_numpy(dtype=np.float64)
    elif metric == "standard-job":
        rate = np.zeros(len(req))
        for r, amount in policy.standard_job.items():
            np.maximum(rate, np.nan_to_num(floats(req[r])) / amount, out=rate)
    else:
        raise ValueError(f"slot_samples: metric must be penalty or standard-job, got {metric!r}")
    wall = np.nan_to_num(floats(jobs["walltime_s"]))[job]
    out = pd.DataFrame(
        {
            "job": job,
            "user": jobs["user"].astype(object).where(jobs["user"].notna(), None).to_numpy()[job],
            "count": np.nan_to_num(floats(req["count"]), nan=1.0),
            **{r: np.nan_to_num(floats(req[r])) for r in SLOT_RESOURCES},
            "walltime_s": np.maximum(wall, 0.0),
            "rate": rate * speed,
        }
    )
    return out


def billed_samples(
    nodes: pd.DataFrame,
    bills: pd.DataFrame,
    *,
    resources: Sequence[str] = ("cpus", "memory"),
    keys: Sequence[str] = (),
) -> pd.DataFrame:
    """The samples of billed allocations (Andrijauskas et al. 2023): one per allocation, ``job`` its row
    position in ``bills``, ``walltime_s`` its ``interval_s`` and ``rate`` the share of its node
    it was billed, in cores, ``max over r in resources of billed_r / total_r x total_cpus``
    (``resources``: those the penalty prices, of cpus, memory, disk): what its bill would cost
    were the node priced as the penalty prices it.

    ``nodes`` and ``bills`` are :func:`~probes.accounting.billing.bill`'s output (``nodes``:
    ``name``, ``total_<r>``; ``bills``: ``parent``, ``user``, ``<r>``, ``billed_<r>``,
    ``interval_s``), and ``keys`` the ones ``bill`` was given: with several snapshots a node is
    named once per instant, and an allocation's node is the one of its own instant.
    Allocations left unbilled (NaN bills: orphans, unknown overhead) are left out.
    """
    key_list = [keys] if isinstance(keys, str) else list(keys)
    require_columns(nodes, ["name", *(f"total_{r}" for r in SLOT_RESOURCES), *key_list], "nodes table")
    require_columns(
        bills,
        ["parent", "user", "interval_s", *SLOT_RESOURCES, *(f"billed_{r}" for r in SLOT_RESOURCES), *key_list],
        "bills table",
    )
    at = _parent_positions(bills, _slot_index(nodes, key_list), key_list)
    known = at >= 0
    total = {r: np.where(known, floats(nodes[f"total_{r}"])[np.maximum(at, 0)], np.nan) for r in SLOT_RESOURCES}
    rate = np.zeros(len(bills))
    billed_any = np.zeros(len(bills), dtype=bool)
    for r in resources:
        billed = floats(bills[f"billed_{r}"])
        with np.errstate(divide="ignore", invalid="ignore"):
            share = np.where(total[r] > 0, billed / total[r], 0.0)
        billed_any |= ~np.isnan(billed)
        np.fmax(rate, share, out=rate)
    rate *= total["cpus"]
    keep: npt.NDArray[np.bool_] = known & billed_any & np.isfinite(rate)
    out = pd.DataFrame(
        {
            "job": np.arange(len(bills), dtype=np.int64),
            "user": bills["user"].astype(object).where(bills["user"].notna(), None).to_numpy(),
            "count": 1.0,
            **{r: np.nan_to_num(floats(bills[r])) for r in SLOT_RESOURCES},
            "walltime_s": np.maximum(np.nan_to_num(floats(bills["interval_s"])), 0.0),
            "rate": rate,
        }
    )
    return out[keep].reset_index(drop=True)


def _check_samples(samples: pd.DataFrame) -> None:
    require_columns(samples, SAMPLE_COLUMNS, "samples table")


def _loss(
    x: npt.NDArray[np.float64], y: npt.NDArray[np.float64], w: npt.NDArray[np.float64], c: npt.NDArray[np.float64]
) -> float:
    return float(np.sum(w * np.abs(np.max(x * c, axis=1) - y)))


def _weighted_median(values: npt.NDArray[np.float64], weights: npt.NDArray[np.float64]) -> float:
    """The smallest value at which the weights below reach half the total."""
    order = np.argsort(values, kind="stable")
    cum = np.cumsum(weights[order])
    return float(values[order][np.searchsorted(cum, cum[-1] / 2.0)])


def _descend(x: npt.NDArray[np.float64], y: npt.NDArray[np.float64], w: npt.NDArray[np.float64],
             start: npt.NDArray[np.float64]) -> tuple[float, npt.NDArray[np.float64]]:  # fmt: skip
    c = start.copy()
    best = (_loss(x, y, w, c), c.copy())
    for _ in range(_MAX_ROUNDS):
        active = np.argmax(x * c, axis=1)  # a tie goes to the first resource: any is exact there
        new = c.copy()
        for r in range(x.shape[1]):
            mine = (active == r) & (x[:, r] > 0)
            if mine.any():  # sum w |c x - y| = sum (w x) |c - y / x|: a weighted median
                new[r] = _weighted_median(y[mine] / x[mine, r], w[mine] * x[mine, r])
        if np.array_equal(new, c):
            break
        c = new
        loss = _loss(x, y, w, c)
        if loss < best[0]:
            best = (loss, c.copy())
    return best


def fit_slot_weight(
    samples: pd.DataFrame, starts: Sequence[SlotWeight] = (), *, resources: Sequence[str] = SLOT_RESOURCES
) -> SlotWeight:
    """The weight that minimizes ``sum of count x walltime x |weight - rate|`` over the
    samples, i.e. the usage it charges to the wrong requests (see the module's docstring),
    searched from the best three of ``starts``, every resource's own fit at once and each
    resource alone; ties go to the earliest start.

    Only ``resources`` (of :data:`SLOT_RESOURCES`) take part: those the metric prices, so that
    a resource it ignores (disk, for the default penalty) cannot stand in for one it prices.
    Raises ``ValueError`` when no sample has both usage and time (nothing to fit).
    """
    _check_samples(samples)
    unknown = [r for r in resources if r not in SLOT_RESOURCES]
    if unknown or not resources:
        raise ValueError(f"a slot weight can use some of {list(SLOT_RESOURCES)}, got {list(resources)}")
    x = _features(samples, "samples table")
    x[:, [r not in resources for r in SLOT_RESOURCES]] = 0.0
    y = np.nan_to_num(floats(samples["rate"]))
    w = np.nan_to_num(floats(samples["count"])) * np.nan_to_num(floats(samples["walltime_s"]))
    use = (w > 0) & (y >= 0)
    if not np.any(use & (y > 0)):
        raise ValueError("no sample has both a rate and a walltime above 0: there is no usage to fit a slot weight to")
    # the same shape and rate repeat through a workload: fit each distinct one once, weighted
    distinct = pd.DataFrame({"c": x[use, 0], "m": x[use, 1], "d": x[use, 2], "y": y[use], "w": w[use]})
    distinct = distinct.groupby(["c", "m", "d", "y"], sort=False)["w"].sum().reset_index()
    x, y, w = distinct[["c", "m", "d"]].to_numpy(), distinct["y"].to_numpy(), distinct["w"].to_numpy()
    alone = []
    for r in range(3):
        if np.any(x[:, r] > 0):
            c = np.zeros(3)
            c[r] = _weighted_median(y[x[:, r] > 0] / x[x[:, r] > 0, r], (w * x[:, r])[x[:, r] > 0])
            alone.append(c)
    best: tuple[float, npt.NDArray[np.float64]] | None = None
    used = np.array([r in resources for r in SLOT_RESOURCES])
    # a coefficient at 0 is never active, so never refitted: also start from every resource's
    # own fit at once, from which each keeps the samples where it is the largest term
    together = [np.sum(alone, axis=0)] if len(alone) > 1 else []
    candidates = [np.where(used, s.coefficients(), 0.0) for s in starts] + together + alone
    # a descent sorts the samples a few times per round: only from the best few starts (on a
    # million distinct requests, descending from all of 50 classes' starts took over ten times the
    # CPU, for the same weight: bench_usage.py)
    losses = [_loss(x, y, w, c) for c in candidates]
    for i in sorted(range(len(candidates)), key=lambda i: (losses[i], i))[:_DESCENTS]:
        _, c = _descend(x, y, w, candidates[i])
        rounded = SlotWeight.of(c).coefficients()  # the rounded weight is the one printed
        loss = _loss(x, y, w, rounded)
        if best is None or loss < best[0]:
            best = (loss, rounded)
    assert best is not None  # some sample has a rate, so some resource has a request
    return SlotWeight.of(best[1])


@dataclass
class SlotWeightError:
    """How well a weight approximates the metric on the samples.

    ``jobs``: number of jobs with a metric above 0 (those the relative errors are over);
    ``mean_abs_rel_error``: the mean over them of ``|weight - metric| / metric`` (per job, the
    weights and rates of its nodes summed); ``within``: the share of them within 5 % (0..1);
    ``usage_error``: ``sum |W_j - M_j| / sum M_j`` over jobs, their usages (rate x walltime):
    the share of the metric's usage the weight puts on the wrong jobs; ``total_error``:
    ``sum W / sum M - 1``. ``users``: per user, ``jobs``, ``metric_usage`` and
    ``weight_usage`` (metric x seconds), their shares of the total (``metric_share``,
    ``weight_share``, percent), ``error_pct`` (``100 x (weight / metric - 1)``, NaN where the
    metric is 0), worst (largest ``|error_pct|``) first.
    """

    jobs: int
    mean_abs_rel_error: float
    within: float
    usage_error: float
    total_error: float
    users: pd.DataFrame


def slot_weight_error(samples: pd.DataFrame, weight: SlotWeight) -> SlotWeightError:
    """The error of ``weight`` against the samples' metric, per job and per user."""
    _check_samples(samples)
    job = samples["job"].to_numpy(dtype=np.int64)
    count = np.nan_to_num(floats(samples["count"]))
    codes, jobs = pd.factorize(job)
    n = len(jobs)
    metric = np.bincount(codes, weights=count * np.nan_to_num(floats(samples["rate"])), minlength=n)
    weighted = np.bincount(codes, weights=count * weight.rates(samples), minlength=n)
    first = np.flatnonzero(~pd.Series(codes).duplicated().to_numpy())
    wall = np.nan_to_num(floats(samples["walltime_s"]))[first]
    user = samples["user"].to_numpy(dtype=object)[first]
    priced = metric > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.abs(weighted - metric)[priced] / metric[priced]
    m_use, w_use = metric * wall, weighted * wall
    total = float(m_use.sum())
    frame = pd.DataFrame({"user": user, "jobs": 1, "metric_usage": m_use, "weight_usage": w_use})
    users = frame.groupby("user", dropna=False, sort=False).sum().reset_index()
    for col, share in (("metric_usage", "metric_share"), ("weight_usage", "weight_share")):
        s = users[col].sum()
        users[share] = 100.0 * users[col] / s if s > 0 else 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        users["error_pct"] = np.where(
            users["metric_usage"] > 0, 100.0 * (users["weight_usage"] / users["metric_usage"] - 1.0), np.nan
        )
    users["user"] = users["user"].astype(object).where(users["user"].notna(), None)
    order = np.lexsort(
        (users["user"].astype(str).to_numpy(), -np.nan_to_num(np.abs(users["error_pct"].to_numpy()), nan=-1.0))
    )
    return SlotWeightError(
        jobs=int(priced.sum()),
        mean_abs_rel_error=float(rel.mean()) if len(rel) else float("nan"),
        within=float(np.mean(rel <= _WITHIN + 1e-12)) if len(rel) else float("nan"),
        usage_error=float(np.abs(w_use - m_use).sum() / total) if total > 0 else float("nan"),
        total_error=float(w_use.sum() / total - 1.0) if total > 0 else float("nan"),
        users=users.iloc[order].reset_index(drop=True),
    )
