"""A sum that overflows is never stored as null nor exported as 0 in silence (issue 54, point 12):
two job records with a walltime of 1.5e308 (finite, their sum is not) summed to null in the
summary, 0.0 core-hours in the export, and /healthz said ok. From outside: the collector refuses
such records; records a store holds from before (an earlier collector took them) make the
summaries fail loudly (/healthz, ``fairacct summarize``) and the export refuse, in both stores."""

from __future__ import annotations

import time
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from collector.errors import SinkError
from collector.exports import Period, usage_table
from collector.sinks.sqlite import EmbeddedStore
from collector.summaries import summarize
from probes.cli import main

from .conftest import Collector, free_port, record

TOO_LARGE = "expected a number of magnitude at most 2^63 (9.223e+18: the summaries' sums of larger ones overflow)"


def legacy_jobs(day: date) -> list[dict[str, Any]]:
    """Two jobs of 1.5e308 s on one core, as a collector before the bound took them, and one of an hour."""
    stamp = f"{day}T12:00:00Z"
    return [
        {**record(i, "p1", timestamp=stamp, project="x"), "id": f"p1:{i}", "walltime_s": wall}
        for i, wall in ((1, 1.5e308), (2, 1.5e308), (3, 3600.0))
    ]


def test_the_collector_refuses_a_number_too_large_to_sum(shared_collector: Collector) -> None:
    c = shared_collector
    docs = [record(f"big-{i}", "p1", walltime_s=1.5e308) for i in range(2)] + [record("ok", "p1", walltime_s=3600.0)]
    reply = httpx.post(f"{c.url}/v1/records", json=docs, headers=c.auth("p1"))
    assert reply.status_code == 400, reply.text
    body = reply.json()
    assert body["accepted"] == 1 and [r["index"] for r in body["rejected"]] == [0, 1]
    assert body["rejected"][0]["reason"] == f"field 'walltime_s': {TOO_LARGE}, got 1.5e+308"


def test_a_store_holding_such_records_fails_its_summaries_loudly(tmp_path: Path) -> None:
    today = datetime.now(UTC).date()
    settings = {"flush_every_s": 0.2, "summaries_recent_days": 1, "summaries_nightly_days": 0}
    c = Collector(tmp_path, free_port(), {"p1": "token-one"}, settings)
    (tmp_path / "collector").mkdir()
    with EmbeddedStore(tmp_path / "collector" / "store.sqlite") as sink:
        sink.send("job", legacy_jobs(today))
    try:
        c.start()
        deadline = time.monotonic() + 60
        while not (doc := httpx.get(f"{c.url}/healthz").json())["summaries"]["failures"]:
            assert time.monotonic() < deadline, c.log
            time.sleep(0.1)
        assert doc["status"] == "degraded"
        [said] = doc["degraded"]
        assert said.startswith(
            f"the last summary run failed (1 so far): 1 group(s) of the records of {today} .. {today} sum past what a "
            f"number holds (job of {today}, user alice, project x: walltime_hours, core_hours): a record holds a value "
            "too large to sum"
        ), said
        assert 'fairacct_collector_summary_runs_total{outcome="failed"} 1' in httpx.get(f"{c.url}/metrics").text
    finally:
        c.stop()
    with EmbeddedStore(tmp_path / "collector" / "store.sqlite") as sink:
        assert sink.query("summary") == []  # no summary of null hours
    days = ("--from", str(today), "--to", str(today))
    assert main(["summarize", "--config", str(c.config), *days]) == 1
    assert main(["export", "--config", str(c.config), *days, "--raw", "--out", str(tmp_path / "x.csv")]) == 1
    assert not (tmp_path / "x.csv").exists()


def test_no_summary_of_an_overflowed_sum_is_written_and_the_export_refuses(
    empty_store: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """In both stores: the group that overflows keeps no null summary (Elasticsearch refused it
    whole before, and every summary of those days with it), its neighbours' are written, and the
    raw sums are refused rather than exported."""
    sink = empty_store
    day = date(2026, 1, 5)
    sink.send("job", [*legacy_jobs(day), {**legacy_jobs(day)[2], "id": "p1:4", "project": "y"}])
    with pytest.raises(SinkError, match=r"^1 group\(s\) of the records of 2026-01-05 \.\. 2026-01-05 sum past what"):
        summarize(sink, day, day, probe="t")
    summaries = [s for s in sink.query("summary") if s["record_kind"] == "job"]
    assert [(s["project"], s["n_jobs"], s["core_hours"]) for s in summaries] == [("y", 1, 1.0)]
    # and, in Elasticsearch, the products of walltime_s its weighted averages make NaN (gpu_hours, ...)
    said = r"^1 group\(s\) sum past what a number holds \(project x: walltime_hours, core_hours[\w, ]*\): a record "
    with pytest.raises(SinkError, match=said):
        usage_table(sink, Period(day, day), ["project"], raw=True)
