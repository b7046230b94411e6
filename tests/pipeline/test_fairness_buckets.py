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


def test_two_snapshots_of_a_bucket_are_bucket_shares_of_both() -> None:
    # a holds 4 cores then 2 (mean 3); b waits for 2 idle cores of 3 then holds 4 (mean 2 and 1)
    snaps = [
        (
            pd.DataFrame({"user": ["a", "a"], "cpus": [2.0, 2.0]}),
            pd.DataFrame({"request_cpus": [2.0], "count": [1], "users": ["b"]}),
        ),
        (
            pd.DataFrame({"user": ["a", "b"], "cpus": [2.0, 4.0]}),
            pd.DataFrame({"request_cpus": [], "count": [], "users": []}),
        ),
    ]
    state = None
    for at, (alloc, idle) in zip((7200.0, 7500.0), snaps, strict=True):
        state = add_snapshot(state, alloc, idle, observed_at=at, bucket_s=3600.0)
    assert state == {
        "bucket_s": 3600.0,
        "bucket_start": 7200.0,
        "snapshots": 2,
        "allocation": {"a": 6.0, "b": 4.0},
        "demand": {"b": 2.0},
    }
    docs = bucket_records(state, CONFIG, probe="test")["fairness"]
    assert [(d["name"], d["allocation_cpus"], d["demand_cpus"], d["starved"]) for d in docs] == [
        ("a", 3.0, 0.0, False),
        ("b", 2.0, 1.0, False),
    ]
    assert [d["served"] for d in docs] == pytest.approx([1.0, 2 / 3], rel=1e-14)
    # the same as the command's bucket_shares over both snapshots at once
    allocations = pd.concat([a.assign(observed_at=t) for t, (a, _) in zip((7200.0, 7500.0), snaps, strict=True)])
    shares = bucket_shares(allocations, demand_table(snaps[0][1], 7200.0), bucket_s=3600.0)
    assert [d["served"] for d in docs] == pytest.approx(shares["served"].tolist(), rel=1e-14)
    # the next bucket starts over
    later = add_snapshot(state, snaps[1][0], snaps[1][1], observed_at=10800.0, bucket_s=3600.0)
    assert (later["bucket_start"], later["snapshots"], later["allocation"]) == (10800.0, 1, {"a": 2.0, "b": 4.0})


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
    assert [(d["name"], d["allocation_cpus"]) for d in first] == [
        ("alice", 170), ("bob", 75), ("carol", 16), ("dave", 184),
    ]  # fmt: skip
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
