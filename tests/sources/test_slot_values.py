"""The status reader's units and clock (issue 51, points 7 and 8), on the smallest node: a 16-core,
32,768 MiB partitionable slot holding alice's 4 cores / 8192 MiB and bob's 12 / 24576 MiB, billed
4 and 12 cores, 8192 and 24576 MiB. A memory with a unit (``8 GB``, read as 8 MiB before), a
``TotalSlotMemory`` in KiB (every memory bill 1,024 times too large before) and an ad heard from
in 2100 (every other node unheard before) are set aside with the reason; their node is left
incomplete, and nothing else moves."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from probes.cli import main

T = 1_790_000_000  # 2026-09-21: before the time of reading, as a dump's times are
IN_2100 = "4102444800"


def _ad(name: str, machine: str = "n1", **attrs: str) -> str:
    base = {"Name": f'"{name}"', "Machine": f'"{machine}"', "MyType": '"Machine"', "LastHeardFrom": str(T),
            "MyCurrentTime": str(T)}  # fmt: skip
    return "".join(f"{k} = {v}\n" for k, v in {**base, **attrs}.items())


def pslot(name: str = "slot1@n1", machine: str = "n1", **attrs: str) -> str:
    p = {"SlotType": '"Partitionable"', "PartitionableSlot": "true", "State": '"Unclaimed"', "Cpus": "0",
         "Memory": "0", "TotalSlotCpus": "16", "TotalSlotMemory": "32768", "TotalMemory": "32768"}  # fmt: skip
    return _ad(name, machine, **{**p, **attrs})


def dslot(k: int, user: str, cpus: int, memory: int | str, **attrs: str) -> str:
    return _ad(f"slot1_{k}@n1", **{"SlotType": '"Dynamic"', "DynamicSlot": "true", "State": '"Claimed"',
                                   "Cpus": str(cpus), "Memory": str(memory), "GlobalJobId": f'"s#{k}.0#1"',
                                   "RemoteOwner": f'"{user}@pool"', **attrs})  # fmt: skip


def node(p: dict[str, str] | None = None, alice: dict[str, str] | None = None, *extra: str) -> str:
    a = {"memory": 8192, **(alice or {})}
    memory = a.pop("memory")
    ads = [pslot(**(p or {})), dslot(1, "alice", 4, memory, **a), dslot(2, "bob", 12, 24576), *extra]
    return "\n".join(ads) + "\n"  # condor_status ends each ad with a blank line


def bill(tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str) -> tuple[Any, str]:
    path = tmp_path / "status.ads"
    path.write_text(text)
    code = main(["bill", "--status-file", str(path), "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out), err


def billed(doc: Any) -> dict[str, tuple[float | None, float | None]]:
    return {a["name"]: (a["billed"]["cpus"], a["billed"]["memory"]) for a in doc["allocations"]}


def test_the_node_as_it_is(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc, err = bill(tmp_path, capsys, node())
    assert billed(doc) == {"slot1_1@n1": (4.0, 8192.0), "slot1_2@n1": (12.0, 24576.0)} and err == ""


@pytest.mark.parametrize(
    ("memory", "why"),
    [
        ("8 GB", "('8 GB' is a number followed by 'GB' (a unit?), not a plain number"),
        ("8GiB", "('8GiB' is a number followed by 'GiB' (a unit?)"),
        ("0x2000", "('0x2000' is hexadecimal, not a plain decimal number)"),
    ],
)
def test_a_memory_with_a_unit_leaves_its_node_unbilled(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], memory: str, why: str
) -> None:
    """alice's Memory = 8 GB: the issue billed her 8 MiB and bob 32,757 MiB of the node's memory."""
    doc, err = bill(tmp_path, capsys, node(alice={"memory": memory}))
    assert billed(doc) == {"slot1_2@n1": (None, None)} and doc["incomplete_nodes"] == ["slot1@n1"]
    assert f"status.ads line 15: attribute 'Memory' = {memory}: expected a finite number from 0 to below" in err
    assert why in err


def test_a_slot_memory_in_kib_leaves_its_node_unbilled(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """TotalSlotMemory = 33,554,432 (32,768 MiB in KiB) on a machine of 32,768 MiB: the issue billed
    alice 8,388,608 MiB and bob 25,165,824 (1,024 times their memory)."""
    doc, err = bill(tmp_path, capsys, node({"TotalSlotMemory": "33554432"}))
    assert billed(doc) == {"slot1_1@n1": (None, None), "slot1_2@n1": (None, None)}
    assert doc["incomplete_nodes"] == ["slot1@n1"]
    assert "attribute 'TotalSlotMemory' = 3.35544e+07, more than its machine's TotalMemory = 32768 MiB" in err


def test_an_ad_from_the_future_moves_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A second node heard from in 2100: the issue judged every other ad against 2100 (all unheard,
    nothing billed); now that node is set aside, and n1 is billed as it is."""
    future = pslot("slot1@n2", "n2", LastHeardFrom=IN_2100, MyCurrentTime=IN_2100)
    doc, err = bill(tmp_path, capsys, node(None, None, future))
    assert billed(doc) == {"slot1_1@n1": (4.0, 8192.0), "slot1_2@n1": (12.0, 24576.0)}
    assert doc["unbilled_nodes"] == 0
    assert "attribute 'MyCurrentTime' = 4102444800 (2100-01-01T00:00:00Z) is after the time of reading" in err


def test_a_json_memory_in_hexadecimal_is_no_number(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """condor_status -json with alice's Memory the expression 0x2000: classad2 reads it as 0 (bob
    billed the node's memory); now her ad is set aside and the node left unbilled."""
    path = tmp_path / "status.json"
    ads = []
    for text in node().strip().split("\n\n"):
        ad: dict[str, Any] = {}
        for line in text.strip().split("\n"):
            key, _, value = line.partition(" = ")
            ad[key] = json.loads(value) if value not in ("true", "false") else value == "true"
        ads.append(ad)
    ads[1]["Memory"] = "/Expr(0x2000)/"
    path.write_text(json.dumps(ads))
    assert main(["bill", "--status-file", str(path), "--json"]) == 0
    out, err = capsys.readouterr()
    doc = json.loads(out)
    assert billed(doc) == {"slot1_2@n1": (None, None)} and doc["incomplete_nodes"] == ["slot1@n1"]
    assert "attribute 'Memory' = 0x2000: expected a finite number" in err, err
