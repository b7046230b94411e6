"""True overhead, the idle cross-check and bills, end to end on real dumps (seed 003)."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import numpy as np
import pytest

from probes.cli import main
from probes.config import ProbeConfig, load_config
from probes.pipeline.overhead import overhead_report, snapshot_bills
from probes.sources.queue import read_idle
from probes.sources.status import read_status

from ..conftest import DEMO, ROOT


def cli_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:  # type: ignore[type-arg]
    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)  # type: ignore[no-any-return]


def test_the_8_core_slot(capsys: pytest.CaptureFixture[str], eight_core: Path) -> None:
    """8 cores, 15940 MiB; 4 cores and 15428 MiB unallocated; 4 jobs of 1 core and 128 MiB.

    Under {1 core, 2048 MiB}: floor(4 / 1) = 4, floor(15428 / 2048) = 7 -> 4 CU of true
    overhead (4 cores, 8192 MiB). Billable: 8 - 4 = 4 cores over 4 allocated -> 100 %;
    15940 - 8192 = 7748 MiB over 4 x 128 = 512 allocated -> 7748 / 512 = 15.1328125.
    Unallocated disk is TotalSlotDisk minus the 4 jobs' Disk (65737856 - 4 x 657374 KiB), not the
    p-slot's own Disk (63107953 KiB, which the startd measures and rounds).
    """
    dump = str(eight_core)
    overhead = cli_json(capsys, "overhead", "--status-file", dump)
    (slot,) = overhead["slots"]
    assert (slot["overhead_cu"], slot["partition"], slot["phase"]) == (4, "cpu", "active")
    assert slot["unallocated"] == {"cpus": 4.0, "memory": 15428.0, "disk": 65737856.0 - 4 * 657374, "gpus": 0.0}
    assert overhead["histogram"] == {"4": 1} and overhead["totals"]["overhead_cu"] == 4
    assert overhead["totals"]["overhead_cu_hours"] == pytest.approx(4 * 300 / 3600)
    bill = cli_json(capsys, "bill", "--status-file", dump)
    (node,) = bill["nodes"]
    assert node["rate"]["cpus"] == 1.0 and node["rate"]["memory"] == 7748 / 512 == 15.1328125
    assert node["rate"]["gpus"] is None  # nothing of it allocated
    assert {a["billed"]["memory"] for a in bill["allocations"]} == {128 * 15.1328125}


def test_the_purdue_glidein(capsys: pytest.CaptureFixture[str], fixtures: Path) -> None:
    """10 cores all claimed, 30000 MiB of which 11056 left: no core is free, so 0 CU.
    Cores bill at 10 / 10 = 100 %; memory at 30000 / (30000 - 11056) = 30000 / 18944."""
    dump = str(fixtures / "classads/status-glidein-pslot-purdue.ads")
    (slot,) = cli_json(capsys, "overhead", "--status-file", dump)["slots"]
    assert (slot["overhead_cu"], slot["site"]) == (0, "Purdue")
    bill = cli_json(capsys, "bill", "--status-file", dump)
    (node,) = bill["nodes"]
    assert node["rate"]["cpus"] == 1.0
    assert node["rate"]["memory"] == pytest.approx(30000 / 18944)  # 158 %
    jobs = {a["name"].split("@")[0]: a for a in bill["allocations"]}
    assert jobs["slot1_6"]["billed"]["memory"] == pytest.approx(1280 * 30000 / 18944)
    assert sum(a["billed"]["memory"] for a in bill["allocations"]) == pytest.approx(30000)


def test_the_htcondor_25_pool_and_its_idle_jobs(capsys: pytest.CaptureFixture[str], condor25: Path) -> None:
    """GPU node: 3 GPUs free but no memory -> 3 CU under {1 GPU}; none of the idle jobs
    (11.4 wants 4096 MiB) fits in 0 MiB, so the overhead is not 'suspicious'."""
    out = cli_json(
        capsys,
        "overhead",
        "--status-file",
        str(condor25 / "status.ads"),
        "--idle-file",
        str(condor25 / "queue.ads"),
        "--exact",
    )
    by_name = {s["name"]: s for s in out["slots"]}
    assert by_name["slot1@gpu-node1@vm"]["overhead_cu"] == 3 and by_name["slot1@cpu-node1@vm"]["overhead_cu"] == 0
    assert [s["fits_idle"] for s in out["slots"]] == [False, False]
    assert out["idle_cross_check"]["suspicious_cu_hours"] == 0
    assert out["idle_cross_check"]["other_cu_hours"] == pytest.approx(3 * 300 / 3600)


def test_the_exact_cross_check_evaluates_requirements() -> None:
    """Demo autocluster 10 (1 core, 2048 MiB) fits many leftovers by resources, but its
    Requirements want GLIDEIN_Site in DESIRED_Sites = "T2_CH_CERN", which no slot is."""
    config = load_config(ROOT / "config/demo.toml")
    snapshot, _ = read_status(config.sources.status_files, config.slot_reading())
    idle, _ = read_idle(config.sources.idle_files)
    cern_only = idle[idle["autocluster_id"] == 10]
    assert len(cern_only) == 1
    by_resources = overhead_report(snapshot, config, cern_only)
    exact = overhead_report(snapshot, config, cern_only, exact=True)
    assert by_resources.slots["fits_idle"].sum() > 10
    assert exact.slots["fits_idle"].sum() == 0
    assert exact.overlap is not None and exact.overlap["suspicious_cu_hours"] == 0


def test_slots_matching_no_partition_are_reported(condor25: Path) -> None:
    config = ProbeConfig.model_validate({"partitions": [{"name": "gpu", "match": "TotalSlotGPUs > 0", "gpus": 1}]})
    snapshot, _ = read_status([condor25 / "status.ads"], config.slot_reading())
    report = overhead_report(snapshot, config)
    assert report.slots.set_index("name")["unmatched"].to_dict() == {
        "slot1@cpu-node1@vm": True,
        "slot1@gpu-node1@vm": False,
    }
    _nodes, bills = snapshot_bills(snapshot, config)
    assert len(bills) == 6 and not bills["orphan"].any()


def test_the_demo_bills_add_up() -> None:
    """Per node and resource: bills + unattributed + overhead = the node's total."""
    config = load_config(ROOT / "config/demo.toml")
    snapshot, _ = read_status([DEMO / "status.ads"], config.slot_reading())
    nodes, bills = snapshot_bills(snapshot, config)
    billed = bills.groupby("parent")[["billed_cpus", "billed_memory", "billed_gpus"]].sum()
    n = nodes.set_index("name")
    for r in ("cpus", "memory", "gpus"):
        total = billed[f"billed_{r}"].reindex(n.index).fillna(0) + n[f"unattributed_{r}"] + n[f"overhead_{r}"]
        assert total.to_numpy() == pytest.approx(n[f"total_{r}"].to_numpy()), r


def test_the_cross_check_asks_for_jobs_within_the_true_overhead(tmp_path: Path) -> None:
    """Seed 003, section 3.1: a node with 3 cores and 4 GB unallocated has 2 CU of true
    overhead, and is suspicious only if jobs "that request less than 2 CPUs and 4 GB of
    memory, i.e. 2 canonical units" were waiting. A 3-core job would fit the leftovers, but not
    within the 2 CU; a 2-core, 4 GB job would."""
    import pandas as pd

    dump = tmp_path / "status.ads"
    dump.write_text(
        'Name = "slot1@node"\nMachine = "node"\nSlotType = "Partitionable"\nMyCurrentTime = 1795300000\n'
        "TotalSlotCpus = 8\nTotalSlotMemory = 16384\nTotalSlotDisk = 1000000.0\n"
        "Cpus = 3\nMemory = 4096\nDisk = 500000\n\n"
    )
    config = ProbeConfig()
    snapshot, _ = read_status([dump], config.slot_reading())

    def idle(cpus: float, memory: float) -> pd.DataFrame:
        return pd.DataFrame(
            {
                "request_cpus": [cpus],
                "request_memory": [memory],
                "request_disk": [1.0],
                "request_gpus": [0.0],
                "count": [1],
            }
        )

    three_cores = overhead_report(snapshot, config, idle(3, 1024))
    assert three_cores.slots["overhead_cu"].tolist() == [2]
    assert three_cores.slots["fits_idle"].tolist() == [False]
    two_cu = overhead_report(snapshot, config, idle(2, 4096))
    assert two_cu.slots["fits_idle"].tolist() == [True]
    assert two_cu.overlap is not None and two_cu.overlap["suspicious_cu_hours"] == 2 * 300 / 3600


def _without_a_dynamic_slot(condor25: Path, tmp_path: Path, *, drop_lists: bool) -> Path:
    """The condor25 dump with the 4-core dynamic slot of the CPU node made unreadable (a line
    classad2 cannot parse), and with ``drop_lists`` the p-slot's Child* lists removed too."""
    ads = (condor25 / "status.ads").read_text().split("\n\n")
    victim = next(i for i, ad in enumerate(ads) if 'Name = "slot1_1@cpu-node1@vm"' in ad)
    ads[victim] = ads[victim].replace("\nCpus = 4\n", "\nCpus = 4 +* 2\n")
    assert "+*" in ads[victim]
    if drop_lists:
        pslot = next(i for i, ad in enumerate(ads) if 'Name = "slot1@cpu-node1@vm"' in ad)
        ads[pslot] = "\n".join(line for line in ads[pslot].split("\n") if not line.startswith("Child"))
    dump = tmp_path / "status.ads"
    dump.write_text("\n\n".join(ads))
    return dump


def test_a_malformed_dynamic_slot_does_not_rebill_its_neighbour(condor25: Path, tmp_path: Path) -> None:
    """The 4-core dynamic slot's ad is quarantined. The p-slot's Child* lists are whole, but they
    serve only a dump with no dynamic-slot ads at all (on a live pool they may still list
    released claims), so the node is incomplete and left unbilled: the 12-core job beside the
    lost slot is never billed its 4 cores (16 cores and 32768 MiB), nor billed from the lists."""
    snapshot, report = read_status([_without_a_dynamic_slot(condor25, tmp_path, drop_lists=False)])
    assert len(report.malformed) == 1
    accounting = overhead_report(snapshot, ProbeConfig())
    slots = accounting.slots.set_index("name")
    assert slots.loc["slot1@cpu-node1@vm", "incomplete"] and not slots.loc["slot1@gpu-node1@vm", "incomplete"]
    bills = accounting.bills.set_index("name")
    assert np.isnan(bills.loc["slot1_2@cpu-node1@vm", "billed_cpus"]) and accounting.unbilled == 1
    assert not bills["from_child_lists"].any()


def test_a_node_whose_children_are_not_all_known_is_left_unbilled(condor25: Path, tmp_path: Path) -> None:
    snapshot, _ = read_status([_without_a_dynamic_slot(condor25, tmp_path, drop_lists=True)])
    accounting = overhead_report(snapshot, ProbeConfig())
    slots = accounting.slots.set_index("name")
    assert slots.loc["slot1@cpu-node1@vm", "incomplete"] and not slots.loc["slot1@gpu-node1@vm", "incomplete"]
    assert accounting.unbilled == 1
    bills = accounting.bills.set_index("name")
    assert bills.loc["slot1_2@cpu-node1@vm", "incomplete"]
    assert np.isnan(bills.loc["slot1_2@cpu-node1@vm", "billed_cpus"])
    # the GPU node is billed as ever, and the CPU node's true overhead still counts (0 CU: no core is free)
    assert not np.isnan(bills.loc["slot1_1@gpu-node1@vm", "billed_cpus"])
    assert slots.loc["slot1@cpu-node1@vm", "overhead_cu"] == 0


def test_bill_says_how_many_nodes_were_left_unbilled(
    condor25: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dump = _without_a_dynamic_slot(condor25, tmp_path, drop_lists=True)
    assert main(["bill", "--status-file", str(dump), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["unbilled_nodes"] == 1 and doc["incomplete_nodes"] == ["slot1@cpu-node1@vm"]
    assert main(["bill", "--status-file", str(dump)]) == 0
    assert "1 node(s) left unbilled (incomplete: an ad quarantined, " in capsys.readouterr().out


def _later(dump: Path, tmp_path: Path, seconds: int) -> Path:
    """``dump`` as if taken ``seconds`` later."""
    text = re.sub(
        r"^(MyCurrentTime|LastHeardFrom) = (\d+)",
        lambda m: f"{m[1]} = {int(m[2]) + seconds}",
        dump.read_text(),
        flags=re.M,
    )
    later = tmp_path / f"later-{seconds}.ads"
    later.write_text(text)
    return later


@pytest.mark.parametrize("second", ["status.ads", "status.json"])
def test_the_same_instant_given_twice_is_counted_once(condor25: Path, second: str) -> None:
    once, _ = read_status([condor25 / "status.ads"])
    twice, report = read_status([condor25 / "status.ads", condor25 / second])
    assert sum(report.rejects.values()) == 8 and "the same dump given twice?" in next(iter(report.rejects))
    assert twice.slots["n_dynamic"].tolist() == once.slots["n_dynamic"].tolist() == [2, 4]
    one, two = overhead_report(once, ProbeConfig()), overhead_report(twice, ProbeConfig())
    assert two.slots["overhead_cu"].sum() == one.slots["overhead_cu"].sum() == 3
    assert len(two.bills) == len(one.bills) == 6


def test_dumps_of_several_instants_are_accounted_instant_by_instant(tmp_path: Path) -> None:
    snapshot, report = read_status([DEMO / "status.ads", _later(DEMO / "status.ads", tmp_path, 300)])
    assert not report.rejects and snapshot.slots["observed_at"].nunique() == 2
    accounting = overhead_report(snapshot, ProbeConfig())
    first, second = (
        accounting.bills[accounting.bills["observed_at"] == t] for t in sorted(snapshot.slots["observed_at"].unique())
    )
    assert len(first) == len(second) == 72
    assert second["billed_cpus"].tolist() == pytest.approx(first["billed_cpus"].tolist())
    assert accounting.slots["n_dynamic"].sum() == 2 * 72


def test_an_overhead_report_is_immutable() -> None:
    """A cycle's accounting is handed to several steps (records, the command line's tables):
    none of them can change what the others read, but for the tables, which are not copied."""
    config = load_config(ROOT / "config/demo.toml")
    snapshot, _ = read_status(config.sources.status_files, config.slot_reading())
    idle, _ = read_idle(config.sources.idle_files)
    report = overhead_report(snapshot, config, idle)
    with pytest.raises(dataclasses.FrozenInstanceError):
        report.slots = report.slots.head(1)  # type: ignore[misc]
    assert report.overlap is not None and report.units
    with pytest.raises(TypeError, match="does not support item assignment"):
        report.overlap["suspicious_cu_hours"] = 0.0
    with pytest.raises(TypeError, match="does not support item assignment"):
        report.units["cpu"] = report.units["cpu"]  # type: ignore[index]
    # the units given are copied: changing the caller's mapping later changes nothing
    units = {"cpu": report.units["cpu"]}
    again = dataclasses.replace(report, units=units)
    units.clear()
    assert list(again.units) == ["cpu"] and not isinstance(again.units, dict)
