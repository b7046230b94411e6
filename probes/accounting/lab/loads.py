"""The submission strategies S1..S8 and the cases 1, 2, 2a, 3, 4 and 5 (section 5) of
Sedighi et al. 2014, "Fairness of task scheduling in high performance computing environments".

A strategy is the number of tasks a user submits in each time slot t = 1 .. ``slots``
(Tables 5.1-5.6), with L_1 = 1000 tasks per slot the normal load and L_0 = 1:

=====  ==================  ===========================================================
S1     normal              L_1(t) = 1000
S2     low                 L_2(t) = L_1 / 10
S3     sine                L_3(t) = max(L_1 sin(pi t / 2), 0)
S4     cosine              L_4(t) = max(k L_1 cos(pi t / 2), 0)   (k = 2 in case 2a)
S5     burst               L_5(t) = 10 L_1 U(a < t < b)
S6     exponential         L_6(0) = 1000, L_6(t) = L_6(t - 1) ** 1.01
S7     early riser         L_7(t) = 10 L_1 for 0 <= t <= a, else 0
S8     delayed             L_8(t) = L_1 for t >= b (a <= b), else 0
=====  ==================  ===========================================================

Tasks are whole: each slot's load is rounded to the nearest integer (so that sin(pi) = 1e-16
submits nothing), and no user submits more than T_max = 100,000 tasks in all (section 6).

The paper leaves the burst window (a, b) of cases 1 and 5 open. Case 1 says the burst user
"submits the same number of tasks [as the normal user] in a much shorter time frame", and
Figure 6.2 shows the shift within t = 1..20: we take a = 10, b = 21 (t = 11..20, 10 slots
of 10,000 = 100,000 = T_max). Case 5 says the early riser submits in "1/10 of the total
submission time": a = 10 (t = 1..10); the delayed user starts after it, b = 11.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

import numpy as np
import numpy.typing as npt

__all__ = ["CASES", "L1", "SLOTS", "STRATEGIES", "T_MAX", "Case", "case_loads", "strategy_load"]

L1 = 1000.0
"""The normal load, tasks per slot (section 5)."""
T_MAX = 100_000
"""The most tasks one user submits (section 6)."""
SLOTS = 100
"""Time slots in which users submit (section 6: t = 1 .. 100)."""


def _exponential(t: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    # L(t) = L(t-1) ** 1.01 from L(0) = 1000 is 1000 ** (1.01 ** t)
    return np.asarray(L1 ** (1.01**t), dtype=np.float64)


def _window(inside: npt.NDArray[np.bool_], rate: float) -> npt.NDArray[np.float64]:
    return np.where(inside, rate, 0.0)


STRATEGIES: Mapping[str, tuple[str, Callable[..., npt.NDArray[np.float64]]]] = MappingProxyType(
    {
        "S1": ("normal", lambda t: np.full_like(t, L1)),
        "S2": ("low", lambda t: np.full_like(t, L1 / 10)),
        "S3": ("sine", lambda t: np.maximum(L1 * np.sin(np.pi * t / 2), 0.0)),
        "S4": ("cosine", lambda t, k=1.0: np.maximum(k * L1 * np.cos(np.pi * t / 2), 0.0)),
        "S5": ("burst", lambda t, a=10, b=21: _window((a < t) & (t < b), 10 * L1)),
        "S6": ("exponential", _exponential),
        "S7": ("early riser", lambda t, a=10: _window((t >= 0) & (t <= a), 10 * L1)),
        "S8": ("delayed", lambda t, b=11: _window(t >= b, L1)),
    }
)
"""Strategy -> (name, load of the slots t, keyword parameters as in the module's table)."""


def strategy_load(strategy: str, slots: int = SLOTS, *, t_max: int = T_MAX, **params: float) -> npt.NDArray[np.int64]:
    """Tasks submitted in slots t = 1 .. ``slots`` under ``strategy`` (S1..S8), whole and
    capped at ``t_max`` in all."""
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy must be one of {', '.join(STRATEGIES)}, got {strategy!r}")
    t = np.arange(1, slots + 1, dtype=np.float64)
    tasks = np.rint(STRATEGIES[strategy][1](t, **params))
    cumulative: npt.NDArray[np.float64] = np.minimum(np.cumsum(tasks), t_max)
    return np.diff(cumulative, prepend=0.0).astype(np.int64)


@dataclass(frozen=True)
class Case:
    """One of Sedighi et al. 2014's cases: its users' strategies (user -> (strategy, parameters))."""

    name: str
    title: str
    users: Mapping[str, tuple[str, Mapping[str, float]]]


def _case(name: str, title: str, **users: tuple[str, Mapping[str, float]]) -> Case:
    return Case(name, title, MappingProxyType(users))


CASES: Mapping[str, Case] = MappingProxyType(
    {
        c.name: c
        for c in (
            _case("1", "burst: c1 steady, c5 bursts (Table 5.1)", c1=("S1", {}), c5=("S5", {})),
            _case("2", "complementary: c3 sine, c4 cosine (Table 5.2)", c3=("S3", {}), c4=("S4", {})),
            _case("2a", "unbalanced complementary: c4 twice c3 (Table 5.3)", c3=("S3", {}), c4=("S4", {"k": 2.0})),
            _case("3", "conflicting: c2 low, c6 exponential (Table 5.4)", c2=("S2", {}), c6=("S6", {})),
            _case("4", "steady: c1 normal, c2 low (Table 5.5)", c1=("S1", {}), c2=("S2", {})),
            _case("5", "early riser: c7 first, c8 delayed (Table 5.6)", c7=("S7", {}), c8=("S8", {})),
        )
    }
)
"""Sedighi et al. 2014's cases by name. The paper says it modeled eight cases and describes these six."""


def case_loads(case: Case, slots: int = SLOTS, *, t_max: int = T_MAX) -> tuple[list[str], npt.NDArray[np.int64]]:
    """The users of ``case`` and their tasks per slot, a users x slots array."""
    users = list(case.users)
    return users, np.vstack([strategy_load(s, slots, t_max=t_max, **dict(p)) for s, p in case.users.values()])
