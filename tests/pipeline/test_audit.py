"""``fairacct audit`` on snapshots built from a known timeline, in both stores.

Jobs with known start and end are sampled every INTERVAL_S seconds as the probe samples a pool:
each sample is a real snapshot accounted by the probe's own code (true overhead, bills) and
made into the probe's slot and allocation records; the history is the jobs' records. The audit
must then give, per submitter and site, the core-hours an independent loop over the timeline
gives (and, on a window aligned with the samples, the values worked out by hand below), every
difference within the sampling bound, every node balanced, and exactly the gaps of the
snapshots dropped.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from collector.records import table_docs
from collector.sinks.elasticsearch import ElasticsearchSink
from collector.sinks.sqlite import EmbeddedStore
from probes.cli import main
from probes.config import ProbeConfig, parse_config
from probes.pipeline.audit import audit
from probes.pipeline.overhead import overhead_report
from probes.pipeline.records import snapshot_docs
from probes.sources.status import Snapshot
from tests.collector.conftest import osmem_server  # noqa: F401 - the session's server, its pipe closed at the end

T0 = 1_800_000_000.0
INTERVAL_S = 60.0
SAMPLES = 61  # t0 ... t0 + 3600
NODES = {"node1@a": ("SiteA", 8.0), "node2@b": ("SiteB", 8.0)}  # name: (site, cores); 2 GiB a core
#: (job, submitter, node, cores, start, end) relative to T0; a claim with no job is job None
TIMELINE = (
    ("s#1.0#1", "alice@pool", "node1@a", 2, 100, 1000),
    ("s#2.0#1", "alice@pool", "node1@a", 2, 1010, 2500),
    (None, "alice@pool", "node1@a", 2, 2510, 2650),  # a claim between two jobs: samples 2520, 2580, 2640
    ("s#3.0#1", "bob@pool", "node2@b", 4, 250, 3300),  # across both edges of the window
    ("s#4.0#1", "carol@pool", "node1@a", 1, 2990, 3010),  # seen once, at 3000
    ("s#5.0#1", "dave@pool", "node2@b", 1, 400, 430),  # seen once, at 420
)


def config() -> ProbeConfig:
    return parse_config({"pool": {"name": "synthetic", "interval_s": INTERVAL_S, "max_interval_s": 2 * INTERVAL_S}})


def sample(k: int, t0: float = T0) -> Snapshot:
    """The pool at t0 + k x INTERVAL_S: the claims present then, as the reader's tables."""
    t = t0 + k * INTERVAL_S
    rows = [r for r in TIMELINE if t0 + r[4] <= t <= t0 + r[5]]
    allocations = pd.DataFrame(
        {
            "pool": "synthetic",
            "name": [f"slot1_{i}@{r[2].split('@')[1]}" for i, r in enumerate(rows)],
            "parent": [r[2] for r in rows],
            "job_id": [r[0] for r in rows],
            "submitter": [r[1] for r in rows],
            "user": [r[1].split("@")[0] for r in rows],
            "group": None,
            "project": None,
            "site": [NODES[r[2]][0] for r in rows],
            "cpus": [float(r[3]) for r in rows],
            "memory": [2048.0 * r[3] for r in rows],
            "disk": 0.0,
            "gpus": 0.0,
            "observed_at": t,
        },
        columns=["pool", "name", "parent", "job_id", "submitter", "user", "group", "project", "site",
                 "cpus", "memory", "disk", "gpus", "observed_at"],
    )  # fmt: skip
    held = allocations.groupby("parent")[["cpus", "memory"]].sum()
    slots = pd.DataFrame(
        [
            {
                "pool": "synthetic", "name": name, "machine": name.split("@")[1], "slot_type": "Partitionable",
                "site": site, "partition": "cpu", "total_cpus": cores, "total_memory": 2048.0 * cores,
                "total_disk": 1e6, "total_gpus": 0.0,
                "unallocated_cpus": cores - (held.loc[name, "cpus"] if name in held.index else 0.0),
                "unallocated_memory": 2048.0 * cores - (held.loc[name, "memory"] if name in held.index else 0.0),
                "unallocated_disk": 1e6, "unallocated_gpus": 0.0,
                "n_dynamic": int((allocations["parent"] == name).sum()),
                "incomplete": False, "glidein_to_retire": np.nan, "observed_at": t,
            }
            for name, (site, cores) in NODES.items()
        ]
    )  # fmt: skip
    return Snapshot(slots, allocations)


@functools.cache
def sampled(t0: float = T0) -> dict[str, list[dict[str, Any]]]:
    """Every sample's slot and allocation records (the timeline starting at ``t0``), made once."""
    out: dict[str, list[dict[str, Any]]] = {"slot": [], "allocation": []}
    for k in range(SAMPLES):
        snap = sample(k, t0)
        stands = {"interval_s": INTERVAL_S}  # every sample follows the one before (the first: the nominal interval)
        snap = Snapshot(snap.slots.assign(**stands), snap.allocations.assign(**stands))
        for kind, docs in snapshot_docs(overhead_report(snap, config()), idle_known=False, probe="p").items():
            out[kind] += docs.decoded()
    return out


def records(dropped: frozenset[int] = frozenset(), t0: float = T0) -> dict[str, list[dict[str, Any]]]:
    """Every sample's records (but those of ``dropped``) and the jobs' records (the timeline starting at ``t0``)."""
    gone = {t0 + k * INTERVAL_S for k in dropped}
    out = {kind: [d for d in docs if d["observed_at"] not in gone] for kind, docs in sampled(t0).items()}
    jobs = pd.DataFrame(
        [
            {"job_id": j, "submitter": s, "user": s.split("@")[0], "site": NODES[n][0], "cpus": float(c),
             "start": t0 + a, "end": t0 + b, "walltime_s": float(b - a)}
            for j, s, n, c, a, b in TIMELINE if j is not None
        ]
    )  # fmt: skip
    out["job"] = table_docs("job", jobs, probe="p")
    return out


def open_store(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """An empty store of the fixture's parameter: the embedded one, or osmem-server's with the templates."""
    if request.param == "sqlite":
        return EmbeddedStore(tmp_path / "store.sqlite")
    sink = ElasticsearchSink(request.getfixturevalue("osmem_url"))
    sink.install_templates()
    return sink


@pytest.fixture(params=["sqlite", "osmem"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    sink = open_store(request, tmp_path)
    yield sink
    sink.close()


def fill(sink: Any, dropped: frozenset[int] = frozenset(), t0: float = T0) -> None:
    for kind, docs in records(dropped, t0).items():
        assert not sink.send(kind, docs).rejected


def expected(start: float, end: float, dropped: frozenset[int] = frozenset()) -> pd.DataFrame:
    """The books by an independent loop over the timeline: per submitter, the core-seconds of
    every sample's interval inside the window (held), of every job inside the observed window
    (used), and the bound, one interval a core of each job."""
    observed = [
        (T0 + k * INTERVAL_S - INTERVAL_S, T0 + k * INTERVAL_S) for k in range(SAMPLES) if k not in dropped
    ]  # each sample stands for (t - interval, t]
    out: dict[str, dict[str, float]] = {}
    for job, who, _node, cores, a, b in TIMELINE:
        row = out.setdefault(who, {"held": 0.0, "claimed": 0.0, "used": 0.0, "bound": 0.0})
        for lo, hi in observed:
            if T0 + a <= hi <= T0 + b:  # the sample at hi saw it
                part = cores * max(0.0, min(hi, end) - max(lo, start))
                row["held" if job else "claimed"] += part
        if job is None:
            continue
        for lo, hi in observed:
            row["used"] += cores * max(0.0, min(hi, end, T0 + b) - max(lo, start, T0 + a))
        if T0 + a < end + INTERVAL_S and T0 + b >= start:  # ran in it, or its first sample may stand for some of it
            row["bound"] += cores * INTERVAL_S
    frame = pd.DataFrame(out).T / 3600.0
    return frame.rename_axis("submitter").reset_index()


def test_books_of_a_window_on_the_samples_are_the_hand_computed_ones(store: Any) -> None:
    fill(store)
    report = audit(store, config(), T0 + 300, T0 + 3000, lag_s=0.0)
    books = report.submitters.set_index("submitter")
    # bob: 4 cores over [250, 3300]: the window holds 2700 s of it, 45 samples (360 ... 3000) of 60 s
    assert books.loc["bob@pool", "held_core_hours"] == pytest.approx(3.0, abs=1e-9)
    assert books.loc["bob@pool", "used_core_hours"] == pytest.approx(3.0, abs=1e-9)
    # alice: job 1 (2 cores, [100, 1000]): held 11 samples x 60 s (360 ... 960), used 700 s: -80 core-s;
    # job 2 ([1010, 2500]): held 25 samples (1020 ... 2460), used 1490 s: +20 core-s; both within 2 x 60 core-s
    assert books.loc["alice@pool", "held_core_hours"] == pytest.approx((1320 + 3000) / 3600, abs=1e-9)
    assert books.loc["alice@pool", "used_core_hours"] == pytest.approx((1400 + 2980) / 3600, abs=1e-9)
    assert books.loc["alice@pool", "difference_core_hours"] == pytest.approx(-60 / 3600, abs=1e-9)
    assert books.loc["alice@pool", "bound_core_hours"] == pytest.approx(4 * 60 / 3600, abs=1e-9)
    # the claim between alice's jobs: 3 samples x 60 s x 2 cores, not compared with jobs
    assert books.loc["alice@pool", "claimed_core_hours"] == pytest.approx(360 / 3600, abs=1e-9)
    # dave: one sample (420) of 60 s for a job of 30 s; carol: one (3000) for the 10 s of hers in the window
    assert books.loc["dave@pool", "held_core_hours"] == pytest.approx(60 / 3600, abs=1e-9)
    assert books.loc["dave@pool", "used_core_hours"] == pytest.approx(30 / 3600, abs=1e-9)
    assert books.loc["carol@pool", "held_core_hours"] == pytest.approx(60 / 3600, abs=1e-9)
    assert books.loc["carol@pool", "used_core_hours"] == pytest.approx(10 / 3600, abs=1e-9)
    assert report.beyond == 0 and report.gaps.empty
    assert list(books["site"]) == ["SiteA", "SiteB", "SiteA", "SiteB"]
    # node books: 45 snapshots of 8 CU each (1 core and 2 GiB), 0.75 h: 6 CU-hours offered, balanced
    nodes = report.nodes.set_index("name")
    assert list(nodes["snapshots"]) == [45, 45]
    assert list(nodes["offered_cu_hours"]) == pytest.approx([6.0, 6.0])
    assert nodes["balanced"].all() and (nodes["difference_cu_hours"] < 1e-12).all()
    # node2 held bob's 4 cores all along and dave's 1 core once: 4 x 0.75 + 1/60 CU-hours
    assert nodes.loc["node2@b", "allocated_cu_hours"] == pytest.approx(3.0 + 1 / 60)
    assert nodes.loc["node2@b", "overhead_cu_hours"] == pytest.approx(4 * 0.75 - 1 / 60)


@pytest.mark.parametrize("window", [(330.5, 2970.25), (0.0, 3600.0), (1100.0, 1300.0)])
def test_books_equal_an_independent_loop_over_the_timeline(store: Any, window: tuple[float, float]) -> None:
    fill(store)
    start, end = T0 + np.floor(window[0]), T0 + np.floor(window[1])
    report = audit(store, config(), T0 + window[0], T0 + window[1], lag_s=0.0)
    want = expected(start, end).set_index("submitter")
    got = report.submitters.set_index("submitter")
    want = want[(want[["held", "claimed", "used"]] != 0).any(axis=1) | (want["bound"] > 0)]
    assert sorted(got.index) == sorted(want.index)
    for who in want.index:
        assert got.loc[who, "held_core_hours"] == pytest.approx(want.loc[who, "held"], abs=1e-9), who
        assert got.loc[who, "claimed_core_hours"] == pytest.approx(want.loc[who, "claimed"], abs=1e-9), who
        assert got.loc[who, "used_core_hours"] == pytest.approx(want.loc[who, "used"], abs=1e-9), who
        assert got.loc[who, "bound_core_hours"] == pytest.approx(want.loc[who, "bound"], abs=1e-9), who
    assert report.beyond == 0 and report.unbalanced == 0 and report.gaps.empty


def test_dropped_snapshots_are_exactly_the_gaps_and_the_books_still_balance(store: Any) -> None:
    fill(store, dropped=frozenset({20, 21, 40}))
    report = audit(store, config(), T0 + 300, T0 + 3000, lag_s=0.0)
    gaps = report.gaps
    assert list(gaps["pool"]) == ["synthetic", "synthetic"]
    assert list(gaps["start"] - T0) == [1140.0, 2340.0]  # the samples at 1200, 1260 and 2400 stood for these
    assert list(gaps["end"] - T0) == [1260.0, 2400.0]
    assert list(gaps["seconds"]) == [120.0, 60.0]
    # the jobs are compared over the observed time only, so the gaps cost both sides alike
    want = expected(T0 + 300, T0 + 3000, frozenset({20, 21, 40})).set_index("submitter")
    got = report.submitters.set_index("submitter")
    assert got.loc["bob@pool", "held_core_hours"] == pytest.approx(3.0 - 4 * 180 / 3600)
    for who in ("alice@pool", "bob@pool"):
        assert got.loc[who, "used_core_hours"] == pytest.approx(want.loc[who, "used"], abs=1e-9)
    assert report.beyond == 0 and report.unbalanced == 0


def test_a_released_claim_billed_twice_unbalances_its_node_and_its_submitter(store: Any) -> None:
    fill(store)
    # a stale bill: bob's claim billed again at one snapshot under another dynamic slot's name
    docs = [d for d in records()["allocation"] if d["observed_at"] == T0 + 1500 and d["submitter"] == "bob@pool"]
    stale = [dict(d, name="slot1_9@b", id="stale" + d["id"][5:]) for d in docs]
    assert not store.send("allocation", stale).rejected
    report = audit(store, config(), T0 + 300, T0 + 3000, lag_s=0.0)
    nodes = report.nodes.set_index("name")
    assert not nodes.loc["node2@b", "balanced"] and nodes.loc["node1@a", "balanced"]
    assert nodes.loc["node2@b", "difference_cu_hours"] == pytest.approx(4 * 60 / 3600)  # 4 cores, one interval
    bob = report.submitters.set_index("submitter").loc["bob@pool"]
    assert bob["difference_core_hours"] == pytest.approx(4 * 60 / 3600) and not bob["beyond"]  # within 4 cores x 60 s
    assert report.unbalanced == 1


def test_the_command_prints_the_books_as_a_table_and_as_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "state" / "fairacct.sqlite"
    with EmbeddedStore(path) as sink:
        fill(sink, dropped=frozenset({20}))
    cfg = tmp_path / "audit.toml"
    cfg.write_text(
        f'[pool]\nname = "synthetic"\ninterval_s = {INTERVAL_S}\nmax_interval_s = {2 * INTERVAL_S}\n'
        f'[probe]\nstate_dir = "{tmp_path / "state"}"\n'
    )
    window = ("--from", "2027-01-15T08:05:00Z", "--to", str(T0 + 3000))  # T0 + 300 as ISO-8601
    assert main(["audit", "--config", str(cfg), *window, "--lag-s", "0", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["from"] == "2027-01-15T08:05:00Z" and doc["to"] == "2027-01-15T08:50:00Z"
    assert doc["gaps"] == [
        {"pool": "synthetic", "start": "2027-01-15T08:19:00Z", "end": "2027-01-15T08:20:00Z", "seconds": 60.0}
    ]
    assert doc["balanced"] is False  # a gap
    assert [r["submitter"] for r in doc["submitters"]] == ["alice@pool", "bob@pool", "carol@pool", "dave@pool"]
    assert not any(r["beyond"] for r in doc["submitters"]) and all(n["balanced"] for n in doc["nodes"])
    assert main(["audit", "--config", str(cfg), *window]) == 0
    text = capsys.readouterr().out
    assert "0 of 4 submitter rows beyond the sampling bound; 0 of 2 nodes out of balance; 1 gaps" in text
    assert "2027-01-15T08:19:00Z 2027-01-15T08:20:00Z" in text
    assert main(["audit", "--config", str(cfg), "--from", str(T0 + 10), "--to", str(T0)]) == 2
    assert "--from" in capsys.readouterr().err
    # the report of the day shows the books: the rows of the whole day, all within the bound
    assert main(["report", "--config", str(cfg), "--from", "2027-01-15", "--to", "2027-01-15", "--out",
                 str(tmp_path / "report")]) == 0  # fmt: skip
    page = (tmp_path / "report" / "index.html").read_text()
    section = page[page.index("The books: allocation records against completed jobs") :]
    assert "0 of 4 rows" in section and "alice@pool" in section and "Nodes out of balance" in section
    # the dropped snapshot's gap, as UTC times and a duration a reader takes in (not UNIX seconds)
    assert "synthetic 2027-01-15 08:19 UTC to 2027-01-15 08:20 UTC (60 s)" in section


def test_jobs_still_running_are_set_apart_and_a_job_gone_unrecorded_stays_a_fault(store: Any) -> None:
    # the newest snapshot is at 3000 (those after it not taken yet): bob ([250, 3300]) and carol
    # ([2990, 3010]) run in it and are not in the history yet; dave's job ([400, 430]) is gone
    # from the snapshots but never reached the history (a record lost): a fault either way
    later = frozenset(range(51, SAMPLES))
    for kind, docs in records(later).items():
        kept = [d for d in docs if kind != "job" or d["job_id"] not in {"s#3.0#1", "s#4.0#1", "s#5.0#1"}]
        assert not store.send(kind, kept).rejected
    plain = audit(store, config(), T0 + 300, T0 + 3000, lag_s=0.0).submitters.set_index("submitter")
    assert list(plain["beyond"]) == [False, True, True, True]  # alice, bob, carol, dave
    report = audit(store, config(), T0 + 300, T0 + 3000, lag_s=0.0, set_open=True)
    books = report.submitters.set_index("submitter")
    # bob: 4 cores x 45 samples of 60 s in the window (360 ... 3000); carol: 1 core x the 60 s at 3000
    assert list(books["open_core_hours"]) == pytest.approx([0.0, 3.0, 60 / 3600, 0.0])
    assert list(books["held_core_hours"]) == pytest.approx([(1320 + 3000) / 3600, 0.0, 0.0, 60 / 3600])
    assert list(books["beyond"]) == [False, False, False, True]
    assert report.open_jobs == 2 and report.open_core_hours == pytest.approx(3.0 + 60 / 3600)
    assert report.beyond == 1
