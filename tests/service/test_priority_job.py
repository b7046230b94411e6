"""The probe service's priority sync job (``[priority] sync = true``): on its cadence, from the
ledger in the outbox, through the negotiator client, its records committed with the others."""

from __future__ import annotations

from pathlib import Path

from collector.outbox import Outbox
from probes.service.scheduler import ProbeService
from probes.sources.checkpoints import LEDGER_KEY
from tests.pipeline.test_priority_sync import LEDGER, NOW, FakeNegotiator
from tests.service.test_scheduler import Clock, live_config, outbox_docs
from tests.sources.test_live import FakeCollector, FakePool, FakeSchedd


def test_the_service_syncs_on_its_cadence_only_when_asked(tmp_path: Path) -> None:
    fairshare = {"interval_s": 3600, "depth": 2, "targets": {"user": {"alice": "25", "bob": "25"}}}
    off = live_config(tmp_path, fairshare=fairshare)
    pool = FakePool({None: FakeCollector([], [])}, [FakeSchedd("vm")])
    assert "priority" not in ProbeService(off, probe="test", pool=pool.live(off)).jobs

    priority = {"sync": True, "every_s": 600, "pattern": ".*@pool", "priority_at_target": 1000.0}
    config = live_config(tmp_path, fairshare=fairshare, priority=priority)
    neg = FakeNegotiator()
    service = ProbeService(config, probe="test", clock=Clock(NOW), pool=pool.live(config), negotiator=neg)
    assert service.jobs["priority"].every_s == 600
    with Outbox(config.probe.state_dir / "outbox.sqlite") as outbox:
        outbox.commit({}, {LEDGER_KEY: LEDGER})
    assert service.run_job("priority") == (
        "set 2 submitter(s); no submitter of these is known to the negotiator, skipped: carol"
    )
    assert neg.calls == [("setFactor", "alice@pool", 2000.0), ("setFactor", "bob@pool", 600.0)]
    docs = outbox_docs(config.probe.state_dir, "priority")
    assert [(d["credential"], d["before"], d["after"], d["applied"]) for d in docs] == [
        ("alice", 1000, 2000, True), ("bob", 1000, 600, True), ("carol", None, None, False),
    ]  # fmt: skip
