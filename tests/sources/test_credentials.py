"""Who is billed: every table names the submitter as the negotiator does, and the user, group
and project as the job was submitted (see probes/sources/credentials.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from probes.config import parse_config
from probes.sources.credentials import JOB_IDENTITY, SLOT_IDENTITY, identities
from probes.sources.history import read_history
from probes.sources.queue import read_idle
from probes.sources.settings import JobReading
from probes.sources.status import read_status

# One Unix account (condorpool) submitting for others, as glideinWMS frontends and OSG access
# points do; the attributes are those HTCondor 25.0.13 writes (checked on the real pool of
# tests/sources/test_live_identity.py).
JOBS = [
    # accounting_group = group_physics.cms, accounting_group_user = john.smith (a dotted name)
    {"Owner": "condorpool", "User": "condorpool@pool", "AccountingGroup": "group_physics.cms.john.smith",
     "AcctGroup": "group_physics.cms", "AcctGroupUser": "john.smith", "ProjectName": "CMS-Higgs"},
    # accounting_group_user = carol alone: no group
    {"Owner": "condorpool", "User": "condorpool@pool", "AccountingGroup": "carol", "AcctGroupUser": "carol"},
    # a plain submitter
    {"Owner": "nobody", "User": "nobody@pool"},
]  # fmt: skip
NAMES = [
    ("group_physics.cms.john.smith@pool", "john.smith", "group_physics.cms", "CMS-Higgs"),
    ("carol@pool", "carol", None, None),
    ("nobody@pool", "nobody", None, None),
]


def table(rows: list[dict[str, str]], identity: object) -> list[tuple[object, ...]]:
    names = identities(lambda a: np.array([r.get(a) for r in rows], dtype=object), len(rows), identity)  # type: ignore[arg-type]
    return list(zip(*(names[c].tolist() for c in ("submitter", "user", "group", "project")), strict=True))


def test_a_jobs_four_names() -> None:
    assert table(JOBS, JOB_IDENTITY) == NAMES
    # a submitter that already has its domain keeps it; one whose job has no User has none to get
    assert table([{"AccountingGroup": "group_cms.alice@other"}, {"AccountingGroup": "group_cms.alice"}], JOB_IDENTITY)[
        :2
    ] == [("group_cms.alice@other", None, "group_cms", None), ("group_cms.alice", None, "group_cms", None)]


def test_a_claims_four_names() -> None:
    claims = [
        # a startd that copies AcctGroup, AcctGroupUser and ProjectName (STARTD_JOB_ATTRS)
        {"AccountingGroup": "group_physics.cms.john.smith@pool", "RemoteUser": "condorpool@pool",
         "RemoteOwner": "condorpool@pool", "AcctGroup": "group_physics.cms", "AcctGroupUser": "john.smith",
         "ProjectName": "CMS-Higgs"},
        # HTCondor's defaults: the accounting group alone (a dotted user name would be cut here)
        {"AccountingGroup": "carol@pool", "RemoteUser": "condorpool@pool", "RemoteOwner": "condorpool@pool"},
        {"RemoteUser": "nobody@pool", "RemoteOwner": "nobody@pool"},
        # an older startd: RemoteUser is the submitter, RemoteOwner the account
        {"RemoteUser": "group_atlas.bob@pool", "RemoteOwner": "bob@pool"},
    ]  # fmt: skip
    assert table(claims, SLOT_IDENTITY) == [*NAMES, ("group_atlas.bob@pool", "bob", None, None)]


def cells(frame: pd.DataFrame, columns: list[str]) -> list[list[object]]:
    """The rows of ``frame``'s ``columns``, a missing name as None (a table's str columns hold NaN)."""
    return [[None if pd.isna(v) else v for v in row] for row in frame[columns].itertuples(index=False)]


def ad(attrs: dict[str, object]) -> str:
    def value(v: object) -> str:
        if v is None:
            return "undefined"
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, list):
            return "{ " + ",".join(value(x) for x in v) + " }"
        return f'"{v}"' if isinstance(v, str) else str(v)

    return "".join(f"{k} = {value(v)}\n" for k, v in attrs.items()) + "\n"


def job_ad(i: int, status: int, **more: object) -> str:
    return ad(
        {"MyType": "Job", "GlobalJobId": f"ap#7.{i}#1795684971", "ClusterId": 7, "ProcId": i, "JobStatus": status,
         "AutoClusterId": 3, "RequestCpus": 1, "RequestMemory": 1024, "QDate": 1795684971,
         "JobStartDate": 1795684981, "CompletionDate": 1795685000, "RemoteWallClockTime": 19.0,
         "MachineAttrGLIDEIN_Site0": "TestSite", **JOBS[i], **more}
    )  # fmt: skip


def slot_ads(*, copied: bool) -> str:
    """A node running the three jobs of JOBS; ``copied``: the startd copies AcctGroup,
    AcctGroupUser and ProjectName into its dynamic slots (STARTD_JOB_ATTRS)."""
    common = {"MyType": "Machine", "Machine": "node1", "MyCurrentTime": 1795684996, "GLIDEIN_Site": "TestSite",
              "GLIDEIN_ResourceName": "TestCE"}  # fmt: skip
    text = ad({**common, "Name": "slot1@node1", "SlotType": "Partitionable", "PartitionableSlot": True,
               "State": "Unclaimed", "Cpus": 5, "Memory": 5120, "TotalSlotCpus": 8, "TotalSlotMemory": 8192,
               "ChildName": [f"slot1_{i + 1}@node1" for i in range(3)]})  # fmt: skip
    for i, job in enumerate(JOBS):
        slot = {"AccountingGroup": f"{job['AccountingGroup']}@pool"} if "AccountingGroup" in job else {}
        if copied:
            slot |= {k: job[k] for k in ("AcctGroup", "AcctGroupUser", "ProjectName") if k in job}
        text += ad({**common, "Name": f"slot1_{i + 1}@node1", "SlotType": "Dynamic", "DynamicSlot": True,
                    "State": "Claimed", "Cpus": 1, "Memory": 1024, "GlobalJobId": f"ap#7.{i}#1795684971",
                    "RemoteUser": job["User"], "RemoteOwner": job["User"], **slot})  # fmt: skip
    return text


def test_jobs_claims_and_idle_demand_name_the_same_four(tmp_path: Path) -> None:
    history, queue, status = tmp_path / "history.ads", tmp_path / "queue.ads", tmp_path / "status.ads"
    history.write_text("".join(job_ad(i, 4) for i in range(3)))
    queue.write_text("".join(job_ad(i, 1) for i in range(3)))
    status.write_text(slot_ads(copied=True))
    jobs, _ = read_history([history])
    idle, _ = read_idle([queue])
    snapshot, _ = read_status([status])
    four = ["submitter", "user", "group", "project"]
    allocations = snapshot.allocations.sort_values("name")
    for frame in (jobs, idle.sort_values("submitter", key=lambda s: s.map(NAMES_ORDER.index)), allocations):
        assert cells(frame, four) == [list(n) for n in NAMES]
    # where: a bill lands on the site and resource of its job
    assert set(allocations["site"]) == set(jobs["site"]) == {"TestSite"}
    assert set(allocations["resource_name"]) == {"TestCE"}
    # HTCondor's defaults (no STARTD_JOB_ATTRS): the user and group from AccountingGroup, no project
    status.write_text(slot_ads(copied=False))
    plain = read_status([status])[0].allocations.sort_values("name")
    assert cells(plain, four) == [
        ["group_physics.cms.john.smith@pool", "smith", "group_physics.cms.john", None],  # a dotted name is cut
        ["carol@pool", "carol", None, None],
        ["nobody@pool", "nobody", None, None],
    ]


NAMES_ORDER = [n[0] for n in NAMES]


def test_a_nodes_child_lists_name_its_claims_as_its_dynamic_slots_would(tmp_path: Path) -> None:
    """A dump of p-slots only: each claim from the Child<attribute> lists of the same attributes."""
    path = tmp_path / "pslot.ads"
    path.write_text(
        ad(
            {
                "MyType": "Machine",
                "Name": "slot1@node1",
                "Machine": "node1",
                "SlotType": "Partitionable",
                "PartitionableSlot": True,
                "State": "Unclaimed",
                "Cpus": 6,
                "Memory": 6144,
                "TotalSlotCpus": 8,
                "TotalSlotMemory": 8192,
                "MyCurrentTime": 1795684996,
                "GLIDEIN_Site": "TestSite",
                "ProjectName": "not-a-claims",  # the p-slot's own attribute says nothing of its children
                "ChildName": ["slot1_1@node1", "slot1_2@node1"],
                "ChildCpus": [1, 1],
                "ChildMemory": [1024, 1024],
                "ChildAccountingGroup": ["group_bio.alice@pool", None],
                "ChildRemoteUser": ["condorpool@pool", "nobody@pool"],
                "ChildRemoteOwner": ["condorpool@pool", "nobody@pool"],
                "ChildProjectName": ["Bio", None],
            }
        )
    )
    allocations = read_status([path])[0].allocations
    assert allocations["from_child_lists"].all()
    assert cells(allocations, ["submitter", "user", "group", "project", "site"]) == [
        ["group_bio.alice@pool", "alice", "group_bio", "Bio", "TestSite"],
        ["nobody@pool", "nobody", None, None, "TestSite"],
    ]


def test_the_attributes_are_configured(tmp_path: Path) -> None:
    """[credentials]: the job attributes, and the slot_* lists of a claim's."""
    config = parse_config(
        {"credentials": {"user": ["Owner"], "submitter": ["User"], "slot_user": ["RemoteOwner"], "slot_project": []}}
    )
    history, status = tmp_path / "history.ads", tmp_path / "status.ads"
    history.write_text(job_ad(0, 4))
    status.write_text(slot_ads(copied=True))
    jobs, _ = read_history([history], config.job_reading())
    assert (jobs.loc[0, "submitter"], jobs.loc[0, "user"]) == ("condorpool@pool", "condorpool")
    claims = read_status([status], config.slot_reading())[0].allocations
    assert set(claims["user"]) == {"condorpool", "nobody"} and claims["project"].isna().all()
    assert config.slot_reading().identity.submitter == SLOT_IDENTITY.submitter


def test_one_pool_names_its_submitters_the_same_in_every_table(condor25: Path) -> None:
    """condor25 (../shared/fixtures/README.md): one account, condoruser, submits in the groups
    group_cms, group_atlas and group_osg with projects; jobs carry AccountingGroup =
    "group_cms.condoruser", User = "condoruser@localpool"; its dynamic slots AccountingGroup =
    "group_cms.condoruser@localpool" and RemoteUser = RemoteOwner = "condoruser@localpool"."""
    jobs, _ = read_history([condor25 / "history.ads"])
    snapshot, _ = read_status([condor25 / "status.ads"])
    idle, _ = read_idle([condor25 / "queue.ads"])
    grouped = jobs[jobs["group"].notna()]
    assert set(grouped["submitter"]) == {f"{g}.condoruser@localpool" for g in ("group_cms", "group_atlas", "group_osg")}
    assert (grouped["submitter"] == grouped["group"] + ".condoruser@localpool").all()
    assert set(jobs.loc[jobs["group"].isna(), "submitter"]) == {"condoruser@localpool"}  # clusters 1-9: no group
    assert set(jobs["user"]) == set(snapshot.allocations["user"]) == set(idle["user"]) == {"condoruser"}
    # each running job's claim is named as its job ad names it (the queue dump of the same instant)
    running, _ = read_history([condor25 / "queue.ads"], JobReading())
    three = ["submitter", "user", "group"]
    claims = snapshot.allocations.sort_values("job_id")
    assert len(claims) == 6
    assert cells(claims, three) == cells(running.set_index("job_id").loc[claims["job_id"]], three)
    by_job = running.set_index("job_id")[three]
    assert set(idle["submitter"]) <= set(by_job["submitter"])
    # the slots carry no ProjectName (the pool's startds copy no job attribute): a bill has no project
    assert snapshot.allocations["project"].isna().all()
    assert set(snapshot.allocations["site"]) == {"LoopbackSite"}


@pytest.mark.parametrize("kind", ["-long", "-json"])
def test_both_dump_forms_name_the_same(condor25: Path, kind: str) -> None:
    path = condor25 / ("status.ads" if kind == "-long" else "status.json")
    allocations = read_status([path])[0].allocations.sort_values("name")
    assert allocations["submitter"].str.endswith(".condoruser@localpool").all()
    assert allocations["group"].str.startswith("group_").all()
