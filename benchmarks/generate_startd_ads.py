"""Startd ads of a glideinWMS global pool, for ``condor_advertise`` into a real collector.

Each node is one glidein: a partitionable slot of 16-64 cores and its dynamic slots (one per
running job), written as ``condor_status -long`` prints them and as a startd sends them. The ads
are the real HTCondor 25 ads of ``../shared/fixtures/condor25/status.ads`` (a partitionable slot
and a dynamic slot of a glidein, ~6 KB and ~670 attributes each) with the attributes that make a
slot itself replaced per node and per job: names, machine, resources (a node's dynamic slots
and the p-slot's ``Cpus``/``Memory``/``Disk``/``Child*`` lists add up to ``TotalSlot*``), the
job and its submitter, the glidein's site and entry, times. ``ClassAdLifetime`` is a day, so
the collector keeps them however long advertising and measuring take (its ``CLASSAD_LIFETIME``
default is 15 minutes). They carry no ``LastHeardFrom``: the collector sets it when an ad
arrives, and one kept from the fixture (days old) made it drop the ads as stale at its next
housekeeping, in the middle of a run.

The output depends only on the arguments: node ``i``'s ads are drawn from a random stream of
its own (``seed``, ``i``). Files hold ``--per-file`` ads each (``condor_advertise -multiple``
sends one file's ads on one connection).

Usage: ``python benchmarks/generate_startd_ads.py OUT_DIR NODES DSLOTS_PER_NODE [--per-file N]``
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np

__all__ = ["Templates", "node_ads", "template_ads", "write_files"]

TEMPLATES = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "condor25" / "status.ads"
SITES = [f"T2_Site{s:02d}" for s in range(60)]
USERS = [f"user{u:03d}" for u in range(300)]
GROUPS = ["group_cms.prod", "group_cms.analysis", "group_osg.ligo", "group_osg.icecube", "group_atlas"]
LIFETIME_S = 86_400
NOW = 1_795_300_000  # UTC seconds: the ads' own clock, near the fixtures'

_LINE = re.compile(r"^(\w+) = (.*)$")


def template_ads(path: Path = TEMPLATES) -> tuple[dict[str, str], dict[str, str]]:
    """The first partitionable and the first dynamic slot ad of ``path``, as name -> value text."""
    pslot: dict[str, str] = {}
    dslot: dict[str, str] = {}
    for text in path.read_text(encoding="utf-8").split("\n\n"):
        ad = dict(m.groups() for line in text.splitlines() if (m := _LINE.match(line)))
        kind = ad.get("SlotType", "")
        if kind == '"Partitionable"' and not pslot:
            pslot = ad
        elif kind == '"Dynamic"' and not dslot:
            dslot = ad
    if not pslot or not dslot:
        raise SystemExit(f"{path}: expected a partitionable and a dynamic slot ad")
    for ad in (pslot, dslot):  # the collector's own: kept from the fixture, it dates the ad days back
        ad.pop("LastHeardFrom", None)  # and the collector drops it as stale at its next housekeeping
    return pslot, dslot


def _q(text: str) -> str:
    return '"' + text + '"'


def _list(values: Sequence[object]) -> str:
    return "{ " + ",".join(_q(v) if isinstance(v, str) else str(v) for v in values) + " }"


class _Form:
    """A template ad as fixed text around the attributes every ad sets (in ``-long`` order,
    names sorted case-insensitively), so that an ad costs a join of a few dozen strings."""

    def __init__(self, template: dict[str, str], names: Sequence[str]) -> None:
        self.names = sorted(set(names), key=str.lower)
        fixed = {k: v for k, v in template.items() if k not in self.names}
        self.pieces: list[str] = []  # the fixed text before each set attribute, and after the last
        text: list[str] = []
        for k in sorted([*fixed, *self.names], key=str.lower):
            if k in fixed:
                text.append(f"{k} = {fixed[k]}\n")
            else:
                self.pieces.append("".join(text))
                text = []
        self.pieces.append("".join(text))

    def ad(self, values: dict[str, str]) -> str:
        out = [self.pieces[0]]
        for name, after in zip(self.names, self.pieces[1:], strict=True):
            out += (name, " = ", values[name], "\n", after)
        return "".join(out)


class Templates:
    """The two template ads, and their forms once the attributes each ad sets are known."""

    def __init__(self, path: Path = TEMPLATES) -> None:
        self.ads = dict(zip(("p", "d"), template_ads(path), strict=True))
        self._forms: dict[str, _Form] = {}

    def ad(self, kind: str, values: dict[str, str]) -> str:
        form = self._forms.get(kind)
        if form is None:
            form = self._forms[kind] = _Form(self.ads[kind], list(values))
        return form.ad(values)


def node_ads(i: int, dslots: int, templates: Templates, seed: int = 1) -> list[str]:
    """Node ``i``'s partitionable slot ad and its ``dslots`` dynamic slot ads."""
    rng = np.random.default_rng([seed, i])
    cores = int(rng.choice([16, 32, 48, 64]))
    memory = cores * 2048 + int(rng.choice([0, 4096]))  # MiB
    disk = cores * 4_000_000  # KiB
    site = SITES[int(rng.integers(len(SITES)))]
    machine = f"wn{i:06d}.{site.lower()}.example.org"
    name = f"slot1@glidein_{i}@{machine}"
    started = NOW - int(rng.integers(600, 80_000))
    # each job 1 core (most) or as many as a node's share, memory 2 GiB a core
    cpus = np.minimum(rng.choice([1, 1, 1, 2, 4, 8], size=dslots), max(1, cores // max(dslots, 1)))
    mem = cpus * 2048
    dsk = cpus * 1_000_000
    gpus = np.zeros(dslots, dtype=np.int64)
    users = [USERS[int(u)] for u in rng.integers(len(USERS), size=dslots)]
    groups = [GROUPS[int(g)] for g in rng.integers(len(GROUPS), size=dslots)]
    names = [f"slot1_{j + 1}@glidein_{i}@{machine}" for j in range(dslots)]
    submitters = [f"{g}.{u}@cms.example.org" for g, u in zip(groups, users, strict=True)]
    common = {
        "Machine": _q(machine),
        "GLIDEIN_Site": _q(site),
        "GLIDEIN_ResourceName": _q(f"{site}-CE1"),
        "GLIDEIN_Entry_Name": _q(f"{site}_ce1_cpu"),
        "DaemonStartTime": str(started),
        "MyCurrentTime": str(NOW),
        "ClassAdLifetime": str(LIFETIME_S),
    }
    ads = [
        templates.ad("p", {
            **common,
            "Name": _q(name),
            "Cpus": str(cores - int(cpus.sum())),
            "Memory": str(memory - int(mem.sum())),
            "Disk": str(disk - int(dsk.sum())),
            "TotalSlotCpus": str(cores),
            "TotalSlotMemory": str(memory),
            "TotalSlotDisk": f"{disk}.0",
            "TotalSlots": str(dslots + 1),
            "DetectedCpus": str(cores),
            "ChildName": _list(names),
            "ChildCpus": _list(cpus.tolist()),
            "ChildMemory": _list(mem.tolist()),
            "ChildDisk": _list(dsk.tolist()),
            "ChildGPUs": _list(gpus.tolist()),
            "ChildAccountingGroup": _list(submitters),
            "ChildRemoteUser": _list([f"{u}@cms.example.org" for u in users]),
            "ChildRemoteOwner": _list([f"{u}@cms.example.org" for u in users]),
            "ChildDSlotId": _list(list(range(1, dslots + 1))),
            "ChildState": _list(["Claimed"] * dslots),
            "ChildActivity": _list(["Busy"] * dslots),
            "ChildEnteredCurrentState": _list([started + 60] * dslots),
            "ChildCurrentRank": _list(["0.0"] * dslots).replace('"', ""),
            "ChildRetirementTimeRemaining": _list([2_000_000] * dslots),
        })
    ]  # fmt: skip
    for j in range(dslots):
        cluster = 1_000_000 + i * 64 + j
        ads.append(templates.ad("d", {
            **common,
            "Name": _q(names[j]),
            "Cpus": str(int(cpus[j])),
            "Memory": str(int(mem[j])),
            "Disk": str(int(dsk[j])),
            "GPUs": "0",
            "GlobalJobId": _q(f"schedd{i % 40}.example.org#{cluster}.0#{started}"),
            "JobId": _q(f"{cluster}.0"),
            "JobStart": str(started + 60),
            "AccountingGroup": _q(submitters[j]),
            "RemoteUser": _q(f"{users[j]}@cms.example.org"),
            "RemoteOwner": _q(f"{users[j]}@cms.example.org"),
            "RemoteGroup": _q(groups[j]),
            "RemoteNegotiatingGroup": _q(groups[j]),
            "RemoteScheddName": _q(f"schedd{i % 40}.example.org"),
        }))  # fmt: skip
    return ads


def _ads(nodes: int, dslots: int, seed: int) -> Iterator[str]:
    templates = Templates()
    for i in range(nodes):
        yield from node_ads(i, dslots, templates, seed)


def write_files(out: Path, nodes: int, dslots: int, per_file: int = 1000, seed: int = 1) -> list[Path]:
    """Write the pool's ads, ``per_file`` to a file (blank lines between ads); the files."""
    out.mkdir(parents=True, exist_ok=True)
    paths: list[Path] = []
    batch: list[str] = []

    def flush() -> None:
        path = out / f"startd-{len(paths):05d}.ads"
        path.write_text("\n".join(batch), encoding="utf-8")
        paths.append(path)
        batch.clear()

    for ad in _ads(nodes, dslots, seed):
        batch.append(ad)
        if len(batch) >= per_file:
            flush()
    if batch:
        flush()
    return paths


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("nodes", type=int)
    parser.add_argument("dslots", type=int, help="dynamic slots a node")
    parser.add_argument("--per-file", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    paths = write_files(args.out, args.nodes, args.dslots, args.per_file, args.seed)
    print(f"{args.nodes * (args.dslots + 1):,} ads in {len(paths)} files under {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
