"""How the lab's scheduler shares its nodes in a time slot: the queue-proportional allocator
(formula 2.1) of Sedighi et al. 2014, "Fairness of task scheduling in high performance
computing environments", and Maui's decaying fairshare with targets (Maui Admin Guide: Adaptive
Computing, "Maui Scheduler Administrator's Guide", 6.3), whose usage metric may be the
multi-resource penalty (Klusáček & Rudová 2015, "Multi-resource aware fairsharing for
heterogeneous systems").

An allocator is called once per slot with every user's queue (tasks waiting, whole) and
returns the nodes each gets; a task takes one node for one slot (Sedighi et al. 2014, section 6).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from probes.accounting.fairshare import decay_weights

__all__ = ["Allocator", "MauiFairshare", "QueueProportional", "proportional_shares"]


def proportional_shares(queues: npt.ArrayLike, capacity: int) -> npt.NDArray[np.float64]:
    """Formula 2.1: ``r_ck(t) = T_ck / sum_i T_ci * R``, before rounding to whole nodes."""
    q = np.asarray(queues, dtype=np.float64)
    total = q.sum()
    return q / total * capacity if total > 0 else np.zeros_like(q)


class Allocator:
    """What the lab's simulator calls: ``allocate(queues, capacity)`` -> nodes per user."""

    name = "allocator"

    def allocate(self, queues: npt.NDArray[np.int64], capacity: int) -> npt.NDArray[np.int64]:
        raise NotImplementedError


class QueueProportional(Allocator):
    """Sedighi et al. 2014's scheduler: formula 2.1 rounded down to whole nodes (Table 2.1: 0.60 -> 0,
    5.40 -> 5), never more than a user's queue; the remainder stays idle for the slot, and
    nothing but the current queues counts ("the decision is not made based on any
    historical data")."""

    name = "queue_proportional"

    def allocate(self, queues: npt.NDArray[np.int64], capacity: int) -> npt.NDArray[np.int64]:
        return np.minimum(np.floor(proportional_shares(queues, capacity) + 1e-9).astype(np.int64), queues)


@dataclass
class MauiFairshare(Allocator):
    """Maui's fairshare (Maui Admin Guide, 6.3) as a slot scheduler.

    Usage is kept per user in ``depth`` windows of ``interval`` slots, weighted by ``decay
    ** n``; ``effective = sum_n d^n U[n] / sum_n d^n Total[n]`` and the priority is ``target
    - 100 * effective`` (percentage points; targets default to an equal split). Within a
    slot the nodes go in chunks of ``chunk`` to the waiting user of highest priority, whose
    usage is charged at once, as a job's is while it runs: the result is the water-filling
    a priority queue with running usage converges to. ``costs``: usage charged per task
    and slot for each user (1: dedicated processor-slots, Maui's DEDICATEDPS; the penalty
    of the user's task shape: Klusáček & Rudová 2015's metric).
    """

    users: Sequence[str]
    interval: int = 10
    depth: int = 8
    decay: float = 0.5
    targets: Mapping[str, float] = field(default_factory=dict)
    costs: Mapping[str, float] = field(default_factory=dict)
    chunk: int = 5
    name: str = "fairshare"

    def __post_init__(self) -> None:
        if self.interval < 1 or self.depth < 1 or self.chunk < 1:
            raise ValueError(f"interval, depth and chunk must be >= 1, got {self.interval}, {self.depth}, {self.chunk}")
        unknown = sorted(set(self.targets) - set(self.users))
        if unknown:
            raise ValueError(f"targets name users {unknown} that the case does not have; users are {list(self.users)}")
        n = len(self.users)
        self._target = [float(self.targets.get(u, 100.0 / n)) for u in self.users]
        self._cost = [float(self.costs.get(u, 1.0)) for u in self.users]
        self._weights = decay_weights(self.decay, self.depth)
        self._windows = np.zeros((self.depth, n))  # row 0: the current window
        self._slot = 0

    def allocate(self, queues: npt.NDArray[np.int64], capacity: int) -> npt.NDArray[np.int64]:
        if self._slot and self._slot % self.interval == 0:
            self._windows = np.roll(self._windows, 1, axis=0)
            self._windows[0] = 0.0
        self._slot += 1
        n = len(self.users)
        # the older windows' decayed usage is fixed for the slot: plain floats from here on
        past = (self._weights[1:] @ self._windows[1:]).tolist()
        current = self._windows[0].tolist()
        past_total, current_total = sum(past), sum(current)
        left = [int(q) for q in queues]
        given = [0] * n
        free = int(capacity)
        while free > 0:
            total = past_total + current_total
            best, best_priority = -1, -np.inf
            for i in range(n):
                if left[i] > 0:
                    effective = (past[i] + current[i]) / total if total > 0 else 0.0
                    priority = self._target[i] - 100.0 * effective
                    if priority > best_priority:
                        best, best_priority = i, priority
            if best < 0:
                break
            take = min(self.chunk, left[best], free)
            left[best] -= take
            given[best] += take
            free -= take
            current[best] += take * self._cost[best]
            current_total += take * self._cost[best]
        self._windows[0] = current
        return np.asarray(given, dtype=np.int64)
