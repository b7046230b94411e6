"""The pool checked against itself (issue 41, points 1-3), each class on its smallest input: a
16-core partitionable slot holding alice's 4 cores / 8192 MiB and bob's 12 / 24576 MiB, billed
4 and 12 cores. A node that contradicts itself, a resource that is not a finite number, or a
dynamic slot that cannot be placed is never billed to a neighbour: its ad is quarantined (file,
line, attribute, reason) and its node is ``incomplete`` -- unbilled, counted, named by ``bill``,
``probe once`` and the service's ``/metrics``."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import classad2
import pytest

from probes.cli import main
from probes.service.health import Metrics
from probes.sources.status import incomplete_nodes, read_status

T = 1_790_000_000  # 2026-09-21: a dump is read after its times
NODE = "slot1@n1"


def _ad(name: str, **attrs: str) -> str:
    base = {"Name": f'"{name}"', "Machine": '"n1"', "MyType": '"Machine"', "LastHeardFrom": str(T),
            "MyCurrentTime": str(T)}  # fmt: skip
    return "".join(f"{k} = {v}\n" for k, v in {**base, **attrs}.items())


def pslot(**attrs: str) -> str:
    p = {"SlotType": '"Partitionable"', "PartitionableSlot": "true", "State": '"Unclaimed"', "Cpus": "0",
         "Memory": "0", "TotalSlotCpus": "16", "TotalSlotMemory": "32768"}  # fmt: skip
    return _ad(NODE, **{**p, **attrs})


def dslot(k: int, user: str, cpus: int, memory: int, job: str, **attrs: str) -> str:
    return _ad(f"slot1_{k}@n1", **{"SlotType": '"Dynamic"', "DynamicSlot": "true", "State": '"Claimed"',
                                   "Cpus": str(cpus), "Memory": str(memory), "GlobalJobId": f'"s#{job}#1"',
                                   "RemoteOwner": f'"{user}@pool"', **attrs})  # fmt: skip


def node(p: dict[str, str] | None = None, alice: dict[str, str] | None = None, bob: dict[str, str] | None = None,
         *extra: str) -> str:  # fmt: skip
    """The issue's node, with attributes of the p-slot, alice's or bob's dynamic slot replaced."""
    ads = [pslot(**(p or {})), dslot(1, "alice", 4, 8192, "1.0", **(alice or {})),
           dslot(2, "bob", 12, 24576, "2.0", **(bob or {})), *extra]  # fmt: skip
    return "\n".join(ads) + "\n"  # the blank line condor_status -long writes after each ad


def bill(tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, name: str = "status.ads") -> tuple[Any, str]:
    """``fairacct bill --json`` of ``text``: (its document, its stderr); malformed ads kept in q/."""
    path = tmp_path / name
    path.write_text(text)
    code = main(["bill", "--status-file", str(path), "--json", "--quarantine", str(tmp_path / "q")])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out), err


def billed(doc: Any) -> dict[str, float | None]:
    return {a["name"]: a["billed"]["cpus"] for a in doc["allocations"]}


def quarantined(tmp_path: Path) -> str:
    files = sorted((tmp_path / "q").glob("malformed-*.ads"))
    assert len(files) == 1, files
    return files[0].read_text()


def test_the_node_as_it_is_bills_4_and_12(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc, err = bill(tmp_path, capsys, node())
    assert billed(doc) == {"slot1_1@n1": 4.0, "slot1_2@n1": 12.0}
    assert doc["unbilled_nodes"] == 0 and doc["incomplete_nodes"] == [] and err == ""


# -- 1. a node that contradicts itself -------------------------------------------------------------

_HOLD = "but its dynamic slots hold"
OVERFULL = {
    # the issue billed alice 10 and bob 6
    "a dynamic slot of 20 cores": (
        node(alice={"Cpus": "20"}),
        f"'TotalSlotCpus' = 16, {_HOLD} 32 cores (slot1_1@n1 20, slot1_2@n1 12)",
    ),
    "dynamic slots of more memory": (
        node(alice={"Memory": "16384"}),
        f"'TotalSlotMemory' = 32768, {_HOLD} 40960 MiB",
    ),
    "a GPU on a node of none": (
        node({"TotalSlotGPUs": "0"}, {"GPUs": "1"}),
        f"'TotalSlotGPUs' = 0, {_HOLD} 1 devices (slot1_1@n1 1)",
    ),
    # the issue billed 2 and 6, then 0 and 0
    "TotalSlotCpus = 8": (node(p={"TotalSlotCpus": "8"}), f"'TotalSlotCpus' = 8, {_HOLD} 16 cores"),
    "TotalSlotCpus = 0": (node(p={"TotalSlotCpus": "0"}), f"'TotalSlotCpus' = 0, {_HOLD} 16 cores"),
    # alice's job twice, the copy without its GlobalJobId: the issue billed 3.2 + 3.2 and bob 9.6
    "a claim copied without its job id": (
        node(None, None, None, dslot(3, "alice", 4, 8192, "1.0").replace('GlobalJobId = "s#1.0#1"\n', "")),
        f"'TotalSlotCpus' = 16, {_HOLD} 20 cores (slot1_1@n1 4, slot1_2@n1 12, slot1_3@n1 4)",
    ),
}


@pytest.mark.parametrize("case", sorted(OVERFULL))
def test_a_node_that_contradicts_itself_is_not_billed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str
) -> None:
    text, why = OVERFULL[case]
    doc, err = bill(tmp_path, capsys, text)
    assert set(billed(doc).values()) == {None}, billed(doc)  # nobody is billed a neighbour's share
    assert doc["unbilled_nodes"] == 1 and doc["incomplete_nodes"] == [NODE]
    assert why in err and "left unbilled (incomplete)" in err
    # the quarantine names the file, the p-slot's line and why, and holds the p-slot's ad
    kept = quarantined(tmp_path)
    assert kept.startswith(f"# from {tmp_path / 'status.ads'} line 1\n# reason: attribute ") and why in kept
    assert 'Name = "slot1@n1"' in kept


def test_a_node_that_does_not_say_its_size_is_set_aside(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 51, point 4: a p-slot without TotalSlotCpus/TotalSlotMemory (HTCondor writes them in
    every p-slot's ad since 7.x) was billed from its own amounts, 0 cores unallocated here: alice
    and bob were billed 0 cores. Its ad is set aside with the reason, its jobs are not billed, and
    the node is named unbilled."""
    text = "\n".join(
        [pslot().replace("TotalSlotCpus = 16\n", "").replace("TotalSlotMemory = 32768\n", ""),
         dslot(1, "alice", 4, 8192, "1.0", GPUs="1"), dslot(2, "bob", 12, 24576, "2.0")]
    ) + "\n"  # fmt: skip
    doc, err = bill(tmp_path, capsys, text)
    assert billed(doc) == {"slot1_1@n1": None, "slot1_2@n1": None}
    assert doc["incomplete_nodes"] == [NODE] and doc["nodes"] == []
    assert "no TotalSlotCpus, TotalSlotMemory: HTCondor writes them in every partitionable slot ad" in err
    assert "line 1" in err


def test_dynamic_slots_that_fill_their_node_exactly_are_billed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """16 of 16 cores, and a real-valued Disk summing to its size: no contradiction."""
    text = node({"TotalSlotDisk": "3.3"}, {"Disk": "1.1"}, {"Disk": "2.2"})
    doc, err = bill(tmp_path, capsys, text)
    assert billed(doc) == {"slot1_1@n1": 4.0, "slot1_2@n1": 12.0} and doc["incomplete_nodes"] == [] and err == ""


# -- 2. one job on two dynamic slots --------------------------------------------------------------


def test_a_job_on_two_slots_is_billed_once_by_probe_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Alice's job on a third dynamic slot too: with its GlobalJobId, the copy is counted and named
    and alice billed 4 (as main already did); without it, the node contradicts itself (20 of 16
    cores) and is left unbilled, where the issue billed 3.2 + 3.2."""
    copy = dslot(3, "alice", 4, 8192, "1.0")
    (tmp_path / "same.ads").write_text(node(None, None, None, copy))
    (tmp_path / "anon.ads").write_text(node(None, None, None, copy.replace('GlobalJobId = "s#1.0#1"\n', "")))
    for dump, bills in (("same.ads", {"alice": 4.0, "bob": 12.0}), ("anon.ads", {"alice": None, "bob": None})):
        config = tmp_path / f"{dump}.toml"
        config.write_text(f'[sources]\nstatus_files = ["{dump}"]\n[probe]\nstate_dir = "state-{dump}"\n')
        assert main(["probe", "once", "--config", str(config), "--json"]) == 0
        out, err = capsys.readouterr()
        doc = json.loads(out)
        got = {a["user"]: a["billed"]["cpus"] for a in doc["bill"]["allocations"]}
        assert got == bills if dump == "same.ads" else set(got.values()) == {None}, (dump, got)
        if dump == "same.ads":
            assert doc["read"]["status"]["rejects"] == {
                "GlobalJobId: also on a slot heard from later, billed there only": 1
            }
            assert doc["bill"]["incomplete_nodes"] == []
        else:
            assert doc["bill"]["incomplete_nodes"] == [NODE] and "hold 20 cores" in err


# -- 3. values that are not numbers -----------------------------------------------------------------

NOT_NUMBERS = [
    ("Cpus", "error"), ("Cpus", "undefined"), ("Cpus", "Cpus"), ("Memory", "1/0"), ("Cpus", '"4"'),
    ("Memory", "1e309"), ("Memory", 'real("INF")'), ("Memory", "Infinity"), ("Cpus", 'real("NaN")'),
    ("Cpus", "9" * 400), ("Memory", "2 * Memory"), ("Cpus", "{ 4 }"),
]  # fmt: skip


@pytest.mark.parametrize(("attr", "value"), NOT_NUMBERS)
def test_a_resource_that_is_not_a_number_leaves_its_node_unbilled(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], attr: str, value: str
) -> None:
    """The issue billed bob 14.77 (error read as 1 core), 16 (undefined, Cpus = Cpus, "4" read as
    0) or billed the neighbour for the lost slot after a warning."""
    doc, err = bill(tmp_path, capsys, node(alice={attr: value}))
    assert billed(doc) == {"slot1_2@n1": None}  # bob is not billed alice's share
    assert doc["incomplete_nodes"] == [NODE]
    shown = " ".join(value.split()) if len(value) <= 80 else value[:80] + "... (400 characters)"
    reason = f"attribute '{attr}' = {shown}: expected a finite number from 0 to below 9007199254740992"
    assert reason in err and "ignored: Cpus: expected" not in err and "not a finite number, ignored" not in err, err
    kept = quarantined(tmp_path)
    assert kept.startswith(f"# from {tmp_path / 'status.ads'} line 14\n# reason: {reason}")
    assert 'Name = "slot1_1@n1"' in kept


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("undefined", "undefined: expected a finite number"),
        ("36893488147419103232", "3.6893488147419103e+19: expected a number"),  # 2^65, read as 0 before
        ("9223372036854775808", "9.2233720368547758e+18: expected a number"),  # 2^63, read as 0 before
        ("-9223372036854775809", "-9.2233720368547758e+18: expected a number"),
    ],
)
def test_a_partitionable_slot_of_unknown_size_is_not_billed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str, shown: str
) -> None:
    """TotalSlotCpus = undefined or beyond 64 bits billed both jobs 0: now the p-slot's ad is
    quarantined, and its dynamic slots are orphans, unbilled, their node named."""
    doc, err = bill(tmp_path, capsys, node(p={"TotalSlotCpus": value}))
    assert billed(doc) == {"slot1_1@n1": None, "slot1_2@n1": None}
    assert doc["unbilled_nodes"] == 1 and doc["incomplete_nodes"] == [NODE]
    assert f"line 1: attribute 'TotalSlotCpus' = {shown}" in err


def test_integers_beyond_64_bits_are_read_alike_in_long_and_json(tmp_path: Path) -> None:
    """9223372036854775807 was quarantined and 9223372036854775808 read as 0 in a -long dump, as
    the -json reader never did: both are reals out of range in both forms now."""
    for value in ("9223372036854775807", "9223372036854775808", "18446744073709551616"):
        long = tmp_path / "status.ads"
        long.write_text(node(alice={"Cpus": value}))
        ads = [classad2.parseOne(t, classad2.ParserType.Old) for t in node().split("\n\n") if t.strip()]
        objects: list[dict[str, Any]] = [{k: ad.eval(k) for k in ad} for ad in ads]
        objects[1]["Cpus"] = int(value)
        as_json = tmp_path / "status.json"
        as_json.write_text(json.dumps(objects, default=str))
        for path in (long, as_json):
            snapshot, report = read_status([path])
            (bad,) = report.malformed
            assert re.match(r"attribute 'Cpus' = 9\.22|attribute 'Cpus' = 1\.84", bad.reason), (path, bad.reason)
            assert incomplete_nodes(snapshot) == [NODE], path


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ('"garbage"', "dynamic slot Name 'garbage' is not slotN_M@host"),
        ('"slot1@n1#2"', "dynamic slot Name 'slot1@n1#2' is not slotN_M@host"),
        ("17", "no Name (a string) to place the slot on its node"),
    ],
)
def test_a_dynamic_slot_without_a_usable_name_leaves_its_node_unbilled(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str, why: str
) -> None:
    """Its resources were billed to the neighbour, or the slot skipped; its Machine says the node."""
    doc, err = bill(tmp_path, capsys, node(alice={"Name": value}))
    assert billed(doc) == {"slot1_2@n1": None} and doc["incomplete_nodes"] == [NODE]
    assert f"line 14: {why}" in err and "its node is left unbilled (incomplete)" in err


def test_only_the_node_that_contradicts_itself_is_left_unbilled(tmp_path: Path) -> None:
    """A second node beside the damaged one is billed as before; the quarantined ads of one
    node never reach another (the same slot names on another machine)."""
    other = node().replace("@n1", "@n2").replace('"n1"', '"n2"').replace("s#", "t#")
    path = tmp_path / "status.ads"
    path.write_text(node(alice={"Cpus": "error"}) + "\n" + node(p={"TotalSlotCpus": "8"}).replace("s#", "u#")
                    .replace("@n1", "@n3").replace('"n1"', '"n3"') + "\n" + other)  # fmt: skip
    snapshot, report = read_status([path])
    assert incomplete_nodes(snapshot) == ["slot1@n1", "slot1@n3"] and len(report.malformed) == 2
    flags = snapshot.slots.set_index("name")["incomplete"].to_dict()
    assert flags == {"slot1@n1": True, "slot1@n3": True, "slot1@n2": False}


def test_the_service_counts_incomplete_nodes_in_its_metrics() -> None:
    metrics = Metrics()
    assert "\nfairacct_incomplete_nodes " not in metrics.render()  # nothing read yet
    metrics.status_read([], {}, incomplete=2)
    assert "\n# TYPE fairacct_incomplete_nodes gauge\nfairacct_incomplete_nodes 2" in metrics.render()


def test_bills_of_a_damaged_node_are_never_a_number_of_another(tmp_path: Path) -> None:
    """The oracle of the fuzz batch on the node itself: billed as before or not at all."""
    before = read_status([_write(tmp_path / "a.ads", node())])[0]
    after = read_status([_write(tmp_path / "b.ads", node(alice={"Cpus": "Cpus"}))])[0]
    assert before.allocations["cpus"].tolist() == [4.0, 12.0]
    assert after.allocations["name"].tolist() == ["slot1_2@n1"] and after.slots["incomplete"].tolist() == [True]
    assert not math.isnan(after.slots["total_cpus"].iloc[0])


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


@pytest.mark.parametrize("command", ["slots", "overhead"])
def test_slots_and_overhead_say_what_was_quarantined(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    """``Cpus = error`` was read as 1 core by every command: now each reads the node without the
    ad, counts it as malformed and names it; ``slots`` flags the node incomplete."""
    path = tmp_path / "status.ads"
    path.write_text(node(alice={"Cpus": "error"}))
    assert main([command, "--status-file", str(path), "--json"]) == 0
    out, err = capsys.readouterr()
    doc = json.loads(out)
    assert f"{path} line 14: attribute 'Cpus' = error: expected a finite number" in err
    if command == "slots":
        assert doc["read"]["status"]["malformed"] == 1
        assert [s["incomplete"] for s in doc["slots"]] == [True]
        assert [a["name"] for a in doc["allocations"]] == ["slot1_2@n1"]
