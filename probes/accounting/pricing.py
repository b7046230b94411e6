"""The price of a node request on the machine classes that could run it (Klusáček & Rudová
2015, "Multi-resource aware fairsharing for heterogeneous systems", section 3, formula 7).

For the k-th node request of job j and a machine class i:

    PE_k(j, i) = max over r of (w_r * req_k,r / avail_i,r) * avail_i,cpus * node_cost_i

and a request's price is the cheapest among the classes on which it fits (the min of
formula 8, which :mod:`probes.accounting.penalty` sums over a job's requests).

A request *fits* a class when every requested resource (cores, memory, disk, GPUs) is at most
the class's and every pinned property matches (see :func:`pin_mask`). An exclusive request
(a whole node) costs ``avail_i,cpus * node_cost_i``. The resources in the max are cores and
memory by default; GPUs may be added with a relaxation weight ``w_gpus`` (the paper's section
5: a job holding all GPUs of a node does not stop others from using its cores); every other
weight is 1 (:class:`PenaltyPolicy`). Each node of a request is priced on its own, as formula 8
does: the number of nodes in a class is not a constraint, which keeps the price independent of
what else runs.

A request that fits no class is still priced, and flagged: on the class its job ran on when
that is known, else on the cheapest class its pins allow (any class if they allow none), with
the request's shares taken beyond one node (a 600 GiB request on 512 GiB nodes costs 600/512
of a node) and resources the class lacks left out of the max.

Units are HTCondor's: cores, MiB, KiB, devices.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

import numpy as np
import numpy.typing as npt
import pandas as pd

from probes.accounting._tables import RESOURCES, amounts, require_columns
from probes.accounting.machines import machines_table

__all__ = ["REQUEST_COLUMNS", "PenaltyPolicy", "pin_mask", "price_requests"]

REQUEST_COLUMNS = ("job", "count", *RESOURCES, "exclusive", "properties")

# Rows priced together: 8192 requests x 50 classes of float64 is 3 MB, which stays in cache.
_CHUNK = 8192
# A request equal to a class's capacity fits it even after float rounding of a sum of parts.
_FIT_EPS = 1e-9
_HOST_NUMBER = re.compile(r"-?\d+$")
_PRICED_AS = ["cheapest", "ran_on", "nearest"]


@dataclass(frozen=True)
class PenaltyPolicy:
    """How jobs are priced.

    ``resources``: the resources in the max of the penalty and of the global PE (cpus is
    always priced through ``avail_i,cpus``; listing it adds the core share to the max).
    ``gpu_weight``: the relaxation weight of the GPU share when "gpus" is in ``resources``.
    ``standard_job``: resource -> amount of the standard job (cores, MiB, KiB, devices);
    resources it leaves out take no part in the standard-job metric. ``queue_costs``: queue
    name -> cost; other queues cost ``default_queue_cost``.
    """

    resources: tuple[str, ...] = ("cpus", "memory")
    gpu_weight: float = 1.0
    standard_job: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({"cpus": 1.0, "memory": 1024.0}))
    queue_costs: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))
    default_queue_cost: float = 1.0

    def __post_init__(self) -> None:
        resources = tuple(self.resources)
        unknown = [r for r in resources if r not in RESOURCES]
        if unknown or not resources:
            raise ValueError(f"penalty resources must be some of {list(RESOURCES)}, got {list(resources)}")
        object.__setattr__(self, "resources", resources)
        if not (np.isfinite(self.gpu_weight) and self.gpu_weight >= 0):
            raise ValueError(f"gpu_weight must be a number >= 0, got {self.gpu_weight!r}")
        std = {r: float(v) for r, v in self.standard_job.items()}
        bad = [r for r in std if r not in RESOURCES]
        if bad or not any(v > 0 for v in std.values()) or any(not np.isfinite(v) or v < 0 for v in std.values()):
            raise ValueError(
                f"the standard job must give amounts >= 0 of some of {list(RESOURCES)}, at least one > 0, got {std}"
            )
        object.__setattr__(self, "standard_job", MappingProxyType({r: v for r, v in std.items() if v > 0}))
        costs = {str(q): float(c) for q, c in self.queue_costs.items()}
        for q, c in [*costs.items(), ("(default)", float(self.default_queue_cost))]:
            if not (np.isfinite(c) and c > 0):
                raise ValueError(f"the cost of queue {q!r} must be a number greater than 0, got {c!r}")
        object.__setattr__(self, "queue_costs", MappingProxyType(costs))

    def weights(self) -> dict[str, float]:
        """Resource -> weight of its share in the max (only the resources in the max)."""
        return {r: (self.gpu_weight if r == "gpus" else 1.0) for r in self.resources}


def pin_mask(properties: Sequence[str], machines: pd.DataFrame) -> tuple[npt.NDArray[np.bool_], list[str]]:
    """Which classes a node request's pinned properties allow, and the pins no class could check.

    ``machines`` needs ``name``, ``count``, ``cpus``, ``memory``, ``gpus``, ``properties`` and
    ``hosts``. The pins, each negated by a leading ``^``:

    - ``cluster=NAME``: the class is NAME (MetaCentrum's ``cl_NAME``);
    - ``host=H``: H is one of the class's hosts, or its short name is the class's name
      followed by a number (``zewura12.cerit-sc.cz`` is a node of ``zewura``); a negated host
      rules out only a class of one node, since the others of a larger class remain;
    - ``cpus=N``, ``memory=N``, ``gpus=N``: the class's node has exactly N;
    - anything else (``brno``, ``GLIDEIN_Site=UCSD``): one of the class's ``properties``.
      A property that no class lists cannot be checked: it is returned, and ignored.
    """
    names = machines["name"].to_numpy(dtype=object)
    n = len(names)
    mask = np.ones(n, dtype=bool)
    unchecked: list[str] = []
    known = frozenset().union(*machines["properties"]) if n else frozenset()
    for pin in properties:
        negated = pin.startswith("^")
        body = pin[1:] if negated else pin
        key, _, value = body.partition("=")
        if key == "cluster" and value:
            hit = np.array([str(x).lower() == value.lower() for x in names], dtype=bool)
        elif key == "host" and value:
            hit = _host_hits(value, machines)
            if negated:  # other nodes of a larger class are still there
                hit &= machines["count"].to_numpy() <= 1
        elif key in ("cpus", "memory", "gpus") and value:
            try:
                amount = float(value)
            except ValueError:
                unchecked.append(pin)
                continue
            hit = machines[key].to_numpy(dtype=np.float64) == amount
        elif body in known:
            hit = np.array([body in p for p in machines["properties"]], dtype=bool)
        else:
            unchecked.append(pin)
            continue
        mask &= ~hit if negated else hit
    return mask, unchecked


def _host_hits(host: str, machines: pd.DataFrame) -> npt.NDArray[np.bool_]:
    short = host.split(".", 1)[0]
    stem = _HOST_NUMBER.sub("", short).lower()  # zewura12 -> zewura, elmo1-12 -> elmo1
    return np.array(
        [
            host in hosts
            or any(h.split(".", 1)[0] == short for h in hosts)
            or str(name).lower() in (stem, short.lower())
            for name, hosts in zip(machines["name"], machines["hosts"], strict=True)
        ],
        dtype=bool,
    )


def price_requests(
    requests: pd.DataFrame,
    machines: pd.DataFrame,
    policy: PenaltyPolicy | None = None,
    *,
    ran_on: npt.ArrayLike | None = None,
) -> tuple[pd.DataFrame, dict[str, int]]:
    """The price of one node of each request: ``min over fitting classes of PE_k(j, i)``.

    ``requests`` needs :data:`REQUEST_COLUMNS` but ``job``: ``count`` (nodes), ``cpus``,
    ``memory``, ``disk``, ``gpus`` per node (cores, MiB, KiB, devices; NaN is 0),
    ``exclusive`` (bool) and ``properties`` (a tuple of pins, see :func:`pin_mask`; a
    missing column pins nothing). ``machines`` is a machines table
    (:func:`~probes.accounting.machines.machines_table`). ``ran_on``: per request, the
    position in ``machines`` of the class it ran on, -1 where unknown; used only to price a
    request that fits nowhere.

    Returns ``(priced, unchecked)``: ``priced`` is a copy of ``requests`` with ``price`` (one
    node, float), ``priced_on`` (class name, categorical), ``class_index`` (its position),
    ``n_fit`` (how many classes it fits), ``fits`` (bool) and ``priced_as`` (categorical:
    "cheapest", or for a request that fits nowhere "ran_on" or "nearest"); ``unchecked`` counts the requests naming each
    pin no class could check. Computed on the distinct requests, as whole arrays
    (requests x classes) in chunks.
    """
    policy = policy or PenaltyPolicy()
    require_columns(requests, ["count", *RESOURCES, "exclusive"], "requests table")
    machines = machines_table(machines)
    if not len(machines):
        raise ValueError("machines table is empty: there is no class to price the requests against")
    k = len(requests)
    req = np.column_stack([amounts(requests[r]) for r in RESOURCES]) if k else np.zeros((0, len(RESOURCES)))
    if (req < 0).any():
        raise ValueError("requests table has negative resource amounts; a request asks for 0 or more of each resource")
    exclusive = requests["exclusive"].fillna(False).to_numpy(dtype=bool)
    pin_sets: Iterable[tuple[str, ...]]
    if "properties" in requests.columns:
        pin_codes, pin_sets = pd.factorize(
            pd.Series([tuple(p) if p else () for p in requests["properties"]], dtype=object)
        )
    else:  # nothing pinned: one set of pins, the empty one
        pin_codes, pin_sets = np.zeros(k, dtype=np.int64), [()]
    masks: list[npt.NDArray[np.bool_]] = []
    unchecked: dict[str, int] = {}
    for pins in pin_sets:
        mask, missing = pin_mask(pins, machines)
        masks.append(mask)
        for pin in missing:
            unchecked[pin] = unchecked.get(pin, 0) + int(np.sum(pin_codes == len(masks) - 1))
    pin_matrix = np.array(masks, dtype=bool).reshape(len(masks), len(machines))

    # price each distinct request once: workloads repeat a few shapes many times
    key_columns = [req[:, i] for i in range(len(RESOURCES))] + [
        exclusive.astype(np.float64),
        pin_codes.astype(np.float64),
    ]
    codes, first = _distinct_rows(key_columns)
    ureq, uexcl, upin = req[first], exclusive[first], pin_codes[first]
    price, best, n_fit = _cheapest(
        ureq, uexcl, pin_matrix[upin] if len(first) else np.zeros((0, len(machines)), bool), machines, policy
    )
    price, best, n_fit = price[codes], best[codes], n_fit[codes]

    priced_as = np.where(n_fit > 0, 0, -1).astype(np.int8)  # codes of _PRICED_AS
    lost = np.flatnonzero(n_fit == 0)
    if len(lost):
        where = np.full(k, -1, dtype=np.int64) if ran_on is None else np.asarray(ran_on, dtype=np.int64)
        p, b, how = _fallback(req[lost], exclusive[lost], pin_matrix[pin_codes[lost]], where[lost], machines, policy)
        price[lost], best[lost], priced_as[lost] = p, b, how
    out = requests.copy(deep=False)  # new columns only: the caller's table is not touched
    out["price"] = price
    out["class_index"] = best
    names = pd.Index(machines["name"].astype(object))
    out["priced_on"] = pd.Categorical.from_codes(best, categories=names)
    out["n_fit"] = n_fit
    out["fits"] = n_fit > 0
    out["priced_as"] = pd.Categorical.from_codes(priced_as, categories=pd.Index(_PRICED_AS))
    return out, dict(sorted(unchecked.items()))


def _distinct_rows(columns: Sequence[npt.NDArray[np.float64]]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Codes of the distinct rows of ``columns`` and the position of each one's first row.

    Column by column factorization, combined pairwise: much faster than hashing whole rows.
    """
    n = len(columns[0]) if columns else 0
    key = np.zeros(n, dtype=np.int64)
    for col in columns:
        if n == 0 or col.min() == col.max():  # a constant column tells no rows apart
            continue
        codes, uniques = pd.factorize(col)
        key, _ = pd.factorize(key * len(uniques) + codes)
    codes, _ = pd.factorize(key)
    # factorize numbers values in order of first appearance, so the k-th first row is code k's
    first = np.flatnonzero(~pd.Series(codes).duplicated().to_numpy())
    return codes.astype(np.int64), first.astype(np.int64)


def _node_prices(machines: pd.DataFrame) -> npt.NDArray[np.float64]:
    """What a whole node of each class costs: its cores times its cost per core."""
    cores: npt.NDArray[np.float64] = machines["cpus"].to_numpy(dtype=np.float64)
    cost: npt.NDArray[np.float64] = machines["node_cost"].to_numpy(dtype=np.float64)
    return cores * cost


def _coefficients(
    machines: pd.DataFrame, policy: PenaltyPolicy, *, relaxed: bool
) -> list[tuple[int, npt.NDArray[np.float64]]]:
    """Per resource in the max: ``w_r * avail_cpus * node_cost / avail_r`` for each class.

    A class with none of a resource cannot host a request for it: its coefficient is huge, so
    that a request for it prices the class out (its zero requests still cost 0). ``relaxed``
    leaves such resources out instead, to price a request that fits nowhere. An unknown (NaN)
    amount takes no part.
    """
    node = _node_prices(machines)
    out = []
    for r, w in policy.weights().items():
        cap = machines[r].to_numpy(dtype=np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            coef = np.where(cap > 0, w * node / cap, 0.0 if relaxed else 1e200)
        coef = np.where(np.isnan(cap) | (w == 0), 0.0, coef)
        out.append((RESOURCES.index(r), coef))
    return out


def _cheapest(
    req: npt.NDArray[np.float64],
    exclusive: npt.NDArray[np.bool_],
    pins: npt.NDArray[np.bool_],
    machines: pd.DataFrame,
    policy: PenaltyPolicy,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Price, cheapest class and number of fitting classes of each request, in chunks."""
    k, c = len(req), len(machines)
    node = _node_prices(machines)
    coefs = _coefficients(machines, policy, relaxed=False)
    caps = np.column_stack([machines[r].to_numpy(dtype=np.float64) for r in RESOURCES])  # c x 4
    caps = np.where(np.isnan(caps), np.inf, caps)
    # A share of weight 1 is <= 1 exactly when its term is <= the node's price, so for those
    # resources "fits" is read off the price itself; the others are checked on their own, and
    # only on the requests that ask for more than the smallest class has.
    in_price = {i for (i, _), w in zip(coefs, policy.weights().values(), strict=True) if w == 1.0}
    apart = [i for i in range(len(RESOURCES)) if i not in in_price]
    limit = node * (1 + _FIT_EPS)
    price = np.empty(k)
    best = np.empty(k, dtype=np.int64)
    n_fit = np.empty(k, dtype=np.int64)
    all_pinned = bool(pins.all()) if k else True
    for s in range(0, k, _CHUNK):
        e = min(s + _CHUNK, k)
        pe = np.zeros((e - s, c))
        with np.errstate(over="ignore"):
            for i, coef in coefs:
                np.maximum(pe, req[s:e, i, None] * coef, out=pe)
        ok = pe <= limit
        for i in apart:
            over = np.flatnonzero(req[s:e, i] > caps[:, i].min())
            if len(over):
                ok[over] &= req[s + over, i, None] <= caps[:, i] * (1 + _FIT_EPS)
        if not all_pinned:
            ok &= pins[s:e]
        ex = np.flatnonzero(exclusive[s:e])
        if len(ex):
            pe[ex] = node
        pe[~ok] = np.inf
        b = pe.argmin(axis=1)
        best[s:e] = b
        price[s:e] = pe[np.arange(e - s), b]
        n_fit[s:e] = ok.sum(axis=1)
    return price, best, n_fit


def _fallback(
    req: npt.NDArray[np.float64],
    exclusive: npt.NDArray[np.bool_],
    pins: npt.NDArray[np.bool_],
    ran_on: npt.NDArray[np.int64],
    machines: pd.DataFrame,
    policy: PenaltyPolicy,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int64], npt.NDArray[np.int8]]:
    """Prices of requests that fit no class (and codes of how): see the module's docstring."""
    node = _node_prices(machines)
    pe = np.zeros((len(req), len(machines)))
    for i, coef in _coefficients(machines, policy, relaxed=True):
        np.maximum(pe, req[:, i, None] * coef, out=pe)
    pe = np.where(exclusive[:, None], np.maximum(pe, node), pe)
    allowed = np.where(pins.any(axis=1, keepdims=True), pins, True)
    nearest = np.where(allowed, pe, np.inf).argmin(axis=1)
    known = ran_on >= 0
    best = np.where(known, ran_on, nearest)
    how = np.where(known, _PRICED_AS.index("ran_on"), _PRICED_AS.index("nearest")).astype(np.int8)
    return pe[np.arange(len(req)), best], best, how
