"""The fairshare usage ledger, and the fairshare records of a window built from it."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from probes.accounting.fairshare import job_usage
from probes.accounting.ledger import ledger_add
from probes.config import parse_config
from probes.pipeline.records import fairshare_docs

W0 = 1795266000.0  # a multiple of 3600


def test_the_ledger_and_the_fairshare_records_of_a_window() -> None:
    config = parse_config({"fairshare": {"interval_s": 3600, "depth": 2, "targets": {"user": {"alice": "50"}}}})
    jobs = pd.DataFrame(
        {"user": ["alice", "bob"], "group": ["group_cms", "group_cms"], "project": [None, None], "queue": [None, None],
         "qos": [None, None], "submitter": ["group_cms.alice@pool", "group_cms.bob@pool"],
         "end": [W0 + 1800, W0 + 600], "walltime_s": [3600.0, 600.0], "cpus": [2.0, 1.0], "n_hosts": [1, 1]}
    )  # fmt: skip
    rows = ledger_add([], jobs, job_usage(jobs, "dedicated_ps"), now=W0 + 3000, interval_s=3600, depth=2)
    assert rows == [
        [W0 - 3600, "alice", "group_cms", None, None, None, "group_cms.alice@pool", 3600.0],
        [W0, "alice", "group_cms", None, None, None, "group_cms.alice@pool", 3600.0],
        [W0, "bob", "group_cms", None, None, None, "group_cms.bob@pool", 600.0],
    ]
    assert ledger_add(rows, jobs.iloc[1:], np.array([600.0]), now=W0 + 3000, interval_s=3600, depth=2)[2][-1] == 1200.0
    docs = {(d["type"], d["name"]): d for d in fairshare_docs(rows, W0, config, probe="test")}
    assert set(docs) == {
        ("user", "alice"), ("user", "bob"), ("group", "group_cms"),
        ("submitter", "group_cms.alice@pool"), ("submitter", "group_cms.bob@pool"),
    }  # fmt: skip
    assert docs["submitter", "group_cms.alice@pool"]["decayed"] == docs["user", "alice"]["decayed"]
    alice = docs["user", "alice"]
    assert (alice["usage"], alice["total"], alice["decayed"]) == (3600, 4200, 7200)
    assert alice["effective"] == pytest.approx(7200 / 7800) and alice["priority"] == pytest.approx(
        50 - 100 * 7200 / 7800
    )
    assert (alice["window_start_iso"], alice["window_end_iso"], alice["policy"], alice["kind"]) == (
        "2026-11-21T13:00:00Z", "2026-11-21T14:00:00Z", "dedicated_ps", "fairshare"
    )  # fmt: skip
    assert docs["group", "group_cms"]["usage"] == 4200 and np.isnan(docs["user", "bob"]["target"] or np.nan)


def test_the_ledger_counts_each_job_once_by_id() -> None:
    from probes.accounting.ledger import ledger_count

    jobs = pd.DataFrame(
        {"job_id": ["s#1.0#1", "s#2.0#1", "s#1.0#1", None], "user": ["alice", "bob", "alice", "carol"],
         "end": [W0 + 600, W0 + 700, W0 + 600, W0 + 800], "walltime_s": [0.0] * 4}
    )  # fmt: skip
    usage = np.array([10.0, 20.0, 10.0, 5.0])
    rows, counted = ledger_count([], {}, jobs, usage, now=W0 + 3000, interval_s=3600, depth=2)
    assert sum(r[-1] for r in rows) == 35.0  # the duplicate once; the job without an id counted
    assert counted == {"s#1.0#1": W0 + 600, "s#2.0#1": W0 + 700}
    again, same = ledger_count(rows, counted, jobs, usage, now=W0 + 3000, interval_s=3600, depth=2)
    assert sum(r[-1] for r in again) == 40.0 and same == counted  # only the id-less job again
    # two windows later both have left the ledger's horizon: their ids are forgotten
    _, later = ledger_count(again, same, jobs.iloc[:0], usage[:0], now=W0 + 3 * 3600, interval_s=3600, depth=2)
    assert later == {}


def test_a_ledger_of_an_earlier_probe_keeps_its_usage_without_a_submitter() -> None:
    """Rows written before the submitter credential existed (one column fewer) still count: for
    every credential they name, and for no submitter."""
    config = parse_config({"fairshare": {"interval_s": 3600, "depth": 2}})
    old = [[W0, "alice", "group_cms", None, None, None, 3600.0]]
    jobs = pd.DataFrame(
        {"user": ["alice"], "submitter": ["group_cms.alice@pool"], "end": [W0 + 600], "walltime_s": [600.0],
         "cpus": [1.0], "n_hosts": [1]}
    )  # fmt: skip
    rows = ledger_add(old, jobs, np.array([600.0]), now=W0 + 3000, interval_s=3600, depth=2)
    assert rows == [
        [W0, "alice", "group_cms", None, None, None, None, 3600.0],
        [W0, "alice", None, None, None, None, "group_cms.alice@pool", 600.0],
    ]
    docs = {(d["type"], d["name"]): d["usage"] for d in fairshare_docs(old, W0, config, probe="test")}
    assert docs == {("user", "alice"): 3600, ("group", "group_cms"): 3600}
