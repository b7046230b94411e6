"""Issue 49: APEL holds exactly what fairacct sent, through every correction, where real sites'
data goes sooner or later: a DN holding ``%%``, names APEL's collation takes for one (``ß`` and
``s``, two characters outside the BMP), a site re-spelled between two sends, a site-month
emptied, a job that ends in the future, and the jobs kind (ids differing in case, an end of
23:59:59.6 on a month's last day, role and capability variants, null words, changed and removed
jobs, jobs then summaries).

Each send goes through ``fairacct apel`` into a directory queue, then APEL's own loader and
summariser (../shared/apel, the fixture in conftest.py; skipped, with the reason, without it):
no message may be rejected, and APEL's tables, read back table by table, hold fairacct's latest
numbers per key, keys compared as APEL's server compares them.
"""

from __future__ import annotations

import calendar
import json
import math
import random
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from collector.apel import ApelOptions, apel_months, job_records, job_summaries
from collector.apel.grouping import FUTURE
from collector.apel.jobs import SAME_KEY
from collector.apel.keys import general_ci_key
from collector.sinks.sqlite import EmbeddedStore
from probes.cli import main
from probes.pipeline.records import job_docs
from probes.sources.history import read_history
from tests.collector.apel.conftest import ApelServer

from ...conftest import ROOT

OCT = 1_791_331_200  # 2026-10-07T00:00:00Z
LAST_SECOND = 1_793_491_199  # 2026-10-31T23:59:59Z
ADA = "/DC=org/DC=example/CN=Ada 100%% Effort"
GROSS, GROS = "/DC=de/CN=Jürgen Groß", "/DC=de/CN=Jürgen Gros"
YOSHIDA, HOKKE = "/DC=jp/CN=𠮷田 太郎", "/DC=jp/CN=𩸽田 太郎"
WEISS, WEISS2 = "/DC=de/CN=Weiß", "/DC=de/CN=Weiss"
BOB = "/DC=org/CN=Bob"
NAMES = ("Site", "GlobalUserName", "VO", "VOGroup", "VORole", "SubmitHost")
SUMS = ("NumberOfJobs", "WallDuration", "CpuDuration", "NormalisedWallDuration")


def job(site: str, n: int, **extra: Any) -> dict[str, Any]:
    """One job of ``site`` in October 2026: n-th of its kind (end, id), cms, 1,000 s, benchmark 10.123."""
    return {
        "site": site, "dn": BOB, "vo": "cms", "fqan": None, "group": None, "schedd": "ce1.example",
        "job_id": f"ce1.example#{n}.0#1790000000", "walltime_s": 1000.0, "cpu_time_s": 500.0,
        "end": float(OCT + 60 * n), "speed": 10.123, "cpus": 1.0,
    } | extra  # fmt: skip


def write_store(state: Path, rows: list[dict[str, Any]]) -> None:
    """The probe's embedded store in ``state`` holding exactly ``rows`` (a new file each time)."""
    base, _ = read_history([ROOT / "config/demo/history.ads"])
    jobs = base.iloc[[0] * len(rows)].reset_index(drop=True)
    frame = pd.DataFrame(rows)
    for column in frame.columns:
        jobs[column] = frame[column].to_numpy()
    jobs["start"] = jobs["end"] - jobs["walltime_s"]
    jobs["n_hosts"] = 1
    path = state / "fairacct.sqlite"
    for p in state.glob("fairacct.sqlite*"):
        p.unlink()
    store = EmbeddedStore(path)
    assert len(store.send_encoded("job", job_docs(jobs, probe="t")["job"]).acked) == len(rows)
    store.close()


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "probe.toml"
    text = (ROOT / "config/demo.toml").read_text().replace('"demo/', f'"{ROOT}/config/demo/')
    path.write_text(text.replace('"../.demo"', f'"{tmp_path / "state"}"'))
    (tmp_path / "state").mkdir()
    return path


def send(config: Path, out: Path, kind: str, months: tuple[str, str], *extra: str) -> tuple[int, str]:
    code = main(["apel", "--config", str(config), "--from", months[0], "--to", months[1], "--kind", kind,
                 "--out", str(out), *extra])  # fmt: skip
    return code, ""


def folded(row: dict[str, Any]) -> tuple[Any, ...]:
    """A row's key as APEL's server compares it ('None' is how APEL stores no value)."""
    names = (general_ci_key(str(row[k] if row[k] is not None else "None")) for k in NAMES)
    return (*names, int(row["Year"]), int(row["Month"]), int(row["NodeCount"] or 0), int(row["Processors"] or 0))


def apel_summaries(server: ApelServer) -> dict[tuple[Any, ...], tuple[int, int, int, int]]:
    """APEL's summaries (its view over HybridSuperSummaries) per key: jobs, wall, CPU, normalised
    wall; rows of zero jobs (the zero records' rows) left aside after checking they are zero."""
    out: dict[tuple[Any, ...], tuple[int, int, int, int]] = {}
    for r in server.rows("SELECT * FROM VNormalisedSuperSummaries"):
        sums = (int(r["NumberOfJobs"]), int(r["WallDuration"]), int(r["CpuDuration"]), int(r["NormalisedWallDuration"]))
        if sums[0] == 0:
            assert sums == (0, 0, 0, 0), r
            continue
        key = folded(r)
        assert key not in out, f"two rows of one key: {r}"
        out[key] = sums
    return out


def view_sums(server: ApelServer, view: str, fields: tuple[str, ...]) -> dict[tuple[Any, ...], tuple[int, ...]]:
    """One of APEL's tables through its view, summed per key (a v0.3 row per benchmark value);
    keys whose rows are all zero (cancelled by zero records) left aside."""
    out: dict[tuple[Any, ...], list[int]] = {}
    for r in server.rows(f"SELECT * FROM {view}"):
        sums = out.setdefault(folded(r), [0] * len(fields))
        for i, f in enumerate(fields):
            sums[i] += int(r[f])
    return {k: tuple(v) for k, v in out.items() if any(v)}


def fairacct_summaries(records: list[dict[str, Any]]) -> dict[tuple[Any, ...], tuple[int, int, int, int]]:
    out: dict[tuple[Any, ...], list[int]] = {}
    for r in records:
        sums = out.setdefault(folded(r), [0, 0, 0, 0])
        for i, f in enumerate(SUMS):
            sums[i] += round(float(r[f]))
    return {k: (s[0], s[1], s[2], s[3]) for k, s in out.items()}


def apel_sync(server: ApelServer) -> dict[tuple[str, str, int, int], int]:
    rows = server.rows("SELECT Site, SubmitHost, NumberOfJobs, Month, Year FROM VSyncRecords")
    return {
        (general_ci_key(r["Site"]), general_ci_key(r["SubmitHost"]), int(r["Year"]), int(r["Month"])): int(
            r["NumberOfJobs"]
        )
        for r in rows
        if int(r["NumberOfJobs"])
    }


def fairacct_sync(months: list[Any]) -> dict[tuple[str, str, int, int], int]:
    return {
        (general_ci_key(m.site), general_ci_key(s["SubmitHost"]), m.year, m.month): int(s["NumberOfJobs"])
        for m in months
        for s in m.sync
        if s["NumberOfJobs"]
    }


def load(server: ApelServer, out: Path) -> None:
    said = server.load(out)  # AssertionError with APEL's reasons when a message is rejected
    assert "0 rejected" in said, said
    for p in out.iterdir():  # what ssmsend would have sent and removed
        if p.is_dir() and p.name != "temporary":
            for f in p.iterdir():
                f.unlink()


# -- the summary kinds, and sync --------------------------------------------------------------------


def first_month() -> list[dict[str, Any]]:
    return [
        *(job("T2_US_Nebraska", n, walltime_s=1000.0 + n) for n in range(6)),
        *(job("T2_PCT", 10 + n) for n in range(3)),
        job("T2_PCT", 13, dn=ADA),  # %% would end APEL's record there and lose the message
        job("T2_DE_DESY", 20, dn=GROSS, walltime_s=10810.0),
        job("T2_DE_DESY", 21, dn=GROS, walltime_s=10809.0),  # ß weighs S: one key in APEL
        job("T2_DE_DESY", 22, dn=WEISS),
        job("T2_DE_DESY", 23, dn=WEISS2),  # two keys in APEL (a casefold would merge them)
        job("T2_JP", 30, dn=YOSHIDA),
        job("T2_JP", 31, dn=HOKKE),  # both outside the BMP: one key in APEL
        *(job("T2_EMPTY", 40 + n, schedd=f"ce{n % 2}.example") for n in range(3)),
        job("T2_NULL", 50, vo=None, group="none"),  # APEL reads 'none' as no VO: left out, said
        job("T2_NULL", 51, vo=None, group="NULL"),
        job("T2_NULL", 52),
    ]


def test_summaries_and_sync_hold_fairacct_numbers_through_every_correction(
    apel_server: ApelServer, config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state, out = tmp_path / "state", tmp_path / "outgoing"
    now = time.time()
    recent, ahead = now - 3 * 3600, now + 5 * 86400  # APEL refuses an end over two days ahead
    future_months = (time.strftime("%Y-%m", time.gmtime(recent)), time.strftime("%Y-%m", time.gmtime(ahead)))
    options = ApelOptions(vo_attribute="group", placeholder_site="unknown")

    def check(rows: list[dict[str, Any]], kinds: tuple[str, ...], *extra: str) -> Any:
        write_store(state, rows)
        for kind in kinds:
            for months in (("2026-10", "2026-10"), future_months):
                assert main(["apel", "--config", str(config), "--from", months[0], "--to", months[1], "--kind",
                             kind, "--out", str(out), *extra]) == 0, capsys.readouterr()  # fmt: skip
        said = capsys.readouterr().out
        load(apel_server, out)
        store = EmbeddedStore(state / "fairacct.sqlite")
        month_list = [(2026, 10), *sorted({tuple(int(p) for p in m.split("-")) for m in future_months})]
        result = apel_months(store, month_list, options)  # type: ignore[arg-type]
        store.close()
        sent = fairacct_summaries([r for m in result.months for r in m.summaries])
        assert apel_summaries(apel_server) == sent
        assert apel_sync(apel_server) == fairacct_sync(result.months)
        # table by table: APEL's loader files v0.3 and v0.4 normalised summaries alike in
        # NormalisedSummaries, which holds what fairacct sent, key by key; its Summaries (v0.2) none
        assert view_sums(apel_server, "VNormalisedSummaries", SUMS) == sent
        assert view_sums(apel_server, "VSummaries", ("NumberOfJobs", "WallDuration", "CpuDuration")) == {}
        return result, said

    future = [
        *(job("T2_FUT", 60 + n, end=recent) for n in range(3)),
        job("T2_FUT", 63, end=ahead),  # in the future: left out of its message alone
    ]
    result, said = check([*first_month(), *future], ("summary", "sync"))
    by_site = {(m.site, m.month): m for m in result.months}
    assert by_site["T2_PCT", 10].left_out == {"GlobalUserName holds '%%', APEL's record separator": 1}
    assert "1 jobs left out: GlobalUserName holds '%%'" in said
    assert "jobs left out: no VO" in said and by_site["T2_NULL", 10].left_out == {
        "no VO (no proxy VO, no FQAN, no [apel] vo_attribute value)": 2
    }
    assert sum(m.left_out.get(FUTURE, 0) for m in result.months) == 1
    held = apel_summaries(apel_server)
    desy = {k[1]: v for k, v in held.items() if k[0] == "T2_DE_DESY"}
    assert desy[general_ci_key(GROSS)][:2] == (2, 21619)  # both jobs, one key
    assert desy[general_ci_key(WEISS)][0] == 1 and desy[general_ci_key(WEISS2)][0] == 1
    assert [v[0] for k, v in held.items() if k[0] == "T2_JP"] == [2]
    assert sum(v[0] for v in held.values()) == 6 + 3 + 4 + 2 + 3 + 1 + 3
    assert apel_sync(apel_server)[general_ci_key("T2_EMPTY"), "CE0.EXAMPLE", 2026, 10] == 2

    # the month again: the site re-spelled, a job changed and one removed, T2_EMPTY emptied, as
    # the other summary kind
    second = [
        *(job("T2_US_NEBRASKA", n, walltime_s=2000.0) for n in range(5)),
        *(r for r in first_month() if r["site"] not in ("T2_US_Nebraska", "T2_EMPTY")),
        *future,
    ]
    assert main(["apel", "--config", str(config), "--month", "2026-10", "--kind", "normalised", "--out",
                 str(out)]) != 0  # fmt: skip
    assert "--switch-kind" in capsys.readouterr().err
    result, said = check(second, ("normalised", "sync"), "--switch-kind")
    held = apel_summaries(apel_server)
    nebraska = [v for k, v in held.items() if k[0] == "T2_US_NEBRASKA"]
    assert nebraska == [(5, 10000, 2500, round(10000 * 10.123))]
    assert not [k for k in held if k[0] == "T2_EMPTY"]
    assert not [k for k in apel_sync(apel_server) if k[0] == "T2_EMPTY"]  # its sync rows now say 0
    ledger = json.loads((state / "apel-sent.json").read_text())
    assert "T2_US_Nebraska 2026-10" not in ledger and ledger["T2_US_NEBRASKA 2026-10"]["kind"] == "normalised"


# -- the jobs kind ----------------------------------------------------------------------------------


def jobs_month() -> list[dict[str, Any]]:
    return [
        *(job("T2_J", n, walltime_s=1000.4 + n * 0.3, speed=10.1235 + n / 7) for n in range(12)),
        job("T2_J", 20, job_id="ce1.example#77.0#1790000000"),
        job("T2_J", 20, job_id="CE1.EXAMPLE#77.0#1790000000"),  # one key in APEL's JobRecords
        job("T2_J", 21, end=LAST_SECOND + 0.6),  # October's last second: October, not November
        job("T2_J", 22, fqan="/cms/Role=pilot/Capability=NULL"),
        job("T2_J", 23, fqan="/cms/role=pilot"),  # APEL: role 'role=pilot' (Role=pilot to its collation)
        job("T2_J", 24, fqan="/cms/Capability=NULL"),  # APEL: no role, group /cms/Capability=NULL
        job("T2_J", 25, fqan="/atlas/usatlas/Role=production;/atlas"),
        job("T2_J", 26, vo=None, group="none"),  # no VO: left out, said
        job("T2_J", 27, dn=ADA),
        job("T2_J", 28, cpus=1024.0, cpu_time_s=1024 * 30 * 86400.0),  # past the INT APEL loads it through
    ]


def test_the_jobs_kind_holds_what_fairacct_reports_and_refuses_what_apel_cannot_correct(
    apel_server: ApelServer, config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state, out = tmp_path / "state", tmp_path / "outgoing"
    options = ApelOptions(vo_attribute="group", placeholder_site="unknown")

    def jobs(*extra: str) -> int:
        return main(["apel", "--config", str(config), "--month", "2026-10", "--kind", "jobs", "--out", str(out),
                     "--json", *extra])  # fmt: skip

    write_store(state, jobs_month())
    assert jobs() == 0, capsys.readouterr().err
    doc = json.loads(capsys.readouterr().out)
    # the sync of a month sent as jobs counts the job records APEL holds (not the summaries' jobs)
    assert main(["apel", "--config", str(config), "--month", "2026-10", "--kind", "sync", "--out", str(out)]) == 0
    load(apel_server, out)
    store = EmbeddedStore(state / "fairacct.sqlite")
    records, left_out = job_records(store, 2026, 10, options)
    store.close()
    assert left_out == {
        ("T2_J", SAME_KEY): 1,
        ("T2_J", "no VO (no proxy VO, no FQAN, no [apel] vo_attribute value)"): 1,
        ("T2_J", "GlobalUserName holds '%%', APEL's record separator"): 1,
        ("T2_J", "CpuDuration outside APEL's 0 to 2,147,483,647"): 1,
    }
    count = apel_server.rows("SELECT COUNT(*) AS n FROM JobRecords")[0]["n"]
    assert count == len(records) == 12 + 1 + 1 + 4
    assert apel_sync(apel_server) == {("T2_J", "CE1.EXAMPLE", 2026, 10): len(records)}
    # JobRecords, job by job: APEL's key and numbers are the records'
    held_jobs = {
        (general_ci_key(r["LocalJobId"]), calendar.timegm(r["EndTime"].timetuple()), int(r["WallDuration"]),
         float(r["ServiceLevel"]))
        for r in apel_server.rows("SELECT LocalJobId, EndTime, WallDuration, ServiceLevel FROM JobRecords")
    }  # fmt: skip
    assert held_jobs == {
        (general_ci_key(r["LocalJobId"]), r["EndTime"], r["WallDuration"], r["ServiceLevel"]) for r in records
    }
    expected = fairacct_summaries(job_summaries(records))
    assert apel_summaries(apel_server) == expected
    [site] = doc["sites"]
    assert (site["jobs"], site["normalised_wall_s"]) == (18, sum(v[3] for v in expected.values()))
    roles = {
        (r["VOGroup"], r["VORole"]): int(r["NumberOfJobs"])
        for r in apel_server.rows("SELECT * FROM VNormalisedSuperSummaries")
        if r["VORole"] != "None" or r["VOGroup"] != "None"
    }
    # Role= in any case is the role (role=pilot is Role=pilot to APEL's collation); without a
    # role the group runs to the end, Capability=NULL and all
    assert roles == {("/cms", "Role=pilot"): 2, ("/cms/Capability=NULL", "None"): 1,
                     ("/atlas/usatlas", "Role=production"): 1}  # fmt: skip
    months = {(r["Year"], r["Month"]) for r in apel_server.rows("SELECT * FROM VNormalisedSuperSummaries")}
    assert months == {(2026, 10)}  # 23:59:59.6 stays in October

    # the same month again, a job's numbers changed: APEL replaces it (same key)
    changed = [r | {"walltime_s": 5000.0} if r["job_id"].startswith("ce1.example#3.") else r for r in jobs_month()]
    write_store(state, changed)
    assert jobs() == 0
    capsys.readouterr()
    load(apel_server, out)
    store = EmbeddedStore(state / "fairacct.sqlite")
    records, _ = job_records(store, 2026, 10, options)
    store.close()
    assert apel_summaries(apel_server) == fairacct_summaries(job_summaries(records))

    # a job removed, or its end moved: APEL could not remove the old record; refused, with why
    removed = [r for r in changed if not r["job_id"].startswith("ce1.example#4.")]
    moved = [r | {"end": r["end"] + 30} if r["job_id"].startswith("ce1.example#5.") else r for r in changed]
    for rows in (removed, moved):
        write_store(state, rows)
        assert jobs() != 0
        assert "APEL keys job records by site, id and end and cannot remove one" in capsys.readouterr().err
    # a job's VO changed, leaving a summary APEL made with no job: its summariser never removes it
    regrouped = [r | {"fqan": "/atlas"} if r["fqan"] == "/cms/Capability=NULL" else r for r in changed]
    write_store(state, regrouped)
    assert jobs() != 0
    assert "APEL's summariser never removes such a summary" in capsys.readouterr().err
    # and summaries of a month sent as jobs would count it twice: refused, even with --switch-kind
    write_store(state, changed)
    for extra in ((), ("--switch-kind",)):
        code = main(["apel", "--config", str(config), "--month", "2026-10", "--kind", "summary", "--out", str(out),
                     *extra])  # fmt: skip
        assert code != 0 and "was sent to APEL as --kind jobs" in capsys.readouterr().err
    assert not [p for p in out.rglob("*") if p.is_file() and p.parent.name != "temporary"]
    assert apel_summaries(apel_server) == fairacct_summaries(job_summaries(records))


def test_a_month_sent_as_summaries_switches_to_jobs(
    apel_server: ApelServer, config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state, out = tmp_path / "state", tmp_path / "outgoing"
    write_store(state, jobs_month())
    args = ["apel", "--config", str(config), "--month", "2026-10", "--out", str(out)]
    assert main([*args, "--kind", "summary"]) == 0
    load(apel_server, out)
    assert main([*args, "--kind", "jobs"]) != 0 and "--switch-kind" in capsys.readouterr().err
    assert main([*args, "--kind", "jobs", "--switch-kind"]) == 0
    load(apel_server, out)
    store = EmbeddedStore(state / "fairacct.sqlite")
    records, _ = job_records(store, 2026, 10, replace(ApelOptions(), vo_attribute="group"))
    store.close()
    assert apel_summaries(apel_server) == fairacct_summaries(job_summaries(records))
    assert not math.isnan(sum(v[0] for v in apel_summaries(apel_server).values()))


# -- a generated month of every case at once ---------------------------------------------------------

GENERATED_DNS = (
    BOB, GROSS, GROS, YOSHIDA, HOKKE, WEISS, WEISS2, ADA, '/CN="quoted"', "/CN=a\\,b", "/CN=trail\\",
    "/CN=" + "é" * 251, "/CN=ﬀ", "/CN=FF", "/CN=i̇", "/CN=I",
)  # fmt: skip
GENERATED_FQANS = (None, "/cms/Role=pilot/Capability=NULL", "/cms/role=pilot", "/cms/Capability=NULL",
                   "/atlas/Role=production;/atlas", "/cms")  # fmt: skip


def generated_month(*, respelled: bool = False, kept: float = 1.0, longer: float = 0.0) -> list[dict[str, Any]]:
    """3,000 jobs of October 2026 over 30 sites, each spelled three ways, with every case of the
    issue drawn at random (the same draw each call): ``respelled`` spells one site otherwise,
    ``kept`` keeps that share of the jobs, ``longer`` adds seconds to every job's wall time."""
    draw = random.Random(49)
    rows = []
    for n in range(3000):
        site = draw.choice([f"T2_S{s:02d}" for s in range(30)])
        site = draw.choice([site, site, site, site.lower(), site + " "])
        if respelled and site.strip().upper() == "T2_S03":
            site = "t2_s03"
        rows.append(
            job(site, n, dn=draw.choice(GENERATED_DNS), fqan=draw.choice(GENERATED_FQANS),
                vo=draw.choice(["cms", "CMS", None, "atlas"]), group=draw.choice(["g1", "none", "NULL", "G1"]),
                schedd=draw.choice(["ce1.example", "CE1.example", "ce2.example"]),
                walltime_s=draw.randrange(100_000) + draw.random() + longer, cpu_time_s=float(draw.randrange(50_000)),
                end=draw.choice([float(OCT - 6 * 86400 + draw.randrange(31 * 86400))] * 99 + [LAST_SECOND + 0.6]),
                speed=draw.choice([10.123, 8.0, 12.3456, 11.0005]), cpus=float(draw.choice([0, 1, 8, 1024])),
                job_id=draw.choice(["ce1.example", "CE1.EXAMPLE"]) + f"#{n % 2900}.0#1790000000")
        )  # fmt: skip
        if draw.random() >= kept:
            rows.pop()
    return rows


def test_a_generated_month_of_every_case_holds_fairacct_numbers_in_each_kind(
    apel_server: ApelServer, config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state, out = tmp_path / "state", tmp_path / "outgoing"
    options = ApelOptions(vo_attribute="group", placeholder_site="unknown")

    def send(rows: list[dict[str, Any]], *kinds: str) -> tuple[Any, list[dict[str, Any]]]:
        write_store(state, rows)
        for kind in kinds:
            code = main(
                ["apel", "--config", str(config), "--month", "2026-10", "--out", str(out), "--kind", *kind.split()]
            )
            assert code == 0, capsys.readouterr().err
        capsys.readouterr()
        load(apel_server, out)
        store = EmbeddedStore(state / "fairacct.sqlite")
        result, (records, _) = apel_months(store, [(2026, 10)], options), job_records(store, 2026, 10, options)
        store.close()
        return result, records

    for rows, kinds in (
        (generated_month(), ("summary", "sync")),
        (generated_month(respelled=True, kept=0.9), ("normalised --switch-kind", "sync")),
    ):
        result, _ = send(rows, *kinds)
        sent = fairacct_summaries([r for m in result.months for r in m.summaries])
        assert apel_summaries(apel_server) == sent and view_sums(apel_server, "VNormalisedSummaries", SUMS) == sent
        assert apel_sync(apel_server) == fairacct_sync(result.months)
    assert 2000 < sum(v[0] for v in sent.values()) < 2700

    apel_server.empty()
    (state / "apel-sent.json").unlink()
    for rows in (generated_month(), generated_month(longer=0.7)):  # the second: every job's numbers changed
        _, records = send(rows, "jobs", "sync")
        assert apel_summaries(apel_server) == fairacct_summaries(job_summaries(records))
        assert apel_server.rows("SELECT COUNT(*) AS n FROM JobRecords")[0]["n"] == len(records) > 2500
        hosts: dict[tuple[str, str, int, int], int] = {}
        for r in records:
            key = (general_ci_key(r["Site"]), general_ci_key(r["SubmitHost"]), 2026, 10)
            hosts[key] = hosts.get(key, 0) + 1
        assert apel_sync(apel_server) == hosts
