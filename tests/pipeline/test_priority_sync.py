"""The priority sync's pipeline against a fake negotiator with the bindings' methods: a dry run
sets nothing, a sync sets the bounded values and writes before/after records, a restore puts
the before values back."""

from __future__ import annotations

import math
from pathlib import Path

import classad2
import pytest

from collector.records import iso_utc
from collector.sinks.sqlite import EmbeddedStore
from probes.config import parse_config
from probes.pipeline.priority import compare, fairshare_horizon, restore, stored_usage, sync

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


def test_compare_puts_the_pool_shares_side_by_side(tmp_path: Path) -> None:
    """Usage per user summed by a real embedded store over the fairshare's windows, beside the
    negotiator's: alice 2 jobs of 4 cores x 1 h (penalty 4 PE each), bob 1 core x 1 h with
    16 GiB (penalty 2 PE on a 32 GiB, 4-core node), bob's running job billed 1.5 core-hours;
    a job before the windows does not count."""
    store = EmbeddedStore(tmp_path / "store.sqlite")
    at = iso_utc([NOW - 600])[0]
    job = {"timestamp": at, "walltime_s": 3600.0}
    store.send("job", [
        {"id": "j1", "user": "alice", "cpus": 4.0, "penalty_usage": 4 * 3600.0, **job},
        {"id": "j2", "user": "alice", "cpus": 4.0, "penalty_usage": 4 * 3600.0, **job},
        {"id": "j3", "user": "bob", "cpus": 1.0, "penalty_usage": 2 * 3600.0, **job},
        {"id": "old", "user": "bob", "cpus": 64.0, "penalty_usage": 64 * 3600.0, **job,
         "timestamp": iso_utc([NOW - 3 * 3600])[0]},  # before the 2 hourly windows
    ])  # fmt: skip
    store.send("allocation", [{"id": "a1", "timestamp": at, "user": "bob", "billed_cpus_hours": 1.5}])
    since, until = fairshare_horizon(CONFIG, now=NOW)
    assert (since, until) == (WINDOW - 3600, NOW)
    usage = stored_usage(store, since=since, until=until)
    store.close()
    assert usage.to_dict("list") == {"name": ["alice", "bob"], "cpu_only_h": [8.0, 1.0], "penalty_h": [8.0, 2.0],
                                     "billed_h": [0.0, 1.5]}  # fmt: skip
    frame = compare(CONFIG, FakeNegotiator(), LEDGER, now=NOW, usage=usage).set_index("submitter")
    # the negotiator holds alice 50 s, bob 10 s: 83.3 % and 16.7 %; cores say 8 : 1, the penalty 8 : 2
    assert frame.loc["alice@pool", "negotiator_share"] == pytest.approx(100 * 50 / 60)
    assert frame.loc["alice@pool", "cpu_only_share"] == pytest.approx(100 * 8 / 9)
    assert frame.loc["bob@pool", "penalty_share"] == pytest.approx(20.0)
    assert frame.loc["bob@pool", ["billed_h", "billed_share"]].tolist() == [1.5, 100.0]
    assert frame.loc["alice@pool", "fairacct_factor"] == 2400.0  # the fairshare's side is still there
    # without stored usage the metrics are unknown, not 0
    bare = compare(CONFIG, FakeNegotiator(), LEDGER, now=NOW).set_index("submitter")
    assert math.isnan(bare.loc["alice@pool", "penalty_share"]) and bare.loc["alice@pool", "negotiator_share"] > 0
