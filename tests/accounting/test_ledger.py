"""The fairshare usage ledger, and the fairshare records of a window built from it."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from probes.accounting.fairshare import job_usage
from probes.accounting.ledger import ledger_add, ledger_rewindow
from probes.config import parse_config
from probes.pipeline.priority import fairshare_state, windowed_ledger
from probes.pipeline.records import fairshare_docs
from probes.sources.checkpoints import LEDGER_KEY, ROLLED_KEY, WINDOWS_KEY, fairshare_windows

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
    docs = {(d["type"], d["name"]): d for d in fairshare_docs(rows, W0, config, probe="test").decoded()}
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
    docs = {(d["type"], d["name"]): d["usage"] for d in fairshare_docs(old, W0, config, probe="test").decoded()}
    assert docs == {("user", "alice"): 3600, ("group", "group_cms"): 3600}


T0 = 1795449600.0  # a multiple of 1800, 3600 and 7200 s since the epoch
HOURLY = [
    [T0, "alice", None, None, None, None, "alice@p", 100.0],
    [T0 + 3600, "alice", None, None, None, None, "alice@p", 50.0],
    [T0 + 3600, "bob", None, None, None, None, "bob@p", 30.0],
]


def test_a_ledger_rewindowed_to_wider_windows_is_exact() -> None:
    assert ledger_rewindow(HOURLY, 3600, 7200) == [
        [T0, "alice", None, None, None, None, "alice@p", 150.0],
        [T0, "bob", None, None, None, None, "bob@p", 30.0],
    ]
    assert ledger_rewindow(HOURLY, 3600, 3600) == HOURLY


def test_a_ledger_rewindowed_to_narrower_windows_spreads_each_window_evenly() -> None:
    rows = ledger_rewindow(HOURLY, 3600, 1800)
    assert [(r[0] - T0, r[1], r[-1]) for r in rows] == [
        (0.0, "alice", 50.0), (1800.0, "alice", 50.0),
        (3600.0, "alice", 25.0), (3600.0, "bob", 15.0), (5400.0, "alice", 25.0), (5400.0, "bob", 15.0),
    ]  # fmt: skip
    # windows that do not nest (an hour into 5400 s windows: T0 is 1795449600 = 332490.666... x 5400)
    odd = ledger_rewindow(HOURLY[:1], 3600, 5400)
    assert sum(r[-1] for r in odd) == pytest.approx(100.0) and len(odd) == 2


def test_a_changed_window_width_rewindows_the_ledger_and_its_roll_mark() -> None:
    stored = {WINDOWS_KEY: {"interval_s": 3600.0}, LEDGER_KEY: HOURLY, ROLLED_KEY: {"window_start": T0}}
    now = T0 + 7200.0
    assert fairshare_windows(stored.get, 3600.0, now=now) == {}
    marks = fairshare_windows(stored.get, 7200.0, now=now)
    assert marks[WINDOWS_KEY] == {"interval_s": 7200.0}
    assert marks[LEDGER_KEY] == ledger_rewindow(HOURLY, 3600, 7200)
    # the hour [T0, T0 + 3600) was rolled: the last 2-hour window ended by then is [T0 - 7200, T0)
    assert marks[ROLLED_KEY] == {"window_start": T0 - 7200}
    # a ledger from before the width was written down: taken as counted in the configured windows
    assert fairshare_windows({LEDGER_KEY: HOURLY}.get, 3600.0, now=now) == {WINDOWS_KEY: {"interval_s": 3600.0}}


def test_after_a_change_of_windows_the_fairshare_is_not_zeroed() -> None:
    """Daily windows changed to hourly ones at noon (depth 8): read as they were, the day's row
    lies before the 8 hours and every credential's usage is 0, which the next priority sync
    acted on. Re-windowed, the day's usage so far is spread over its 12 hours: 8 of them count."""
    day = T0 - T0 % 86400
    daily = [[day, "alice", None, None, None, None, "alice@p", 1200.0],
             [day, "bob", None, None, None, None, "bob@p", 600.0]]  # fmt: skip
    config = parse_config({"fairshare": {"interval_s": 3600, "depth": 8}})
    now = day + 12 * 3600 + 600
    bare = fairshare_state(config, daily, now=now)
    assert bare.loc[bare["type"] == "user", "decayed"].sum() == 0.0
    stored = {WINDOWS_KEY: {"interval_s": 86400.0}, LEDGER_KEY: daily}
    state = fairshare_state(config, windowed_ledger(stored.get, config, now=now), now=now)
    users = state[state["type"] == "user"].set_index("name")["decayed"]
    # 1200 over the 12 h 10 min to now, 8 of those windows in the state (the current one partly)
    assert users["alice"] == pytest.approx(1200.0 * (7 * 3600 + 600) / (12 * 3600 + 600))
    assert users["bob"] == pytest.approx(users["alice"] / 2)
