"""The service's metrics of unheard nodes and unbilled claims (the fake daemons of
tests/sources/test_live.py answering the HTCondor 25 dump, one node of it long silent)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from probes.config import ProbeConfig
from probes.service.scheduler import ProbeService
from tests.service.test_scheduler import Clock, live_config, outbox_docs
from tests.sources.test_live import FakeCollector, FakePool, FakeSchedd, parse

HEARD = 1795269378  # the dump's newest LastHeardFrom
SILENT_SINCE = HEARD - 700  # more than twice the default 300 s update interval before the answer


def one_snapshot(tmp_path: Path, condor25: Path, ads: list[Any], at: float) -> tuple[ProbeConfig, str]:
    """One snapshot of the service at ``at`` over ``ads`` and the dump's queue and history, with
    HTCondor's default UPDATE_INTERVAL (300 s): its configuration and its /metrics text."""
    vm = FakeSchedd("vm", parse(condor25 / "queue.ads"), parse(condor25 / "history.ads"))
    collector = FakeCollector(ads, [vm.location()])
    config = live_config(tmp_path, pool={"update_interval_s": 300})
    svc = ProbeService(config, probe="test", clock=Clock(at), pool=FakePool({None: collector}, [vm]).live(config))
    try:
        svc._run("snapshot")
        return config, svc.metrics.render()
    finally:
        collector.released.set()
        vm.released.set()


def test_the_metrics_count_unheard_nodes_and_their_claims(tmp_path: Path, condor25: Path) -> None:
    ads = parse(condor25 / "status.ads")
    for ad in ads:
        if str(ad["Name"]).endswith("@cpu-node1@vm"):  # its p-slot and its 2 dynamic slots
            ad["LastHeardFrom"] = SILENT_SINCE
    config, text = one_snapshot(tmp_path, condor25, ads, at=HEARD + 22.0)
    assert "fairacct_unheard_nodes 1\n" in text
    assert f"fairacct_unheard_since_timestamp_seconds {SILENT_SINCE}\n" in text
    assert 'fairacct_unbilled_claims_total{reason="stale"} 2\n' in text
    slots = {d["name"] for d in outbox_docs(config.probe.state_dir, "slot")}
    allocations = {d["parent"] for d in outbox_docs(config.probe.state_dir, "allocation")}
    assert slots == allocations == {"slot1@gpu-node1@vm"}


def test_the_metrics_count_incomplete_nodes_of_a_live_pool(tmp_path: Path, condor25: Path) -> None:
    """Issue 41 on a live answer: cpu-node1's 4-core claim says ``Cpus = error`` (read as 1 core
    before), gpu-node1's dynamic slots hold 22 of its 16 cores. Neither node is billed, both are
    counted, and the quarantine names the ads."""
    import classad2

    ads = parse(condor25 / "status.ads")
    for ad in ads:
        if ad["Name"] == "slot1_1@cpu-node1@vm":
            ad["Cpus"] = classad2.ExprTree("error")
        if ad["Name"] == "slot1_1@gpu-node1@vm":
            ad["Cpus"] = 15
    config, text = one_snapshot(tmp_path, condor25, ads, at=HEARD + 5.0)
    assert "fairacct_incomplete_nodes 2\n" in text
    (kept,) = (config.probe.state_dir / "quarantine").glob("malformed-*.ads")
    quarantine = kept.read_text()
    assert "# reason: attribute 'Cpus' = error: expected a finite number from 0" in quarantine
    assert "# reason: attribute 'TotalSlotCpus' = 16, but its dynamic slots hold 22 cores" in quarantine
    allocations = outbox_docs(config.probe.state_dir, "allocation")
    assert len(allocations) == 5  # cpu-node1's 12-core claim and gpu-node1's four, none billed
    assert all("billed_cpus_hours" in d and d["billed_cpus_hours"] is None for d in allocations), allocations
