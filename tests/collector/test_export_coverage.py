"""The days before the summaries' horizon whose summaries do not count their records
(collector/exports/coverage.py), in both stores: the embedded one and osmem-server."""

from __future__ import annotations

from datetime import date
from typing import Any

from collector.exports import Period
from collector.exports.coverage import Uncovered, uncovered_days
from collector.summaries import summarize


def _records(kind: str, day: str, n: int) -> list[dict[str, Any]]:
    return [
        {"id": f"{kind}-{day}-{i}", "kind": kind, "schema_version": 1, "probe": "p", "timestamp": f"{day}T10:00:00Z",
         "user": "alice", "site": "S", "cpus": 1.0, "walltime_s": 60.0, "interval_s": 300.0, "total_cpus": 8.0}
        for i in range(n)
    ]  # fmt: skip


def test_days_before_the_horizon_whose_summaries_miss_records(empty_store: Any) -> None:
    sink = empty_store
    sink.send(
        "job", _records("job", "2026-01-02", 4) + _records("job", "2026-01-03", 2) + _records("job", "2026-01-05", 1)
    )
    sink.send("slot", _records("slot", "2026-01-03", 3))
    summarize(sink, date(2026, 1, 3), date(2026, 1, 3), probe="t")  # the 3rd only, both kinds
    sink.send("slot", _records("slot", "2026-01-03", 5)[3:])  # two slot records of the 3rd after it was summarized
    period = Period(date(2026, 1, 1), date(2026, 1, 10))
    assert uncovered_days(sink, period, horizon=date(2026, 1, 5)) == [
        Uncovered(date(2026, 1, 2), "job", 4, 0),
        Uncovered(date(2026, 1, 3), "slot", 5, 3),
    ]  # the 5th is within the horizon: its summaries are the service's to make
    assert str(Uncovered(date(2026, 1, 3), "slot", 5, 3)) == "2026-01-03: 5 slot records, 3 summarized"
    assert uncovered_days(sink, period, horizon=date(2026, 1, 1)) == []  # every day within
    summarize(sink, date(2026, 1, 1), date(2026, 1, 10), probe="t")
    assert uncovered_days(sink, period, horizon=date(2026, 12, 1)) == []  # every day summarized as it is
