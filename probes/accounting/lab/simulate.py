"""The lab's simulator: the loads of Sedighi et al. 2014, "Fairness of task scheduling in high
performance computing environments", through an allocator, slot by slot, and what each user
got (section 5, formula 5.1; section 6's conditions).

The queue of user c at the start of slot t holds what it submitted and has not yet run:

    Q_c(t) = Q_c(t - 1) - r_c(t - 1) + L_c(t)

The paper prints formula 5.1 as ``Q(t) = L(t - 1) + L(t) - r(t - 1)``, which forgets every
task older than one slot; its own Table 2.1 (queue 90 at t1, 5 run, 85 at t2 with nothing
submitted) follows the recursion above, so the lab follows the table. Scheduling takes place
at the start of a slot, every task runs in one slot, and users submit in slots 1..100; the
simulation then runs until every queue is empty, so that each user has a completion time.

Starvation and Jain's index are :mod:`probes.accounting.fairness`'s, on slots of length 1
with the demand being the tasks left waiting after the slot's allocation.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

import numpy as np
import numpy.typing as npt
import pandas as pd

from probes.accounting.fairness import equal_shares, fairness_by_bucket, starvation_intervals, starvation_summary
from probes.accounting.lab.loads import CASES, SLOTS, STRATEGIES, T_MAX, Case, case_loads
from probes.accounting.lab.share import Allocator, MauiFairshare, QueueProportional, proportional_shares
from probes.accounting.machines import machines_table
from probes.accounting.penalty import job_penalties

__all__ = ["CAPACITY", "POLICIES", "LabRun", "run_case", "run_lab", "simulate", "table_2_1", "task_penalties"]

CAPACITY = 500
"""Nodes of the lab's pool (Sedighi et al. 2014, section 2, assumption 4)."""
_MAX_SLOTS = 1_000_000


def simulate(
    loads: npt.NDArray[np.int64], allocator: Allocator, capacity: int = CAPACITY
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Run ``loads`` (users x slots, tasks submitted at the start of each slot) until every
    queue is empty. Returns ``(queues, allocated)``, users x slots run: the queue each slot
    started with (after that slot's submissions) and the nodes it got."""
    loads = np.asarray(loads, dtype=np.int64)
    if loads.ndim != 2 or (loads < 0).any():
        raise ValueError(f"loads must be a users x slots array of whole tasks >= 0, got shape {loads.shape}")
    if capacity < 1:
        raise ValueError(f"capacity must be at least 1 node, got {capacity}")
    users, submit_slots = loads.shape
    queue = np.zeros(users, dtype=np.int64)
    queues: list[npt.NDArray[np.int64]] = []
    allocated: list[npt.NDArray[np.int64]] = []
    t = 0
    while t < submit_slots or queue.any():
        if t >= _MAX_SLOTS:
            raise ValueError(f"the queues did not drain in {_MAX_SLOTS} slots under {allocator.name}")
        if t < submit_slots:
            queue = queue + loads[:, t]
        r = allocator.allocate(queue.copy(), capacity)
        if (r < 0).any() or (r > queue).any() or r.sum() > capacity:
            raise ValueError(f"{allocator.name} gave {r.tolist()} for queues {queue.tolist()} and {capacity} nodes")
        queues.append(queue)
        allocated.append(r)
        queue = queue - r
        t += 1
    return np.column_stack(queues), np.column_stack(allocated)


def table_2_1() -> pd.DataFrame:
    """Table 2.1 of Sedighi et al. 2014: c1 and c2 with 10 and 90 tasks waiting, R = 6 nodes, two
    slots.

    One row per user and slot: ``user``, ``t``, ``queue``, ``share`` (formula 2.1 before
    rounding) and ``nodes``. The paper prints the shares cut (not rounded) to two decimals:
    0.60, 5.40 at t1 and 0.63, 5.36 (5.368...) at t2; the nodes are 0 and 5 both times."""
    loads = np.array([[10, 0], [90, 0]], dtype=np.int64)
    queues, allocated = simulate(loads, QueueProportional(), capacity=6)
    rows = []
    for t in range(2):
        shares = proportional_shares(queues[:, t], 6)
        for i, user in enumerate(("c1", "c2")):
            rows.append(
                {
                    "user": user,
                    "t": t + 1,
                    "queue": int(queues[i, t]),
                    "share": float(shares[i]),
                    "nodes": int(allocated[i, t]),
                }
            )
    return pd.DataFrame(rows)


def task_penalties(shapes: Mapping[str, Mapping[str, float]], node: Mapping[str, float]) -> dict[str, float]:
    """The penalty (Klusáček & Rudová 2015, "Multi-resource aware fairsharing for heterogeneous
    systems") of one task of each user (its ``cpus`` cores and ``memory`` MiB) on
    the lab's node class (``cpus``, ``memory``), for one slot: the usage a fairshare with the
    multi-resource metric charges per task."""
    users = list(shapes)
    jobs = pd.DataFrame(
        {
            "queue": None, "walltime_s": 1.0, "speed": 1.0, "host": None, "n_hosts": 1,
            "cpus": [float(shapes[u].get("cpus", 1.0)) for u in users],
            "memory": [float(shapes[u].get("memory", 0.0)) for u in users],
            "disk": 0.0, "gpus": 0.0,
        }
    )  # fmt: skip
    machines = machines_table([{"name": "lab", "count": CAPACITY, **node}])
    usage = job_penalties(jobs, machines).jobs["usage"].to_numpy(dtype=np.float64)
    return dict(zip(users, usage.tolist(), strict=True))


# The lab's task: one core and 2 GiB on one-core 4 GiB nodes, for every user as the paper's
# tasks are all alike; a case may give users other shapes.
_TASK = MappingProxyType({"cpus": 1.0, "memory": 2048.0})
_NODE = MappingProxyType({"cpus": 1.0, "memory": 4096.0})

PolicyFactory = Callable[[Sequence[str], Mapping[str, Mapping[str, float]]], Allocator]
POLICIES: Mapping[str, PolicyFactory] = MappingProxyType(
    {
        "queue_proportional": lambda users, shapes: QueueProportional(),
        "fairshare": lambda users, shapes: MauiFairshare(users),
        "fairshare_mrpe": lambda users, shapes: MauiFairshare(
            users, costs=task_penalties(shapes, _NODE), name="fairshare_mrpe"
        ),
    }
)
"""Policy name -> allocator for a case's users and task shapes: formula 2.1; Maui's
fairshare charging dedicated node-slots (equal targets, 8 windows of 10 slots, decay 0.5);
the same charging Klusáček & Rudová 2015's penalty of each user's task shape."""


@dataclass
class LabRun:
    """One case under one policy.

    ``slots``: one row per user and slot: ``t`` (1..), ``user``, ``submitted``, ``queue``
    (waiting at the start of the slot, with its submissions), ``nodes`` (allocated),
    ``waiting`` (left after the allocation). ``users``: per user ``strategy``,
    ``submitted``, ``completion`` (the slot its last task ran in), ``starved_slots``,
    ``starvation_intervals`` and ``longest_starvation``. ``jain_served`` and
    ``jain_allocation``: Jain's index averaged over the slots in which at least two users
    were active; ``starved_slots``: slots in which some user was starved; ``idle_node_slots``:
    nodes left idle while tasks waited.
    """

    case: str
    title: str
    policy: str
    fraction: float
    slots: pd.DataFrame
    users: pd.DataFrame
    jain_served: float
    jain_allocation: float
    starved_slots: int
    idle_node_slots: int


def run_case(
    case: Case,
    policy: str = "queue_proportional",
    *,
    capacity: int = CAPACITY,
    fraction: float = 0.1,
    slots: int = SLOTS,
    t_max: int = T_MAX,
    shapes: Mapping[str, Mapping[str, float]] | None = None,
) -> LabRun:
    """Simulate ``case`` under ``policy`` (a key of :data:`POLICIES`); a user is starved in a
    slot when it had tasks waiting and got at most ``fraction`` of an equal share of the
    nodes given out (0: nothing, as in Table 2.1)."""
    if policy not in POLICIES:
        raise ValueError(f"policy must be one of {', '.join(POLICIES)}, got {policy!r}")
    users, loads = case_loads(case, slots, t_max=t_max)
    shapes = {u: dict((shapes or {}).get(u, _TASK)) for u in users}
    queues, allocated = simulate(loads, POLICIES[policy](users, shapes), capacity)
    n_users, n_slots = queues.shape
    submitted = np.zeros_like(queues)
    submitted[:, : loads.shape[1]] = loads[:, :n_slots]
    frame = pd.DataFrame(
        {
            "t": np.tile(np.arange(1, n_slots + 1), n_users),
            "user": np.repeat(np.asarray(users, dtype=object), n_slots),
            "submitted": submitted.ravel(),
            "queue": queues.ravel(),
            "nodes": allocated.ravel(),
            "waiting": (queues - allocated).ravel(),
        }
    )
    active = frame[(frame["queue"] > 0)]
    shares = equal_shares(
        pd.DataFrame(
            {
                "bucket_start": active["t"].to_numpy(dtype=np.float64),
                "name": active["user"].to_numpy(),
                "demand_cpus": active["waiting"].to_numpy(dtype=np.float64),
                "allocation_cpus": active["nodes"].to_numpy(dtype=np.float64),
            }
        ),
        by="user",
        bucket_s=1.0,
        fraction=fraction,
    )
    per_slot = fairness_by_bucket(shares)
    contested = per_slot[per_slot["credentials"] >= 2]
    summary = starvation_summary(starvation_intervals(shares, bucket_s=1.0)).set_index("name")
    done = np.cumsum(allocated, axis=1) >= loads.sum(axis=1, keepdims=True)
    table = pd.DataFrame(
        {
            "user": users,
            "strategy": [f"{s} {STRATEGIES[s][0]}" for s, _ in case.users.values()],
            "submitted": loads.sum(axis=1),
            "completion": done.argmax(axis=1) + 1,
            "starved_slots": [int(summary["starved_s"].get(u, 0)) for u in users],
            "starvation_intervals": [int(summary["intervals"].get(u, 0)) for u in users],
            "longest_starvation": [int(summary["longest_s"].get(u, 0)) for u in users],
        }
    )
    left_waiting = (queues - allocated).sum(axis=0) > 0
    return LabRun(
        case=case.name,
        title=case.title,
        policy=policy,
        fraction=fraction,
        slots=frame,
        users=table,
        jain_served=float(contested["jain_served"].mean()) if len(contested) else float("nan"),
        jain_allocation=float(contested["jain_allocation"].mean()) if len(contested) else float("nan"),
        starved_slots=int((per_slot["starved"] > 0).sum()),
        idle_node_slots=int((capacity - allocated.sum(axis=0))[left_waiting].sum()),
    )


def run_lab(
    cases: Sequence[str] | None = None, policies: Sequence[str] | None = None, *, fraction: float = 0.1
) -> list[LabRun]:
    """Every case (default: all of :data:`~probes.accounting.lab.loads.CASES`) under every
    policy (default: all of :data:`POLICIES`)."""
    names = list(cases) if cases else list(CASES)
    unknown = [c for c in names if c not in CASES]
    if unknown:
        raise ValueError(f"cases must be some of {', '.join(CASES)}, got {unknown}")
    return [run_case(CASES[c], p, fraction=fraction) for c in names for p in (policies or list(POLICIES))]
