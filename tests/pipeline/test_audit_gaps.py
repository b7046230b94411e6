"""``fairacct audit`` across gaps: each run counted once however many observed segments it
overlaps, and what the job records say ran inside the gaps named per submitter, at no more
than what ran there (issue 51, point 12).

The timeline, the samples and the stores are :mod:`tests.pipeline.test_audit`'s: the window
``[300, 3000)`` after T0, snapshots every 60 s, those at 1200, 1260 and 2400 dropped, so the
observed segments are ``[300, 1140)``, ``[1260, 2340)`` and ``[2400, 3000)`` and the gaps
``[1140, 1260)`` and ``[2340, 2400)``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from collector.books import holes, job_core_seconds, unobserved_only
from collector.records import table_docs
from collector.sinks.sqlite import EmbeddedStore
from probes.cli import main
from probes.pipeline.audit import audit
from tests.collector.conftest import osmem_server  # noqa: F401 - the session's server, its pipe closed at the end
from tests.pipeline.test_audit import T0, config, fill, open_store, records

DROPPED = frozenset({20, 21, 40})


@pytest.fixture(params=["sqlite", "osmem"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    sink = open_store(request, tmp_path)
    yield sink
    sink.close()


def carol_swallowed(sink: Any, *, runs: bool) -> None:
    """carol's job of 1 core over [1150, 1250]: inside the first gap, no snapshot saw it. With
    ``runs``, its record has the run fields (ran_from, ran_to, runs) the history gives."""
    job = {"job_id": "s#6.0#1", "submitter": "carol@pool", "user": "carol", "site": "SiteA", "cpus": 1.0,
           "start": T0 + 1150, "end": T0 + 1250, "walltime_s": 100.0}  # fmt: skip
    if runs:
        job |= {"runs": 1, "first_start": T0 + 1150, "earlier_s": 0.0, "ran_from": T0 + 1150, "ran_to": T0 + 1250}
    assert not sink.send("job", table_docs("job", pd.DataFrame([job]), probe="p")).rejected


def fill_with_runs(sink: Any) -> None:
    """The samples but those dropped, and the timeline's job records with the run fields the
    history gives: one run each, its wall time its span."""
    for kind, docs in records(DROPPED).items():
        if kind == "job":
            jobs = pd.DataFrame(docs)[["job_id", "submitter", "user", "site", "cpus", "start", "end", "walltime_s"]]
            docs = table_docs(
                "job", jobs.assign(runs=1, first_start=jobs["start"], earlier_s=0.0, ran_from=jobs["start"],
                                   ran_to=jobs["end"]), probe="p"
            )  # fmt: skip
        assert not sink.send(kind, docs).rejected


@pytest.mark.parametrize("runs", [False, True], ids=["start-end", "ran_from-ran_to"])
def test_a_job_across_gaps_is_counted_once_and_its_loss_is_named(store: Any, runs: bool) -> None:
    if runs:
        fill_with_runs(store)
    else:
        fill(store, dropped=DROPPED)
    carol_swallowed(store, runs=runs)
    report = audit(store, config(), T0 + 300, T0 + 3000, lag_s=0.0)
    books = report.submitters.set_index("submitter")
    # alice: job 1 [100, 1000] in the first segment, job 2 [1010, 2500] in all three: 2 jobs,
    # not 4 (one a segment); bob [250, 3300] in all three: 1 job, not 3
    assert list(books["jobs"]) == [2, 1, 1, 1] and list(books["runs"]) == [2, 1, 1, 1]  # alice, bob, carol, dave
    # the bound: cores x runs x 60 s, each run once: alice 2 x 2 x 60, bob 4 x 1 x 60, carol's
    # job at [2990, 3010] and dave's at [400, 430] 1 x 60 (carol's job in the gap: in no segment)
    assert list(books["bound_core_hours"] * 3600) == pytest.approx([240.0, 240.0, 60.0, 60.0])
    # the loss behind the gaps, per submitter: alice's job 2 (2 cores) ran 120 s + 60 s in them,
    # bob's (4 cores) 180 s; carol's job ran there whole, 100 s (it ended inside the gap: not
    # its 120 s); dave ran in none
    assert list(books["unobserved_core_hours"] * 3600) == pytest.approx([360.0, 720.0, 100.0, 0.0])
    assert list(books["unobserved_jobs"]) == [1, 1, 1, 0]
    assert report.unobserved_core_hours == pytest.approx(1180 / 3600)
    # what was observed is as before: carol's job at [2990, 3010] ran 10 s of the window
    assert books.loc["carol@pool", "used_core_hours"] == pytest.approx(10 / 3600)
    assert report.beyond == 0


def test_counts_replace_the_segments_counts_and_keep_the_core_seconds() -> None:
    # one submitter's sums over two segments [0, 10) and [20, 30): a job of 2 cores over [5, 25]
    # is in both (5 + 5 s inside), another of 1 core over [22, 24] in the second only
    first = pd.DataFrame({"submitter": ["a"], "site": ["S"], "jobs": [1], "cores": [2.0], "cores_start": [10.0],
                          "cores_end": [50.0], "core_runs": [2.0], "runs": [1]})  # fmt: skip
    second = pd.DataFrame({"submitter": ["a", "a"], "site": ["S", "S"], "jobs": [1, 1], "cores": [2.0, 1.0],
                           "cores_start": [10.0, 22.0], "cores_end": [50.0, 24.0], "core_runs": [2.0, 1.0],
                           "runs": [1, 1]})  # fmt: skip
    parts = [(first, 0.0, 10.0, False, True), (second.iloc[:1], 20.0, 30.0, True, False),
             (second.iloc[1:], 20.0, 30.0, False, False)]  # fmt: skip
    per_segment = job_core_seconds(parts)
    assert float(per_segment["used_core_s"].iloc[0]) == 2 * 5 + 2 * 5 + 2  # (10 - 5) + (25 - 20) and 24 - 22
    assert int(per_segment["jobs"].iloc[0]) == 3  # the job across the gap twice
    counts = pd.DataFrame({"submitter": ["a"], "site": ["S"], "jobs": [2], "cores": [3.0], "core_runs": [3.0],
                           "runs": [2]})  # fmt: skip
    once = job_core_seconds(parts, counts)
    assert float(once["used_core_s"].iloc[0]) == 22.0
    assert (int(once["jobs"].iloc[0]), float(once["core_runs"].iloc[0]), int(once["runs"].iloc[0])) == (2, 3.0, 2)


def test_the_holes_are_the_window_outside_the_segments() -> None:
    segments = pd.DataFrame({"start": [300.0, 1260.0, 2400.0], "end": [1140.0, 2340.0, 2900.0]})
    got = holes(segments, 100.0, 3000.0)
    assert got.to_dict("list") == {"start": [100.0, 1140.0, 2340.0, 2900.0], "end": [300.0, 1260.0, 2400.0, 3000.0]}
    assert holes(pd.DataFrame({"start": [], "end": []}), 0.0, 5.0).to_dict("list") == {"start": [0.0], "end": [5.0]}


def test_the_command_names_the_loss_behind_the_gaps(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with EmbeddedStore(tmp_path / "state" / "fairacct.sqlite") as sink:
        fill(sink, dropped=DROPPED)
        carol_swallowed(sink, runs=True)
    cfg = tmp_path / "audit.toml"
    cfg.write_text(
        '[pool]\nname = "synthetic"\ninterval_s = 60\nmax_interval_s = 120\n'
        f'[probe]\nstate_dir = "{tmp_path / "state"}"\n'
    )
    window = ("--from", str(T0 + 300), "--to", str(T0 + 3000), "--lag-s", "0")
    assert main(["audit", "--config", str(cfg), *window]) == 0
    assert "3 submitter rows ran 0.3278 core-hours in the gaps, unchecked" in capsys.readouterr().out  # 1180 core-s
    assert main(["audit", "--config", str(cfg), *window, "--json"]) == 0
    rows = {r["submitter"]: r for r in json.loads(capsys.readouterr().out)["submitters"]}
    assert rows["carol@pool"]["unobserved_jobs"] == 1 and rows["carol@pool"]["unobserved_core_hours"] == pytest.approx(
        100 / 3600
    )


def test_a_row_of_nothing_but_a_loss_in_the_gaps_is_told_apart() -> None:
    books = pd.DataFrame(
        {
            "submitter": ["alice", "carol", "dave"],
            "site": ["S", "S", "S"],
            "held_core_hours": [1.0, 0.0, 0.0],
            "claimed_core_hours": [0.0, 0.0, 0.0],
            "used_core_hours": [1.0, 0.0, 0.0],
            "bound_core_hours": [0.1, 0.0, 0.0],
            "jobs": [3, 0, 0],
            "unobserved_core_hours": [0.5, 0.25, 0.0],
        }
    )
    # alice's rows compares jobs besides her loss; carol's holds her loss alone; dave's nothing at all
    assert unobserved_only(books).tolist() == [False, True, False]
