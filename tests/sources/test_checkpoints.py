"""Checkpoint rules: where a history was read up to, and what a snapshot stands for."""

from __future__ import annotations

import pandas as pd
import pytest

from probes.config import ProbeConfig
from probes.sources.checkpoints import checkpoint_key, history_key, new_jobs, snapshot_interval


@pytest.mark.parametrize(
    ("last", "now", "expected"),
    [(None, 1000.0, (300.0, 0.0)), ({"at": 700.0}, 1000.0, (300.0, 0.0)), ({"at": 500.0}, 1000.0, (500.0, 0.0)),
     ({"at": 100.0}, 1000.0, (900.0, 0.0)), ({"at": 0.0}, 5000.0, (300.0, 4700.0)),
     ({"at": 2000.0}, 1000.0, None), ({"at": 1000.0}, 1000.0, None)],
)  # fmt: skip
def test_snapshot_interval(last: dict[str, float] | None, now: float, expected: tuple[float, float] | None) -> None:
    """(what it stands for, unobserved before it); after a gap longer than max_interval_s the
    nominal interval and the rest unobserved; a replay: None, the caller skips it."""
    assert (
        snapshot_interval(
            last, now, interval_s=ProbeConfig().pool.interval_s, max_interval_s=ProbeConfig().pool.max_interval_s
        )
        == expected
    )


def test_new_jobs_at_the_same_second_are_neither_skipped_nor_doubled() -> None:
    jobs = pd.DataFrame({"job_id": ["a", "b", "c"], "end": [10.0, 20.0, 20.0]})
    fresh, mark = new_jobs(jobs, None)
    assert len(fresh) == 3 and mark == {"end": 20.0, "ids": ["b", "c"]}
    later = pd.DataFrame({"job_id": ["a", "b", "c", "d", "e"], "end": [10.0, 20.0, 20.0, 20.0, 30.0]})
    fresh, mark = new_jobs(later, mark)
    assert fresh["job_id"].tolist() == ["d", "e"] and mark == {"end": 30.0, "ids": ["e"]}
    fresh, same = new_jobs(later, mark)
    assert fresh.empty and same == mark


def test_checkpoint_names() -> None:
    assert history_key("/var/lib/condor/spool/history") == "history:/var/lib/condor/spool/history"
    assert checkpoint_key("schedd@cm.example.org") == "history:schedd:schedd@cm.example.org"
