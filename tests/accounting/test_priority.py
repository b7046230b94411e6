"""The priority sync's mapping from fairshare to negotiator factors and usage (hand-computed)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from probes.accounting.priority import (
    PriorityPolicy,
    compare_usage,
    credential_submitters,
    plan_priorities,
    userprio_commands,
)

CREDS = pd.DataFrame(
    {
        "type": ["user"] * 6 + ["group"],
        "name": ["alice", "bob", "carol", "dave", "eve", "frank@other", "alice"],
        "decayed": [36000.0, 7200.0, 3600.0 * 5000, 0.0, 3600.0, 3600.0, 1.0],
        "effective": [0.4, 0.05, 0.5, 0.1, 0.2, 0.3, 1.0],
        "target": [20.0, 20.0, 10.0, 20.0, math.nan, 30.0, 50.0],
    }
)
# the negotiator's real priorities (RUP) and factors; zed@pool has no fairshare usage at all
NEG = pd.DataFrame(
    {
        "submitter": ["alice@pool", "bob@pool", "carol@pool", "eve@pool", "frank@other", "zed@pool"],
        "factor": [1000.0, 1000.0, 1000.0, 1000.0, 1000.0, 1000.0],
        "real_priority": [1.0, 0.5, 0.5, 3.0, 0.5, 0.5],
        "usage_s": [0.0, 10800.0, 36000.0, 3600.0, 3600.0, 0.0],
    }
)
AT_TARGET = 1000.0  # effective priority at target, small enough to compute by hand


def _rows(plan: pd.DataFrame) -> dict[str, tuple]:
    return {r.credential: (r.submitter, r.before, r.wanted, r.after, r.status) for r in plan.itertuples()}


def test_factor_mode_aims_at_the_effective_priority_bounded() -> None:
    policy = PriorityPolicy(
        mode="factor", pattern=r".*@pool", factor_max=3000.0, max_factor_ratio=2.0, priority_at_target=AT_TARGET
    )
    plan = plan_priorities(CREDS, NEG, policy)
    rows = _rows(plan)
    # alice: EUP* = 1000 * 40 % / 20 % = 2000 over her real priority 1: factor 2000 (x2 of 1000)
    assert rows["alice"] == ("alice@pool", 1000.0, 2000.0, 2000.0, "set")
    # bob: EUP* = 1000 * 5 / 20 = 250 over 0.5: 500
    assert rows["bob"] == ("bob@pool", 1000.0, 500.0, 500.0, "set")
    # carol: EUP* = 1000 * 50 / 10 = 5000 over 0.5 = 10000, capped at factor_max 3000, then x2 per run: 2000
    assert rows["carol"] == ("carol@pool", 1000.0, 3000.0, 2000.0, "set")
    assert pd.isna(rows["dave"][0]) and rows["dave"][-1] == "unknown"
    assert rows["eve"][-1] == "no target"
    assert rows["frank@other"][:2] == ("frank@other", 1000.0) and rows["frank@other"][-1] == "not matched"
    # the negotiator's submitter no credential names is reported by its exact name, untouched
    zed = plan[plan["submitter"] == "zed@pool"].iloc[0]
    assert (zed["credential"], zed["status"], zed["before"]) == (None, "no credential", 1000.0)
    assert len(plan) == 7  # the group credential is another type


def test_priority_mode_sets_the_real_priority() -> None:
    policy = PriorityPolicy(mode="priority", pattern=r".*@pool", max_priority_ratio=2.0, priority_at_target=AT_TARGET)
    rows = _rows(plan_priorities(CREDS, NEG, policy))
    # alice: EUP* 2000 over her factor 1000: real priority 2 (x2 of 1)
    assert rows["alice"] == ("alice@pool", 1.0, 2.0, 2.0, "set")
    # bob: 250 / 1000 = 0.25, below the negotiator's floor: 0.5, which he has
    assert rows["bob"] == ("bob@pool", 0.5, 0.5, 0.5, "unchanged")
    # carol: 5000 / 1000 = 5, at most x2 of 0.5 per run
    assert rows["carol"] == ("carol@pool", 0.5, 5.0, 1.0, "set")
    assert rows["eve"][-1] == "no target"


@pytest.mark.parametrize("mode", ["factor", "priority"])
def test_after_a_sync_the_negotiators_order_is_the_fairshares(mode: str) -> None:
    """Random pools: with the per-run bounds open, the effective priorities a sync leaves
    (real priority x factor) order the submitters as usage / target does."""
    rng = np.random.default_rng(7)
    kept = total = 0
    for _ in range(60):
        n = int(rng.integers(2, 12))
        names = [f"u{i}" for i in range(n)]
        effective = rng.dirichlet(np.ones(n))
        target = rng.uniform(1, 60, n)
        creds = pd.DataFrame({"type": "user", "name": names, "decayed": effective, "effective": effective,
                              "target": target})  # fmt: skip
        neg = pd.DataFrame({"submitter": [f"{u}@p" for u in names], "factor": rng.uniform(1, 1e4, n),
                            "real_priority": rng.uniform(0.5, 500, n)})  # fmt: skip
        policy = PriorityPolicy(mode=mode, max_factor_ratio=1e12, max_priority_ratio=1e12, factor_max=1e12)  # type: ignore[arg-type]
        plan = plan_priorities(creds, neg, policy).set_index("submitter").loc[neg["submitter"]]
        other = (neg["real_priority"] if mode == "factor" else neg["factor"]).to_numpy()
        eup = plan["after"].to_numpy(dtype=float) * other
        wanted = 1e5 * 100 * effective / target
        free = wanted / other >= (1.0 if mode == "factor" else 0.5)  # not raised to factor_min or RUP's floor
        kept += int(free.sum())
        total += n
        np.testing.assert_allclose(eup[free], wanted[free], rtol=1e-9)
        assert np.array_equal(np.argsort(eup[free], kind="stable"), np.argsort(wanted[free], kind="stable"))
        assert (eup[~free] >= wanted[~free]).all()  # a floor only ever raises
    assert kept > 0.9 * total  # the floors are the exception, or the test would say little


def test_factor_never_below_one() -> None:
    neg = NEG.assign(factor=1.5)
    plan = plan_priorities(CREDS, neg, PriorityPolicy(priority_at_target=1.0, max_factor_ratio=100.0))
    bob = plan.set_index("credential").loc["bob"]
    assert bob["wanted"] == 1.0 and bob["after"] == 1.0  # 1 * 5 / 20 / 0.5 = 0.5 -> factor_min 1
    with pytest.raises(ValueError, match="factor_min"):
        PriorityPolicy(factor_min=0.5)


def test_dry_run_commands_word_for_word() -> None:
    plan = plan_priorities(CREDS, NEG, PriorityPolicy(pattern=r".*@pool", factor_max=3000.0, priority_at_target=1000.0))
    assert userprio_commands(plan) == [
        "condor_userprio -setfactor alice@pool 2000",
        "condor_userprio -setfactor bob@pool 500",
        "condor_userprio -setfactor carol@pool 2000",
    ]
    assert userprio_commands(plan, restore=True)[0] == "condor_userprio -setfactor alice@pool 1000"
    policy = PriorityPolicy(mode="priority", pattern=r"alice@pool", priority_at_target=1000.0)
    prio = plan_priorities(CREDS, NEG, policy)
    assert userprio_commands(prio) == ["condor_userprio -setprio alice@pool 2"]


def test_a_user_with_several_submitter_names_gets_each_exactly() -> None:
    """The ledger names the submitters each user's jobs ran under: alice plainly and in two
    groups, bob in one group only (his plain name is someone else's: no guessing by names)."""
    ledger = pd.DataFrame({
        "user": ["alice", "alice", "alice", "bob", None],
        "submitter": ["alice@p", "group_a.alice@p", "group_b.sub.alice@p", "group_a.bob@p", "x@p"],
    })  # fmt: skip
    named = credential_submitters(ledger, "user")
    assert named == {"alice": ["alice@p", "group_a.alice@p", "group_b.sub.alice@p"], "bob": ["group_a.bob@p"]}
    neg = pd.DataFrame({"submitter": ["alice@p", "group_a.alice@p", "group_b.sub.alice@p", "bob@p", "group_a.bob@p"],
                        "factor": 1000.0, "real_priority": [1.0, 2.0, 4.0, 1.0, 1.0]})  # fmt: skip
    plan = plan_priorities(CREDS, neg, PriorityPolicy(priority_at_target=AT_TARGET, max_factor_ratio=100.0), named)
    alice = plan[plan["credential"] == "alice"].set_index("submitter")
    # each of alice's names to her EUP* 2000: factors 2000, 1000, 500
    assert alice["after"].to_dict() == {"alice@p": 2000.0, "group_a.alice@p": 1000.0, "group_b.sub.alice@p": 500.0}
    assert plan.loc[plan["credential"] == "bob", "submitter"].tolist() == ["group_a.bob@p"]
    assert plan.loc[plan["status"] == "no credential", "submitter"].tolist() == ["bob@p"]
    # a ledger from before the submitter credential: matched by name, every match
    by_name = plan_priorities(CREDS, neg, PriorityPolicy(priority_at_target=AT_TARGET)).set_index("submitter")
    assert by_name.loc["bob@p", "credential"] == "bob" and by_name.loc["group_a.bob@p", "credential"] == "bob"


def test_priority_section_errors_word_for_word() -> None:
    from collector.errors import ConfigError
    from probes.config import parse_config

    for raw, message in (
        (
            {"pattern": "("},
            "pattern '(' is not a regular expression (missing ), unterminated subpattern at position 0)",
        ),
        ({"factor_min": 5.0, "factor_max": 2.0}, "need 1 <= factor_min <= factor_max, got 5.0, 2.0"),
        (
            {"mode": "usage"},
            'mode "usage" was removed: the accumulated usage it set (condor_userprio -setaccum) does not change '
            'whom the negotiator serves; use "priority" (the real priority, -setprio) or "factor"',
        ),
        (
            {"factor_at_target": 1000.0},
            "factor_at_target was removed with mode usage; see priority_at_target (README, priority sync)",
        ),
    ):
        with pytest.raises(ConfigError) as info:
            parse_config({"priority": raw}, "site.toml")
        assert str(info.value) == f"site.toml: priority: {message}"


def test_compare_usage_shares_side_by_side() -> None:
    # the negotiator charges Cpus (its default SLOT_WEIGHT): alice 3000 s, bob 1000 s; fairacct
    # saw alice 8 core-hours, bob 1 and carol 1 (a user the negotiator does not know); under
    # the penalty bob's and carol's big-memory jobs cost 4 PE-hours each (names: the records' submitters)
    neg = pd.DataFrame({"submitter": ["alice@pool", "bob@pool", "dave@pool"], "usage_s": [3000.0, 1000.0, 0.0]})
    usage = pd.DataFrame({"name": ["alice@pool", "bob@pool", "carol@pool"], "cpu_only_h": [8.0, 1.0, 1.0],
                          "penalty_h": [8.0, 4.0, 4.0], "billed_h": [10.0, 2.5, 0.0]})  # fmt: skip
    out = compare_usage(neg, usage)
    assert out["submitter"].tolist() == ["alice@pool", "bob@pool", "dave@pool", None]
    assert out["credential"].tolist() == ["alice@pool", "bob@pool", None, "carol@pool"]
    assert out["negotiator_share"].tolist()[:3] == [75.0, 25.0, 0.0] and math.isnan(out["negotiator_share"].iloc[3])
    assert out["cpu_only_share"].tolist() == [80.0, 10.0, 0.0, 10.0]  # of 10 core-hours
    assert out["penalty_share"].tolist() == [50.0, 25.0, 0.0, 25.0]  # of 16 PE-hours: bob's share hidden by Cpus
    assert out["billed_share"].tolist() == [80.0, 20.0, 0.0, 0.0]  # of 12.5 billed core-hours
    assert out["penalty_h"].tolist() == [8.0, 4.0, 0.0, 4.0]
    # no usage at all: the negotiator's shares alone, every metric's 0
    empty = compare_usage(neg, usage.iloc[:0])
    assert empty["negotiator_share"].tolist() == [75.0, 25.0, 0.0] and empty["penalty_share"].tolist() == [0.0] * 3
