"""Losses named, never absorbed: nodes a snapshot lacks, stale nodes and holes between snapshots
are ``gap`` records, and a snapshot never stands for longer than the cadence.

Snapshots are condor_status -long dumps written here and read by the probe's own reader; the
figures are by hand."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from collector.outbox import Outbox
from collector.sinks.sqlite import EmbeddedStore
from probes.cli.commands.audit import audit_json
from probes.config import ProbeConfig
from probes.pipeline.audit import audit
from probes.pipeline.cycle import snapshot_step
from probes.pipeline.reading import Reading
from probes.sources.checkpoints import NODES_KEY
from probes.sources.status import Snapshot, read_status

CADENCE, HORIZON = 60.0, 900.0
NODES = {  # name: (cores, cores of each running job)
    "slot1@a.example.org": (8, (2, 2)),
    "slot1@b.example.org": (4, (1,)),
}


def _ad(**attrs: Any) -> str:
    return "\n".join(f"{k} = {v!r}".replace("'", '"') if isinstance(v, str) else f"{k} = {v}" for k, v in attrs.items())


def dump(path: Path, at: float, names: list[str]) -> Path:
    """A condor_status -long dump observed at ``at`` of the nodes ``names`` (of :data:`NODES`)."""
    ads = []
    for name in names:
        cores, jobs = NODES[name]
        machine = name.split("@")[1]
        common = {"MyType": "Machine", "Machine": machine, "MyCurrentTime": int(at), "LastHeardFrom": int(at) - 1}
        ads.append(_ad(**common, Name=name, SlotType="Partitionable", PartitionableSlot="true", State="Unclaimed",
                       Cpus=cores - sum(jobs), Memory=1024, GPUs=0, TotalSlotCpus=cores, TotalSlotMemory=2048 * cores,
                       TotalSlotGPUs=0, TotalSlotDisk=1000000, Disk=500000))  # fmt: skip
        for k, c in enumerate(jobs, 1):
            ads.append(_ad(**common, Name=f"slot1_{k}@{machine}", SlotType="Dynamic", DynamicSlot="true",
                           State="Claimed", Cpus=c, Memory=2048 * c, GPUs=0, Disk=1000, TotalSlotCpus=c,
                           TotalSlotMemory=2048 * c, TotalSlotGPUs=0, TotalSlotDisk=1000,
                           GlobalJobId=f"s#{machine}.{k}#1", RemoteUser="alice@example.org",
                           AccountingGroup="group_a.alice@example.org"))  # fmt: skip
    path.write_text("\n\n".join(ads) + "\n\n")  # a blank line after each ad, as condor_status writes
    return path


def _config(tmp_path: Path) -> ProbeConfig:
    return ProbeConfig.model_validate(
        {"pool": {"name": "p", "interval_s": CADENCE, "max_interval_s": HORIZON}, "probe": {"state_dir": str(tmp_path)}}
    )


def _stepper(tmp_path: Path) -> Callable[[float, list[str]], Any]:
    """Account snapshots in order through one outbox, as the probe does; each returns its step."""
    config, outbox = _config(tmp_path), Outbox(tmp_path / "outbox.db")

    def step(at: float, names: list[str]) -> Any:
        snapshot, _ = read_status([dump(tmp_path / f"status.{at:.0f}.ads", at, names)], config.slot_reading())
        done = snapshot_step(Reading(snapshot=snapshot), outbox.checkpoint, config, probe="t")
        outbox.commit(done.batch.records, done.batch.checkpoints)
        return done

    return step


def _gaps(step: Any) -> list[tuple[str, str, float, float, float, float]]:
    """(node, reason, start, end, cores, running cores) of a step's gap records."""
    docs = step.batch.records["gap"].decoded() if "gap" in step.batch.records else []
    return sorted((d["name"], d["reason"], d["start"], d["end"], d["cpus"], d["running_cpus"]) for d in docs)


A, B = "slot1@a.example.org", "slot1@b.example.org"


def test_a_node_missing_then_back_is_a_gap_per_snapshot_and_a_hole_is_unobserved(tmp_path: Path) -> None:
    step = _stepper(tmp_path)
    first = step(1000, [A, B])
    # A missing (a collector restarted): the time this snapshot stands for, with A's 8 cores, 4 running
    assert _gaps(step(1060, [B])) == [(A, "missing", 1000.0, 1060.0, 8.0, 4.0)]
    assert _gaps(first) == [] and set(first.batch.checkpoints[NODES_KEY]) == {A, B}
    assert _gaps(step(1120, [B])) == [(A, "missing", 1060.0, 1120.0, 8.0, 4.0)]
    back = step(1180, [A, B])  # back: each snapshot that lacked it named its part already
    assert _gaps(back) == [] and back.interval_s == CADENCE
    # 420 s since the last snapshot (the probe or its collector down): stands for the cadence only
    late = step(1600, [B])
    assert (late.interval_s, late.unobserved_s) == (CADENCE, 360.0)
    assert {d["interval_s"] for d in late.batch.records["slot"].decoded()} == {CADENCE}
    assert _gaps(late) == [
        (A, "missing", 1540.0, 1600.0, 8.0, 4.0),
        (A, "unobserved", 1180.0, 1540.0, 8.0, 4.0),
        (B, "unobserved", 1180.0, 1540.0, 4.0, 1.0),
    ]
    assert _gaps(step(1660, [A, B])) == []  # A back, nothing more

    # audit names them per node: A 180 s missing and 360 s unobserved with 4 cores running, B 360 s
    with Outbox(tmp_path / "outbox.db") as outbox, EmbeddedStore(tmp_path / "store.db") as store:
        outbox.flush(store)
        report = audit(store, _config(tmp_path), 900, 1700)
    got = report.node_gaps.set_index(["name", "reason"])
    assert got.loc[(A, "missing"), ["gaps", "seconds"]].tolist() == [3, 180]
    assert got.loc[(A, "unobserved"), "seconds"] == 360 and got.loc[(B, "unobserved"), "seconds"] == 360
    assert got.loc[(A, "missing"), "core_hours"] == pytest.approx(8 * 180 / 3600)
    assert report.running_unbilled == pytest.approx((4 * 540 + 1 * 360) / 3600)  # 0.7 core-hours
    assert report.interval_s == CADENCE  # the hole no longer widens the bound
    shown = audit_json(report)
    assert shown["balanced"] is False and len(shown["node_gaps"]) == 3


def test_a_missing_node_is_named_up_to_the_horizon_then_forgotten(tmp_path: Path) -> None:
    step = _stepper(tmp_path)
    step(1000, [A, B])
    named = 0.0
    for k in range(1, 18):  # 17 snapshots without A, to 2020: A is named until 1000 + 900
        done = step(1000 + 60 * k, [B])
        named += sum(end - start for _, _, start, end, _, _ in _gaps(done))
        assert (A in done.batch.checkpoints[NODES_KEY]) == (1000 + 60 * k < 1000 + HORIZON)
    assert named == HORIZON
    assert _gaps(step(2080, [A, B])) == []  # it came back a new node: nothing says where it was


def test_unheard_nodes_are_gaps_since_their_last_heard(tmp_path: Path) -> None:
    step = _stepper(tmp_path)
    step(1000, [A, B])
    config, outbox = _config(tmp_path), Outbox(tmp_path / "outbox.db")
    snapshot, _ = read_status([dump(tmp_path / "s.ads", 1060, [B])], config.slot_reading())
    unheard = pd.DataFrame(
        {"name": [A], "machine": ["a.example.org"], "site": [None], "since": [1005.0], "source": ["cm"],
         "cpus": [8.0], "memory": [16384.0], "gpus": [0.0]}
    )  # fmt: skip
    assert Snapshot(snapshot.slots, snapshot.allocations).unheard.empty  # by default, none
    done = snapshot_step(Reading(snapshot=replace(snapshot, unheard=unheard)), outbox.checkpoint, config, probe="t")
    [doc] = done.batch.records["gap"].decoded()
    assert (doc["name"], doc["reason"], doc["start"], doc["end"], doc["seconds"]) == (
        A,
        "unheard",
        1000.0,
        1060.0,
        60.0,
    )
    assert (doc["since"], doc["cpus"], doc["memory"], doc["running_cpus"]) == (1005.0, 8.0, 16384.0, 4.0)
    assert done.batch.checkpoints[NODES_KEY][A]["missing"] is False  # listed, though stale: not missing too
