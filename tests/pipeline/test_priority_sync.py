"""The priority sync's pipeline against a fake negotiator with the bindings' methods: a dry run
sets nothing, a sync sets the bounded values and writes before/after records, a restore puts
the before values back."""

from __future__ import annotations

import math
from pathlib import Path

import classad2
import pytest

from collector.errors import FairacctError
from collector.records import iso_utc
from collector.sinks.sqlite import EmbeddedStore
from probes.config import parse_config
from probes.pipeline.priority import compare, fairshare_horizon, restore, stored_usage, sync

NOW = 1795449600.0 + 1800  # half way through an hourly window


class FakeNegotiator:
    def __init__(self) -> None:
        self.ads = {
            # Priority: the effective priority, real priority (alice 1, bob 2) x factor
            "alice@pool": {
                "Name": "alice@pool",
                "Priority": 1000.0,
                "PriorityFactor": 1000.0,
                "WeightedAccumulatedUsage": 50.0,
            },
            "bob@pool": {
                "Name": "bob@pool",
                "Priority": 2000.0,
                "PriorityFactor": 1000.0,
                "WeightedAccumulatedUsage": 10.0,
            },
            "<none>": {"Name": "<none>", "IsAccountingGroup": True, "PriorityFactor": 0.0},
        }
        self.calls: list[tuple[str, str, float]] = []

    def priority_answer(self, rollup: bool = False) -> classad2.ClassAd:
        """The negotiator's answer as it sends it: NumSubmittors and numbered entries."""
        answer = classad2.ClassAd({"NumSubmittors": len(self.ads)})
        for i, ad in enumerate(self.ads.values(), start=1):
            answer.update({f"{attr}{i}": value for attr, value in ad.items()})
        return answer

    def setFactor(self, user: str, factor: float) -> None:  # noqa: N802
        self.calls.append(("setFactor", user, factor))
        ad = self.ads[user]
        ad["Priority"], ad["PriorityFactor"] = ad["Priority"] / ad["PriorityFactor"] * factor, factor

    def setPriority(self, user: str, priority: float) -> None:  # noqa: N802
        self.calls.append(("setPriority", user, priority))
        self.ads[user]["Priority"] = priority * self.ads[user]["PriorityFactor"]

    def setUsage(self, user: str, usage: float) -> None:  # noqa: N802
        self.calls.append(("setUsage", user, usage))
        self.ads[user]["WeightedAccumulatedUsage"] = usage


CONFIG = parse_config(
    {
        "fairshare": {"interval_s": 3600, "depth": 2, "targets": {"user": {"alice": "25", "bob": "25", "carol": "50"}}},
        "priority": {"pattern": ".*@pool", "priority_at_target": 1000.0},
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
    # effective priorities wanted: alice 1000 * 60 / 25 = 2400, bob 1000 * 30 / 25 = 1200;
    # factors over their real priorities: alice 2400 / 1, at most x2 per run: 2000; bob 1200 / 2
    assert result.commands == [
        "condor_userprio -setfactor alice@pool 2000",
        "condor_userprio -setfactor bob@pool 600",
    ]
    assert all(d["dry_run"] and not d["applied"] for d in result.docs)
    carol = next(d for d in result.docs if d["credential"] == "carol")
    assert carol["status"] == "unknown" and carol["submitter"] is None


def test_sync_then_restore() -> None:
    neg = FakeNegotiator()
    done = sync(CONFIG, neg, LEDGER, now=NOW, probe="t")
    assert neg.calls == [("setFactor", "alice@pool", 2000.0), ("setFactor", "bob@pool", 600.0)]
    docs = {d["credential"]: d for d in done.docs}
    assert (docs["alice"]["before"], docs["alice"]["after"], docs["alice"]["applied"]) == (1000, 2000, True)
    assert docs["alice"]["kind"] == "priority" and docs["alice"]["action"] == "sync"
    neg.calls.clear()
    back = restore(CONFIG, neg, done.docs, now=NOW + 60, probe="t")
    assert neg.calls == [("setFactor", "alice@pool", 1000.0), ("setFactor", "bob@pool", 1000.0)]
    assert {d["action"] for d in back.docs} == {"restore"}
    assert {d["id"] for d in back.docs}.isdisjoint(d["id"] for d in done.docs)


def test_priority_mode_sets_the_real_priority() -> None:
    neg = FakeNegotiator()
    config = CONFIG.model_copy(update={"priority": CONFIG.priority.model_copy(update={"mode": "priority"})})
    result = sync(config, neg, LEDGER, now=NOW, probe="t")
    # real priorities: alice 2400 / 1000 = 2.4, at most x2 of 1 per run; bob 1200 / 1000 = 1.2
    assert neg.calls == [("setPriority", "alice@pool", 2.0), ("setPriority", "bob@pool", 1.2)]
    assert result.commands == ["condor_userprio -setprio alice@pool 2", "condor_userprio -setprio bob@pool 1.2"]
    back = restore(config, neg, result.docs, now=NOW + 60, probe="t")
    assert back.commands == ["condor_userprio -setprio alice@pool 1", "condor_userprio -setprio bob@pool 2"]


def test_every_name_of_a_user_from_the_ledger() -> None:
    """alice's jobs ran plainly and in group_a: the ledger's submitter credential names both,
    each is brought to her effective priority; nothing is guessed from names."""
    neg = FakeNegotiator()
    neg.ads["group_a.alice@pool"] = {"Name": "group_a.alice@pool", "Priority": 4000.0, "PriorityFactor": 1000.0}
    ledger = [
        [WINDOW, "alice", None, None, None, None, "alice@pool", 3000.0],
        [WINDOW, "alice", "group_a", None, None, None, "group_a.alice@pool", 3000.0],
        [WINDOW, "bob", None, None, None, None, "bob@pool", 4000.0],
    ]
    result = sync(CONFIG, neg, ledger, now=NOW, probe="t", dry_run=True)
    plan = result.plan.set_index("submitter")
    assert plan.loc[["alice@pool", "group_a.alice@pool"], "credential"].tolist() == ["alice", "alice"]
    # alice 60 % of a 25 % target: 2400, over real priorities 1 and 4: 2400 (x2 at most: 2000) and 600
    assert plan.loc[["alice@pool", "group_a.alice@pool"], "wanted"].tolist() == [2400.0, 600.0]


def test_a_ledger_without_usage_is_not_synced() -> None:
    neg = FakeNegotiator()
    with pytest.raises(FairacctError, match=r"the fairshare ledger holds no user usage since 2026-.*nothing to sync"):
        sync(CONFIG, neg, [], now=NOW, probe="t")
    old = [[WINDOW - 10 * 3600, "alice", None, None, None, None, "alice@pool", 6000.0]]  # outside the 2 windows
    with pytest.raises(FairacctError, match="nothing to sync"):
        sync(CONFIG, neg, old, now=NOW, probe="t")
    assert neg.calls == []


def test_compare_puts_the_pool_shares_side_by_side(tmp_path: Path) -> None:
    """Usage per user summed by a real embedded store over the fairshare's windows, beside the
    negotiator's: alice 2 jobs of 4 cores x 1 h (penalty 4 PE each), bob 1 core x 1 h with
    16 GiB (penalty 2 PE on a 32 GiB, 4-core node), bob's running job billed 1.5 core-hours;
    a job before the windows does not count."""
    store = EmbeddedStore(tmp_path / "store.sqlite")
    at = iso_utc([NOW - 600])[0]
    job = {"timestamp": at, "walltime_s": 3600.0}
    store.send("job", [
        {"id": "j1", "submitter": "alice@pool", "cpus": 4.0, "penalty_usage": 4 * 3600.0, **job},
        {"id": "j2", "submitter": "alice@pool", "cpus": 4.0, "penalty_usage": 4 * 3600.0, **job},
        {"id": "j3", "submitter": "bob@pool", "cpus": 1.0, "penalty_usage": 2 * 3600.0, **job},
        {"id": "old", "submitter": "bob@pool", "cpus": 64.0, "penalty_usage": 64 * 3600.0, **job,
         "timestamp": iso_utc([NOW - 3 * 3600])[0]},  # before the 2 hourly windows
    ])  # fmt: skip
    store.send("allocation", [{"id": "a1", "timestamp": at, "submitter": "bob@pool", "billed_cpus_hours": 1.5}])
    since, until = fairshare_horizon(CONFIG, now=NOW)
    assert (since, until) == (WINDOW - 3600, NOW)
    usage = stored_usage(store, since=since, until=until)
    store.close()
    assert usage.to_dict("list") == {"name": ["alice@pool", "bob@pool"], "cpu_only_h": [8.0, 1.0],
                                     "penalty_h": [8.0, 2.0], "billed_h": [0.0, 1.5]}  # fmt: skip
    frame = compare(CONFIG, FakeNegotiator(), LEDGER, now=NOW, usage=usage).set_index("submitter")
    # the negotiator holds alice 50 s, bob 10 s: 83.3 % and 16.7 %; cores say 8 : 1, the penalty 8 : 2
    assert frame.loc["alice@pool", "negotiator_share"] == pytest.approx(100 * 50 / 60)
    assert frame.loc["alice@pool", "cpu_only_share"] == pytest.approx(100 * 8 / 9)
    assert frame.loc["bob@pool", "penalty_share"] == pytest.approx(20.0)
    assert frame.loc["bob@pool", ["billed_h", "billed_share"]].tolist() == [1.5, 100.0]
    assert frame.loc["alice@pool", "fairacct_factor"] == 2400.0  # the fairshare's side: 2400 / real priority 1
    # without stored usage the metrics are unknown, not 0
    bare = compare(CONFIG, FakeNegotiator(), LEDGER, now=NOW).set_index("submitter")
    assert math.isnan(bare.loc["alice@pool", "penalty_share"]) and bare.loc["alice@pool", "negotiator_share"] > 0


def test_a_job_that_ended_in_the_second_of_the_command_counts(tmp_path: Path) -> None:
    """Records are dated to the second: a job that ended 0.4 s before the command ran (already
    in the ledger) is in the store's usage too. Before, the range ended at that second,
    exclusive, and a fast machine compared it as 0 against the ledger's."""
    store = EmbeddedStore(tmp_path / "store.sqlite")
    store.send("job", [{"id": "j", "submitter": "bob@pool", "cpus": 2.0, "walltime_s": 1800.0,
                        "timestamp": iso_utc([NOW])[0]}])  # fmt: skip
    usage = stored_usage(store, since=NOW - 3600, until=NOW + 0.4)
    store.close()
    assert usage.set_index("name").loc["bob@pool", "cpu_only_h"] == 1.0
