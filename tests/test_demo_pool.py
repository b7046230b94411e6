"""The bundled demo pool (config/demo/*.ads) is reproducible, parseable and consistent.

These tests read the committed dumps with HTCondor's own parser (classad2), not with
fairacct's readers, so they check the data and not the code that will consume it.
"""

from __future__ import annotations

import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import classad2
import pytest

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "scripts" / "make_demo_pool.py"
DEMO = REPO / "config" / "demo"
DUMPS = ("status.ads", "queue.ads", "history.ads")
NOW = 1795300000  # the script's fixed clock
RESOURCES = ("Cpus", "Memory", "Disk", "GPUs")


def read_ads(name: str) -> list[classad2.ClassAd]:
    text = (DEMO / name).read_text(encoding="ascii")
    return list(classad2.parseAds(text, classad2.ParserType.Old))


def host_part(slot_name: str) -> str:
    """``slot1_3@glidein_1_2@host`` -> ``glidein_1_2@host``: what a dynamic slot shares with its parent."""
    return slot_name.split("@", 1)[1]


@pytest.fixture(scope="module")
def status() -> list[classad2.ClassAd]:
    return read_ads("status.ads")


@pytest.fixture(scope="module")
def queue() -> list[classad2.ClassAd]:
    return read_ads("queue.ads")


@pytest.fixture(scope="module")
def history() -> list[classad2.ClassAd]:
    return read_ads("history.ads")


@pytest.fixture(scope="module")
def pslots(status: list[classad2.ClassAd]) -> list[classad2.ClassAd]:
    return [ad for ad in status if ad["SlotType"] == "Partitionable"]


@pytest.fixture(scope="module")
def children(status: list[classad2.ClassAd]) -> dict[str, list[classad2.ClassAd]]:
    """Dynamic slots by the host part of their name, ordered by dynamic slot id."""
    by_parent: dict[str, list[classad2.ClassAd]] = defaultdict(list)
    for ad in status:
        if ad["SlotType"] == "Dynamic":
            by_parent[host_part(ad["Name"])].append(ad)
    for slots in by_parent.values():
        slots.sort(key=lambda ad: ad["DSlotId"])
    return by_parent


# (a) reproducible ------------------------------------------------------------


def test_script_reproduces_the_committed_dumps_byte_for_byte(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    for name in DUMPS:
        assert (tmp_path / name).read_bytes() == (DEMO / name).read_bytes(), (
            f"{name} differs from config/demo/{name}: rerun scripts/make_demo_pool.py"
        )


# (b) parseable ---------------------------------------------------------------


@pytest.mark.parametrize("name", DUMPS)
def test_classad2_parses_every_ad(name: str) -> None:
    # parseAds silently drops a malformed ad, so only the count tells it was lost
    text = (DEMO / name).read_text(encoding="ascii")
    blocks = text.rstrip("\n").split("\n\n")
    assert all(block.strip() for block in blocks), "ads must be separated by exactly one blank line"
    ads = list(classad2.parseAds(text, classad2.ParserType.Old))
    assert len(ads) == len(blocks)
    assert all(len(ad) == len(block.splitlines()) for ad, block in zip(ads, blocks, strict=True))


@pytest.mark.parametrize("name", DUMPS)
def test_dump_is_formatted_like_htcondor_prints_it(name: str) -> None:
    text = (DEMO / name).read_text(encoding="ascii")
    # condor_status -long writes a blank line after each ad, the last too; condor_q and
    # condor_history as the demo has them, a newline
    blank = name == "status.ads"
    assert text.endswith("\n\n" if blank else "\n") and not text.endswith("\n\n\n" if blank else "\n\n")
    for block in text.rstrip("\n").split("\n\n"):
        names = [line.split(" = ", 1)[0] for line in block.splitlines()]
        assert all(" = " in line for line in block.splitlines())
        assert names == sorted(names, key=str.lower)


def test_some_strings_carry_escaped_quotes(status: list[classad2.ClassAd]) -> None:
    assert '\\"' in (DEMO / "status.ads").read_text(encoding="ascii")
    assert all('"primary"' in ad["AddressV1"] for ad in status if "AddressV1" in ad)


# (c) consistent --------------------------------------------------------------


def test_pool_has_the_documented_size(
    status: list[classad2.ClassAd],
    pslots: list[classad2.ClassAd],
    queue: list[classad2.ClassAd],
    history: list[classad2.ClassAd],
) -> None:
    kinds = [ad["SlotType"] for ad in status]
    assert (len(pslots), kinds.count("Dynamic"), kinds.count("Static")) == (32, 70, 4)
    assert sum(1 for ad in pslots if ad["TotalSlotGPUs"] > 0) == 8
    assert [ad["JobStatus"] for ad in queue].count(1) == 15
    assert [ad["JobStatus"] for ad in queue].count(2) == 72
    assert len(history) == 60


def test_unallocated_plus_dynamic_slots_is_the_total(
    pslots: list[classad2.ClassAd],
    children: dict[str, list[classad2.ClassAd]],
) -> None:
    for pslot in pslots:
        kids = children.get(host_part(pslot["Name"]), [])
        for resource in RESOURCES:
            allocated = sum(kid[resource] for kid in kids)
            assert pslot[resource] >= 0, (pslot["Name"], resource)
            assert pslot[resource] + allocated == pslot["TotalSlot" + resource], (pslot["Name"], resource)
        assert pslot["NumDynamicSlots"] == len(kids)


def test_every_dynamic_slot_has_a_parent(
    pslots: list[classad2.ClassAd],
    children: dict[str, list[classad2.ClassAd]],
) -> None:
    assert set(children) <= {host_part(ad["Name"]) for ad in pslots}


def test_child_lists_describe_the_dynamic_slots(
    pslots: list[classad2.ClassAd],
    children: dict[str, list[classad2.ClassAd]],
) -> None:
    rollup = {
        "ChildName": "Name",
        "ChildCpus": "Cpus",
        "ChildMemory": "Memory",
        "ChildDisk": "Disk",
        "ChildGPUs": "GPUs",
        "ChildRemoteUser": "RemoteUser",
        "ChildAccountingGroup": "AccountingGroup",
        "ChildState": "State",
    }
    for pslot in pslots:
        kids = children.get(host_part(pslot["Name"]), [])
        if not kids:  # an empty pilot publishes no rollup
            assert "ChildName" not in pslot
            continue
        for parent_attr, child_attr in rollup.items():
            assert pslot[parent_attr] == [kid[child_attr] for kid in kids], (pslot["Name"], parent_attr)


def test_dynamic_slots_describe_themselves_and_inherit_the_glidein(
    pslots: list[classad2.ClassAd],
    children: dict[str, list[classad2.ClassAd]],
) -> None:
    inherited = (
        "Machine",
        "GLIDEIN_Site",
        "GLIDEIN_ResourceName",
        "GLIDEIN_Entry_Name",
        "GLIDEIN_Factory",
        "GLIDEIN_Name",
        "DaemonStartTime",
        "HEPSPEC",
    )
    for pslot in pslots:
        for kid in children.get(host_part(pslot["Name"]), []):
            assert (kid["DynamicSlot"], kid["ParentSlotId"], kid["State"]) == (True, 1, "Claimed")
            for resource in RESOURCES:
                assert kid["TotalSlot" + resource] == kid[resource]
            for attr in inherited:
                assert kid[attr] == pslot[attr], (kid["Name"], attr)
            for attr in ("GLIDEIN_ToRetire", "GLIDEIN_ToDie"):
                assert kid.eval(attr) == pslot.eval(attr), (kid["Name"], attr)
            assert kid["GlobalJobId"].split("#")[1] == kid["JobId"]


def test_running_jobs_are_the_claimed_slots(
    status: list[classad2.ClassAd],
    queue: list[classad2.ClassAd],
) -> None:
    claimed = {ad["GlobalJobId"]: ad for ad in status if ad.get("State") == "Claimed"}
    running = {ad["GlobalJobId"]: ad for ad in queue if ad["JobStatus"] == 2}
    assert set(running) == set(claimed)
    for job_id, job in running.items():
        slot = claimed[job_id]
        assert job["RemoteHost"] == slot["Name"]
        assert f"{job['ClusterId']}.{job['ProcId']}" == slot["JobId"]
        assert (job["CpusProvisioned"], job["MemoryProvisioned"], job["GPUsProvisioned"]) == (
            slot["Cpus"],
            slot["Memory"],
            slot["GPUs"],
        )
        assert slot["AccountingGroup"] == job["AccountingGroup"] + "@" + job["User"].split("@")[1]


def test_no_pilot_is_past_its_death(status: list[classad2.ClassAd]) -> None:
    assert all(ad.eval("GLIDEIN_ToDie") > ad["MyCurrentTime"] for ad in status)


# (d) the situations the accounting must see ------------------------------------


def test_there_are_empty_pilots(pslots: list[classad2.ClassAd]) -> None:
    empty = [ad for ad in pslots if ad["NumDynamicSlots"] == 0]
    assert len(empty) >= 1
    assert all(ad["Cpus"] == ad["TotalSlotCpus"] and ad["Memory"] == ad["TotalSlotMemory"] for ad in empty)


def test_there_are_retiring_pilots_still_running_jobs(pslots: list[classad2.ClassAd]) -> None:
    retiring = [ad for ad in pslots if ad.eval("GLIDEIN_ToRetire") < ad["MyCurrentTime"]]
    assert len(retiring) >= 1
    assert all(ad["NumDynamicSlots"] > 0 for ad in retiring)
    # both ways glideins publish it: an expression and an absolute time
    assert {type(ad["GLIDEIN_ToRetire"]) for ad in retiring} == {int, classad2.ExprTree}


def test_there_are_gpu_nodes_with_and_without_free_gpus(pslots: list[classad2.ClassAd]) -> None:
    gpu = [ad for ad in pslots if ad["TotalSlotGPUs"] > 0]
    assert any(ad["GPUs"] > 0 for ad in gpu)
    assert any(ad["GPUs"] == 0 and ad["NumDynamicSlots"] > 0 for ad in gpu)


def test_there_are_true_and_false_overheads(pslots: list[classad2.ClassAd]) -> None:
    cpu = [ad for ad in pslots if ad["TotalSlotGPUs"] == 0]
    assert any(ad["Cpus"] == 0 and ad["Memory"] == 0 for ad in cpu)  # packed
    assert any(ad["Cpus"] >= 1 and ad["Memory"] >= 2048 and ad["NumDynamicSlots"] > 0 for ad in cpu)
    assert any(ad["Cpus"] >= 1 and ad["Memory"] == 0 for ad in cpu)  # idle cores, no memory


def test_there_are_static_slots_claimed_and_unclaimed(status: list[classad2.ClassAd]) -> None:
    static = [ad for ad in status if ad["SlotType"] == "Static"]
    assert {ad["State"] for ad in static} == {"Claimed", "Unclaimed"}


def test_idle_jobs_fit_somewhere_and_nowhere(
    status: list[classad2.ClassAd],
    queue: list[classad2.ClassAd],
) -> None:
    matchable = [
        ad
        for ad in status
        if ad["SlotType"] == "Partitionable" or (ad["SlotType"] == "Static" and ad["State"] == "Unclaimed")
    ]
    idle = [ad for ad in queue if ad["JobStatus"] == 1]
    assert len({ad["AutoClusterId"] for ad in idle}) >= 5

    def fits(job: classad2.ClassAd, slot: classad2.ClassAd) -> bool:
        return (
            job["RequestCpus"] <= slot["Cpus"]
            and job.eval("RequestMemory") <= slot["Memory"]
            and job.eval("RequestDisk") <= slot["Disk"]
            and job.get("RequestGPUs", 0) <= slot["GPUs"]
        )

    by_resources = {ad["GlobalJobId"]: any(fits(ad, slot) for slot in matchable) for ad in idle}
    by_matchmaking = {ad["GlobalJobId"]: any(slot.symmetricMatch(ad) for slot in matchable) for ad in idle}
    assert any(by_matchmaking.values())
    assert not all(by_resources.values())  # some demand fits nowhere at all
    # and some fits by resources but its Requirements exclude every site
    assert any(by_resources[j] and not by_matchmaking[j] for j in by_resources)


def test_idle_jobs_use_both_memory_request_forms(queue: list[classad2.ClassAd]) -> None:
    idle = [ad for ad in queue if ad["JobStatus"] == 1]
    forms = {type(ad["RequestMemory"]) for ad in idle}
    assert forms == {int, classad2.ExprTree}
    assert all("ImageSize" in ad for ad in idle if isinstance(ad["RequestMemory"], classad2.ExprTree))


def test_history_is_recent_newest_first_and_ran_on_demo_slots(
    status: list[classad2.ClassAd],
    history: list[classad2.ClassAd],
) -> None:
    left_queue = [ad["EnteredCurrentStatus"] for ad in history]
    assert left_queue == sorted(left_queue, reverse=True)
    assert all(NOW - 2 * 86400 <= t < NOW for t in left_queue)
    assert sorted({ad["JobStatus"] for ad in history}) == [3, 4]
    hosts = {host_part(ad["Name"]) for ad in status}
    ran = [ad for ad in history if "LastRemoteHost" in ad]
    assert all(host_part(ad["LastRemoteHost"]) in hosts for ad in ran)
    assert any(ad["CpusProvisioned"] > 1 for ad in ran)
    assert any(ad["GPUsProvisioned"] > 0 for ad in ran)
