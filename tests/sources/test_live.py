"""Live sources: real ClassAd objects through the one conversion path, fakes only at the network call.

The fake daemons below stand in for ``htcondor2.Collector`` and ``htcondor2.Schedd`` at the
single call fairacct makes. They record what fairacct passes (constraint, projection, match,
since, options), answer as a daemon would with real ``classad2.ClassAd`` objects (the
constraint and ``since`` evaluated by classad2, newest first, at most ``match``, only the
projected attributes), and can fail, hang or answer garbage on demand. Everything on both sides
of the call is fairacct's real code.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import classad2
import htcondor2
import numpy as np
import pandas as pd
import pytest

from collector.errors import ConfigError
from collector.outbox import Outbox
from collector.sinks.sqlite import EmbeddedStore
from probes.config import ProbeConfig, parse_config
from probes.errors import SourceError
from probes.pipeline.cycle import ProbeCycle
from probes.pipeline.reading import check_sources, iter_live_history, live_pool, read_live_snapshot
from probes.sources.checkpoints import checkpoint_key
from probes.sources.history import read_history
from probes.sources.live import (
    END_TIME,
    LivePool,
    history_constraint,
    history_projection,
    history_since,
    idle_projection,
    slot_projection,
)
from probes.sources.queue import read_idle
from probes.sources.status import read_status

NOW = 1795269400.0


# -- the fakes: one object per daemon, at the network call ---------------------------------------------


def parse(path: Path) -> list[classad2.ClassAd]:
    return list(classad2.parseAds(path.read_text(), classad2.ParserType.Old))


def copy(ad: classad2.ClassAd) -> classad2.ClassAd:
    return classad2.parseOne(ad.printOld(), classad2.ParserType.Old)


def project(ad: classad2.ClassAd, projection: Sequence[str] | None) -> classad2.ClassAd:
    """What a daemon sends for a projection: only those attributes (expressions unevaluated)."""
    if not projection:
        return ad
    out = classad2.ClassAd()
    for name in projection:
        if name in ad:
            out[name] = ad.lookup(name)
    return out


def matches(ad: classad2.ClassAd, constraint: str | None) -> bool:
    return not constraint or classad2.ExprTree(constraint).eval(ad) is True


class Daemon:
    """Behaviour on demand: answer, fail (HTCondorException), hang, or answer ``garbage``."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []
        self.fail: str | None = None
        self.hang = False
        self.garbage: Any = None
        self.delay = 0.0
        self.released = threading.Event()
        self.active: Counter[str] = Counter()  # calls in progress, by method
        self.most_active: Counter[str] = Counter()
        self._lock = threading.Lock()

    def _answer(self, call: str, answer: Iterable[classad2.ClassAd], **args: Any) -> Any:
        self.calls.append({"call": call, **args})
        with self._lock:
            self.active[call] += 1
            self.most_active[call] = max(self.most_active[call], self.active[call])
        try:
            if self.delay:
                time.sleep(self.delay)
            if self.hang:
                self.released.wait(30)
            if self.fail:
                raise htcondor2.HTCondorException(self.fail)
            if self.garbage is not None:
                return self.garbage
            return list(answer)
        finally:
            with self._lock:
                self.active[call] -= 1


class FakeCollector(Daemon):
    def __init__(self, startd: Sequence[classad2.ClassAd] = (), schedds: Sequence[classad2.ClassAd] = ()) -> None:
        super().__init__()
        self.startd = list(startd)
        self.schedd_ads = list(schedds)
        self.accounting: list[classad2.ClassAd] = []
        self.security: list[Any] = []

    def query(
        self, ad_type: htcondor2.AdType, constraint: str | None = None, projection: list[str] | None = None
    ) -> Any:
        if ad_type is htcondor2.AdType.Accounting:  # not counted among the calls; none: groups as declared
            return [project(ad, projection) for ad in self.accounting if matches(ad, constraint)]
        assert ad_type is htcondor2.AdType.Startd
        answer = (project(ad, projection) for ad in self.startd if matches(ad, constraint))
        return self._answer("query", answer, ad_type=ad_type, constraint=constraint, projection=projection)

    def locateAll(self, daemon_type: htcondor2.DaemonType) -> Any:  # noqa: N802 - the bindings' name
        return self._answer("locateAll", self.schedd_ads, daemon_type=daemon_type)


class FakeSchedd(Daemon):
    def __init__(
        self, name: str, queue: Sequence[classad2.ClassAd] = (), history: Sequence[classad2.ClassAd] = ()
    ) -> None:
        super().__init__()
        self.name = name
        self.queue = list(queue)
        self.history_ads = list(history)  # newest first, as the schedd scans its history
        self.ignore_since = False

    def location(self) -> classad2.ClassAd:
        return classad2.ClassAd(
            {"Name": self.name, "MyAddress": f"<127.0.0.1:9618?sock={self.name}>", "CondorVersion": "25.0.13"}
        )

    def query(self, constraint: str = "true", projection: Sequence[str] = (), opts: Any = None, limit: int = -1) -> Any:
        answer = (project(ad, projection) for ad in self.queue if matches(ad, constraint))
        return self._answer("query", answer, constraint=constraint, projection=projection, opts=opts)

    def history(
        self, constraint: str | None = None, projection: Sequence[str] = (), match: int = -1, since: str | None = None
    ) -> Any:
        def scan() -> Iterable[classad2.ClassAd]:
            found = 0
            for ad in self.history_ads:
                if since and not self.ignore_since and classad2.ExprTree(since).eval(ad) is True:
                    return
                if matches(ad, constraint):
                    yield project(ad, projection)
                    found += 1
                    if 0 < match <= found:
                        return

        return self._answer("history", scan(), constraint=constraint, projection=projection, match=match, since=since)


class FakePool:
    """The factories a LivePool is given: collectors by address, schedds by name."""

    def __init__(self, collectors: dict[str | None, FakeCollector], schedds: Sequence[FakeSchedd] = ()) -> None:
        self.collectors = collectors
        self.schedds = {s.name: s for s in schedds}

    def collector(self, address: str | None, security: Any) -> FakeCollector:
        fake = self.collectors[address]
        fake.security.append(security)
        return fake

    def schedd(self, location: classad2.ClassAd) -> FakeSchedd:
        return self.schedds[location["Name"]]

    def live(self, config: ProbeConfig) -> LivePool:
        return live_pool(config, collector_factory=self.collector, schedd_factory=self.schedd)

    def release(self) -> None:
        for d in [*self.collectors.values(), *self.schedds.values()]:
            d.released.set()


def config(**sections: dict[str, Any]) -> ProbeConfig:
    raw: dict[str, Any] = {
        "pool": {"name": "test"},
        "sources": {"live": True},
        "machines": {"speed_attribute": "HEPSPEC"},
    }
    for name, values in sections.items():
        raw[name] = {**raw.get(name, {}), **values}
    return parse_config(raw)


@pytest.fixture(scope="module")
def status_ads(condor25: Path) -> list[classad2.ClassAd]:
    return parse(condor25 / "status.ads")


@pytest.fixture(scope="module")
def queue_ads(condor25: Path) -> list[classad2.ClassAd]:
    return parse(condor25 / "queue.ads")


@pytest.fixture(scope="module")
def history_ads(condor25: Path) -> list[classad2.ClassAd]:
    return parse(condor25 / "history.ads")


@pytest.fixture
def pools() -> Iterable[list[FakePool]]:
    made: list[FakePool] = []
    yield made
    for p in made:
        p.release()  # no fake left hanging in a thread


def fake_pool(
    pools: list[FakePool], collectors: dict[str | None, FakeCollector], schedds: Sequence[FakeSchedd] = ()
) -> FakePool:
    pool = FakePool(collectors, schedds)
    pools.append(pool)
    return pool


# -- projections --------------------------------------------------------------------------------------


def test_the_slot_projection_is_what_the_tables_and_the_configuration_need() -> None:
    cfg = parse_config(
        {
            "sources": {"live": True, "slot_attributes": ["Arch"]},
            "machines": {
                "speed_attribute": "HEPSPEC",
                "cost_expression": "MY.NodeCost * 2",
                "class_attributes": ["CPUModel"],
            },
            "partitions": [
                {"name": "big", "match": "TotalSlotMemory > 100000 && HasTDP", "cpus": 1},
                {"name": "cpu", "cpus": 1},
            ],
        }
    )
    projection = _slot_projection(cfg)
    assert len(projection) == len({p.lower() for p in projection})
    for name in ("Name", "SlotType", "Cpus", "TotalSlotGPUs", "GLIDEIN_Site", "HEPSPEC", "MyCurrentTime",
                 "Arch", "NodeCost", "CPUModel", "TotalSlotMemory", "HasTDP"):  # fmt: skip
        assert name in projection, name
    assert "MY.NodeCost" not in projection
    # the p-slots' Child* lists only where they serve (a query that leaves dynamic slots out)
    lists = {"ChildName", "ChildCpus", "ChildMemory", "ChildDisk", "ChildGPUs", "ChildRemoteOwner"}
    assert not lists & set(projection)
    with_lists = _slot_projection(parse_config({**cfg.model_dump(mode="json"), "pool": {"child_lists": True}}))
    added = set(with_lists) - set(projection)
    assert lists <= added and all(name.startswith("Child") for name in added) and len(added) == 12, added


def test_the_job_projections_hold_what_default_request_expressions_refer_to() -> None:
    idle = idle_projection()
    assert idle[:2] == ["JobStatus", "AutoClusterId"] and {
        "RequestCpus",
        "RequestMemory",
        "RequestDisk",
        "RequestGPUs",
    } <= set(idle)
    assert {"MemoryUsage", "ResidentSetSize", "ImageSize", "DiskUsage"} <= set(idle)
    assert not {"JobCount", "JobIds"} & set(idle)  # autocluster ads only
    history = history_projection(
        config(credentials={"qos": ["JobQOS"]}, sources={"job_attributes": ["ExitBySignal"]}).job_reading()
    )
    assert {"GlobalJobId", "CompletionDate", "EnteredCurrentStatus", "MemoryProvisioned", "MachineAttrHEPSPEC0",
            "JobQOS", "ExitBySignal", "AccountingGroup", "MemoryUsage", "DiskUsage"} <= set(history)  # fmt: skip
    # every run of a job, for the books: how many, the first start, the last run's wall time, its vacate
    assert {"NumJobStarts", "JobRunCount", "JobStartDate", "LastRemoteWallClockTime", "LastVacateTime"} <= set(history)


# -- slots ---------------------------------------------------------------------------------------------


def test_a_live_snapshot_is_the_file_snapshot(
    condor25: Path, status_ads: list[classad2.ClassAd], pools: list[FakePool], caplog: pytest.LogCaptureFixture
) -> None:
    cfg = config(pool={"collectors": ["cm.example.org:9618"], "slot_constraint": 'SlotType =!= "Static"'})
    collector = FakeCollector(status_ads)
    live = fake_pool(pools, {"cm.example.org:9618": collector}).live(cfg)
    with caplog.at_level("INFO", logger="fairacct.live"):
        snapshot, report = live.snapshot(now=NOW)

    # DaemonStartTime is asked from the start (a startd's update steps, and a glidein's
    # GLIDEIN_ToRetire = DaemonStartTime + 86400): one query, never asked again
    (first,) = collector.calls
    assert first == {"call": "query", "ad_type": htcondor2.AdType.Startd, "constraint": 'SlotType =!= "Static"',
                     "projection": _slot_projection(cfg)}  # fmt: skip
    assert "DaemonStartTime" in first["projection"] and "UpdateSequenceNumber" in first["projection"]
    assert "which the projection lacked" not in caplog.text
    collector.calls.clear()
    live.snapshot(now=NOW + 300)
    assert [c["projection"] for c in collector.calls] == [_slot_projection(cfg)]
    assert collector.security == [None, None]  # one query a snapshot
    files, _ = read_status([condor25 / "status.ads"], cfg.slot_reading())
    ignore = ["observed_at", "source", "line"]
    pd.testing.assert_frame_equal(snapshot.slots.drop(columns=ignore), files.slots.drop(columns=ignore))
    pd.testing.assert_frame_equal(
        snapshot.allocations.drop(columns=["observed_at"]), files.allocations.drop(columns=["observed_at"])
    )
    gpu = snapshot.slots.set_index("name").loc["slot1@gpu-node1@vm"]
    assert (gpu["unallocated_gpus"], gpu["unallocated_cpus"], gpu["partition"], gpu["speed"]) == (3, 5, "gpu", 15.0)
    assert set(snapshot.slots["observed_at"]) == {NOW} and set(snapshot.slots["source"]) == {
        "collector cm.example.org:9618"
    }
    assert len(snapshot.allocations) == 6 and report.ads == 8 and not report.rejects


def test_an_answer_without_dynamic_slot_ads_is_billed_from_lists_only_when_configured(
    tmp_path: Path, status_ads: list[classad2.ClassAd], pools: list[FakePool]
) -> None:
    """The same p-slots, listing 6 claims in ChildName, with no dynamic-slot ad beside them: a
    pool between two claims (its p-slots still list the released ones, or already the next),
    billed to nobody; or a query that leaves dynamic slots out, billed from the lists as a dump
    of p-slots only is."""
    pslots = [ad for ad in status_ads if ad.get("SlotType") == "Partitionable"]
    assert sum(len(ad.eval("ChildName")) for ad in pslots) == 6
    between, _ = fake_pool(pools, {None: FakeCollector(pslots)}).live(config()).snapshot(now=NOW)
    assert between.allocations.empty
    slots = between.slots.set_index("name")
    assert (slots["unallocated_cpus"] == slots["total_cpus"]).all() and slots["n_dynamic"].eq(0).all()

    constraint = 'SlotType =!= "Dynamic"'
    cfg = config(pool={"slot_constraint": constraint, "child_lists": True})
    listed, _ = fake_pool(pools, {None: FakeCollector(status_ads)}).live(cfg).snapshot(now=NOW)
    dump = tmp_path / "pslots.ads"
    dump.write_text("\n".join(ad.printOld() for ad in pslots) + "\n")  # the blank line after the last ad too
    files, _ = read_status([dump], cfg.slot_reading())
    assert len(listed.allocations) == 6 and listed.allocations["from_child_lists"].all()
    pd.testing.assert_frame_equal(
        listed.allocations.drop(columns=["observed_at"]), files.allocations.drop(columns=["observed_at"])
    )


def generated_pool(rng: np.random.Generator, n_nodes: int) -> list[classad2.ClassAd]:
    """Startd ads of a random pool: partitionable slots carved into dynamic slots, some static slots."""
    ads = []
    for node in range(n_nodes):
        host = f"node{node}.example.org"
        cpus, memory, gpus = (
            int(rng.choice([8, 16, 64])),
            int(rng.choice([16384, 65536, 262144])),
            int(rng.choice([0, 0, 4])),
        )
        if rng.random() < 0.2:
            ads.append(classad2.ClassAd({"Name": f"slot1@{host}", "Machine": host, "SlotType": "Static",
                                         "State": rng.choice(["Claimed", "Unclaimed"]),
                                         "Cpus": 1, "Memory": 2048, "Disk": 1000000, "MyCurrentTime": 1795269000 + node,
                                         "GLIDEIN_Site": "SiteA", "HEPSPEC": 10.0}))  # fmt: skip
            continue
        used = [0, 0, 0]
        for k in range(int(rng.integers(0, 5))):
            c, m, g = int(rng.integers(1, 5)), int(rng.integers(1, 8)) * 1024, int(gpus > 0 and rng.random() < 0.5)
            if used[0] + c > cpus or used[1] + m > memory or used[2] + g > gpus:
                break
            used = [used[0] + c, used[1] + m, used[2] + g]
            ads.append(classad2.ClassAd({"Name": f"slot1_{k + 1}@{host}", "Machine": host, "SlotType": "Dynamic",
                                         "DynamicSlot": True,
                                         "State": "Claimed", "Cpus": c, "Memory": m, "Disk": 100000, "GPUs": g,
                                         "GlobalJobId": f"schedd#{node}.{k}#1795260000", "RemoteUser": f"u{k}@pool",
                                         "AccountingGroup": f"group_{k % 3}.u{k}@pool",
                                         "MyCurrentTime": 1795269000 + node}))  # fmt: skip
        p_slot = classad2.ClassAd({"Name": f"slot1@{host}", "Machine": host, "SlotType": "Partitionable",
                                   "PartitionableSlot": True,
                                   "State": "Unclaimed", "Cpus": cpus - used[0], "Memory": memory - used[1],
                                   "Disk": 5000000,
                                   "GPUs": gpus - used[2], "TotalSlotCpus": cpus, "TotalSlotMemory": memory,
                                   "TotalSlotDisk": 5100000.5, "TotalSlotGPUs": gpus,
                                   "MyCurrentTime": 1795269000 + node,
                                   "GLIDEIN_Site": f"Site{node % 3}",
                                   "HEPSPEC": float(rng.choice([8.5, 12.0]))})  # fmt: skip
        p_slot["Weird"] = classad2.ExprTree("TotalSlotCpus * 2")  # an expression, evaluated on both paths
        ads.append(p_slot)
    return ads


@pytest.mark.parametrize("seed", range(6))
def test_generated_ads_give_the_same_tables_through_both_paths(
    tmp_path: Path, seed: int, pools: list[FakePool]
) -> None:
    ads = generated_pool(np.random.default_rng(seed), 12)
    dump = tmp_path / "status.ads"
    dump.write_text("\n".join(ad.printOld() for ad in ads) + "\n")  # a blank line after each ad, as condor_status
    cfg = config(sources={"slot_attributes": ["Weird"]})
    files, _ = read_status([dump], cfg.slot_reading())
    live, _ = fake_pool(pools, {None: FakeCollector(ads)}).live(cfg).snapshot(now=NOW)
    ignore = ["observed_at", "source", "line"]
    pd.testing.assert_frame_equal(live.slots.drop(columns=ignore), files.slots.drop(columns=ignore))
    pd.testing.assert_frame_equal(
        live.allocations.drop(columns=["observed_at"]), files.allocations.drop(columns=["observed_at"])
    )
    assert (live.slots["Weird"] == live.slots["total_cpus"] * 2).loc[live.slots["slot_type"] == "Partitionable"].all()


def test_failover_to_the_next_replica(
    status_ads: list[classad2.ClassAd], pools: list[FakePool], caplog: pytest.LogCaptureFixture
) -> None:
    cfg = config(pool={"collectors": ["cm1:9618, cm2:9618"], "timeout_s": 0.3})
    down, slow, up = FakeCollector(status_ads), FakeCollector(status_ads), FakeCollector(status_ads)
    down.fail = "Failed communication with collector."
    live = fake_pool(pools, {"cm1:9618": down, "cm2:9618": up}).live(cfg)
    snapshot, _ = live.snapshot(now=NOW)
    assert len(snapshot.slots) == 2 and len(down.calls) == len(up.calls) == 1
    assert (
        "collector cm1:9618: startd ads: Failed communication with collector.; trying the next replica" in caplog.text
    )

    slow.hang = True  # a replica that never answers costs the timeout, not the cycle
    live = fake_pool(pools, {"cm1:9618": slow, "cm2:9618": up}).live(cfg)
    started = time.monotonic()
    snapshot, _ = live.snapshot(now=NOW)
    # at least the timeout (a lower bound holds at any load); and the hung replica's calls still hang
    # (for 30 s, or until the test ends): the snapshot did not wait for them
    assert len(snapshot.slots) == 2 and time.monotonic() - started >= 0.3 and slow.active["query"] >= 1
    assert "collector cm1:9618: startd ads: no answer within 0.3 s (pool.timeout_s)" in caplog.text


def test_a_pool_whose_replicas_all_fail_fails_the_cycle(
    status_ads: list[classad2.ClassAd], pools: list[FakePool]
) -> None:
    cfg = config(pool={"collectors": ["cm1:9618, cm2:9618"]})
    a, b = FakeCollector(status_ads), FakeCollector(status_ads)
    a.fail, b.fail = "Failed communication with collector.", 'SECMAN:2010:Received "DENIED" from server'
    with pytest.raises(SourceError) as info:
        fake_pool(pools, {"cm1:9618": a, "cm2:9618": b}).live(cfg).snapshot(now=NOW)
    assert str(info.value) == (
        "no collector of the pool answered: collector cm1:9618: startd ads: Failed communication with collector.; "
        'collector cm2:9618: startd ads: SECMAN:2010:Received "DENIED" from server'
    )


def test_several_pools_are_merged_and_a_slot_seen_twice_is_kept_once(
    status_ads: list[classad2.ClassAd], pools: list[FakePool]
) -> None:
    newer = copy(status_ads[0])
    newer["LastHeardFrom"] = 1795269999
    newer["Memory"] = 1024  # what the startd said last
    other = [newer, *status_ads[2:4]]  # a second pool that also sees the CPU node
    cfg = config(pool={"collectors": ["pool-a:9618", "pool-b:9618"]})
    snapshot, report = (
        fake_pool(pools, {"pool-a:9618": FakeCollector(status_ads), "pool-b:9618": FakeCollector(other)})
        .live(cfg)
        .snapshot(now=NOW)
    )
    assert (
        sorted(snapshot.slots["name"]) == ["slot1@cpu-node1@vm", "slot1@gpu-node1@vm"]
        and len(snapshot.allocations) == 6
    )
    cpu = snapshot.slots.set_index("name").loc["slot1@cpu-node1@vm"]
    # the newer ad is kept, and is one node with its dynamic slots from pool-a: unallocated is its
    # TotalSlotMemory minus theirs (32768 - 10240), not its own Memory (DESIGN.md, Tables)
    assert (cpu["unallocated_memory"], cpu["n_dynamic"], cpu["source"]) == (22528, 2, "collector pool-b:9618")
    assert snapshot.ads is not None and "Memory = 1024\n" in snapshot.ads[snapshot.slots["name"] == cpu.name][0]
    assert report.rejects == {"Name: seen twice (two pools or replicas), kept once": 3}


# -- slots, streamed: each chunk of the answer converted as it arrives ------------------------------


def streamed(
    pools: list[FakePool], collectors: dict[str | None, FakeCollector], chunk: int, cfg: ProbeConfig | None = None
) -> tuple[LivePool, list[tuple[str, int]]]:
    """A live pool converting ``chunk`` startd ads at a time, and the chunks it saw (source, size)."""
    live = fake_pool(pools, collectors).live(cfg or config(pool={"collectors": [a for a in collectors if a]}))
    live.slot_chunk = chunk
    seen: list[tuple[str, int]] = []
    live.on_slot_ads = lambda source, ads: seen.append((source, len(ads)))
    return live, seen


@pytest.mark.parametrize("chunk", [1, 3, 7, 8, 1000])
def test_a_snapshot_streamed_in_chunks_is_the_snapshot_taken_whole(
    chunk: int, condor25: Path, status_ads: list[classad2.ClassAd], pools: list[FakePool]
) -> None:
    """Chunk boundaries anywhere (an ad a chunk, a p-slot and its dynamic slots in different
    chunks, the answer in one) give the file's tables, rows in the answer's order."""
    collector = FakeCollector(status_ads)
    live, seen = streamed(pools, {None: collector}, chunk)
    snapshot, report = live.snapshot(now=NOW)
    files, _ = read_status([condor25 / "status.ads"], config().slot_reading())
    ignore = ["observed_at", "source", "line"]  # a file's line is its line in the file
    pd.testing.assert_frame_equal(snapshot.slots.drop(columns=ignore), files.slots.drop(columns=ignore))
    pd.testing.assert_frame_equal(
        snapshot.allocations.drop(columns=["observed_at"]), files.allocations.drop(columns=["observed_at"])
    )
    assert list(snapshot.slots["line"]) == [1, 2] and report.ads == 8 and not report.rejects
    # every ad refers to DaemonStartTime (GLIDEIN_ToRetire), which the projection asks from the start
    # (a startd's update steps): one answer, in chunks of `chunk`
    whole = [min(chunk, 8 - i) for i in range(0, 8, chunk)]
    assert [n for _, n in seen] == whole and len(collector.calls) == 1
    assert "DaemonStartTime" in collector.calls[0]["projection"]
    # an ad's text is kept for the p-slots (partitions, Snapshot.ads), not for the dynamic slots
    columns, _, _ = live.slot_columns()
    assert columns.raw is not None and [text is None for text in columns.raw] == [False, False, *[True] * 6]
    assert snapshot.ads is not None and [ad.count("\nName = ") for ad in snapshot.ads] == [1, 1]
    if chunk < len(status_ads):
        return  # the rest is decided a chunk at a time: on chunks of 1000, as the bindings send them
    # equal strings of a column mostly repeated are one object (8 ads: "Claimed" x 6, "Unclaimed" x 2),
    # and so are the Child* lists' repeated items; columns of distinct names are left alone
    assert len({id(v) for v in columns["Name"]}) == 8
    assert len({id(v) for v in columns["State"]}) == len(set(columns["State"])) == 2
    users = columns["RemoteUser"][[isinstance(u, str) for u in columns["RemoteUser"]]]
    assert len(users) == 6 and len({id(u) for u in users}) == len(set(users)) < 6
    # the Child* lists are asked for only with pool.child_lists: their items are shared too
    listed, _ = streamed(pools, {None: FakeCollector(status_ads)}, chunk, config(pool={"child_lists": True}))
    columns, _, _ = listed.slot_columns()
    users = [u for items in columns["ChildRemoteUser"] if isinstance(items, list) for u in items]
    assert len(users) == 6 and len({id(u) for u in users}) == len(set(users)) < 6


def test_a_re_ask_is_decided_on_a_later_chunk_and_asks_for_all_that_is_lacking(
    status_ads: list[classad2.ClassAd], pools: list[FakePool], caplog: pytest.LogCaptureFixture
) -> None:
    ads = [copy(status_ads[i]) for i in (2, 3, 4, 0, 5, 6, 1, 7)]  # the p-slots in the 2nd and 3rd chunks of 3
    ads[3]["HEPSPEC"] = classad2.ExprTree("HepSpecPerCore * 8")  # slot1@cpu-node1@vm
    ads[3]["HepSpecPerCore"] = 12.5
    ads[6]["HEPSPEC"] = classad2.ExprTree("BenchmarkScore / 100")  # slot1@gpu-node1@vm
    ads[6]["BenchmarkScore"] = 9000
    collector = FakeCollector(ads)
    live, seen = streamed(pools, {None: collector}, 3)
    live.learned["startd"].add("DaemonStartTime")  # learned by an earlier snapshot
    with caplog.at_level("INFO", logger="fairacct.live"):
        snapshot, report = live.snapshot(now=NOW)
    first, second = (c["projection"] for c in collector.calls)
    assert second == [*first, "BenchmarkScore", "HepSpecPerCore"]
    assert [n for _, n in seen] == [3, 3, 2, 3, 3, 2] and report.ads == 8
    assert (
        "startd ads: the answer refers to BenchmarkScore, HepSpecPerCore, which the projection lacked; "
        "asking again with them" in caplog.text
    )
    # each node's speed evaluated with what was asked again
    speed = snapshot.slots.set_index("name")["speed"]
    assert speed.to_dict() == {"slot1@cpu-node1@vm": 100.0, "slot1@gpu-node1@vm": 90.0}


@pytest.mark.parametrize("chunk", [2, 1000])
@pytest.mark.parametrize("later_is_newer", [True, False])
def test_a_slot_seen_twice_in_different_chunks_is_kept_once_at_its_first_place(
    chunk: int, later_is_newer: bool, status_ads: list[classad2.ClassAd], pools: list[FakePool]
) -> None:
    """The copy heard from last is kept, wherever either was; the slots keep the answer's order."""
    again = copy(status_ads[0])  # slot1@cpu-node1@vm, first in the answer, again at its end
    again["LastHeardFrom"] = status_ads[0]["LastHeardFrom"] + (60 if later_is_newer else -60)
    again["Memory"] = 1024
    live, _ = streamed(pools, {None: FakeCollector([*status_ads, again])}, chunk)
    live.learned["startd"].add("DaemonStartTime")
    snapshot, report = live.snapshot(now=NOW)
    assert list(snapshot.slots["name"]) == ["slot1@cpu-node1@vm", "slot1@gpu-node1@vm"]
    assert list(snapshot.slots["line"]) == [1, 2] and len(snapshot.allocations) == 6
    assert report.rejects == {"Name: seen twice (two pools or replicas), kept once": 1} and report.ads == 8
    kept = snapshot.ads[0] if snapshot.ads is not None else ""
    assert ("Memory = 1024\n" in kept) is later_is_newer
    # a p-slot billed from its dynamic-slot ads: unallocated is its size minus theirs either way
    assert snapshot.slots.set_index("name").loc["slot1@cpu-node1@vm", "unallocated_memory"] == 22528


@pytest.mark.parametrize("chunk", [1, 3, 1000])
def test_slots_of_two_pools_in_chunks_are_merged_as_when_taken_whole(
    chunk: int, status_ads: list[classad2.ClassAd], pools: list[FakePool]
) -> None:
    newer = copy(status_ads[0])
    newer["LastHeardFrom"] = 1795269999
    newer["Memory"] = 1024
    older = copy(status_ads[3])  # slot1_1@gpu-node1@vm, heard from before pool-a's copy
    older["LastHeardFrom"] = 1795260000
    other = [older, newer, *status_ads[2:3]]
    collectors = {"pool-a:9618": FakeCollector(status_ads), "pool-b:9618": FakeCollector(other)}
    live, seen = streamed(pools, collectors, chunk)
    live.learned["startd"].add("DaemonStartTime")
    snapshot, report = live.snapshot(now=NOW)
    assert report.rejects == {"Name: seen twice (two pools or replicas), kept once": 3} and report.ads == 8
    slots = snapshot.slots.set_index("name")
    assert list(slots.index) == ["slot1@cpu-node1@vm", "slot1@gpu-node1@vm"]
    assert list(slots["source"]) == ["collector pool-b:9618", "collector pool-a:9618"]
    assert list(slots["line"]) == [1, 2]
    assert {s for s, _ in seen} == {"collector pool-a:9618", "collector pool-b:9618"}
    assert len(snapshot.allocations) == 6 and slots.loc["slot1@cpu-node1@vm", "unallocated_memory"] == 22528


class Failing:
    """An answer that breaks after ``good`` ads, as a collector's stream cut midway."""

    def __init__(self, ads: Sequence[classad2.ClassAd], good: int) -> None:
        self.ads, self.good = list(ads), good
        self.closed = False

    def __iter__(self) -> Any:
        yield from self.ads[: self.good]
        raise htcondor2.HTCondorException("Failed to receive the ads")

    def close(self) -> None:
        self.closed = True


def test_a_replica_failing_midway_costs_only_its_partial_answer(
    status_ads: list[classad2.ClassAd], pools: list[FakePool], caplog: pytest.LogCaptureFixture
) -> None:
    nameless = classad2.ClassAd({"SlotType": "Partitionable", "Cpus": 2})
    broken, up = FakeCollector(), FakeCollector(status_ads)
    broken.garbage = Failing([nameless, *status_ads], good=4)  # 3 named ads in 2 chunks, then the failure
    cfg = config(pool={"collectors": ["cm1:9618, cm2:9618"]})
    live, seen = streamed(pools, {"cm1:9618": broken, "cm2:9618": up}, 2, cfg)
    live.learned["startd"].add("DaemonStartTime")
    snapshot, report = live.snapshot(now=NOW)
    assert seen[:2] == [("collector cm1:9618", 2), ("collector cm1:9618", 2)]
    assert "collector cm1:9618: startd ads: Failed to receive the ads; trying the next replica" in caplog.text
    # nothing of the broken answer is counted or kept: not its nameless ad, not its slots twice
    assert report.ads == 8 and not report.rejects and len(snapshot.slots) == 2 and len(snapshot.allocations) == 6
    assert set(snapshot.slots["source"]) == {"collector cm2:9618"}


@pytest.mark.parametrize("chunk", [2, 1000])
def test_a_malformed_ad_in_a_chunk_is_quarantined_at_its_place(
    chunk: int, status_ads: list[classad2.ClassAd], pools: list[FakePool]
) -> None:
    """An ad out of range is quarantined, named by its place among the kept ads (as when the
    answer was converted whole), and its node left incomplete, whichever chunk it was in."""
    ads = [copy(ad) for ad in status_ads]
    ads[5]["Cpus"] = -1  # slot1_2@gpu-node1@vm
    stale = copy(ads[4])  # a copy of slot1_2@cpu-node1@vm heard from earlier: not kept, never said
    stale["LastHeardFrom"] = 1
    stale["Memory"] = -5
    live, _ = streamed(pools, {None: FakeCollector([*ads, stale])}, chunk)
    live.learned["startd"].add("DaemonStartTime")
    snapshot, report = live.snapshot(now=NOW)
    assert [(m.path, m.line) for m in report.malformed] == [("collector", 6)]
    assert "attribute 'Cpus' = -1" in report.malformed[0].reason and "slot1_2@gpu-node1@vm" in report.malformed[0].text
    assert report.ads == 7 and report.rejects == {"Name: seen twice (two pools or replicas), kept once": 1}
    slots = snapshot.slots.set_index("name")
    assert slots["incomplete"].to_dict() == {"slot1@cpu-node1@vm": False, "slot1@gpu-node1@vm": True}
    assert len(snapshot.allocations) == 5


@pytest.mark.parametrize(
    ("garbage", "message"),
    [
        ("Failed", "collector COLLECTOR_HOST: startd ads: expected a list of ClassAds, got str"),
        ([{"Name": "slot1@x"}], "collector COLLECTOR_HOST: startd ads: expected a list of ClassAds, item 0 is a dict"),
        (None, None),
    ],
)
def test_garbage_from_a_collector_is_a_clear_error(
    garbage: Any, message: str | None, status_ads: list[classad2.ClassAd], pools: list[FakePool]
) -> None:
    collector = FakeCollector([*status_ads[:2], classad2.ClassAd({"Cpus": "many", "SlotType": "Partitionable"})])
    collector.garbage = garbage
    live = fake_pool(pools, {None: collector}).live(config())
    if message:
        with pytest.raises(SourceError, match=f"^{message}$"):
            live.snapshot(now=NOW)
        return
    snapshot, report = live.snapshot(now=NOW)  # an ad without a Name is skipped and counted
    assert len(snapshot.slots) == 2 and report.rejects == {"Name: missing, the slot ad was skipped": 1}


def test_the_real_bindings_failing_become_a_source_error(pools: list[FakePool]) -> None:
    """Nothing listens on port 1 of the loopback: htcondor2's own failure, translated."""
    live = live_pool(config(pool={"collectors": ["127.0.0.1:1"], "timeout_s": 10}))
    with pytest.raises(
        SourceError, match=r"^collector 127\.0\.0\.1:1: startd ads: Failed communication with collector\.$"
    ):
        live.snapshot(now=NOW)
    assert live.bindings is not None and live.bindings.killed == 0  # an answer (a failure), in time


def test_a_token_file_becomes_the_collectors_security_context(
    tmp_path: Path, status_ads: list[classad2.ClassAd], pools: list[FakePool]
) -> None:
    token = tmp_path / "token"
    token.write_text("eyJhbGciOiJIUzI1NiJ9.payload.sig\n")
    collector = FakeCollector(status_ads)
    live = fake_pool(pools, {None: collector}).live(config(pool={"token_file": str(token)}))
    live.snapshot(now=NOW)
    security = collector.security[0]
    assert all(s is security for s in collector.security)
    assert (
        isinstance(security, htcondor2.SecurityContext)
        and security.preferred_token == "eyJhbGciOiJIUzI1NiJ9.payload.sig"
    )
    assert "eyJ" not in repr(live)
    token.write_text("")
    with pytest.raises(ConfigError, match=r"pool.token_file: .* is empty, expected an IDTOKEN"):
        live_pool(
            config(pool={"token_file": str(token)}),
            collector_factory=FakePool({}).collector,
            schedd_factory=FakePool({}).schedd,
        )


def test_live_sources_and_files_are_exclusive() -> None:
    with pytest.raises(
        ConfigError, match=r"sources.live = true reads the pool itself, but sources.history names files too"
    ):
        check_sources(config(sources={"history": ["h.ads"]}))


# -- idle demand ------------------------------------------------------------------------------------------


def test_idle_demand_is_read_from_the_idle_jobs_of_every_schedd(
    condor25: Path, queue_ads: list[classad2.ClassAd], pools: list[FakePool]
) -> None:
    vm, down = FakeSchedd("vm", queue_ads), FakeSchedd("down")
    down.fail = "Failed to fetch ads from schedd, errmsg=CEDAR:6001:Failed to connect to <10.0.0.9:9618>"
    collector = FakeCollector(schedds=[vm.location(), down.location(), vm.location()])
    cfg = config(pool={"job_constraint": 'Owner =!= "test"'})
    live = fake_pool(pools, {None: collector}, [vm, down]).live(cfg)
    schedds, missing = live.schedds()
    assert [n for n, _ in schedds] == ["down", "vm"] and missing == {}
    assert collector.calls == [{"call": "locateAll", "daemon_type": htcondor2.DaemonType.Schedd}]
    read = live.idle(schedds)

    (call,) = vm.calls  # the idle jobs themselves: an autocluster query (QueryOpt.AutoCluster) would count running ones
    assert call == {"call": "query", "constraint": '(JobStatus == 1) && (Owner =!= "test")',
                    "projection": idle_projection(), "opts": htcondor2.QueryOpt.Default}  # fmt: skip
    assert read.failures == {
        "schedd:down": "schedd down: idle jobs: Failed to fetch ads from schedd, "
        "errmsg=CEDAR:6001:Failed to connect to <10.0.0.9:9618>"
    }
    idle = read.idle
    assert idle is not None
    assert idle[["autocluster_id", "request_cpus", "request_memory", "request_gpus", "count"]].values.tolist() == [
        [11, 2, 4096, 1, 1], [13, 8, 16384, 0, 1], [14, 1, 40000, 0, 1]
    ]  # fmt: skip
    files, _ = read_idle([condor25 / "queue.ads"])
    pd.testing.assert_frame_equal(
        idle.drop(columns=["example_job", "source", "line"]), files.drop(columns=["example_job", "source", "line"])
    )


def test_configured_schedds_and_a_schedd_nobody_knows(queue_ads: list[classad2.ClassAd], pools: list[FakePool]) -> None:
    vm, other = FakeSchedd("vm", queue_ads), FakeSchedd("other", queue_ads)
    collector = FakeCollector(schedds=[vm.location(), other.location()])
    live = fake_pool(pools, {None: collector}, [vm, other]).live(config(pool={"schedds": ["vm", "gone"]}))
    schedds, failures = live.schedds()
    assert [n for n, _ in schedds] == ["vm"] and failures == {"schedd:gone": "schedd gone: not known to any collector"}
    read = live.idle([])
    assert read.idle is not None and read.idle.empty


# -- history ------------------------------------------------------------------------------------------------


def job(template: classad2.ClassAd, cluster: int, proc: int, end: int) -> classad2.ClassAd:
    """A copy of ``template`` as job ``cluster.proc`` of schedd vm that ended at ``end``, its run
    moved with it (a job that ends before it starts is impossible, and quarantined)."""
    ad = copy(template)
    start = end - int(template.get("RemoteWallClockTime", 0))
    ad.update({"GlobalJobId": f"vm#{cluster}.{proc}#1795260000", "ClusterId": cluster, "ProcId": proc,
               "CompletionDate": end, "EnteredCurrentStatus": end,
               "QDate": start, "JobStartDate": start, "JobCurrentStartDate": start})  # fmt: skip
    return ad


def history_pool(pools: list[FakePool], ads: Sequence[classad2.ClassAd], **pool: Any) -> tuple[FakeSchedd, LivePool]:
    schedd = FakeSchedd("vm", history=ads)
    return schedd, fake_pool(pools, {None: FakeCollector(schedds=[schedd.location()])}, [schedd]).live(
        config(pool=pool)
    )


def test_the_history_is_read_in_one_call_and_the_checkpoint_is_a_position_in_it(
    condor25: Path, history_ads: list[classad2.ClassAd], pools: list[FakePool]
) -> None:
    schedd, live = history_pool(pools, history_ads, history_match=10)  # converted 10 jobs at a time
    cfg = config(pool={"history_match": 10})
    schedds, _ = live.schedds()
    read = live.history(schedds, lambda key: None)

    (call,) = schedd.calls
    assert (call["constraint"], call["match"], call["since"]) == ("true", 50_001, None) and read.pages == {"vm": 1}
    assert call["projection"] == history_projection(cfg.job_reading())
    files, _ = read_history([condor25 / "history.ads"], cfg.job_reading())
    pd.testing.assert_frame_equal(
        read.jobs.sort_values("job_id").reset_index(drop=True).drop(columns=["source", "line"]),
        files.sort_values("job_id").reset_index(drop=True).drop(columns=["source", "line"]),
    )
    assert read.jobs["line"].tolist() == list(range(1, 43))  # each ad's place in the one answer
    mark = read.checkpoints[checkpoint_key("vm")]
    newest = [ad["GlobalJobId"] for ad in history_ads[:2]]  # the history file's end: its newest jobs
    assert mark == {"end": 1795269401.0, "ids": ["vm#12.0#1795269388", "vm#12.1#1795269388"], "tail": newest}

    # the next pass stops at the second of them and asks for the first: nothing new
    schedd.calls.clear()
    again = live.history(schedds, {checkpoint_key("vm"): mark}.get)
    (call,) = schedd.calls
    assert call["since"] == history_since(mark, 3600) == f'GlobalJobId == "{newest[1]}"'
    assert call["constraint"] == history_constraint("", mark) == "true"
    assert again.jobs.empty and again.checkpoints[checkpoint_key("vm")] == mark and again.problems == {}

    # jobs written to the history later are read, whenever they ended: in the same second as the
    # checkpoint, after it, and (a job removed late, or whose output took long) long before it
    late = [job(history_ads[0], 13, 0, 1795269500), job(history_ads[0], 13, 1, 1795200000),
            job(history_ads[0], 13, 2, 1795269401)]  # fmt: skip
    schedd.history_ads = late + schedd.history_ads
    third = live.history(schedds, {checkpoint_key("vm"): mark}.get)
    assert third.jobs["job_id"].tolist() == ["vm#13.0#1795260000", "vm#13.1#1795260000", "vm#13.2#1795260000"]
    assert third.checkpoints[checkpoint_key("vm")] == {
        "end": 1795269500.0, "ids": ["vm#13.0#1795260000"], "tail": ["vm#13.0#1795260000", "vm#13.1#1795260000"]
    }  # fmt: skip


def test_a_job_constraint_still_answers_the_checkpoints_newest_job(
    history_ads: list[classad2.ClassAd], pools: list[FakePool]
) -> None:
    schedd, live = history_pool(pools, history_ads, job_constraint="ExitCode == 0")
    schedds, _ = live.schedds()
    first = live.history(schedds, lambda key: None)
    mark = first.checkpoints[checkpoint_key("vm")]
    assert len(first.jobs) < 42 and (first.jobs["exit_code"] == 0).all()
    schedd.calls.clear()
    again = live.history(schedds, {checkpoint_key("vm"): mark}.get)
    assert again.jobs.empty and again.problems == {}
    assert schedd.calls[0]["constraint"] == f'(ExitCode == 0) || GlobalJobId == "{mark["tail"][0]}"'


def test_more_jobs_in_one_second_than_a_chunk_holds(history_ads: list[classad2.ClassAd], pools: list[FakePool]) -> None:
    ads = [job(history_ads[0], 20, k, 1795269600) for k in range(25)]
    schedd, live = history_pool(pools, ads, history_match=10)
    read = live.history(live.schedds()[0], lambda key: None)
    assert sorted(read.jobs["proc"]) == list(range(25)) and read.pages == {"vm": 1}
    assert len(read.checkpoints[checkpoint_key("vm")]["ids"]) == 25
    schedd.history_ads = [job(history_ads[0], 20, 25, 1795269600), *ads]
    more = live.history(live.schedds()[0], read.checkpoints.get)
    assert more.jobs["proc"].tolist() == [25] and len(more.checkpoints[checkpoint_key("vm")]["ids"]) == 26


def test_an_older_probes_checkpoint_is_read_once_by_its_rule_then_positioned(
    history_ads: list[classad2.ClassAd], pools: list[FakePool], caplog: pytest.LogCaptureFixture
) -> None:
    """A site upgrading: the checkpoint of a probe from before positions (an end time and the ids
    at it) is read once as that probe would have, in one scan, and left with a position."""
    old = {"end": 1795269401.0, "ids": ["vm#12.0#1795269388", "vm#12.1#1795269388"]}
    written_since = [job(history_ads[0], 13, 0, 1795269450), job(history_ads[0], 13, 1, 1795269401)]
    schedd, live = history_pool(pools, [*written_since, *history_ads], history_lookback_s=600)
    schedds, _ = live.schedds()
    with caplog.at_level("INFO", logger="fairacct.live"):
        read = live.history(schedds, {checkpoint_key("vm"): old}.get)
    (call,) = schedd.calls
    assert call["since"] == f"{END_TIME} < 1795268801" and call["constraint"] == "true"
    assert read.jobs["job_id"].tolist() == ["vm#13.0#1795260000", "vm#13.1#1795260000"]  # none read twice
    mark = read.checkpoints[checkpoint_key("vm")]
    assert mark == {
        "end": 1795269450.0,
        "ids": ["vm#13.0#1795260000"],
        "tail": ["vm#13.0#1795260000", "vm#13.1#1795260000"],
    }
    assert "schedd vm: a checkpoint without a position in the history, read once more by its end time" in caplog.text

    # from then on, by position: a job written later that ended long before is read
    schedd.history_ads = [job(history_ads[0], 14, 0, 1795000000), *schedd.history_ads]
    later = live.history(schedds, {checkpoint_key("vm"): mark}.get)
    assert later.jobs["job_id"].tolist() == ["vm#14.0#1795260000"] and later.problems == {}


def test_a_history_that_lost_the_checkpoints_position_is_said(
    history_ads: list[classad2.ClassAd], pools: list[FakePool], caplog: pytest.LogCaptureFixture
) -> None:
    rotated = {"end": 1795260000.0, "ids": ["vm#1.0#1795250000"], "tail": ["vm#1.0#1795250000", "vm#0.9#1795250000"]}
    _, live = history_pool(pools, history_ads)
    schedds, _ = live.schedds()
    with caplog.at_level("WARNING", logger="fairacct.live"):
        read = live.history(schedds, {checkpoint_key("vm"): rotated}.get)
    assert len(read.jobs) == 42  # all it holds is past the lost position
    why = read.problems["schedd:vm"]
    assert why.startswith("schedd vm: its history no longer holds job vm#1.0#1795250000, where the last pass stopped")
    assert "rotated away" in why and why in caplog.text

    # a history rewritten (jobs read before are in it, the position is not): only jobs past the end time
    rewritten = {"end": 1795269309.0, "ids": [history_ads[4]["GlobalJobId"]], "tail": ["vm#99.0#1", "vm#98.0#1"]}
    read = live.history(schedds, {checkpoint_key("vm"): rewritten}.get)
    assert (read.jobs["end"] > 1795269309).all() and len(read.jobs) == 4
    assert "the history was rewritten; only jobs that ended after 1795269309 were taken" in read.problems["schedd:vm"]


def test_a_schedd_that_does_not_apply_since_is_still_read_once_and_said(
    history_ads: list[classad2.ClassAd], pools: list[FakePool], caplog: pytest.LogCaptureFixture
) -> None:
    schedd, live = history_pool(pools, history_ads)
    schedds, _ = live.schedds()
    mark = live.history(schedds, lambda key: None).checkpoints[checkpoint_key("vm")]
    schedd.ignore_since = True
    with caplog.at_level("WARNING", logger="fairacct.live"):
        again = live.history(schedds, {checkpoint_key("vm"): mark}.get)
    assert again.jobs.empty and again.checkpoints[checkpoint_key("vm")] == mark and again.failures == {}
    assert again.problems == {
        "schedd:vm": f"schedd vm: its history went on past job {mark['tail'][1]}, where it was asked to stop (since): "
        "it does not apply since, so every pass scans its whole history"
    }
    assert again.problems["schedd:vm"] in caplog.text


def test_an_answer_whose_expressions_need_more_is_asked_again_once(
    history_ads: list[classad2.ClassAd], pools: list[FakePool], caplog: pytest.LogCaptureFixture
) -> None:
    ads = [copy(ad) for ad in history_ads]
    ads[30]["RequestMemory"] = classad2.ExprTree("2 * MemoryRequestedByWrapper")
    ads[30]["MemoryRequestedByWrapper"] = 700
    del ads[30]["MemoryProvisioned"]
    schedd, live = history_pool(pools, ads, history_match=10)
    with caplog.at_level("INFO", logger="fairacct.live"):
        read = live.history(live.schedds()[0], lambda key: None)
    assert read.pages == {"vm": 2} and len(read.jobs) == 42
    assert read.jobs.set_index("job_id").loc[ads[30]["GlobalJobId"], "memory"] == 1400
    assert schedd.calls[1]["projection"] == [*schedd.calls[0]["projection"], "MemoryRequestedByWrapper"]
    assert "the answer refers to MemoryRequestedByWrapper, which the projection lacked; asking again" in caplog.text
    schedd.calls.clear()
    live.history(live.schedds()[0], lambda key: None)
    assert len(schedd.calls) == 1 and "MemoryRequestedByWrapper" in schedd.calls[0]["projection"]


@pytest.mark.parametrize(
    ("garbage", "message"),
    [("Failed", "expected a list of ClassAds, got str"), (7, "expected a list of ClassAds, got int"),
     ([classad2.ClassAd(), {"GlobalJobId": "x"}], "expected a list of ClassAds, item 1 is a dict")],
)  # fmt: skip
def test_garbage_from_a_schedds_history_is_a_clear_failure(
    garbage: Any, message: str, history_ads: list[classad2.ClassAd], pools: list[FakePool]
) -> None:
    schedd, live = history_pool(pools, history_ads)
    schedd.garbage = garbage
    read = live.history(live.schedds()[0], lambda key: None)
    assert read.failures == {"schedd:vm": f"schedd vm: history: {message}"} and read.checkpoints == {}


def test_a_live_cycle_commits_each_answering_schedd_with_its_checkpoint(
    tmp_path: Path, condor25: Path, queue_ads: list[classad2.ClassAd],
    history_ads: list[classad2.ClassAd], pools: list[FakePool],
) -> None:  # fmt: skip
    # the collector answers now, having just heard from its startds (the dump's own times are
    # long past: its nodes would be unheard)
    status_ads = parse(condor25 / "status.ads")
    for ad in status_ads:
        ad["LastHeardFrom"] = int(time.time())
    good = FakeSchedd("vm", queue_ads, history_ads)
    bad = FakeSchedd("flaky", queue_ads, history_ads[:5])
    bad.hang = True
    cfg = config(pool={"history_match": 20, "timeout_s": 0.3})
    pool = fake_pool(pools, {None: FakeCollector(status_ads, [good.location(), bad.location()])}, [good, bad])
    with Outbox(tmp_path / "outbox.sqlite") as outbox, EmbeddedStore(tmp_path / "store.sqlite") as store:
        first, _ = ProbeCycle(cfg, probe="test", pool=pool.live(cfg)).once(outbox, store)
        # a fairness record per submitter (group_cms, group_atlas, group_osg.condoruser@localpool)
        assert first.enqueued == {"slot": 2, "allocation": 6, "job": 42, "fairness": 3}
        assert (
            set(first.reading.failures) == {"schedd:flaky"}
            and "no answer within 0.3 s" in first.reading.failures["schedd:flaky"]
        )
        assert (
            outbox.checkpoint(checkpoint_key("vm"))["end"] == 1795269401
            and outbox.checkpoint(checkpoint_key("flaky")) is None
        )
        slot = store.query("slot")[0]
        assert (
            abs(slot["observed_at"] - time.time()) < 60 and slot["pool"] == "test"
        )  # observed when the collector answered

        bad.hang = False  # the flaky schedd answers again: its jobs now, and nothing of vm's twice
        bad.released.set()
        second, _ = ProbeCycle(cfg, probe="test", pool=pool.live(cfg)).once(outbox, store)
        assert second.enqueued.get("job") == 5 and second.reading.failures == {}
        assert store.count("job") == 42  # the same jobs by id: flaky's are vm's history
        assert outbox.checkpoint(checkpoint_key("flaky")) is not None


def test_read_live_without_a_collector_keeps_the_snapshot_and_says_so(
    status_ads: list[classad2.ClassAd], pools: list[FakePool]
) -> None:
    collector = FakeCollector(status_ads)
    pool = fake_pool(pools, {None: collector})
    original = collector.locateAll

    def locate_fails(daemon_type: htcondor2.DaemonType) -> Any:
        collector.fail = "Failed communication with collector."
        try:
            return original(daemon_type)
        finally:
            collector.fail = None

    collector.locateAll = locate_fails  # type: ignore[method-assign]
    result = read_live_snapshot(pool.live(config()), now=NOW)
    assert result.snapshot is not None and len(result.snapshot.slots) == 2 and result.idle is None
    assert result.failures == {
        "collector": "collector COLLECTOR_HOST: locate schedds: Failed communication with collector."
    }
    with pytest.raises(SourceError, match="locate schedds"):
        list(iter_live_history(pool.live(config()), lambda key: None))


def test_stopping_abandons_a_call_in_flight(status_ads: list[classad2.ClassAd], pools: list[FakePool]) -> None:
    collector = FakeCollector(status_ads)
    collector.hang = True
    live = fake_pool(pools, {None: collector}).live(config(pool={"timeout_s": 60}))
    threading.Timer(0.2, live.cancel).start()
    with pytest.raises(SourceError, match="abandoned, the probe is stopping"):
        live.snapshot(now=NOW)
    # abandoned while the call still hangs (for 30 s, or until the test ends), not waited for
    assert collector.active["query"] == 1 and live.abandoned == 1


def _slot_projection(cfg: ProbeConfig) -> list[str]:
    """The projection a live pool of ``cfg`` asks the collectors for."""
    m = cfg.machines
    expressions = (m.speed_expression, m.cost_expression)
    return slot_projection(cfg.slot_reading(), expressions, m.class_attributes, child_lists=cfg.pool.child_lists)
