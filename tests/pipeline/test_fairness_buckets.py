"""The probe's fairness records: a bucket's snapshots add up, a later snapshot of the same
bucket overwrites its records, a snapshot of the next bucket starts new ones (seed 002)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest

from probes.accounting.fairness import bucket_shares
from probes.cli import main
from probes.config import ProbeConfig
from probes.pipeline.analytics import demand_table
from probes.pipeline.fairness_buckets import add_snapshot, bucket_records

from ..conftest import DEMO

CONFIG = ProbeConfig.model_validate({"pool": {"name": "p"}, "fairness": {"bucket_s": 3600}})


def claims(*submitters: str) -> pd.DataFrame:
    """Running jobs of 2 cores, one per submitter given: ``g.u@p`` is user u of group g."""
    users = [s.split("@")[0].split(".")[-1] for s in submitters]
    groups = [s.split(".")[0] if "." in s else None for s in submitters]
    return pd.DataFrame({"submitter": list(submitters), "user": users, "group": groups, "cpus": 2.0})


def test_two_snapshots_of_a_bucket_are_bucket_shares_of_both() -> None:
    # a holds 4 cores then 2 (mean 3); b waits for 2 idle cores of 3 then holds 4 (mean 2 and 1)
    a, b = "g.a@p", "b@p"
    second = claims(a, b).assign(cpus=[2.0, 4.0])
    snaps = [
        (
            claims(a, a),
            pd.DataFrame({"request_cpus": [2.0], "count": [1], "submitter": [b], "user": ["b"], "group": [None]}),
        ),
        (second, pd.DataFrame({"request_cpus": [], "count": [], "submitter": [], "user": [], "group": []})),
    ]
    state = None
    for at, (alloc, idle) in zip((7200.0, 7500.0), snaps, strict=True):
        state = add_snapshot(state, alloc, idle, observed_at=at, bucket_s=3600.0)
    assert state == {
        "by": "submitter",
        "bucket_s": 3600.0,
        "bucket_start": 7200.0,
        "snapshots": 2,
        "allocation": {a: 6.0, b: 4.0},
        "demand": {b: 2.0},
        "names": {a: ["a", "g"], b: ["b", None]},
    }
    docs = bucket_records(state, CONFIG, probe="test")["fairness"].decoded()
    assert [(d["type"], d["name"], d["user"], d["group"]) for d in docs] == [
        ("submitter", b, "b", None),
        ("submitter", a, "a", "g"),
    ]
    assert [(d["allocation_cpus"], d["demand_cpus"], d["starved"]) for d in docs] == [
        (2.0, 1.0, False),
        (3.0, 0.0, False),
    ]
    assert [d["served"] for d in docs] == pytest.approx([2 / 3, 1.0], rel=1e-14)
    # the same as the command's bucket_shares over both snapshots at once
    allocations = pd.concat([c.assign(observed_at=t) for t, (c, _) in zip((7200.0, 7500.0), snaps, strict=True)])
    shares = bucket_shares(allocations, demand_table(snaps[0][1], 7200.0), bucket_s=3600.0, by="submitter")
    assert [d["served"] for d in docs] == pytest.approx(shares["served"].tolist(), rel=1e-14)
    # the next bucket starts over
    later = add_snapshot(state, snaps[1][0], snaps[1][1], observed_at=10800.0, bucket_s=3600.0)
    assert (later["bucket_start"], later["snapshots"], later["allocation"]) == (10800.0, 1, {a: 2.0, b: 4.0})
    # a bucket's sums per user (an earlier probe's checkpoint) are not added to: the bucket starts over
    old = {k: v for k, v in state.items() if k not in ("by", "names")} | {"allocation": {"a": 6.0}}
    fresh = add_snapshot(old, snaps[1][0], snaps[1][1], observed_at=7600.0, bucket_s=3600.0)
    assert (fresh["snapshots"], fresh["allocation"]) == (1, {a: 2.0, b: 4.0})


def shifted(source: Path, target: Path, seconds: int) -> Path:
    """The demo's status dump, observed ``seconds`` later."""
    text = re.sub(
        r"^(MyCurrentTime|LastHeardFrom) = (\d+)$",
        lambda m: f"{m[1]} = {int(m[2]) + seconds}",
        source.read_text(),
        flags=re.MULTILINE,
    )
    target.write_text(text)
    return target


def test_probe_once_writes_the_bucket_and_overwrites_it(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    config = tmp_path / "probe.toml"
    config.write_text(
        f'[pool]\nname = "demo"\ninterval_s = 300\n[sources]\nstatus_files = ["{DEMO / "status.ads"}"]\n'
        f'idle_files = ["{DEMO / "queue.ads"}"]\n[probe]\nstate_dir = "{tmp_path / "state"}"\n'
    )

    def fairness() -> list[dict[str, object]]:
        assert main(["records", "fairness", "--config", str(config), "--json"]) == 0
        return sorted(json.loads(capsys.readouterr().out), key=lambda d: (d["bucket_start"], d["name"]))

    assert main(["probe", "once", "--config", str(config)]) == 0
    capsys.readouterr()
    first = fairness()
    assert main(["fairness", "--config", str(config), "--json"]) == 0
    command = sorted(json.loads(capsys.readouterr().out)["shares"], key=lambda d: d["name"])
    keys = ("bucket_start", "name", "snapshots", "demand_cpus", "allocation_cpus", "served", "share_cpus", "starved")
    assert [{k: d[k] for k in keys} for d in first] == [{k: c[k] for k in keys} for c in command]
    assert [(d["name"], d["user"], d["group"], d["allocation_cpus"]) for d in first] == [
        ("group_atlas.bob@demo.fairacct", "bob", "group_atlas", 75),
        ("group_cms.alice@demo.fairacct", "alice", "group_cms", 170),
        ("group_cms.dave@demo.fairacct", "dave", "group_cms", 184),
        ("group_osg.carol@demo.fairacct", "carol", "group_osg", 16),
    ]
    # the same pool 10 minutes later: the same bucket (1795298400), its records overwritten
    for seconds, path in ((600, "later.ads"), (3600, "next-hour.ads")):
        dump = shifted(DEMO / "status.ads", tmp_path / path, seconds)
        assert main(["probe", "once", "--config", str(config), "--status-file", str(dump)]) == 0
        capsys.readouterr()
        if seconds == 600:
            again = fairness()
            assert [d["id"] for d in again] == [d["id"] for d in first]
            assert [d["snapshots"] for d in again] == [2] * 4
            assert [d["allocation_cpus"] for d in again] == [d["allocation_cpus"] for d in first]
    both = fairness()
    assert [(d["bucket_start"], d["snapshots"]) for d in both] == [(1795298400, 2)] * 4 + [(1795302000, 1)] * 4
