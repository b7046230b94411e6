"""The priority sync's pipeline against a fake negotiator with the bindings' methods: a dry run
sets nothing, a sync sets the bounded values and writes before/after records, a restore puts
the before values back."""

from __future__ import annotations

import classad2

from probes.config import parse_config
from probes.pipeline.priority import restore, sync

NOW = 1795449600.0 + 1800  # half way through an hourly window


class FakeNegotiator:
    def __init__(self) -> None:
        self.ads = {
            "alice@pool": {"Name": "alice@pool", "PriorityFactor": 1000.0, "WeightedAccumulatedUsage": 50.0},
            "bob@pool": {"Name": "bob@pool", "PriorityFactor": 1000.0, "WeightedAccumulatedUsage": 10.0},
            "<none>": {"Name": "<none>", "IsAccountingGroup": True, "PriorityFactor": 0.0},
        }
        self.calls: list[tuple[str, str, float]] = []

    def getPriorities(self, rollup: bool = False) -> list[classad2.ClassAd]:  # noqa: N802
        return [classad2.ClassAd(ad) for ad in self.ads.values()]

    def setFactor(self, user: str, factor: float) -> None:  # noqa: N802
        self.calls.append(("setFactor", user, factor))
        self.ads[user]["PriorityFactor"] = factor

    def setUsage(self, user: str, usage: float) -> None:  # noqa: N802
        self.calls.append(("setUsage", user, usage))
        self.ads[user]["WeightedAccumulatedUsage"] = usage


CONFIG = parse_config(
    {
        "fairshare": {"interval_s": 3600, "depth": 2, "targets": {"user": {"alice": "25", "bob": "25", "carol": "50"}}},
        "priority": {"pattern": ".*@pool"},
    }
)
WINDOW = NOW // 3600 * 3600
# alice 60 %, bob 30 %, carol 10 % of 10000 core-seconds; carol never ran in the pool
LEDGER = [
    [WINDOW, "alice", None, None, None, None, 6000.0],
    [WINDOW, "bob", None, None, None, None, 3000.0],
    [WINDOW, "carol", None, None, None, None, 1000.0],
]


def test_dry_run_sets_nothing_and_prints_the_commands() -> None:
    neg = FakeNegotiator()
    result = sync(CONFIG, neg, LEDGER, now=NOW, dry_run=True, probe="t")
    assert neg.calls == []
    # alice: 1000 * 60 / 25 = 2400, at most x2 per run: 2000; bob: 1000 * 30 / 25 = 1200
    assert result.commands == [
        "condor_userprio -setfactor alice@pool 2000",
        "condor_userprio -setfactor bob@pool 1200",
    ]
    assert all(d["dry_run"] and not d["applied"] for d in result.docs)
    carol = next(d for d in result.docs if d["credential"] == "carol")
    assert carol["status"] == "unknown" and carol["submitter"] is None


def test_sync_then_restore() -> None:
    neg = FakeNegotiator()
    done = sync(CONFIG, neg, LEDGER, now=NOW, probe="t")
    assert neg.calls == [("setFactor", "alice@pool", 2000.0), ("setFactor", "bob@pool", 1200.0)]
    docs = {d["credential"]: d for d in done.docs}
    assert (docs["alice"]["before"], docs["alice"]["after"], docs["alice"]["applied"]) == (1000, 2000, True)
    assert docs["alice"]["kind"] == "priority" and docs["alice"]["action"] == "sync"
    neg.calls.clear()
    back = restore(CONFIG, neg, done.docs, now=NOW + 60, probe="t")
    assert neg.calls == [("setFactor", "alice@pool", 1000.0), ("setFactor", "bob@pool", 1000.0)]
    assert {d["action"] for d in back.docs} == {"restore"}
    assert {d["id"] for d in back.docs}.isdisjoint(d["id"] for d in done.docs)


def test_usage_mode_sets_the_weighted_seconds() -> None:
    neg = FakeNegotiator()
    config = CONFIG.model_copy(update={"priority": CONFIG.priority.model_copy(update={"mode": "usage"})})
    result = sync(config, neg, LEDGER, now=NOW, probe="t")
    assert neg.calls == [("setUsage", "alice@pool", 6000.0), ("setUsage", "bob@pool", 3000.0)]
    assert result.commands == ["condor_userprio -setaccum alice@pool 6000", "condor_userprio -setaccum bob@pool 3000"]
