"""The slot reader's books (issue 51): every startd ad read is billed as read or set aside with
its reason, and a bill that depends on an ad set aside is never given in silence: its node is
``incomplete`` (unbilled, named), never billed to a neighbour.

Each class on its smallest input, two nodes: ``slot1@n1`` of 16 cores / 32768 MiB holds alice's
4 cores / 28672 MiB and bob's 12 / 4096, nothing left, billed as they hold (rates 1); ``slot1@n2``
of 8 / 16384 holds carol's 8 / 16384. Had bob's ad been lost and n1 billed, n1 would leave 12
cores / 4096 MiB unallocated: 2 canonical units of {1 core, 2048 MiB} of overhead, and alice
would be billed 14 cores (16 - 2) for her 4.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import classad2
import numpy as np
import pytest

from probes.cli import main
from probes.config import ProbeConfig
from probes.errors import SourceError
from probes.pipeline.overhead import overhead_report
from probes.sources.classad import Attr, Kind, read_ads
from probes.sources.slot_checks import ORPHAN
from probes.sources.status import read_status
from probes.sources.unheard import STALE_DYNAMIC

T = 1_790_000_000  # before the time of reading: a later one is set aside (from the future)
WHOLE = {"alice": (4.0, 28672.0), "bob": (12.0, 4096.0), "carol": (8.0, 16384.0)}


def _ad(attrs: dict[str, object]) -> str:
    """One ad as an older condor_status -long writes it: Name first (HTCondor 8.4's order, as
    the Purdue glidein's dump has it), then the rest."""
    return "".join(f"{k} = {v}\n" for k, v in attrs.items())


def pslot(host: str, cpus: int, memory: int, children: list[str], **more: object) -> str:
    return _ad({"Name": f'"slot1@{host}"', "Machine": f'"{host}"', "MyAddress": f'"<10.0.0.{host[-1]}:9618>"',
                "MyType": '"Machine"', "SlotType": '"Partitionable"', "PartitionableSlot": "true",
                "State": '"Unclaimed"', "LastHeardFrom": T, "MyCurrentTime": T, "Cpus": 0, "Memory": 0,
                "TotalSlotCpus": cpus, "TotalSlotMemory": memory,
                "ChildName": "{ " + ",".join(f'"{c}"' for c in children) + " }", **more})  # fmt: skip


def dslot(host: str, k: int, user: str, cpus: int, memory: int, **more: object) -> str:
    return _ad({"Name": f'"slot1_{k}@{host}"', "Machine": f'"{host}"', "MyAddress": f'"<10.0.0.{host[-1]}:9618>"',
                "MyType": '"Machine"', "SlotType": '"Dynamic"', "DynamicSlot": "true", "State": '"Claimed"',
                "LastHeardFrom": T, "MyCurrentTime": T, "Cpus": cpus, "Memory": memory,
                "GlobalJobId": f'"s#{host}.{k}#1"', "RemoteOwner": f'"{user}@pool"', **more})  # fmt: skip


def ads(**changes: dict[str, object]) -> list[str]:
    """carol's node, then alice's and bob's (last): ``changes`` by who (``n1`` its p-slot)."""
    c = changes.get
    return [
        pslot("n2", 8, 16384, ["slot1_1@n2"], **c("n2", {})),
        dslot("n2", 1, "carol", 8, 16384),
        pslot("n1", 16, 32768, ["slot1_1@n1", "slot1_2@n1"], **c("n1", {})),
        dslot("n1", 1, "alice", 4, 28672, **c("alice", {})),
        dslot("n1", 2, "bob", 12, 4096, **c("bob", {})),
    ]


def dump(parts: list[str]) -> str:
    """The ads as condor_status -long writes them: each followed by a blank line."""
    return "".join(f"{a}\n" for a in parts)


def bills(tmp_path: Path, *texts: str) -> tuple[dict[str, tuple[float, float] | None], list[str], Any]:
    """Read ``texts`` (one file each) and bill them: each user's (cores, MiB) billed (None:
    not billed), the nodes left unbilled, and the read's report."""
    paths = []
    for k, text in enumerate(texts):
        paths.append(tmp_path / f"status{k}.ads")
        paths[-1].write_bytes(text.encode("utf-8", "surrogateescape"))
    snapshot, report = read_status(paths)
    accounting = overhead_report(snapshot, ProbeConfig())
    out: dict[str, tuple[float, float] | None] = {}
    for row in accounting.bills.to_dict("records"):
        pair = (row["billed_cpus"], row["billed_memory"])
        out[str(row["user"])] = None if any(math.isnan(v) for v in pair) else pair
    nodes = accounting.nodes
    orphans = accounting.bills.loc[accounting.bills["orphan"], "parent"]
    unbilled = sorted({*nodes.loc[nodes["incomplete"], "name"], *orphans})
    return out, unbilled, report


def reasons(report: Any) -> list[str]:
    return [m.reason for m in report.malformed]


def test_the_two_nodes_as_they_are(tmp_path: Path) -> None:
    billed, unbilled, report = bills(tmp_path, dump(ads()))
    assert billed == WHOLE and unbilled == [] and not report.malformed and not report.rejects


# -- 1. a dump cut short ------------------------------------------------------------------------------


def _cut_after(text: str, line: str) -> str:
    """``text`` cut at the end of its last line ``line`` (a line boundary: nothing of the file
    says it is cut but the blank line missing after its last ad)."""
    at = text.rindex(f"\n{line}\n") + len(line) + 2
    return text[:at]


@pytest.mark.parametrize(
    ("line", "was"),
    [
        # bob with 12 cores and no Memory (0 MiB) nor user: alice billed all 32768 MiB for her 28672
        ("Cpus = 12", {"alice": (4.0, 32768.0), "None": (12.0, 0.0)}),
        # bob without SlotType: read as a static slot of 12 idle cores; alice billed 14 of n1's 16
        ('MyType = "Machine"', {"alice": (14.0, 28672.0)}),
        # bob whole but for his job's owner: billed to no one
        ('GlobalJobId = "s#n1.2#1"', {"alice": (4.0, 28672.0), "None": (12.0, 4096.0)}),
    ],
)
def test_a_dump_cut_at_a_line_boundary_sets_its_last_ad_aside(tmp_path: Path, line: str, was: dict[str, Any]) -> None:
    """Before issue 51 the last ad was read as if whole (``was``, besides carol's 8 cores)."""
    billed, unbilled, report = bills(tmp_path, _cut_after(dump(ads()), line))
    assert billed == {"carol": WHOLE["carol"], "alice": None} and unbilled == ["slot1@n1"]
    (why,) = reasons(report)
    assert why.startswith("cut by the end of its file: condor_status -long ends every ad with a blank line")
    assert report.malformed[0].line == 1 + sum(a.count("\n") + 1 for a in ads()[:4])  # bob's first line


def test_a_dump_that_ends_with_its_blank_line_is_whole(tmp_path: Path) -> None:
    """Not cut: the blank line (or a line of white space, as classad2 reads it) after the last ad."""
    assert bills(tmp_path, dump(ads()).rstrip("\n") + "\n  \n")[0] == WHOLE


# -- 2. an attribute twice, two ads merged ------------------------------------------------------


def test_an_attribute_written_twice_sets_its_ad_aside(tmp_path: Path) -> None:
    """``Cpus = 12`` then ``Cpus = 6``: the last won, bob held 6 cores and n1 had 6 left over
    (0 MiB: no overhead), alice billed 16 x 4/10 = 6.4 cores and bob 9.6."""
    text = dump(ads()).replace("Cpus = 12\n", "Cpus = 12\nCpus = 6\n")
    billed, unbilled, report = bills(tmp_path, text)
    assert billed == {"carol": WHOLE["carol"], "alice": None} and unbilled == ["slot1@n1"]
    (why,) = reasons(report)
    assert why.startswith("attribute 'Cpus' twice in one ad (HTCondor writes each once")


def test_two_ads_merged_are_set_aside_and_both_their_nodes_left_unbilled(tmp_path: Path) -> None:
    """The blank line between carol's d-slot and n1's p-slot lost: the merged ad was read as
    n1's p-slot (the last Name won), and carol's job vanished from n2, 8 idle cores there."""
    parts = ads()
    text = dump(parts[:1]) + parts[1] + dump(parts[2:])
    billed, unbilled, report = bills(tmp_path, text)
    assert unbilled == ["slot1@n1", "slot1@n2"] and billed == {"alice": None, "bob": None}
    (why,) = reasons(report)
    assert why.startswith("attribute 'Name', 'Machine', 'MyAddress', 'MyType', 'SlotType'") and "twice" in why


# -- 3. one dump in two files -------------------------------------------------------------------


def _split(parts: list[str]) -> tuple[str, str]:
    """The p-slots (with their Child* lists, as a live p-slot has them) and the dynamic slots."""
    listed = {
        "n2": {"ChildCpus": "{ 8 }", "ChildMemory": "{ 16384 }", "ChildRemoteOwner": '{ "carol@pool" }'},
        "n1": {"ChildCpus": "{ 4,12 }", "ChildMemory": "{ 28672,4096 }",
               "ChildRemoteOwner": '{ "alice@pool","bob@pool" }'},
    }  # fmt: skip
    pslots = [a for a in ads(**listed) if '"Partitionable"' in a]
    return dump(pslots), dump([a for a in parts if '"Dynamic"' in a])


def test_a_dump_split_over_two_files_is_read_as_one(tmp_path: Path) -> None:
    """Each job was allocated twice (from the p-slots' Child* lists and from its own ad) and
    billed half: alice 2 cores / 14336 MiB, twice."""
    billed, unbilled, report = bills(tmp_path, *_split(ads()))
    assert billed == WHOLE and unbilled == [] and not report.malformed
    snapshot, _ = read_status(sorted(tmp_path.glob("status*.ads")))
    assert len(snapshot.allocations) == 3 and not snapshot.allocations["from_child_lists"].any()


def test_parts_that_cannot_be_told_are_refused_with_the_reason(tmp_path: Path) -> None:
    pslots, dslots = _split(ads())
    later = pslots.replace(f"= {T}\n", f"= {T + 60}\n")
    with pytest.raises(SourceError, match=r"status1\.ads line \d+: the dynamic slot 'slot1_1@n2' has its "
                       r"partitionable slot 'slot1@n2' in 2 other files"):  # fmt: skip
        bills(tmp_path, pslots, dslots, later)
    for old in tmp_path.glob("status*.ads"):
        old.unlink()
    with pytest.raises(SourceError, match=r"only in .*status0\.ads, a dump 3600 s apart"):
        bills(tmp_path, pslots, dslots.replace(f"= {T}\n", f"= {T + 3600}\n"))


# -- 6. an ad set aside is never billed to its neighbour ----------------------------------------


@pytest.mark.parametrize(
    ("changes", "why"),
    [
        # skipped as "Name or Machine: missing", its node billed without it
        ({"bob": {"Name": "undefined", "Machine": "undefined"}}, "set aside: no Name and no Machine"),
        # read as a claimed static slot, held whole by bob
        ({"bob": {"SlotType": "undefined", "DynamicSlot": "undefined"}}, "set aside: no SlotType"),
        # a dynamic slot of a p-slot that does not exist: an orphan
        ({"bob": {"Name": '"slot2_2@n1"'}}, ORPHAN),
        # not heard from in 2 x 300 s: left out, its 12 cores idle
        ({"bob": {"LastHeardFrom": T - 1000, "MyCurrentTime": T - 1000}}, STALE_DYNAMIC),
    ],
)
def test_a_dynamic_slot_set_aside_leaves_its_node_unbilled(
    tmp_path: Path, changes: dict[str, dict[str, object]], why: str
) -> None:
    """Before issue 51 each of these billed bob's 12 cores to alice: 14 cores (see the module)."""
    parts = ads()
    for attr, value in changes["bob"].items():
        parts[4] = re.sub(rf"(?m)^{attr} = .*$", f"{attr} = {value}", parts[4])
    billed, unbilled, report = bills(tmp_path, dump(parts))
    assert billed["alice"] is None and billed["carol"] == WHOLE["carol"]
    # an orphan's lost parent is named too
    assert unbilled == (["slot1@n1", "slot2@n1"] if why == ORPHAN else ["slot1@n1"])
    said = [f"set aside: {r}" for r in reasons(report)] + list(report.rejects)
    assert any(s.startswith(why) for s in said), said


def test_a_dynamic_slot_garbled_by_nul_bytes_leaves_its_node_unbilled(tmp_path: Path) -> None:
    """NUL bytes in bob's Name (past the file's first 4 KiB: a file that starts with them is
    refused whole): read as U+0001, its Name places it on no node; its startd is n1's."""
    parts = ads(n2={"Padding": '"' + "x" * 5000 + '"'})
    parts[4] = parts[4].replace('"slot1_2@n1"', '"slot1_2@\0\0"')
    billed, unbilled, report = bills(tmp_path, dump(parts))
    assert billed == {"carol": WHOLE["carol"], "alice": None, "bob": None}
    assert unbilled == ["slot1@\1\1", "slot1@n1"] and report.rejects[ORPHAN] == 1


def test_a_renamed_partitionable_slot_is_not_a_free_node(tmp_path: Path) -> None:
    """``slot7@n1`` had none of n1's dynamic slots: 16 idle cores, 16 canonical units of
    overhead, while alice's and bob's jobs ran there."""
    text = dump(ads()).replace('Name = "slot1@n1"', 'Name = "slot7@n1"')
    snapshot, report = read_status([_write(tmp_path, text)])
    node = snapshot.slots.set_index("name").loc["slot7@n1"]
    assert node["incomplete"] and report.rejects == {ORPHAN: 2}
    accounting = overhead_report(snapshot, ProbeConfig())
    assert np.isnan(accounting.nodes.set_index("name").loc["slot7@n1", "rate_cpus"])


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "status.ads"
    path.write_text(text)
    return path


# -- 9. the -long text as classad2 reads it -----------------------------------------------------


def test_comments_tabs_white_lines_and_a_bom_are_read_as_classad2_reads_them(tmp_path: Path) -> None:
    """A ``#`` comment line, tabs about ``=`` and a line of spaces between two ads (classad2: a
    blank line) refused whole ads; a byte order mark stuck to the first attribute's name (it
    is stripped; classad2 would keep it). The reader's values equal classad2's, ad for ad."""
    parts = ads()
    parts[0] = "Cpus = 0\n" + parts[0].replace("Cpus = 0\n", "")  # the BOM before a wanted name
    parts[1] = "# carol's job\n" + parts[1].replace("Memory = 16384", "Memory =\t16384")
    parts[3] = parts[3].replace("Cpus = 4", "Cpus\t=\t4")
    text = "\ufeff" + "\n".join(parts).replace('"alice@pool"\n\n', '"alice@pool"\n   \n') + "\n"
    assert "\n   \n" in text
    path = _write(tmp_path, text)
    wanted = [Attr(n, k) for n, k in [("Name", Kind.STRING), ("Cpus", Kind.NUMBER), ("Memory", Kind.NUMBER)]]
    columns, report = read_ads(path, wanted)
    assert not report.malformed and len(columns) == 5
    mine = [[columns[a.name][i] for a in wanted] for i in range(len(columns))]
    theirs = [[ad.get(a.name) for a in wanted] for ad in classad2.parseAds(text[1:], classad2.ParserType.Old)]
    assert [[_same(v) for v in ad] for ad in mine] == [[_same(v) for v in ad] for ad in theirs]
    # classad2 reads "Cpus\t" as a name of its own: alice's ad has no Cpus, and is set aside
    assert mine[3][1] != mine[3][1] and mine[0][1] == 0 and mine[1][2] == 16384
    billed, unbilled, report = bills(tmp_path, text)
    assert billed == {"carol": WHOLE["carol"], "bob": None} and unbilled == ["slot1@n1"]
    assert reasons(report) == ["no Cpus: HTCondor writes it in every slot ad (the ad cut, or edited?); its node is "
                               "left unbilled (incomplete)"]  # fmt: skip


def _same(value: object) -> object:
    """A value as both sides give it: a number as a float, missing (NaN, None) as None."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return None if value != value else float(value)
    return value


def test_the_same_slot_twice_at_one_instant_with_other_values_is_refused(tmp_path: Path) -> None:
    """bob's ad again, with 6 cores: the first was kept and the second counted as the same dump
    given twice. As the guide says, two snapshots of one instant are refused."""
    text = dump(ads()) + dump([ads()[4].replace("Cpus = 12", "Cpus = 6")])
    with pytest.raises(SourceError, match=r"line 73: the slot 'slot1_2@n1' is also at .* line 59, at the same "
                       r"instant .* with another Cpus \(6\.0, there 12\.0\)"):  # fmt: skip
        read_status([_write(tmp_path, text)])
    # the same dump twice is still counted once
    assert bills(tmp_path, dump(ads()) + dump(ads()))[0] == WHOLE


# -- 10. 64-bit overflows ------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["18446744073709551615", "-12"])
def test_child_lists_that_are_not_amounts_leave_their_node_unbilled(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str
) -> None:
    """A dump of p-slots only is billed from their Child* lists: bob's 2^64 - 1 cores were read as
    0 (alice billed all 16), and -12 ended ``fairacct bill`` in a traceback ("allocations table
    has negative resource amounts")."""
    pslots, _ = _split(ads())
    path = _write(tmp_path, pslots.replace("ChildCpus = { 4,12 }", f"ChildCpus = {{ 4,{value} }}"))
    assert main(["bill", "--status-file", str(path), "--json"]) == 0
    out, err = capsys.readouterr()
    doc = json.loads(out)
    assert doc["incomplete_nodes"] == ["slot1@n1"]
    assert {a["user"]: a["billed"]["cpus"] for a in doc["allocations"]} == {"carol": 8.0}
    (reason,) = doc["read"]["status"]["set_aside"]
    assert reason.startswith(f"attribute 'ChildCpus' holds {value}")
    assert "Traceback" not in err


def test_an_amount_past_64_bits_is_set_aside_by_bill_as_a_process(tmp_path: Path) -> None:
    import subprocess
    import sys

    path = _write(tmp_path, dump(ads()).replace("Memory = 4096\n", "Memory = 18446744073709551615\n"))
    done = subprocess.run(
        [sys.executable, "-m", "probes", "bill", "--status-file", str(path), "--json"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    doc = json.loads(done.stdout)
    assert doc["incomplete_nodes"] == ["slot1@n1"] and doc["read"]["status"]["malformed"] == 1
    assert doc["read"]["status"]["rejects"] == {"Memory: an integer beyond 64 bits, read as a real": 1}


def test_bill_counts_what_was_set_aside_by_reason(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Two reasons, one ad each: each counted, on stderr and in ``--json``; both nodes unbilled."""
    parts = ads()
    parts[1] = parts[1].replace('SlotType = "Dynamic"\n', "").replace("DynamicSlot = true\n", "")
    path = _write(tmp_path, dump(parts).replace("Cpus = 12\n", "Cpus = 12\nCpus = 6\n"))
    assert main(["bill", "--status-file", str(path), "--json"]) == 0
    out, err = capsys.readouterr()
    doc = json.loads(out)
    twice = "attribute 'Cpus' twice in one ad (HTCondor writes each once: two ads merged, the blank line between them "
    twice += "lost?): which value is true cannot be told; its node is left unbilled (incomplete)"
    untyped = "no SlotType: HTCondor writes it in every slot ad (the ad cut, or edited?); its node is left unbilled "
    untyped += "(incomplete)"
    assert doc["read"]["status"]["set_aside"] == {twice: 1, untyped: 1} and doc["read"]["status"]["malformed"] == 2
    assert doc["incomplete_nodes"] == ["slot1@n1", "slot1@n2"]
    assert f"status: 1 ad(s) set aside: {twice}\n" in err and f"status: 1 ad(s) set aside: {untyped}\n" in err
