#!/usr/bin/env python3
"""Write the bundled demo pool that ``make demo`` reads.

The demo pool is a small glideinWMS-style HTCondor pool frozen at one instant
(``NOW``), written as the three dumps a site operator would capture:

- ``status.ads``:  ``condor_status -long`` (partitionable, dynamic and static slots)
- ``queue.ads``:   ``condor_q -allusers -long`` (running and idle jobs)
- ``history.ads``: ``condor_history -long`` (jobs completed in the last two days)

The pool is described by hand below (``CPU_NODES``, ``GPU_NODES``,
``STATIC_NODE``, ``IDLE_JOBS``, ``HISTORY_MIX``) so that every situation the
accounting has to handle is present on purpose and named in ``NodePlan.note``;
a seeded random generator only fills in identifiers, clocks and noise. Running
it twice gives byte-identical files, which ``tests/test_demo_pool.py`` checks.

Stdlib only and no project imports: the demo data must not depend on the code
it is used to demonstrate.

Usage: ``python scripts/make_demo_pool.py [--out DIR]`` (default ``config/demo/``).
"""

from __future__ import annotations

import argparse
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

NOW = 1795300000
"""The instant of the snapshot (UTC seconds); every clock in the dumps derives from it."""

SEED = 20261121
UID_DOMAIN = "demo.fairacct"
SCHEDD = "submit-1.demo.fairacct"
HISTORY_WINDOW = 2 * 86400
"""History jobs completed within this many seconds before NOW."""

CMS_SITES = ("Purdue", "UCSD", "Nebraska", "CIT_CMS_T2", "FNAL")
ALL_SITES = CMS_SITES


# --------------------------------------------------------------------------
# ClassAd text
# --------------------------------------------------------------------------


class Expr(str):
    """A ClassAd expression, written unquoted (``DaemonStartTime + 86400``)."""


Value = bool | int | float | str | Expr | Sequence[int] | Sequence[str]
Ad = dict[str, Value]


def render_value(value: Value) -> str:
    """One value in HTCondor's "old" ClassAd syntax, as ``condor_status -long`` prints it."""
    if isinstance(value, Expr):
        return str(value)
    if isinstance(value, bool):  # before int: bool is an int
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value)  # 16.0, 12345678.0, 10.5: the same digits HTCondor prints
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    items = ",".join(render_value(item) for item in value)
    return "{ " + items + " }" if items else "{  }"


def render_ad(ad: Mapping[str, Value]) -> str:
    """Attributes one per line, sorted case-insensitively like HTCondor's tools do."""
    return "\n".join(f"{name} = {render_value(ad[name])}" for name in sorted(ad, key=str.lower))


def render_dump(ads: Iterable[Mapping[str, Value]], *, blank_after_each: bool = False) -> str:
    """Ads separated by one blank line; the file ends with a single newline, or, with
    ``blank_after_each``, with the blank line after its last ad too, as ``condor_status -long``
    writes it (a startd dump without it was cut short)."""
    return "\n\n".join(render_ad(ad) for ad in ads) + ("\n\n" if blank_after_each else "\n")


def quantize(value: int, step: int) -> int:
    """HTCondor's ``quantize()``: round up to a multiple of ``step``.

    The startd carves a dynamic slot of ``quantize(RequestMemory, 128)`` MiB and
    ``quantize(RequestDisk, 1024)`` KiB, so a slot can be larger than the request.
    """
    return -(-value // step) * step


# --------------------------------------------------------------------------
# The catalogue: users, workflows, sites, nodes
# --------------------------------------------------------------------------

DEFAULT_REQUEST_MEMORY = Expr("ifthenelse(MemoryUsage =!= undefined,MemoryUsage,(ImageSize + 1023) / 1024)")
MEMORY_USAGE = Expr("((ResidentSetSize + 1023) / 1024)")


@dataclass(frozen=True)
class User:
    owner: str
    group: str  # accounting group, e.g. group_cms
    project: str

    @property
    def user(self) -> str:
        return f"{self.owner}@{UID_DOMAIN}"

    @property
    def accounting_group(self) -> str:
        """As the schedd writes it into the job ad (no domain)."""
        return f"{self.group}.{self.owner}"


ALICE = User("alice", "group_cms", "CMS_Production")
BOB = User("bob", "group_atlas", "ATLAS_Analysis")
CAROL = User("carol", "group_osg", "OSG_Chemistry")
DAVE = User("dave", "group_cms", "CMS_ML_Training")


@dataclass(frozen=True)
class Workflow:
    """One kind of job a user submits: a request shape and a runtime range.

    ``memory=None`` means the job was submitted without ``request_memory`` and
    carries HTCondor's default expression, which evaluates from ``ImageSize``
    while idle and from ``MemoryUsage`` once it ran. ``request_disk=None``
    means ``RequestDisk = DiskUsage`` (the usual default).
    """

    key: str
    user: User
    cpus: int
    memory: int | None  # MiB
    gpus: int
    request_disk: int | None  # KiB
    disk_usage: int  # KiB
    image_size: int  # KiB
    runtime: tuple[int, int]  # seconds, min and max
    cmd: str
    sites: tuple[str, ...] = ALL_SITES
    publish_request_gpus: bool = True
    arguments: str | None = None
    cpu_efficiency: tuple[float, float] = (0.6, 0.95)
    backfills_gpu_nodes: bool = False  # a CPU-only job that also lands on GPU nodes

    @property
    def memory_to_match(self) -> int:
        """What ``RequestMemory`` evaluates to when the job is matched (MiB)."""
        if self.memory is None:
            return (self.image_size + 1023) // 1024
        return self.memory

    @property
    def slot_memory(self) -> int:
        return quantize(self.memory_to_match, 128)

    @property
    def slot_disk(self) -> int:
        return quantize(self.request_disk or self.disk_usage, 1024)

    def requirements(self) -> Expr:
        clauses = [
            '(TARGET.Arch == "X86_64")',
            '(TARGET.OpSys == "LINUX")',
            "(TARGET.Disk >= RequestDisk)",
            "(TARGET.Memory >= RequestMemory)",
            "(TARGET.Cpus >= RequestCpus)",
        ]
        if self.gpus:
            clauses.append("(TARGET.GPUs >= RequestGPUs)")
        clauses.append("stringListMember(TARGET.GLIDEIN_Site,DESIRED_Sites)")
        return Expr(" && ".join(clauses))


HOUR = 3600
WORKFLOWS: dict[str, Workflow] = {
    wf.key: wf
    for wf in (
        # CMS production: 8-core multithreaded jobs, the bread and butter of glideins
        Workflow(
            "A",
            ALICE,
            8,
            16384,
            0,
            20000000,
            2500000,
            1800000,
            (2 * HOUR, 12 * HOUR),
            "/srv/job_wrapper.sh",
            CMS_SITES,
            arguments="-t 8 --pset step1.py",
        ),
        Workflow("B", ALICE, 1, 2048, 0, None, 250000, 1500000, (HOUR, 4 * HOUR), "/srv/job_wrapper.sh", CMS_SITES),
        Workflow("C", BOB, 4, 16384, 0, None, 1500000, 9000000, (HOUR, 8 * HOUR), "runAthena.sh"),
        Workflow(
            "M",
            BOB,
            1,
            8192,
            0,
            None,
            3000000,
            6000000,
            (HOUR // 2, 3 * HOUR),
            "runMerge.sh",
            cpu_efficiency=(0.3, 0.6),
        ),
        Workflow(
            "W",
            BOB,
            16,
            98304,
            0,
            None,
            8000000,
            60000000,
            (2 * HOUR, 6 * HOUR),
            "runAthena.sh",
            arguments="--highmem",
            backfills_gpu_nodes=True,
        ),
        # OSG users submit with a quoted argument: exercises \" inside job ads
        Workflow(
            "K",
            CAROL,
            1,
            3072,
            0,
            None,
            50000,
            2000000,
            (HOUR // 2, 5 * HOUR),
            "run_md.sh",
            arguments='--input mol_17.xyz --label "run 17"',
        ),
        Workflow(
            "F",
            CAROL,
            1,
            None,
            0,
            None,
            12000,
            1800000,
            (HOUR // 4, 2 * HOUR),
            "analyze.py",
            publish_request_gpus=False,
        ),
        Workflow(
            "G", DAVE, 8, 32768, 1, None, 5000000, 12000000, (2 * HOUR, 10 * HOUR), "train.sh", arguments="--epochs 40"
        ),
        Workflow(
            "H",
            DAVE,
            16,
            65536,
            2,
            40000000,
            9000000,
            30000000,
            (4 * HOUR, 12 * HOUR),
            "train.sh",
            arguments="--epochs 80 --ddp",
        ),
        Workflow(
            "J",
            CAROL,
            1,
            4096,
            1,
            None,
            1000000,
            3000000,
            (HOUR // 2, 3 * HOUR),
            "run_gromacs.sh",
            cpu_efficiency=(0.1, 0.3),
        ),
        # idle only: fits nowhere by resources (no slot has 16 cores AND 384 GiB free)
        Workflow(
            "X", BOB, 16, 393216, 0, None, 2000000, 3000000, (4 * HOUR, 8 * HOUR), "runAthena.sh", arguments="--highmem"
        ),
        # idle only: small enough for any leftover, but pinned to a site not in the pool
        Workflow(
            "R", ALICE, 1, 2048, 0, None, 250000, 1500000, (HOUR, 2 * HOUR), "/srv/job_wrapper.sh", ("T2_CH_CERN",)
        ),
    )
}


@dataclass(frozen=True)
class GpuModel:
    name: str
    capability: float
    memory_mb: int


A100_40 = GpuModel("NVIDIA A100-SXM4-40GB", 8.0, 40536)
A100_80 = GpuModel("NVIDIA A100-SXM4-80GB", 8.0, 81038)
V100 = GpuModel("Tesla V100-SXM2-32GB", 7.0, 32510)
A40 = GpuModel("NVIDIA A40", 8.6, 45634)


@dataclass(frozen=True)
class Resource:
    """A glideinWMS entry: where pilots of one kind land.

    ``lifetime_as_expression`` publishes GLIDEIN_ToRetire/ToDie as
    ``DaemonStartTime + N`` (as the condor25 fixture does), otherwise as
    absolute UTC seconds (as real glideins do); readers must handle both.
    """

    name: str  # GLIDEIN_ResourceName
    site: str  # GLIDEIN_Site
    entry: str  # GLIDEIN_Entry_Name
    host_pattern: str
    subnet: str
    host_cpus: int  # DetectedCpus: the worker node, of which a pilot may get a part
    hepspec: float
    mips: int
    retire_after: int
    die_after: int
    lifetime_as_expression: bool
    gpu: GpuModel | None = None


RESOURCES: dict[str, Resource] = {
    r.name: r
    for r in (
        Resource(
            "Purdue-Hammer",
            "Purdue",
            "CMSHTPC_T2_US_Purdue_Hammer",
            "hammer-a{n:03d}.rcac.purdue.edu",
            "128.211.146",
            40,
            11.2,
            24481,
            86400,
            172800,
            True,
        ),
        Resource(
            "Purdue-Bell",
            "Purdue",
            "CMSHTPC_T2_US_Purdue_Bell",
            "bell-a{n:03d}.rcac.purdue.edu",
            "128.211.148",
            128,
            14.8,
            30120,
            86400,
            172800,
            False,
        ),
        Resource(
            "UCSD-CMS-T2",
            "UCSD",
            "CMSHTPC_T2_US_UCSD_gw6",
            "cabinet-7-7-{n}.t2.ucsd.edu",
            "169.228.130",
            64,
            12.5,
            27214,
            86400,
            172800,
            True,
        ),
        Resource(
            "Nebraska-Red",
            "Nebraska",
            "CMSHTPC_T2_US_Nebraska_Red",
            "red-c{n:04d}.unl.edu",
            "129.93.239",
            64,
            10.1,
            21877,
            172800,
            259200,
            False,
        ),
        Resource(
            "CIT_CMS_T2",
            "CIT_CMS_T2",
            "CMSHTPC_T2_US_Caltech_cit2",
            "compute-2-{n}.ultralight.org",
            "192.84.86",
            48,
            13.3,
            28730,
            79200,
            165600,
            False,
        ),
        Resource(
            "FNAL-CMS-T1",
            "FNAL",
            "CMSHTPC_T1_US_FNAL_cmsgwms1",
            "cmswn{n:04d}.fnal.gov",
            "131.225.188",
            32,
            12.0,
            25990,
            345600,
            432000,
            True,
        ),
        Resource(
            "FNAL-LPC",
            "FNAL",
            "CMS_T3_US_FNAL_LPC_fixed",
            "cmslpc{n:03d}.fnal.gov",
            "131.225.191",
            4,
            9.6,
            20118,
            604800,
            691200,
            False,
        ),
        Resource(
            "UCSD-PRP-GPU",
            "UCSD",
            "OSG_US_UCSD_PRP_gpu",
            "gpu-{n:02d}.nautilus.optiputer.net",
            "67.58.53",
            64,
            16.4,
            33810,
            259200,
            345600,
            True,
            A100_40,
        ),
        Resource(
            "Nebraska-GPU",
            "Nebraska",
            "OSG_US_Nebraska_gpu",
            "red-gpu{n:02d}.unl.edu",
            "129.93.244",
            32,
            11.9,
            24880,
            259200,
            345600,
            False,
            V100,
        ),
        Resource(
            "Purdue-Gilbreth",
            "Purdue",
            "OSG_US_Purdue_Gilbreth_gpu",
            "gilbreth-k{n:03d}.rcac.purdue.edu",
            "128.211.133",
            64,
            15.7,
            32406,
            259200,
            345600,
            False,
            A100_80,
        ),
        Resource(
            "CIT-GPU",
            "CIT_CMS_T2",
            "CMSHTPC_T2_US_Caltech_gpu",
            "gpu-1-{n}.ultralight.org",
            "192.84.87",
            32,
            14.1,
            29520,
            172800,
            259200,
            True,
            A40,
        ),
    )
}
GLIDEIN_FACTORY = "OSG"
GLIDEIN_NAME = "gfactory_instance"


@dataclass(frozen=True)
class NodePlan:
    """One pilot: its size, the workflows of its running jobs, and why it is here."""

    key: str
    resource: str
    cpus: int
    memory: int  # MiB
    gpus: int
    jobs: str  # one workflow key per running job (one dynamic slot each)
    uptime_h: float
    note: str


CPU_NODES: tuple[NodePlan, ...] = (
    NodePlan("P1", "Purdue-Hammer", 16, 32768, 0, "AA", 14, "packed: nothing free"),
    NodePlan("P2", "Purdue-Hammer", 16, 32768, 0, "AC", 9, "4 cores free, no memory: 0 CU"),
    NodePlan("P3", "Purdue-Hammer", 16, 40960, 0, "AC", 5, "4 cores + 8 GiB free: 4 CU"),
    NodePlan("P4", "Purdue-Bell", 8, 16384, 0, "", 0.1, "empty pilot, started 6 minutes ago"),
    NodePlan("P5", "Purdue-Bell", 8, 16384, 0, "KKKKK", 3, "3 cores + 1 GiB free: 0 CU"),
    NodePlan("U1", "UCSD-CMS-T2", 16, 49152, 0, "AA", 18, "memory free, no cores"),
    NodePlan("U2", "UCSD-CMS-T2", 16, 49152, 0, "ACM", 7, "3 cores + 8 GiB free: 3 CU"),
    NodePlan("U3", "UCSD-CMS-T2", 16, 49152, 0, "A", 26, "retiring (ToRetire expression) with one job"),
    NodePlan("U4", "UCSD-CMS-T2", 8, 24576, 0, "A", 11, "memory free, no cores"),
    NodePlan("U5", "UCSD-CMS-T2", 32, 98304, 0, "AAC", 4, "12 cores + 48 GiB free: 12 CU"),
    NodePlan("N1", "Nebraska-Red", 16, 65536, 0, "CCCC", 30, "packed: nothing free"),
    NodePlan("N2", "Nebraska-Red", 16, 65536, 0, "AA", 20, "memory free, no cores"),
    NodePlan("N3", "Nebraska-Red", 32, 131072, 0, "", 3, "empty pilot, idle for 3 hours"),
    NodePlan("N4", "Nebraska-Red", 16, 49152, 0, "ACC", 36, "packed: nothing free"),
    NodePlan("N5", "Nebraska-Red", 8, 32768, 0, "MMKK", 12, "4 cores + 10 GiB free: 4 CU"),
    NodePlan("C1", "CIT_CMS_T2", 16, 32768, 0, "AA", 16, "packed: nothing free"),
    NodePlan("C2", "CIT_CMS_T2", 32, 65536, 0, "AC", 22.2, "retiring (absolute ToRetire) with two jobs"),
    NodePlan("C3", "CIT_CMS_T2", 16, 32768, 0, "AKK", 6, "6 cores + 10 GiB free: 5 CU"),
    NodePlan("C4", "CIT_CMS_T2", 8, 16384, 0, "A", 2, "packed: nothing free"),
    NodePlan("F1", "FNAL-CMS-T1", 8, 16384, 0, "A", 60, "packed: nothing free"),
    NodePlan("F2", "FNAL-CMS-T1", 8, 16384, 0, "A", 52, "packed: nothing free"),
    NodePlan("F3", "FNAL-CMS-T1", 16, 65536, 0, "CCC", 45, "4 cores + 16 GiB free: 4 CU"),
    NodePlan("F4", "FNAL-CMS-T1", 16, 32768, 0, "", 0.7, "empty pilot, started 42 minutes ago"),
    NodePlan("F5", "FNAL-CMS-T1", 8, 16384, 0, "BKFF", 28, "4 cores + 7.5 GiB free: 3 CU"),
)

GPU_NODES: tuple[NodePlan, ...] = (
    NodePlan("G1", "UCSD-PRP-GPU", 32, 262144, 4, "HH", 55, "all GPUs claimed, memory free"),
    NodePlan("G2", "UCSD-PRP-GPU", 64, 524288, 8, "GGGH", 20, "3 GPUs + 24 cores free: 3 GPU CU"),
    NodePlan("G3", "Nebraska-GPU", 32, 196608, 4, "GG", 33, "2 GPUs + 16 cores free: 2 GPU CU"),
    NodePlan("G4", "Nebraska-GPU", 32, 196608, 4, "HJJ", 10, "all GPUs claimed, 14 cores free"),
    NodePlan("G5", "Purdue-Gilbreth", 64, 524288, 8, "HHHH", 58, "all GPUs claimed, memory free"),
    NodePlan("G6", "Purdue-Gilbreth", 32, 262144, 4, "", 1.5, "empty GPU pilot"),
    NodePlan("G7", "CIT-GPU", 32, 131072, 4, "GW", 8, "3 GPUs free but no memory left"),
    NodePlan("G8", "CIT-GPU", 32, 262144, 4, "GJ", 40, "2 GPUs + 23 cores free: 2 GPU CU"),
)

# A glidein with the "fixed" slot layout: four 1-core static slots.
STATIC_NODE = NodePlan("S1", "FNAL-LPC", 4, 8192, 0, "BF", 70, "static slots: 2 claimed, 2 unclaimed")

IDLE_JOBS: tuple[tuple[str, int], ...] = (
    ("K", 4),  # 1 core, 3 GiB: fits in many leftovers
    ("A", 3),  # 8 cores, 16 GiB: fits in the empty and retiring pilots and U5
    ("G", 3),  # 1 GPU: fits on G2, G3, G6, G8
    ("F", 2),  # default RequestMemory expression: fits in many leftovers
    ("X", 2),  # fits nowhere by resources
    ("R", 1),  # fits by resources, but its Requirements match no site
)

HISTORY_MIX: tuple[tuple[str, int], ...] = (
    ("A", 12),
    ("B", 8),
    ("C", 8),
    ("M", 5),
    ("K", 8),
    ("F", 4),
    ("W", 2),
    ("G", 5),
    ("H", 4),
    ("J", 4),
)


# --------------------------------------------------------------------------
# The pool at NOW: nodes and jobs
# --------------------------------------------------------------------------


@dataclass
class Node:
    plan: NodePlan
    resource: Resource
    host: str
    glidein: str  # glidein_<pid>_<rand>, the middle part of every slot name
    ip: str
    sock: str
    daemon_start: int
    last_heard: int
    disk: int  # KiB, the whole slot (pilot)
    running: list[Job] = field(default_factory=list)
    history: list[Job] = field(default_factory=list)

    @property
    def is_static(self) -> bool:
        return self.plan is STATIC_NODE

    @property
    def to_retire(self) -> int:
        return self.daemon_start + self.resource.retire_after

    @property
    def to_die(self) -> int:
        return self.daemon_start + self.resource.die_after

    def slot_name(self, slot: str) -> str:
        return f"{slot}@{self.glidein}@{self.host}"


@dataclass
class Job:
    workflow: Workflow
    status: int  # 1 idle, 2 running, 3 removed, 4 completed
    qdate: int
    start: int | None = None  # JobCurrentStartDate
    end: int | None = None  # CompletionDate (or removal time)
    node: Node | None = None
    slot: str | None = None  # slot1_N for dynamic slots, slotN for static ones
    gpu_ids: tuple[int, ...] = ()
    exit_code: int = 0
    cpu_efficiency: float = 0.0
    rss_fraction: float = 0.0
    cluster: int = 0
    proc: int = 0

    @property
    def job_id(self) -> str:
        return f"{self.cluster}.{self.proc}"

    @property
    def global_job_id(self) -> str:
        return f"{SCHEDD}#{self.job_id}#{self.qdate}"

    @property
    def slot_name(self) -> str:
        assert self.node is not None and self.slot is not None
        return self.node.slot_name(self.slot)

    @property
    def cpus(self) -> int:
        return 1 if self.node is not None and self.node.is_static else self.workflow.cpus

    @property
    def memory(self) -> int:
        """Provisioned memory: a static slot gives its whole size."""
        if self.node is not None and self.node.is_static:
            return self.node.plan.memory // self.node.plan.cpus
        return self.workflow.slot_memory

    @property
    def gpus(self) -> int:
        return self.workflow.gpus

    @property
    def disk(self) -> int:
        if self.node is not None and self.node.is_static:
            return self.node.disk // self.node.plan.cpus
        return self.workflow.slot_disk


@dataclass
class Pool:
    nodes: list[Node]
    jobs: list[Job]


def make_node(plan: NodePlan, number: int, rng: random.Random) -> Node:
    res = RESOURCES[plan.resource]
    pid = rng.randint(1000, 99999)
    uptime = int(plan.uptime_h * HOUR) + rng.randint(0, 300)
    disk_per_core = rng.randint(20, 40) * 1_000_000  # KiB, a scratch disk share
    return Node(
        plan=plan,
        resource=res,
        host=res.host_pattern.format(n=number),
        glidein=f"glidein_{pid}_{rng.randint(100_000_000, 999_999_999)}",
        ip=f"{res.subnet}.{rng.randint(2, 254)}",
        sock=f"startd_{pid}_{rng.randrange(16**4):04x}",
        daemon_start=NOW - uptime,
        last_heard=NOW - rng.randint(10, 290),
        disk=plan.cpus * disk_per_core + rng.randint(0, 999_999),
    )


def make_nodes(rng: random.Random) -> list[Node]:
    """Host numbers grow per resource so that names are unique and look like a rack."""
    next_number: dict[str, int] = {}
    nodes = []
    for plan in (*CPU_NODES, *GPU_NODES, STATIC_NODE):
        number = next_number.get(plan.resource, rng.randint(1, 40)) + rng.randint(1, 9)
        next_number[plan.resource] = number
        nodes.append(make_node(plan, number, rng))
    return nodes


def add_running_jobs(node: Node, rng: random.Random) -> None:
    """One job per dynamic (or claimed static) slot, started while the pilot could accept it."""
    for key in node.plan.jobs:
        wf = WORKFLOWS[key]
        latest_run = min(NOW - node.daemon_start - 120, wf.runtime[1])
        # a pilot stops matching at GLIDEIN_ToRetire, so its jobs started before that
        earliest_run = max(600, NOW - node.to_retire + 300)
        start = NOW - rng.randint(earliest_run, max(earliest_run, latest_run))  # a young pilot: earliest
        node.running.append(
            Job(
                workflow=wf,
                status=2,
                qdate=start - rng.randint(120, 4 * HOUR),
                start=start,
                node=node,
                cpu_efficiency=rng.uniform(*wf.cpu_efficiency),
                rss_fraction=rng.uniform(0.4, 0.9),
            )
        )


def fits_on(wf: Workflow, node: Node) -> bool:
    """Could a job of this workflow ever have run on this node (its whole size)?"""
    plan = node.plan
    if node.resource.site not in wf.sites:
        return False
    if node.is_static:
        return wf.cpus == 1 and wf.gpus == 0 and wf.memory_to_match <= plan.memory // plan.cpus
    if wf.gpus > 0 and plan.gpus == 0:
        return False
    if wf.gpus == 0 and plan.gpus > 0 and not wf.backfills_gpu_nodes:
        return False
    return wf.cpus <= plan.cpus and wf.memory_to_match <= plan.memory and wf.gpus <= plan.gpus


def make_history_job(wf: Workflow, nodes: Sequence[Node], rng: random.Random) -> Job:
    """A completed job on a pilot that was alive for the whole of its run."""
    while True:
        end = NOW - rng.randint(120, HISTORY_WINDOW - 60)
        start = end - rng.randint(*wf.runtime)
        hosts = [n for n in nodes if fits_on(wf, n) and n.daemon_start + 60 <= start and end < n.to_die]
        if hosts:
            break
    node = rng.choice(hosts)
    job = Job(
        workflow=wf,
        status=4,
        qdate=start - rng.randint(60, 6 * HOUR),
        start=start,
        end=end,
        node=node,
        exit_code=rng.choice((1, 3, 137)) if rng.random() < 0.1 else 0,
        cpu_efficiency=rng.uniform(*wf.cpu_efficiency),
        rss_fraction=rng.uniform(0.4, 0.9),
    )
    node.history.append(job)
    return job


def make_history(nodes: Sequence[Node], rng: random.Random) -> list[Job]:
    jobs = [make_history_job(WORKFLOWS[key], nodes, rng) for key, count in HISTORY_MIX for _ in range(count)]
    # Two removals, as condor_rm leaves them: one while running, one that never ran.
    running_removed = next(j for j in jobs if j.workflow.key == "C")
    running_removed.status = 3
    never_ran = next(j for j in jobs if j.workflow.key == "K")
    assert never_ran.node is not None
    never_ran.node.history.remove(never_ran)
    never_ran.end = never_ran.start  # it left the queue when it would otherwise have started
    never_ran.start = None
    never_ran.node = None
    never_ran.status = 3
    return jobs


def make_idle_jobs(rng: random.Random) -> list[Job]:
    return [
        Job(workflow=WORKFLOWS[key], status=1, qdate=NOW - rng.randint(300, 6 * HOUR))
        for key, count in IDLE_JOBS
        for _ in range(count)
    ]


def name_slots(node: Node, rng: random.Random) -> None:
    """Dynamic slot ids count up over the pilot's life: finished jobs had the low ones."""
    if node.is_static:
        for number, job in enumerate(node.running, start=1):
            job.slot = f"slot{number}"
        for job in node.history:
            job.slot = f"slot{rng.randint(1, node.plan.cpus)}"
        return
    ordered = sorted(node.history, key=lambda j: j.start or 0) + node.running
    for number, job in enumerate(ordered, start=1):
        job.slot = f"slot1_{number}"


def assign_gpus(node: Node) -> None:
    """Hand out CUDA device ids to the running jobs in slot order."""
    next_id = 0
    for job in node.running:
        job.gpu_ids = tuple(range(next_id, next_id + job.gpus))
        next_id += job.gpus
    for job in node.history:  # finished before some of today's jobs started: any ids will do
        job.gpu_ids = tuple(range(job.gpus))


def assign_job_ids(jobs: Sequence[Job]) -> None:
    """Group jobs into submissions (clusters) and number them like a schedd would.

    A user submits a workflow in batches every 4 hours; jobs of one batch share
    the cluster and its QDate. Cluster ids grow with QDate.
    """
    period = 4 * HOUR
    for job in jobs:
        offset = sum(map(ord, job.workflow.key)) * 37 % period  # batches of different workflows interleave
        job.qdate = (job.qdate - offset) // period * period + offset
    batches: dict[tuple[int, str], list[Job]] = {}
    for job in sorted(jobs, key=lambda j: (j.qdate, j.workflow.key, j.start or NOW, j.status)):
        batches.setdefault((job.qdate, job.workflow.key), []).append(job)
    for cluster, batch in enumerate(batches.values(), start=4101):
        for proc, job in enumerate(batch):
            job.cluster, job.proc = cluster, proc


def build_pool(seed: int = SEED) -> Pool:
    rng = random.Random(seed)
    nodes = make_nodes(rng)
    for node in nodes:
        add_running_jobs(node, rng)
    history = make_history(nodes, rng)
    idle = make_idle_jobs(rng)
    for node in nodes:
        name_slots(node, rng)
        assign_gpus(node)
    running = [job for node in nodes for job in node.running]
    jobs = running + idle + history
    assign_job_ids(jobs)
    check_pool(nodes)
    return Pool(nodes, jobs)


def check_pool(nodes: Sequence[Node]) -> None:
    """Refuse to write a pool whose plan over-fills a node."""
    for node in nodes:
        if node.is_static:
            continue
        for resource, total in (
            ("cpus", node.plan.cpus),
            ("memory", node.plan.memory),
            ("gpus", node.plan.gpus),
            ("disk", node.disk),
        ):
            used = sum(getattr(job, resource) for job in node.running)
            if used > total:
                raise ValueError(f"node {node.plan.key}: {resource} allocated {used} > total {total}")


# --------------------------------------------------------------------------
# Slot ads
# --------------------------------------------------------------------------

WITHIN_RESOURCE_LIMITS = Expr(
    "(MY.Cpus > 0 && TARGET.RequestCpus <= MY.Cpus && MY.Memory > 0 && TARGET.RequestMemory <= MY.Memory"
    " && MY.Disk > 0 && TARGET.RequestDisk <= MY.Disk"
    " && (TARGET.RequestGPUs =?= undefined || MY.GPUs >= TARGET.RequestGPUs))"
)


def lifetime_attrs(node: Node) -> Ad:
    res = node.resource
    if res.lifetime_as_expression:
        return {
            "GLIDEIN_ToRetire": Expr(f"DaemonStartTime + {res.retire_after}"),
            "GLIDEIN_ToDie": Expr(f"DaemonStartTime + {res.die_after}"),
        }
    return {"GLIDEIN_ToRetire": node.to_retire, "GLIDEIN_ToDie": node.to_die}


def machine_attrs(node: Node) -> Ad:
    """What every slot of a pilot publishes alike: identity, platform, glidein, speed."""
    res = node.resource
    ad: Ad = {
        "MyType": "Machine",
        "Machine": node.host,
        "Arch": "X86_64",
        "OpSys": "LINUX",
        "DaemonStartTime": node.daemon_start,
        "MyCurrentTime": NOW,
        "LastHeardFrom": node.last_heard,
        "TotalCpus": float(node.plan.cpus),
        "TotalMemory": node.plan.memory,
        "TotalDisk": node.disk,
        "TotalGPUs": node.plan.gpus,
        "DetectedCpus": max(res.host_cpus, node.plan.cpus),
        "HEPSPEC": res.hepspec,
        "Mips": res.mips,
        "GLIDEIN_Site": res.site,
        "GLIDEIN_ResourceName": res.name,
        "GLIDEIN_Entry_Name": res.entry,
        "GLIDEIN_Factory": GLIDEIN_FACTORY,
        "GLIDEIN_Name": GLIDEIN_NAME,
        **lifetime_attrs(node),
    }
    if res.gpu is not None:
        ad.update(
            {
                "DetectedGPUs": node.plan.gpus,
                "CUDADeviceName": res.gpu.name,
                "CUDACapability": res.gpu.capability,
                "CUDAGlobalMemoryMb": res.gpu.memory_mb,
                "CUDADriverVersion": 12.4,
            }
        )
    return ad


def address_attrs(node: Node) -> Ad:
    """The startd's addresses, published on the slots that can be matched (not on dynamic ones,
    to keep the demo small). AddressV1 nests quotes: readers must unescape it."""
    return {
        "StartdIpAddr": f"<{node.ip}:9618?addrs={node.ip}-9618&noUDP&sock={node.sock}>",
        "AddressV1": (f'{{[ p="primary"; a="{node.ip}"; port=9618; n="Internet"; spid="{node.sock}"; noUDP=true; ]}}'),
    }


def gpu_list(ids: Iterable[int]) -> tuple[str, Expr]:
    """AssignedGPUs (a string) and AvailableGPUs (a list of references) for these devices."""
    ids = list(ids)
    return ",".join(f"CUDA{i}" for i in ids), Expr(
        "{ " + ",".join(f"GPUs_CUDA{i}" for i in ids) + " }" if ids else "{  }"
    )


def claim_attrs(job: Job) -> Ad:
    """What a slot running this job publishes about its claim."""
    user = job.workflow.user
    assert job.start is not None
    return {
        "State": "Claimed",
        "Activity": "Busy",
        "JobStart": job.start,
        "RemoteUser": user.user,
        "RemoteOwner": user.user,
        "AccountingGroup": f"{user.accounting_group}@{UID_DOMAIN}",  # the slot's form carries the domain
        "GlobalJobId": job.global_job_id,
        "JobId": job.job_id,
        # copied from the job ad, as the pilots' STARTD_JOB_ATTRS = $(STARTD_JOB_ATTRS) AcctGroup
        # AcctGroupUser ProjectName asks: who the claim is for, and the project it is charged to
        "AcctGroup": user.group,
        "AcctGroupUser": user.owner,
        "ProjectName": user.project,
    }


def partitionable_slot_ad(node: Node) -> Ad:
    plan, jobs = node.plan, node.running
    ad = machine_attrs(node)
    ad.update(
        {
            "Name": node.slot_name("slot1"),
            "SlotID": 1,
            "SlotType": "Partitionable",
            "PartitionableSlot": True,
            "State": "Unclaimed",  # a partitionable slot stays Unclaimed however full it is
            "Activity": "Idle",
            **address_attrs(node),
            "Start": True,
            "Requirements": Expr("Start && (WithinResourceLimits)"),
            "WithinResourceLimits": WITHIN_RESOURCE_LIMITS,
            # the slot's own Cpus/Memory/Disk/GPUs are what is still unallocated
            "Cpus": plan.cpus - sum(j.cpus for j in jobs),
            "Memory": plan.memory - sum(j.memory for j in jobs),
            "Disk": node.disk - sum(j.disk for j in jobs),
            "GPUs": plan.gpus - sum(j.gpus for j in jobs),
            "TotalSlotCpus": plan.cpus,
            "TotalSlotMemory": plan.memory,
            "TotalSlotDisk": float(node.disk),
            "TotalSlotGPUs": plan.gpus,
            "NumDynamicSlots": len(jobs),
        }
    )
    if node.resource.gpu is not None:
        claimed = {i for j in jobs for i in j.gpu_ids}
        ad["AssignedGPUs"] = gpu_list(range(plan.gpus))[0]
        ad["AvailableGPUs"] = gpu_list(i for i in range(plan.gpus) if i not in claimed)[1]
    if jobs:  # an empty pilot publishes no Child* rollup at all
        ad.update(
            {
                "ChildName": [j.slot_name for j in jobs],
                "ChildCpus": [j.cpus for j in jobs],
                "ChildMemory": [j.memory for j in jobs],
                "ChildDisk": [j.disk for j in jobs],
                "ChildGPUs": [j.gpus for j in jobs],
                "ChildRemoteUser": [j.workflow.user.user for j in jobs],
                "ChildAccountingGroup": [f"{j.workflow.user.accounting_group}@{UID_DOMAIN}" for j in jobs],
                "ChildState": ["Claimed"] * len(jobs),
                "ChildActivity": ["Busy"] * len(jobs),
            }
        )
    return ad


def dynamic_slot_ad(node: Node, job: Job) -> Ad:
    assert job.slot is not None
    ad = machine_attrs(node)
    ad.update(claim_attrs(job))
    ad.update(
        {
            "Name": job.slot_name,
            "SlotID": 1,
            "DSlotId": int(job.slot.split("_")[1]),
            "ParentSlotId": 1,
            "SlotType": "Dynamic",
            "DynamicSlot": True,
            "Cpus": job.cpus,
            "Memory": job.memory,
            "Disk": job.disk,
            "GPUs": job.gpus,
            # a dynamic slot's TotalSlot* are its own size, not the node's
            "TotalSlotCpus": job.cpus,
            "TotalSlotMemory": job.memory,
            "TotalSlotDisk": float(job.disk),
            "TotalSlotGPUs": job.gpus,
        }
    )
    if job.gpu_ids:
        ad["AssignedGPUs"], ad["AvailableGPUs"] = gpu_list(job.gpu_ids)
    return ad


def static_slot_ads(node: Node) -> list[Ad]:
    plan = node.plan
    per_slot = (plan.memory // plan.cpus, node.disk // plan.cpus)
    by_slot = {job.slot: job for job in node.running}
    ads = []
    for number in range(1, plan.cpus + 1):
        ad = machine_attrs(node)
        ad.update(
            {
                "Name": node.slot_name(f"slot{number}"),
                "SlotID": number,
                "SlotType": "Static",
                "State": "Unclaimed",
                "Activity": "Idle",
                **address_attrs(node),
                "Start": True,
                "Requirements": Expr("Start && (WithinResourceLimits)"),
                "WithinResourceLimits": WITHIN_RESOURCE_LIMITS,
                # a static slot keeps its whole size whether claimed or not
                "Cpus": 1,
                "Memory": per_slot[0],
                "Disk": per_slot[1],
                "GPUs": 0,
                "TotalSlotCpus": 1,
                "TotalSlotMemory": per_slot[0],
                "TotalSlotDisk": float(per_slot[1]),
                "TotalSlotGPUs": 0,
            }
        )
        job = by_slot.get(f"slot{number}")
        if job is not None:
            ad.update(claim_attrs(job))
        ads.append(ad)
    return ads


def status_ads(pool: Pool) -> list[Ad]:
    ads: list[Ad] = []
    for node in pool.nodes:
        if node.is_static:
            ads.extend(static_slot_ads(node))
        else:
            ads.append(partitionable_slot_ad(node))
            ads.extend(dynamic_slot_ad(node, job) for job in node.running)
    # condor_status sorts by slot name (then machine); dynamic slots follow their parent
    return sorted(ads, key=lambda ad: (str(ad["Machine"]), str(ad["Name"])))


# --------------------------------------------------------------------------
# Job ads
# --------------------------------------------------------------------------


def job_base_attrs(job: Job) -> Ad:
    """What the schedd knows about a job from submission on."""
    wf, user = job.workflow, job.workflow.user
    ad: Ad = {
        "MyType": "Job",
        "TargetType": "Machine",
        "ClusterId": job.cluster,
        "ProcId": job.proc,
        "GlobalJobId": job.global_job_id,
        "QDate": job.qdate,
        "Owner": user.owner,
        "User": user.user,
        "AcctGroup": user.group,
        "AcctGroupUser": user.owner,
        "AccountingGroup": user.accounting_group,
        "ProjectName": user.project,
        "Cmd": wf.cmd,
        "JobUniverse": 5,
        "JobPrio": 0,
        "MaxHosts": 1,
        "MinHosts": 1,
        "RequestCpus": wf.cpus,
        "RequestMemory": DEFAULT_REQUEST_MEMORY if wf.memory is None else wf.memory,
        "RequestDisk": Expr("DiskUsage") if wf.request_disk is None else wf.request_disk,
        "DiskUsage": wf.disk_usage,
        "ImageSize": wf.image_size,
        "Requirements": wf.requirements(),
        "DESIRED_Sites": ",".join(wf.sites),
        "JOB_GLIDEIN_Site": "$$(GLIDEIN_Site:Unknown)",
    }
    if wf.publish_request_gpus:
        ad["RequestGPUs"] = wf.gpus
    if wf.arguments is not None:
        ad["Arguments"] = wf.arguments
    return ad


def match_attrs(job: Job) -> Ad:
    """What the schedd records when a job is matched to a slot and started."""
    assert job.node is not None and job.start is not None
    res = job.node.resource
    ad: Ad = {
        "JobStartDate": job.start,
        "JobCurrentStartDate": job.start,
        "NumJobStarts": 1,
        "CpusProvisioned": job.cpus,
        "MemoryProvisioned": job.memory,
        "DiskProvisioned": job.disk,
        "GPUsProvisioned": job.gpus,
        "MachineAttrGLIDEIN_Site0": res.site,
        "MachineAttrGLIDEIN_ResourceName0": res.name,
        "MachineAttrHEPSPEC0": res.hepspec,
        "MATCH_EXP_JOB_GLIDEIN_Site": res.site,
        "MemoryUsage": MEMORY_USAGE,
        "ResidentSetSize": int(job.memory * job.rss_fraction) * 1024,
    }
    if job.gpu_ids:
        ad["AssignedGPUs"] = gpu_list(job.gpu_ids)[0]
    return ad


def cpu_times(job: Job, wall: int) -> Ad:
    user_cpu = float(int(wall * job.cpus * job.cpu_efficiency))
    return {"RemoteUserCpu": user_cpu, "RemoteSysCpu": float(int(user_cpu * 0.02))}


def queue_ad(job: Job, autocluster: int) -> Ad:
    ad = job_base_attrs(job)
    ad.update({"JobStatus": job.status, "AutoClusterId": autocluster, "ServerTime": NOW})
    if job.status == 1:
        ad.update(
            {
                "EnteredCurrentStatus": job.qdate,
                "LastRejMatchReason": "no match found",
                "LastRejMatchTime": NOW - 47,
            }
        )
        return ad
    assert job.start is not None
    ad.update(match_attrs(job))
    ad.update(cpu_times(job, NOW - job.start))
    ad.update(
        {
            "EnteredCurrentStatus": job.start,
            "LastJobStatus": 1,
            "RemoteHost": job.slot_name,
            "RemoteSlotID": 1,
            "RemoteWallClockTime": 0.0,  # only counts finished runs
            "ShadowBday": job.start,
        }
    )
    return ad


def queue_ads(pool: Pool) -> list[Ad]:
    """Running and idle jobs, in cluster.proc order; one autocluster per workflow."""
    queued = sorted((j for j in pool.jobs if j.status in (1, 2)), key=lambda j: (j.cluster, j.proc))
    autoclusters: dict[str, int] = {}
    for job in sorted(queued, key=lambda j: (j.qdate, j.cluster)):
        autoclusters.setdefault(job.workflow.key, len(autoclusters) + 1)
    return [queue_ad(job, autoclusters[job.workflow.key]) for job in queued]


def history_ad(job: Job) -> Ad:
    ad = job_base_attrs(job)
    ad.update({"JobStatus": job.status, "LastJobStatus": 2, "ExitBySignal": False})
    assert job.end is not None
    if job.node is None:  # removed before it ever ran
        ad.update(
            {
                "LastJobStatus": 1,
                "EnteredCurrentStatus": job.end,
                "RemoteWallClockTime": 0.0,
                "RemoteUserCpu": 0.0,
                "RemoteSysCpu": 0.0,
                "RemoveReason": f"via condor_rm (by user {job.workflow.user.owner})",
            }
        )
        return ad
    assert job.start is not None
    wall = job.end - job.start
    ad.update(match_attrs(job))
    ad.update(cpu_times(job, wall))
    ad.update(
        {
            "EnteredCurrentStatus": job.end,
            "LastRemoteHost": job.slot_name,
            "RemoteWallClockTime": float(wall),
            "CumulativeSlotTime": float(wall * job.cpus),
        }
    )
    if job.status == 4:
        ad.update({"CompletionDate": job.end, "ExitCode": job.exit_code})
    else:
        ad["RemoveReason"] = f"via condor_rm (by user {job.workflow.user.owner})"
    return ad


def history_ads(pool: Pool) -> list[Ad]:
    """Newest first (by the time each job left the queue), as condor_history prints them."""
    done = [j for j in pool.jobs if j.status in (3, 4)]
    done.sort(key=lambda j: (j.end or 0, j.cluster, j.proc), reverse=True)
    return [history_ad(job) for job in done]


# --------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------


def write_dumps(out: Path, seed: int = SEED) -> dict[str, Path]:
    pool = build_pool(seed)
    out.mkdir(parents=True, exist_ok=True)
    written = {}
    for name, ads in (
        ("status.ads", status_ads(pool)),
        ("queue.ads", queue_ads(pool)),
        ("history.ads", history_ads(pool)),
    ):
        path = out / name
        path.write_text(render_dump(ads, blank_after_each=name == "status.ads"), encoding="ascii", newline="\n")
        written[name] = path
    return written


def main(argv: Sequence[str] | None = None) -> int:
    repo_root = Path(__file__).resolve().parent.parent
    parser = argparse.ArgumentParser(description="Write the bundled demo pool that `make demo` reads.")
    parser.add_argument(
        "--out",
        type=Path,
        default=repo_root / "config" / "demo",
        help="directory to write status.ads, queue.ads and history.ads into",
    )
    args = parser.parse_args(argv)
    for path in write_dumps(args.out).values():
        print(f"wrote {path} ({path.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
