"""What lands in APEL's own tables is what fairacct reported.

fairacct's messages go through APEL's own loader and summariser into APEL's schema in MariaDB
(../shared/apel, the fixture in conftest.py); APEL's views are read back and summed per site,
month, VO, user and submit host, and compared with fairacct's own account of the month (its
summaries, its export's ``apel`` sheet, what it says it left out) and with sums by hand.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from collector.apel import KINDS, ApelOptions, apel_months, job_records, render
from collector.apel.grouping import NOT_BATCH, OTHER_VO
from collector.apel.view import apel_view
from collector.gratia import envelope_docs
from collector.sinks import Sink
from collector.sinks.sqlite import EmbeddedStore
from probes.cli import main
from probes.pipeline.records import job_docs
from probes.sources.history import read_history
from tests.collector.apel.conftest import ApelServer
from tests.collector.gratia.conftest import envelope, jur

from ...conftest import ROOT

SUMS = ("NumberOfJobs", "WallDuration", "CpuDuration", "NormalisedWallDuration")
BY = ("Site", "Month", "Year", "VO", "GlobalUserName", "SubmitHost")


def apel_sums(server: ApelServer) -> dict[tuple[Any, ...], tuple[int, ...]]:
    """APEL's sums per site, month, VO, user and submit host (its normalised super summaries)."""
    rows = server.rows(
        f"SELECT {', '.join(BY)}, {', '.join(f'SUM({s}) AS {s}' for s in SUMS)} "
        f"FROM VNormalisedSuperSummaries GROUP BY {', '.join(BY)}"
    )
    return {tuple(r[k] for k in BY): tuple(int(r[s]) for s in SUMS) for r in rows}


def fairacct_sums(records: list[dict[str, Any]]) -> dict[tuple[Any, ...], tuple[int, ...]]:
    """The same sums of the summary records fairacct sent (each value rounded as written)."""
    out: dict[tuple[Any, ...], list[int]] = {}
    for r in records:
        key = tuple(r[k] for k in BY)
        sums = out.setdefault(key, [0] * len(SUMS))
        for i, s in enumerate(SUMS):
            sums[i] += round(float(r[s]))
    return {k: tuple(v) for k, v in out.items()}


def write(folder: Path, texts: list[str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for n, text in enumerate(texts):
        (folder / f"{n:04d}.msg").write_text(text)
    return folder


# -- the demo, through fairacct's command line -------------------------------------------------------


DEMO_VO_MAP = 'vo_map = {group_atlas = "atlas", group_cms = "cms", group_osg = "osg"}'
"""config/demo.toml's VOs of its accounting groups."""


@pytest.fixture
def demo(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    """The demo pool's configuration, one probe cycle into its store in tmp_path."""
    config = tmp_path / "probe.toml"
    text = (ROOT / "config/demo.toml").read_text().replace('"demo/', f'"{ROOT}/config/demo/')
    config.write_text(text.replace('"../.demo"', '"state"'))
    assert main(["probe", "once", "--config", str(config)]) == 0, capsys.readouterr().err
    capsys.readouterr()
    return config


@pytest.mark.parametrize("kind", ["summary", "normalised"])
def test_the_demo_month_in_apel_is_the_export(
    apel_server: ApelServer, demo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    out = tmp_path / "outgoing"
    for k in (kind, "sync"):
        code = main(["apel", "--config", str(demo), "--month", "2026-11", "--kind", k, "--out", str(out)])
        assert code == 0, capsys.readouterr().err
    said = capsys.readouterr().out
    # the demo's one job that no attribute places has [site] default's "unknown": not sent
    assert "1 jobs without a site (or with [site] default 'unknown'): not sent" in said
    apel_server.load(out)

    export = tmp_path / "usage.xlsx"
    assert main(["summarize", "--config", str(demo), "--from", "2026-11-01", "--to", "2026-11-30"]) == 0
    code = main(["export", "--config", str(demo), "--from", "2026-11-01", "--to", "2026-11-30", "--by", "project",
                 "--format", "xlsx", "--out", str(export)])  # fmt: skip
    assert code == 0, capsys.readouterr().err
    sheet = pd.read_excel(export, sheet_name="apel")
    sheet = sheet.loc[sheet["month"] != "TOTAL"]  # the sheet's total row is no VO
    per_vo = apel_server.rows(
        "SELECT VO, SUM(NumberOfJobs) AS jobs, SUM(WallDuration) AS wall, SUM(NormalisedWallDuration) AS norm "
        "FROM VNormalisedSuperSummaries WHERE Month = 11 AND Year = 2026 GROUP BY VO ORDER BY VO"
    )
    assert [r["VO"] for r in per_vo] == sorted(sheet.loc[sheet["apel_jobs"] > 0, "VO"])
    for r in per_vo:
        row = sheet.loc[sheet["VO"] == r["VO"]].iloc[0]
        assert int(r["jobs"]) == row["apel_jobs"]
        assert int(r["wall"]) == pytest.approx(row["apel_wall_hours"] * 3600, abs=len(sheet))
        assert int(r["norm"]) == pytest.approx(row["apel_normalised_wall_hours"] * 3600, abs=len(sheet))
    # 60 jobs ended in the month: 59 sent, the unsited one not; no site 'unknown' in APEL
    assert sum(int(r["jobs"]) for r in per_vo) == 59
    assert "unknown" not in {r["Site"] for r in apel_server.rows("SELECT name AS Site FROM Sites")}
    # the sync records count what the summaries hold, site by site and host by host
    sync = apel_server.rows("SELECT Site, SubmitHost, NumberOfJobs FROM VSyncRecords WHERE Month = 11")
    held = apel_server.rows(
        "SELECT Site, SubmitHost, SUM(NumberOfJobs) AS n FROM VNormalisedSuperSummaries WHERE Month = 11 "
        "GROUP BY Site, SubmitHost"
    )
    assert sorted((r["Site"], r["SubmitHost"], int(r["NumberOfJobs"])) for r in sync) == sorted(
        (r["Site"], r["SubmitHost"], int(r["n"])) for r in held
    )


def test_a_month_sent_again_replaces_the_month_in_apel_and_a_kind_switch_is_asked_for(
    apel_server: ApelServer, demo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def send(kind: str, out: str, *extra: str) -> tuple[int, str]:
        code = main(["apel", "--config", str(demo), "--month", "2026-11", "--kind", kind, "--out", str(tmp_path / out),
                     *extra])  # fmt: skip
        said = capsys.readouterr()
        return code, said.out + said.err

    def totals() -> dict[str, tuple[int, int]]:
        rows = apel_server.rows(
            "SELECT VO, SUM(NumberOfJobs) AS n, SUM(WallDuration) AS wall FROM VNormalisedSuperSummaries "
            "WHERE Month = 11 AND Year = 2026 GROUP BY VO"
        )
        return {r["VO"]: (int(r["n"]), int(r["wall"])) for r in rows if int(r["n"])}

    mapped = demo.read_text()  # the demo's [apel] vo_map: first with cms under another name
    assert DEMO_VO_MAP in mapped
    demo.write_text(mapped.replace(DEMO_VO_MAP, DEMO_VO_MAP.replace('"cms"', '"cms-old"')))
    assert send("summary", "q1")[0] == 0
    apel_server.load(tmp_path / "q1")
    first = totals()
    assert sum(n for n, _ in first.values()) == 59 and "cms-old" in first
    # the site renames a VO: the month sent again is the new month in APEL, not both
    demo.write_text(mapped)
    code, said = send("summary", "q2")
    assert code == 0 and "records of zero jobs for keys sent before and no longer produced" in said
    apel_server.load(tmp_path / "q2")
    second = totals()
    assert "cms-old" not in second and second["cms"] == first["cms-old"]
    assert {k: v for k, v in second.items() if k != "cms"} == {k: v for k, v in first.items() if k != "cms-old"}
    # the other kind for a month already sent: refused, unless asked; then APEL holds the month once
    code, said = send("normalised", "q3")
    assert code != 0 and "was sent to APEL as --kind summary" in said and "--switch-kind" in said
    assert send("normalised", "q3", "--switch-kind")[0] == 0
    apel_server.load(tmp_path / "q3")
    assert totals() == second
    # a group the map does not name is no VO: its jobs are left out of the messages and said, never
    # sent as a VO, and what was sent of it before is zeroed
    demo.write_text(mapped.replace(DEMO_VO_MAP, DEMO_VO_MAP.replace(', group_osg = "osg"', "")))
    code, said = send("normalised", "q4")
    assert code == 0 and "no VO: [apel] vo_map names none for group 'group_osg' (not sent as a VO)" in said, said
    assert not [f for f in (tmp_path / "q4").rglob("*") if f.is_file() and b"group_osg" in f.read_bytes()]
    apel_server.load(tmp_path / "q4")
    assert totals() == {k: v for k, v in second.items() if k != "osg"}


# -- a generated month of edge cases ------------------------------------------------------------------

OCT = 1_791_331_200.0  # 2026-10-07T00:00:00Z
ANNA = "/DC=org/DC=example/CN=Anna Smith"
LONG_DN = "/DC=org/DC=example/OU=" + "x" * 270 + "/CN=Long Name"  # 300 characters
SPEED = 10.12345  # HS06 per core: APEL keeps 10.123


def generated(tmp_path: Path) -> EmbeddedStore:
    """Ten jobs of October 2026 (a row each: site, DN, VO, submit host, wall s, benchmark)."""
    rows = [
        ("T2_A", ANNA, "cms", "ce1.example", 3600, SPEED),
        ("T2_A", ANNA.replace("Anna Smith", "Anna  Smith"), "cms ", "ce1.example", 7200, SPEED),
        ("T2_A", ANNA.lower(), "CMS", "ce1.example", 1800, SPEED),
        ("T2_A", ANNA, "cms", "CE1.example ", 600, SPEED),
        ("T2_A", LONG_DN, "cms", "ce1.example", 1000, SPEED),
        ("unknown", ANNA, "cms", "ce1.example", 5000, SPEED),  # [site] default: no site
        ("T2_A", ANNA, None, "ce1.example", 700, SPEED),  # no proxy, no FQAN, no group: no VO
        ("T2_A", ANNA, "cms", "ce1.example", 900, np.nan),  # no benchmark
        ("T2_A", "/DC=org/CN=Bob", "atlas", "ce2.example", 2000, 8.0),
        ("T2_B", "/DC=org/CN=Bob", "atlas", "ce2.example", 400, 8.0),
    ]
    jobs, _ = read_history([ROOT / "config/demo/history.ads"])
    jobs = jobs.iloc[: len(rows)].copy()
    site, dn, vo, schedd, wall, speed = (list(c) for c in zip(*rows, strict=True))
    jobs = jobs.assign(
        site=site, dn=dn, vo=vo, schedd=schedd, walltime_s=[float(w) for w in wall], cpu_time_s=[w / 2 for w in wall],
        speed=speed, cpus=1.0, n_hosts=1, fqan=None, group=None, end=[OCT + 60 * i for i in range(len(rows))],
        start=[OCT - 7200 + 60 * i for i in range(len(rows))],
    )  # fmt: skip
    store = EmbeddedStore(tmp_path / "store.sqlite")
    assert store.send_encoded("job", job_docs(jobs, probe="t")["job"]).acked
    return store


def options() -> ApelOptions:
    """The site's options: [site] default's "unknown" is no site."""
    return ApelOptions(placeholder_site="unknown")


# APEL's rows, by hand: Anna's four spellings and two submit host spellings are one key each
EXPECTED = {
    ("T2_A", 10, 2026, "cms", ANNA, "ce1.example"): (
        4, 13200, 6600, round(3600 * 10.123) + round(7200 * 10.123) + round(1800 * 10.123) + round(600 * 10.123)
    ),
    ("T2_A", 10, 2026, "atlas", "/DC=org/CN=Bob", "ce2.example"): (1, 2000, 1000, 16000),
    ("T2_B", 10, 2026, "atlas", "/DC=org/CN=Bob", "ce2.example"): (1, 400, 200, 3200),
}  # fmt: skip


def test_keys_differing_in_case_and_spacing_are_one_key_in_apel_and_nothing_is_lost(
    apel_server: ApelServer, tmp_path: Path
) -> None:
    store = generated(tmp_path)
    result = apel_months(store, [(2026, 10)], options())
    texts = [render(KINDS[k], m.summaries if k == "summary" else m.sync, benchmark_type="HEPSPEC")
             for m in result.months for k in ("summary", "sync")]  # fmt: skip
    apel_server.load(write(tmp_path / "out", texts))
    got = apel_sums(apel_server)
    sent = fairacct_sums([r for m in result.months for r in m.summaries])
    # the record keys merge before the sums: a record's normalised time is its summed wall x 10.123
    assert set(got) == set(sent) == set(EXPECTED)
    assert got == sent
    assert {k: v[:3] for k, v in got.items()} == {k: v[:3] for k, v in EXPECTED.items()}
    assert got[("T2_A", 10, 2026, "cms", ANNA, "ce1.example")][3] == round(13200 * 10.123)
    # what was left out, and why, per site and month
    t2a = next(m for m in result.months if m.site == "T2_A")
    assert t2a.left_out == {
        "GlobalUserName longer than APEL's 255 characters": 1,
        "no VO (no proxy VO, no FQAN, no [apel] vo_attribute value)": 1,
    }
    assert t2a.unbenchmarked_jobs == 1 and result.unsited_jobs == 1
    assert sorted(str(m) for m in result.merged) == [
        f"GlobalUserName '{ANNA.lower()}' sent as '{ANNA}' (APEL compares them equal; 7 jobs)",
        "SubmitHost 'CE1.example' sent as 'ce1.example' (APEL compares them equal; 8 jobs)",
        "VO 'CMS' sent as 'cms' (APEL compares them equal; 7 jobs)",
    ]
    # the sync records: the jobs the summaries hold, per site and submit host
    sync = apel_server.rows("SELECT Site, SubmitHost, NumberOfJobs FROM VSyncRecords")
    assert sorted((r["Site"], r["SubmitHost"], int(r["NumberOfJobs"])) for r in sync) == [
        ("T2_A", "ce1.example", 4), ("T2_A", "ce2.example", 1), ("T2_B", "ce2.example", 1),
    ]  # fmt: skip
    # the export's APEL sheet says the same
    view = apel_view(store, [(2026, 10)], options()).set_index("VO")
    assert view.loc["cms", "apel_jobs"] == 4 and view.loc["atlas", "apel_jobs"] == 2
    assert view["left_out_jobs"].sum() == 3 and view["unbenchmarked_jobs"].sum() == 1
    store.close()


def test_individual_job_messages_land_as_the_summaries_say(apel_server: ApelServer, tmp_path: Path) -> None:
    store = generated(tmp_path)
    records, left_out = job_records(store, 2026, 10, options())
    assert left_out == {
        ("T2_A", "no benchmark"): 1,
        ("T2_A", "GlobalUserName longer than APEL's 255 characters"): 1,
        ("T2_A", "no VO (no proxy VO, no FQAN, no [apel] vo_attribute value)"): 1,
    }
    assert Counter(r["ServiceLevel"] for r in records) == {10.123: 4, 8.0: 2}
    texts = [render(KINDS["jobs"], [r for r in records if r["Site"] == s], benchmark_type="HEPSPEC")
             for s in ("T2_A", "T2_B")]  # fmt: skip
    apel_server.load(write(tmp_path / "out", texts))
    jobs = apel_server.rows("SELECT COUNT(*) AS n, SUM(WallDuration) AS wall FROM JobRecords")[0]
    assert (int(jobs["n"]), int(jobs["wall"])) == (6, 13200 + 2000 + 400)
    # APEL's summariser: one key for Anna's spellings; its normalised time of each job's ServiceLevel
    got = apel_sums(apel_server)
    assert {k[0:4]: v[:3] for k, v in got.items()} == {k[0:4]: v[:3] for k, v in EXPECTED.items()}
    store.close()


# -- Gratia records, as OSG's gracc-apel sends them -------------------------------------------------


def gratia_record(n: int, vo: str, kind: str, grid: str, wall: str, user: str, system: str, *, njobs: int = 1) -> bytes:
    """A Gratia record of T2_G in October 2026 from the probe on ce1.example."""
    dn = ANNA if vo == "cms" else "/DC=org/CN=Bob"
    return jur(
        f"<UserIdentity><VOName>{vo}</VOName><ReportableVOName>{vo}</ReportableVOName><DN>{dn}</DN></UserIdentity>"
        f"<Processors>1</Processors><WallDuration>PT{wall}S</WallDuration>"
        f'<CpuDuration urwg:usageType="user">PT{user}S</CpuDuration>'
        f'<CpuDuration urwg:usageType="system">PT{system}S</CpuDuration>'
        f"<EndTime>2026-10-07T0{n}:00:00Z</EndTime><StartTime>2026-10-06T0{n}:00:00Z</StartTime>"
        f"<ProbeName>condor:ce1.example</ProbeName><SiteName>T2_G</SiteName><Grid>{grid}</Grid>"
        f'<Njobs>{njobs}</Njobs><Resource urwg:description="ResourceType">{kind}</Resource>',
        record_id=f"r-{n}",
    )


GRATIA_MONTH = [
    gratia_record(1, "cms", "Batch", "OSG", "3600.6", "1000.4", "200.3"),
    gratia_record(2, "cms", "Batch", "OSG", "1800.9", "500.5", "100.5", njobs=5),  # an aggregated record: 1 in Count
    gratia_record(3, "cms", "Payload", "Local", "600.7", "300.2", "0"),  # a local site's own payload: sent
    gratia_record(4, "cms", "Payload", "OSG", "7200", "7000", "0"),  # a pilot's payload: its pilot is sent
    gratia_record(5, "nova", "Batch", "OSG", "5000", "4000", "0"),  # not one of gracc-apel's VOs
    gratia_record(6, "atlas", "Batch", "OSG", "1000.5", "800.25", "100.25"),
]
# What gracc-apel sends of them, by hand: records counted (Count), WallDuration in whole seconds
# per record (GRACC's long), CpuDuration user + system, each sum and its normalisation by
# 10.123 (the benchmark to APEL's 3 decimals) written as int() writes it (of the exact product:
# 6000 x 10.123 = 60738, where a binary float makes 60737.99...)
GRATIA_EXPECTED = {
    ("T2_G", 10, 2026, "cms", ANNA, "ce1.example"): (3, 3600 + 1800 + 600, 2101, 60738),  # CPU: 1200.7 + 601 + 300.2
    ("T2_G", 10, 2026, "atlas", "/DC=org/CN=Bob", "ce1.example"): (1, 1000, 900, 10123),  # CPU: 900.5
}


def test_gratia_records_reach_apel_as_gracc_apel_sends_them(
    apel_server: ApelServer, empty_store: Sink, tmp_path: Path
) -> None:
    store = empty_store  # the embedded store and Elasticsearch (osmem-server): each sums whole wall seconds
    docs = envelope_docs(envelope(GRATIA_MONTH), probe="gratia-test").docs
    assert len(store.send("gratia", docs).acked) == 6
    options = ApelOptions(source="gratia", site_benchmarks={"T2_G": SPEED})
    result = apel_months(store, [(2026, 10)], options)
    texts = [render(KINDS[k], m.summaries if k == "summary" else m.sync, benchmark_type="HEPSPEC")
             for m in result.months for k in ("summary", "sync")]  # fmt: skip
    apel_server.load(write(tmp_path / "out", texts))
    got = apel_sums(apel_server)
    assert got == fairacct_sums([r for m in result.months for r in m.summaries]) == GRATIA_EXPECTED
    cpu = apel_server.rows("SELECT VO, SUM(NormalisedCpuDuration) AS n FROM VNormalisedSuperSummaries GROUP BY VO")
    assert {r["VO"]: int(r["n"]) for r in cpu} == {"cms": 21277, "atlas": 9115}  # 21277.5337, 9115.7615
    [month] = result.months
    assert month.left_out == {NOT_BATCH: 1, OTHER_VO: 1} and result.unsited_jobs == 0
    sync = apel_server.rows("SELECT Site, SubmitHost, NumberOfJobs FROM VSyncRecords")
    assert [(r["Site"], r["SubmitHost"], int(r["NumberOfJobs"])) for r in sync] == [("T2_G", "ce1.example", 4)]
    # the VOs are the site's to choose: nova's record goes when nova is listed
    listed = apel_months(store, [(2026, 10)], ApelOptions(source="gratia", site_benchmarks={"T2_G": SPEED},
                                                         gratia_vos=("CMS", "nova")))  # fmt: skip
    assert {r["VO"]: r["NumberOfJobs"] for r in listed.months[0].summaries} == {"cms": 3, "nova": 1}
    assert listed.months[0].left_out == {NOT_BATCH: 1, OTHER_VO: 1}  # atlas, now
