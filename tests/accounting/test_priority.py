"""The priority sync's mapping from fairshare to negotiator factors and usage (hand-computed)."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from probes.accounting.priority import PriorityPolicy, compare_usage, plan_priorities, userprio_commands

CREDS = pd.DataFrame(
    {
        "type": ["user"] * 6 + ["group"],
        "name": ["alice", "bob", "carol", "dave", "eve", "frank@other", "alice"],
        "decayed": [36000.0, 7200.0, 3600.0 * 5000, 0.0, 3600.0, 3600.0, 1.0],
        "effective": [0.4, 0.05, 0.5, 0.1, 0.2, 0.3, 1.0],
        "target": [20.0, 20.0, 10.0, 20.0, math.nan, 30.0, 50.0],
    }
)
NEG = pd.DataFrame(
    {
        "submitter": ["alice@pool", "bob@pool", "carol@pool", "eve@pool", "frank@other"],
        "factor": [1000.0, 1000.0, 1000.0, 1000.0, 1000.0],
        "usage_s": [0.0, 10800.0, 36000.0, 3600.0, 3600.0],
    }
)


def _rows(plan: pd.DataFrame) -> dict[str, tuple]:
    return {r.credential: (r.submitter, r.before, r.wanted, r.after, r.status) for r in plan.itertuples()}


def test_factor_mode_bounds_patterns_unknown_and_change() -> None:
    policy = PriorityPolicy(mode="factor", pattern=r".*@pool", factor_max=3000.0, max_factor_ratio=2.0)
    rows = _rows(plan_priorities(CREDS, NEG, policy))
    # alice: 1000 * 40 % / 20 % = 2000, within x2 of 1000
    assert rows["alice"] == ("alice@pool", 1000.0, 2000.0, 2000.0, "set")
    # bob: 1000 * 5 / 20 = 250, but one run moves at most /2: 500
    assert rows["bob"] == ("bob@pool", 1000.0, 250.0, 500.0, "set")
    # carol: 1000 * 50 / 10 = 5000, capped at factor_max 3000, then x2 per run: 2000
    assert rows["carol"] == ("carol@pool", 1000.0, 3000.0, 2000.0, "set")
    assert pd.isna(rows["dave"][0]) and rows["dave"][-1] == "unknown"
    assert rows["eve"][-1] == "no target"
    assert rows["frank@other"][:2] == ("frank@other", 1000.0) and rows["frank@other"][-1] == "not matched"
    assert len(rows) == 6  # the group credential is another type


def test_factor_never_below_one() -> None:
    neg = NEG.assign(factor=1.5)
    plan = plan_priorities(CREDS, neg, PriorityPolicy(factor_at_target=1.0, max_factor_ratio=100.0))
    bob = plan.set_index("credential").loc["bob"]
    assert bob["wanted"] == 1.0 and bob["after"] == 1.0  # 1 * 5 / 20 = 0.25 -> factor_min 1
    with pytest.raises(ValueError, match="factor_min"):
        PriorityPolicy(factor_min=0.5)


def test_usage_mode_hours_and_change_bound() -> None:
    policy = PriorityPolicy(mode="usage", pattern=r".*@pool", max_usage_change_s=360000.0)
    rows = _rows(plan_priorities(CREDS, NEG, policy))
    assert rows["alice"] == ("alice@pool", 0.0, 36000.0, 36000.0, "set")
    assert rows["bob"] == ("bob@pool", 10800.0, 7200.0, 7200.0, "set")
    assert rows["carol"] == ("carol@pool", 36000.0, 1.8e7, 396000.0, "set")  # +360000 s per run at most
    assert rows["eve"] == ("eve@pool", 3600.0, 3600.0, 3600.0, "unchanged")  # no target needed in usage mode


def test_dry_run_commands_word_for_word() -> None:
    plan = plan_priorities(CREDS, NEG, PriorityPolicy(pattern=r".*@pool", factor_max=3000.0))
    assert userprio_commands(plan) == [
        "condor_userprio -setfactor alice@pool 2000",
        "condor_userprio -setfactor bob@pool 500",
        "condor_userprio -setfactor carol@pool 2000",
    ]
    assert userprio_commands(plan, restore=True)[0] == "condor_userprio -setfactor alice@pool 1000"
    usage = plan_priorities(CREDS, NEG, PriorityPolicy(mode="usage", pattern=r"alice@pool"))
    assert userprio_commands(usage) == ["condor_userprio -setaccum alice@pool 36000"]


def test_group_submitters_and_ambiguity() -> None:
    neg = pd.DataFrame({"submitter": ["group_a.alice@p", "bob@p", "group_a.bob@p"], "factor": 1000.0, "usage_s": 0.0})
    plan = plan_priorities(CREDS, neg, PriorityPolicy()).set_index("credential")
    assert plan.loc["alice", "submitter"] == "group_a.alice@p"
    assert plan.loc["bob", "status"] == "unknown"  # bob@p and group_a.bob@p: not guessed


def test_priority_section_errors_word_for_word() -> None:
    from collector.errors import ConfigError
    from probes.config import parse_config

    for raw, message in (
        (
            {"pattern": "("},
            "pattern '(' is not a regular expression (missing ), unterminated subpattern at position 0)",
        ),
        ({"factor_min": 5.0, "factor_max": 2.0}, "need 1 <= factor_min <= factor_max, got 5.0, 2.0"),
    ):
        with pytest.raises(ConfigError) as info:
            parse_config({"priority": raw}, "site.toml")
        assert str(info.value) == f"site.toml: priority: {message}"


def test_compare_usage_shares_side_by_side() -> None:
    # the negotiator charges Cpus (its default SLOT_WEIGHT): alice 3000 s, bob 1000 s; fairacct
    # saw alice 8 core-hours, bob 1 and carol 1 (a user the negotiator does not know); under
    # the penalty bob's and carol's big-memory jobs cost 4 PE-hours each
    neg = pd.DataFrame({"submitter": ["alice@pool", "bob@pool", "dave@pool"], "usage_s": [3000.0, 1000.0, 0.0]})
    usage = pd.DataFrame({"name": ["alice", "bob", "carol"], "cpu_only_h": [8.0, 1.0, 1.0],
                          "penalty_h": [8.0, 4.0, 4.0], "billed_h": [10.0, 2.5, 0.0]})  # fmt: skip
    out = compare_usage(neg, usage)
    assert out["submitter"].tolist() == ["alice@pool", "bob@pool", "dave@pool", None]
    assert out["credential"].tolist() == ["alice", "bob", None, "carol"]
    assert out["negotiator_share"].tolist()[:3] == [75.0, 25.0, 0.0] and math.isnan(out["negotiator_share"].iloc[3])
    assert out["cpu_only_share"].tolist() == [80.0, 10.0, 0.0, 10.0]  # of 10 core-hours
    assert out["penalty_share"].tolist() == [50.0, 25.0, 0.0, 25.0]  # of 16 PE-hours: bob's share hidden by Cpus
    assert out["billed_share"].tolist() == [80.0, 20.0, 0.0, 0.0]  # of 12.5 billed core-hours
    assert out["penalty_h"].tolist() == [8.0, 4.0, 0.0, 4.0]
    # no usage at all: the negotiator's shares alone, every metric's 0
    empty = compare_usage(neg, usage.iloc[:0])
    assert empty["negotiator_share"].tolist() == [75.0, 25.0, 0.0] and empty["penalty_share"].tolist() == [0.0] * 3
