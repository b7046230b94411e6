"""Checkpoint rules: where a history was read up to, and what a snapshot stands for."""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest

from probes.sources.checkpoints import checkpoint_key, history_key, new_jobs, new_schedd_jobs, snapshot_interval


@pytest.mark.parametrize(
    ("last", "now", "expected"),
    [(None, 1000.0, (300.0, 0.0)), ({"at": 700.0}, 1000.0, (300.0, 0.0)), ({"at": 720.0}, 1000.0, (280.0, 0.0)),
     ({"at": 675.0}, 1000.0, (325.0, 0.0)), ({"at": 500.0}, 1000.0, (300.0, 200.0)),
     ({"at": 0.0}, 5000.0, (300.0, 4700.0)), ({"at": 2000.0}, 1000.0, None), ({"at": 1000.0}, 1000.0, None)],
)  # fmt: skip
def test_a_snapshot_never_stands_for_a_hole(
    last: dict[str, float] | None, now: float, expected: tuple[float, float] | None
) -> None:
    """(what it stands for, unobserved before it): the whole time since the last one within a
    tenth of a cadence of it (the scheduler's lateness), else the cadence and the rest unobserved."""
    assert snapshot_interval(last, now, interval_s=300.0) == expected


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


def _answer(*jobs: tuple[str, float]) -> pd.DataFrame:
    """A schedd's answer, newest first in its history file: (job id, end time) per job."""
    return pd.DataFrame({"job_id": [j for j, _ in jobs], "end": [e for _, e in jobs]})


_MARK = {"end": 50.0, "ids": ["b"], "tail": ["b", "a"]}


@pytest.mark.parametrize(
    ("answer", "checkpoint", "fresh", "mark", "problem"),
    [
        # the first pass: everything, positioned at the file's end
        (_answer(("b", 50.0), ("a", 10.0)), None, ["b", "a"], {"end": 50.0, "ids": ["b"], "tail": ["b", "a"]}, None),
        # jobs written after the position are new, whenever they ended; the position moves to the end
        (_answer(("d", 20.0), ("c", 60.0), ("b", 50.0)), _MARK, ["d", "c"],
         {"end": 60.0, "ids": ["c"], "tail": ["d", "c"]}, None),
        (_answer(("d", 50.0), ("b", 50.0)), _MARK, ["d"], {"end": 50.0, "ids": ["b", "d"], "tail": ["d", "b"]}, None),
        (_answer(("b", 50.0)), _MARK, [], _MARK, None),
        # a job answered twice is taken once, at its newest place
        (_answer(("d", 70.0), ("d", 70.0), ("b", 50.0)), _MARK, ["d"],
         {"end": 70.0, "ids": ["d"], "tail": ["d", "b"]}, None),
        # past the position it was asked to stop at: right all the same, and said
        (_answer(("c", 60.0), ("b", 50.0), ("a", 10.0)), _MARK, ["c"], {"end": 60.0, "ids": ["c"], "tail": ["c", "b"]},
         "vm: its history went on past job a"),
        # the position is gone: rotated away (all it holds is new), or rewritten (by end time)
        (_answer(("d", 20.0), ("c", 60.0)), _MARK, ["d", "c"], {"end": 60.0, "ids": ["c"], "tail": ["d", "c"]},
         "vm: its history no longer holds job b, where the last pass stopped (rotated away"),
        (_answer(("c", 60.0), ("x", 50.0), ("b", 50.0)), {**_MARK, "tail": ["gone", "a"]}, ["c", "x"],
         {"end": 60.0, "ids": ["c"], "tail": ["c", "x"]},
         ("vm: its history no longer holds job gone, where the last pass stopped, but holds jobs read before it: "
          "the history was rewritten; only jobs that ended after 50 were taken")),
        # an older probe's checkpoint: its own rule, once; then a position
        (_answer(("d", 20.0), ("c", 60.0), ("b", 50.0), ("a", 10.0)), {"end": 50.0, "ids": ["b"]}, ["c"],
         {"end": 60.0, "ids": ["c"], "tail": ["d", "c"]}, None),
        (_answer(), {"end": 50.0, "ids": ["b"]}, [], {"end": 50.0, "ids": ["b"]}, None),
    ],
)  # fmt: skip
def test_new_schedd_jobs(
    answer: pd.DataFrame, checkpoint: dict[str, Any] | None, fresh: list[str], mark: dict[str, Any], problem: str | None
) -> None:
    got, advanced, said = new_schedd_jobs(answer, checkpoint, schedd="vm")
    assert got["job_id"].tolist() == fresh and advanced == mark
    assert (said is None) if problem is None else (said is not None and said.startswith(problem)), said
