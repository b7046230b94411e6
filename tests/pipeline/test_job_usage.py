"""Job records with their usage under the penalty and under cores only (seed 000), priced
against the pool's machine classes where the records are built, and summed by the summaries:
a hand-checked case."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from collector.sinks.sqlite import EmbeddedStore
from collector.summaries import summarize
from probes.accounting.machines import machines_table
from probes.config import ProbeConfig
from probes.pipeline.cycle import history_step
from probes.pipeline.reading import Reading
from probes.pipeline.records import job_docs
from probes.pipeline.usage import priced_usage

END = 1_768_046_400.0  # 2026-01-10T12:00:00Z

# small: 4 nodes of 8 cores, 16 GiB, cost 1; fat: 1 node of 16 cores, 128 GiB, cost 1.5 (MiB)
MACHINES = machines_table([
    {"name": "small", "count": 4, "cpus": 8, "memory": 16384, "speed": 1.0, "node_cost": 1.0},
    {"name": "fat", "count": 1, "cpus": 16, "memory": 131072, "speed": 2.0, "node_cost": 1.5},
])  # fmt: skip


def jobs() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "job_id": ["schedd#1.0#1", "schedd#2.0#1"], "end": [END, END + 60], "user": "alice",
            "cpus": [2.0, 1.0], "memory": [8192.0, 65536.0], "disk": 1024.0, "gpus": 0.0, "n_hosts": 1,
            "queue": None, "walltime_s": [3600.0, 7200.0], "speed": np.nan, "host": None,
        }
    )  # fmt: skip


def test_jobs_are_priced_by_hand() -> None:
    # job 1 (2 cores, 8 GiB, 1 h): small max(2/8, 8/16) x 8 x 1 = 4, fat max(2/16, 8/128) x 16 x 1.5 = 3:
    #   the cheaper, 3 PE x 3600 s (host unknown: speed 1) = 10,800; cores only 2 x 3600 = 7,200
    # job 2 (1 core, 64 GiB, 2 h): fits fat only, max(1/16, 64/128) x 16 x 1.5 = 12 PE x 7200 s = 86,400;
    #   cores only 1 x 7200 = 7,200
    out = priced_usage(jobs(), MACHINES, ProbeConfig())
    assert out["penalty_usage"].tolist() == pytest.approx([10_800.0, 86_400.0])
    assert out["cpu_only_usage"].tolist() == pytest.approx([7_200.0, 7_200.0])
    assert priced_usage(jobs(), None, ProbeConfig()).columns.tolist() == jobs().columns.tolist()  # no classes yet


def test_job_records_carry_them_and_summaries_sum_them(tmp_path: Path) -> None:
    records = job_docs(priced_usage(jobs(), MACHINES, ProbeConfig()), probe="test")
    assert [(d["penalty_usage"], d["cpu_only_usage"]) for d in records["job"].decoded()] == [
        (10_800.0, 7_200.0),
        (86_400.0, 7_200.0),
    ]
    unpriced = history_step(Reading(jobs=jobs()), None, ProbeConfig(), probe="test", now=END).batch.records
    assert not any("penalty_usage" in d for d in unpriced["job"].decoded())  # no snapshot: no machines to price against
    with EmbeddedStore(tmp_path / "store.sqlite") as store:
        store.send_encoded("job", records["job"])
        summarize(store, date(2026, 1, 10), date(2026, 1, 10), probe="test", kinds=["job"])
        [summary] = store.query("summary")
    assert (summary["user"], summary["penalty_hours"], summary["cpu_only_hours"]) == (
        "alice",
        27.0,
        4.0,
    )  # (10,800 + 86,400) / 3600
