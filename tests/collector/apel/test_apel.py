"""APEL messages from the store, read back under APEL's own rules.

The parser below is written from APEL's record definitions (apel/apel,
``apel/db/records/normalised_summary.py``, ``sync.py``, ``job.py``) independently of
collector/apel: the header names the record kind; every field is one of its fields; the
mandatory fields are there; integer fields are whole numbers (v0.4's normalised times a
``{benchmark: integer}``); Month is 1..12 and not in the future; durations are not negative;
EarliestEndTime <= LatestEndTime, both inside the month. Every fixture history and the GRACC
conformance records go through a store (the embedded one and osmem-server), and the
messages' totals are checked against the store's daily summaries and against hand sums.
"""

from __future__ import annotations

import calendar
import math
import re
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from dirq.QueueSimple import QueueSimple

from collector.apel import KINDS, ApelOptions, apel_months, deliver, job_records, render
from collector.apel.grouping import NOT_BATCH
from collector.gratia import envelope_docs
from collector.sinks import Sink
from collector.summaries import summarize
from probes.pipeline.records import job_docs
from probes.sources.history import read_history
from tests.collector.gratia.conftest import PAIRS, envelope, pair

# -- APEL's rules, as the test reads them ----------------------------------------------------------

_SUMMARY = {
    "fields": {
        "Site", "Month", "Year", "GlobalUserName", "VO", "VOGroup", "VORole", "SubmitHost", "Infrastructure",
        "NodeCount", "Processors", "EarliestEndTime", "LatestEndTime", "WallDuration", "CpuDuration",
        "NormalisedWallDuration", "NormalisedCpuDuration", "NumberOfJobs",
    },
    "mandatory": {"Site", "Month", "Year", "WallDuration", "CpuDuration", "NormalisedWallDuration",
                  "NormalisedCpuDuration", "NumberOfJobs"},
    "integers": {"Month", "Year", "NodeCount", "Processors", "WallDuration", "CpuDuration", "NormalisedWallDuration",
                 "NormalisedCpuDuration", "NumberOfJobs", "EarliestEndTime", "LatestEndTime"},
}  # fmt: skip
RULES: dict[str, dict[str, Any]] = {
    "APEL-summary-job-message: v0.3": _SUMMARY,
    "APEL-normalised-summary-message: v0.4": {**_SUMMARY, "dicts": {"NormalisedWallDuration", "NormalisedCpuDuration"}},
    "APEL-sync-message: v0.1": {
        "fields": {"Site", "SubmitHost", "NumberOfJobs", "Month", "Year"},
        "mandatory": {"Site", "NumberOfJobs", "Month", "Year"},
        "integers": {"NumberOfJobs", "Month", "Year"},
    },
    "APEL-individual-job-message: v0.3": {
        "fields": {
            "Site", "SubmitHost", "MachineName", "Queue", "LocalJobId", "LocalUserId", "GlobalUserName", "FQAN", "VO",
            "VOGroup", "VORole", "WallDuration", "CpuDuration", "Processors", "NodeCount", "StartTime", "EndTime",
            "InfrastructureDescription", "InfrastructureType", "MemoryReal", "MemoryVirtual", "ServiceLevelType",
            "ServiceLevel",
        },
        "mandatory": {"Site", "LocalJobId", "WallDuration", "CpuDuration", "StartTime", "EndTime"},
        "integers": {"WallDuration", "CpuDuration", "Processors", "NodeCount", "StartTime", "EndTime"},
    },
}  # fmt: skip
_INT = re.compile(r"-?[0-9]+")
_DICT = re.compile(r"\{(HEPscore23|HEPSPEC|hepspec|si2k): ([0-9]+)\}")


def parse(text: str) -> tuple[str, list[dict[str, Any]]]:
    """A message's header and records, each field checked under APEL's rules (AssertionError)."""
    header, _, body = text.partition("\n")
    assert header in RULES, f"unknown header {header!r}"
    rules = RULES[header]
    assert body.rstrip().endswith("%%"), "the last record is not ended by %%"
    records = []
    for n, chunk in enumerate(body.split("%%\n")):
        if not chunk.strip():
            continue
        record: dict[str, Any] = {}
        for line in chunk.strip().splitlines():
            name, sep, value = line.partition(": ")
            assert sep and name in rules["fields"], f"record {n}: unknown field line {line!r}"
            assert name not in record, f"record {n}: {name} twice"
            if name in rules.get("dicts", ()):
                m = _DICT.fullmatch(value)
                assert m, f"record {n}: {name} is not a {{benchmark: integer}}: {value!r}"
                value = int(m.group(2))
            elif name in rules["integers"]:
                assert _INT.fullmatch(value), f"record {n}: {name} is not an integer: {value!r}"
                value = int(value)
            elif name == "ServiceLevel":
                value = float(value)
            record[name] = value
        missing = rules["mandatory"] - set(record)
        assert not missing, f"record {n}: mandatory fields missing: {sorted(missing)}"
        if "Month" in record:
            assert 1 <= record["Month"] <= 12 and 1900 < record["Year"] < 3000
            start = datetime(record["Year"], record["Month"], 1, tzinfo=UTC)
            assert start <= datetime.now(UTC), "month in the future"
            end = start.timestamp() + calendar.monthrange(record["Year"], record["Month"])[1] * 86400
            for t in ("EarliestEndTime", "LatestEndTime"):
                if t in record:
                    assert start.timestamp() <= record[t] <= end, f"record {n}: {t} outside its month"
            if "EarliestEndTime" in record and "LatestEndTime" in record:
                assert record["EarliestEndTime"] <= record["LatestEndTime"]
        for t in ("WallDuration", "CpuDuration", "NormalisedWallDuration", "NormalisedCpuDuration"):
            assert record.get(t, 0) >= 0, f"record {n}: negative {t}"
        if "StartTime" in record:
            assert record["StartTime"] <= record["EndTime"]
        records.append(record)
    return header, records


# -- the fixtures, through a store -----------------------------------------------------------------

BENCHMARK = 12.5  # HS06 per core, given by hand to every other job of the fixtures


def _histories(fixtures: Path) -> list[Path]:
    c = fixtures / "condor25"
    return [
        c / "history.ads",
        c / "history.json",
        c / "per_job_history",
        fixtures / "classads/history-glidein-job-finished.ad",
    ]


def _jobs(path: Path) -> pd.DataFrame:
    jobs, _ = read_history([path])
    speed = np.where(np.arange(len(jobs)) % 2 == 0, BENCHMARK, np.nan)  # every other host has no benchmark
    return jobs.assign(speed=speed)


def _months(jobs: pd.DataFrame) -> list[tuple[int, int]]:
    ends = pd.to_datetime(jobs["end"].astype(float), unit="s", utc=True)
    return sorted({(t.year, t.month) for t in ends})


def _messages(kind: str, sink: Sink, months: list[tuple[int, int]], options: ApelOptions) -> list[str]:
    result = apel_months(sink, months, options)
    if kind == "jobs":
        return [render(KINDS[kind], job_records(sink, y, m, options)[0], benchmark_type=options.benchmark_type)
                for y, m in months]  # fmt: skip
    return [
        render(KINDS[kind], m.sync if kind == "sync" else m.summaries, benchmark_type=options.benchmark_type)
        for m in result.months
        if (m.sync if kind == "sync" else m.summaries)
    ]


@pytest.mark.parametrize("index", range(4), ids=["history.ads", "history.json", "per_job_history", "glidein"])
def test_every_fixture_history_gives_messages_apel_accepts_whose_totals_are_the_summaries(
    empty_store: Sink, fixtures: Path, index: int
) -> None:
    jobs = _jobs(_histories(fixtures)[index])
    assert empty_store.send_encoded("job", job_docs(jobs, probe="t")["job"]).acked
    months = _months(jobs)
    users = {str(u) for u in jobs["user"].dropna()}  # every job has a VO: none left out
    options = ApelOptions(site="T2_TEST", vo_attribute="user", vo_map={u: u for u in users})
    result = apel_months(empty_store, months, options)
    for kind in KINDS:
        for text in _messages(kind, empty_store, months, options):
            header, records = parse(text)
            assert records and header == KINDS[kind].header
    # totals: the messages hold the benchmarked jobs, the rest is counted; both are the store's
    # own daily summaries, and the records' sums by hand
    known = jobs["speed"].notna()
    got = [r for m in result.months for r in m.summaries]
    assert all(not m.left_out for m in result.months)
    assert sum(r["NumberOfJobs"] for r in got) == known.sum()
    assert sum(m.unbenchmarked_jobs for m in result.months) == (~known).sum()
    wall = jobs["walltime_s"].astype(float)
    assert sum(r["WallDuration"] for r in got) == pytest.approx(wall[known].sum())
    assert sum(r["NormalisedWallDuration"] for r in got) == pytest.approx(BENCHMARK * wall[known].sum())
    assert sum(r["NormalisedCpuDuration"] for r in got) == pytest.approx(
        BENCHMARK * jobs["cpu_time_s"].astype(float)[known].sum()
    )
    first, last = (datetime.fromtimestamp(f(jobs["end"].astype(float)), UTC).date() for f in (min, max))
    summarize(empty_store, first, last, probe="t", kinds=["job"])
    summaries = [d for d in empty_store.query("summary", limit=10_000) if d["record_kind"] == "job"]
    total_jobs = sum(m.unbenchmarked_jobs for m in result.months) + sum(r["NumberOfJobs"] for r in got)
    assert sum(d["n_jobs"] for d in summaries) == total_jobs == len(jobs)
    sent_wall = sum(r["WallDuration"] for r in got) + sum(m.unbenchmarked_wall_s for m in result.months)
    assert sum(d["walltime_hours"] for d in summaries) * 3600 == pytest.approx(sent_wall)
    # the sync message counts, as APEL's client makes it, the jobs the summaries hold
    assert sum(s["NumberOfJobs"] for m in result.months for s in m.sync) == known.sum()


def test_the_glidein_job_is_reported_with_its_voms_identity(fixtures: Path, tmp_path: Path) -> None:
    from collector.sinks.sqlite import EmbeddedStore

    jobs = _jobs(fixtures / "classads/history-glidein-job-finished.ad")  # one job: benchmark 12.5
    sink = EmbeddedStore(tmp_path / "s.sqlite")
    sink.send_encoded("job", job_docs(jobs, probe="t")["job"])
    options = ApelOptions(benchmark_type="HEPscore23")
    (month,) = apel_months(sink, [(2016, 8)], options).months
    _, (record,) = parse(render(KINDS["normalised"], month.summaries, benchmark_type="HEPscore23"))
    assert record == {
        "Site": "INFN-LNL-2", "Month": 8, "Year": 2016,
        "GlobalUserName": "/DC=ch/DC=cern/OU=Organic Units/OU=Users/CN=amaltaro/CN=718748/CN=Alan Malta Rodrigues",
        "VO": "cms", "VOGroup": "/cms", "VORole": "Role=production", "SubmitHost": "cmsgwms-submit1.fnal.gov",
        "Infrastructure": "grid", "NodeCount": 1, "Processors": 1,
        "EarliestEndTime": 1470014433, "LatestEndTime": 1470014433,
        "WallDuration": 18, "CpuDuration": 0, "NormalisedWallDuration": 225, "NormalisedCpuDuration": 0,
        "NumberOfJobs": 1,
    }  # fmt: skip
    (job,) = job_records(sink, 2016, 8, options)[0]
    _, (parsed,) = parse(render(KINDS["jobs"], [job], benchmark_type="HEPscore23"))
    assert parsed["ServiceLevelType"] == "HEPscore23" and parsed["ServiceLevel"] == BENCHMARK
    assert parsed["MachineName"] == "glidein_12775_19808370@wp-06-12.lnl.infn.it"
    assert parsed["FQAN"] == "/cms/Role=production/Capability=NULL" and parsed["EndTime"] == 1470014433
    sink.close()


def test_gratia_records_give_apel_summaries_normalised_by_the_configured_site_benchmark(
    empty_store: Sink, fixtures: Path
) -> None:
    gracc = fixtures / "gracc"
    records = [pair(gracc, name)[0] for name in PAIRS]
    docs = envelope_docs(envelope(records), probe="gratia-test").docs
    assert len(empty_store.send("gratia", docs).acked) == len(docs) == 6
    # as gracc-apel: 04 (cms, Batch, Grid Local) and 06 (cms, Batch) are sent; 01 (AWSVM) and
    # 05 (Payload, Grid OSG) are not Batch; 02 and 03 (Batch) have no VO and no site
    options = ApelOptions(source="gratia", site_benchmarks={"TAMU_BRAZOS_CE": 10.0})
    months = sorted({(int(d["EndTime"][:4]), int(d["EndTime"][5:7])) for d in docs})
    result = apel_months(empty_store, months, options)
    for text in _messages("summary", empty_store, months, options) + _messages("sync", empty_store, months, options):
        parse(text)
    got = [r for m in result.months for r in m.summaries]
    assert [(r["Site"], r["VO"], r["NumberOfJobs"], r["WallDuration"], r["NormalisedWallDuration"]) for r in got] == [
        ("TAMU_BRAZOS_CE", "CMS", 1, 21, 210)
    ]
    assert sum(m.unbenchmarked_jobs for m in result.months) == 1  # 06, UCSDT2-D: no benchmark given
    left_out: dict[str, int] = {}
    for m in result.months:
        for reason, jobs in m.left_out.items():
            left_out[reason] = left_out.get(reason, 0) + jobs
    assert left_out == {NOT_BATCH: 2} and result.unsited_jobs == 2  # 02 and 03 have no SiteName either


def test_a_month_sent_twice_is_in_the_queue_once(tmp_path: Path) -> None:
    def month(jobs: int, site: str = "T2_X", m: int = 5) -> str:
        return render(KINDS["sync"], [{"Site": site, "SubmitHost": "ce1", "NumberOfJobs": jobs, "Month": m,
                                       "Year": 2026}], benchmark_type="HEPSPEC")  # fmt: skip

    out = tmp_path / "outgoing"
    deliver(out, [month(3), month(1, m=4), month(2, site="T2_Y")])
    second = deliver(out, [month(5)])  # late records re-made May of T2_X
    assert len(second.replaced) == 1 and len(second.added) == 1
    queue = QueueSimple(str(out))
    texts = []
    for name in queue:
        assert queue.lock(name)
        texts.append(queue.get(name).decode())
        queue.unlock(name)
    assert sorted(texts) == sorted([month(5), month(1, m=4), month(2, site="T2_Y")])


def test_a_missing_mandatory_field_is_an_error_naming_it() -> None:
    with pytest.raises(ValueError, match="record 0: mandatory field NumberOfJobs"):
        render(KINDS["sync"], [{"Site": "X", "Month": 1, "Year": 2026}], benchmark_type="HEPSPEC")


def test_the_parser_refuses_what_apel_refuses() -> None:
    good = "APEL-sync-message: v0.1\nSite: X\nNumberOfJobs: 3\nMonth: 5\nYear: 2026\n%%\n"
    parse(good)
    for bad in (good.replace("3", "3.5"), good.replace("Site: X\n", ""), good.replace("Month: 5", "Month: 13"),
                good.replace("%%\n", "")):  # fmt: skip
        with pytest.raises(AssertionError):
            parse(bad)
    assert math.isfinite(date.today().year)


def test_the_gratia_vos_are_gracc_apels_by_default() -> None:
    # opensciencegrid/gracc-apel's vo_list, in [apel] gratia_vos and in the options alike
    from collector.apel.grouping import GRACC_APEL_VOS
    from probes.config.apel import ApelSettings

    assert GRACC_APEL_VOS == ("atlas", "alice", "belle", "cms", "enmr.eu", "lhcb")
    assert tuple(ApelSettings().gratia_vos) == ApelOptions().gratia_vos == GRACC_APEL_VOS
