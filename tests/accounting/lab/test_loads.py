"""Each of seed 002's strategies has the load shape of its table (Tables 5.1-5.6)."""

from __future__ import annotations

import numpy as np
import pytest

from probes.accounting.lab.loads import CASES, T_MAX, case_loads, strategy_load

T = np.arange(1, 101)


def test_normal_and_low_are_steady() -> None:
    assert (strategy_load("S1") == 1000).all()
    assert (strategy_load("S2") == 100).all()


def test_sine_and_cosine_complement_each_other() -> None:
    sine, cosine = strategy_load("S3"), strategy_load("S4")
    # sin(pi t / 2) at whole t is 1, 0, -1, 0: one slot in four submits, and never the same one
    assert sine.tolist()[:8] == [1000, 0, 0, 0, 1000, 0, 0, 0]
    assert cosine.tolist()[:8] == [0, 0, 0, 1000, 0, 0, 0, 1000]
    assert not (sine * cosine).any()
    assert (strategy_load("S4", k=2.0) == 2 * cosine).all()  # case 2a


def test_burst_submits_the_normal_users_total_in_a_tenth_of_the_time() -> None:
    burst = strategy_load("S5")
    assert set(T[burst > 0]) == set(range(11, 21)) and (burst[burst > 0] == 10_000).all()
    assert burst.sum() == strategy_load("S1").sum() == T_MAX


def test_exponential_grows_until_the_cap() -> None:
    load = strategy_load("S6")
    assert load[0] == round(1000**1.01)  # L(1) = L(0) ** 1.01 = 1071.5
    growing = load[load.cumsum() < T_MAX]
    assert (np.diff(growing) > 0).all()
    assert load.sum() == T_MAX and load[-1] == 0


def test_early_riser_and_delayed() -> None:
    early, late = strategy_load("S7"), strategy_load("S8")
    assert (early[:10] == 10_000).all() and not early[10:].any()
    assert not late[:10].any() and (late[10:] == 1000).all()


def test_cases_pair_the_strategies_of_their_tables() -> None:
    strategies = {name: [s for s, _ in c.users.values()] for name, c in CASES.items()}
    assert strategies == {
        "1": ["S1", "S5"], "2": ["S3", "S4"], "2a": ["S3", "S4"], "3": ["S2", "S6"], "4": ["S1", "S2"],
        "5": ["S7", "S8"],
    }  # fmt: skip
    users, loads = case_loads(CASES["2a"])
    assert users == ["c3", "c4"] and loads[1].sum() == 2 * loads[0].sum()


def test_unknown_strategy() -> None:
    with pytest.raises(ValueError, match=r"strategy must be one of S1, S2, .* got 'S9'"):
        strategy_load("S9")
