"""Fair usage end to end: the penalty and fairshare commands, Maui's files and diagnose -f."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from probes.accounting import FairsharePolicy, fairshare
from probes.cli import main
from probes.cli.times import parse_time
from probes.cli.usage_views import diagnose_f
from probes.config import parse_config
from probes.pipeline.usage import alea_machines, fs_files, slot_machines
from probes.sources.history import read_history
from probes.sources.status import read_status

from ..conftest import DEMO, ROOT


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def wagap(metacentrum: Path) -> tuple[Path, Path]:
    return metacentrum / "wagap-2013.swf", metacentrum / "wagap-2013.machines"


@pytest.fixture(scope="module")
def wagap_penalty(wagap: tuple[Path, Path]) -> dict[str, Any]:
    swf, machines = wagap
    code, out, err = run("penalty", "--swf", str(swf), "--machines", str(machines), "--json")
    assert code == 0, err
    return json.loads(out)  # type: ignore[no-any-return]


def test_every_wagap_job_is_priced(wagap: tuple[Path, Path], wagap_penalty: dict[str, Any]) -> None:
    jobs = wagap_penalty["jobs"]
    # all 17,900 jobs, none dropped, each with a finite penalty
    assert [j["job_id"] for j in jobs] == [str(i) for i in range(17_900)]
    assert all(np.isfinite(j["penalty"]) and j["penalty"] > 0 for j in jobs)
    for key in ("job_id", "user", "group", "queue", "penalty", "cpu_only", "standard_job", "global_pe",
                "walltime", "speed", "usage", "unmatched"):  # fmt: skip
        assert key in jobs[0], key
    # job 0, "1:ppn=64:x86_64:cl_zewura#excl": a whole zewura node, 80 cores x cost 1
    j0 = jobs[0]
    assert (j0["penalty"], j0["cpu_only"], j0["priced_on"], j0["queue"]) == (80.0, 64.0, ["zewura"], "q_1d")
    assert j0["usage"] == 56011 * 1.0 * 80  # walltime x speed (unknown: 1.0) x penalty
    assert j0["speed"] == 1.0 and j0["speed_known"] is False
    # job 1, "1:ppn=12" with 91268055040 B = 87040 MiB: zegox max(12/12, 87040/91832) x 12 = 12,
    # zewura max(12/80, 87040/517018) x 80 = 13.47; standard job max(12/1, 87040/1024) = 85
    j1 = jobs[1]
    assert (j1["penalty"], j1["priced_on"], j1["standard_job"]) == (12.0, ["zegox"], 85.0)
    # Moab's PE against 2176 cores and 20 x 517018 + 48 x 91832 MiB
    assert j1["global_pe"] == pytest.approx(87040 / (20 * 517018 + 48 * 91832) * 2176)
    # one job fits nowhere: 80 cores and 512 GiB, more than zewura's 505 GiB
    unmatched = [j for j in jobs if j["unmatched"]]
    assert [(j["job_id"], j["user"]) for j in unmatched] == [("8687", "836")]
    # users: the sum of their jobs' usage
    total: dict[str, float] = {}
    for j in jobs:
        total[j["user"]] = total.get(j["user"], 0.0) + j["usage"]
    assert wagap_penalty["users"] == pytest.approx(total)
    assert len(total) == 75


def test_the_cluster_pins_are_respected(wagap: tuple[Path, Path], wagap_penalty: dict[str, Any]) -> None:
    specs = [line.split()[20] for line in wagap[0].read_text().splitlines()]
    jobs = wagap_penalty["jobs"]
    zegox = [j for j, spec in zip(jobs, specs, strict=True) if "cl_zegox" in spec]
    zewura = [j for j, spec in zip(jobs, specs, strict=True) if "cl_zewura" in spec and "^cl_zewura" not in spec]
    assert len(zegox) == 320 and len(zewura) == 575
    assert {tuple(j["priced_on"]) for j in zegox} == {("zegox",)}  # never on zewura, though it may be cheaper
    assert {tuple(j["priced_on"]) for j in zewura} == {("zewura",)}
    # "1:ppn=1:^cl_zewura" and the zegoxNN host pins
    pinned = [
        j for j, spec in zip(jobs, specs, strict=True) if "^cl_zewura" in spec or ":zegox2" in spec or "zegox17" in spec
    ]
    assert pinned and {tuple(j["priced_on"]) for j in pinned} == {("zegox",)}


def test_who_pays_more_under_the_penalty(wagap: tuple[Path, Path], wagap_penalty: dict[str, Any]) -> None:
    summary = wagap_penalty["summary"]
    assert (summary["jobs"], summary["unmatched"], summary["users"]) == (17_900, 1, 75)
    assert len(summary["users_paying_more"]) == 32
    by_user = {u["user"]: u for u in wagap_penalty["by_user"]}
    # user 1037: 16 jobs that hold much memory on few cores pay 23 times their cores
    assert by_user["1037"]["ratio"] == pytest.approx(23.406, abs=1e-3)
    assert "1037" in summary["users_paying_more"] and "1242" not in summary["users_paying_more"]
    swf, machines = wagap
    code, out, err = run("penalty", "--swf", str(swf), "--machines", str(machines))
    assert code == 0, err
    assert "== who pays more under the penalty than under cpu_only\n32 of 75 users pay more" in out
    assert "RAM per node read as KB" in out  # the assumed reading is said
    assert "ppn=1.5 is not a whole number" in err


def test_fairshare_of_the_wagap_workload(wagap: tuple[Path, Path], tmp_path: Path) -> None:
    swf, machines = wagap
    config = tmp_path / "fs.toml"
    config.write_text(
        '[fairshare]\ninterval_s = 604800\ndepth = 4\ndecay = 0.5\nmetric = "mrpe"\n'
        'targets = { user = { "1037" = "5-", "62" = "10+", "836" = "8%" } }\n'
    )
    code, out, err = run(
        "fairshare", "--config", str(config), "--swf", str(swf), "--machines", str(machines),
        "--at", "2013-03-30T00:00:00Z", "--fs-dir", str(tmp_path / "fs"), "--json",
    )  # fmt: skip
    assert code == 0, err
    doc = json.loads(out)
    # weeks start on multiples of 604800 s (Thursdays): 2013-03-28 holds the 30th
    assert [w["start_iso"] for w in doc["windows"]] == [
        "2013-03-28T00:00:00Z", "2013-03-21T00:00:00Z", "2013-03-14T00:00:00Z", "2013-03-07T00:00:00Z",
    ]  # fmt: skip
    assert doc["at"] == parse_time("2013-03-30T00:00:00Z") == 1364601600
    creds = {(c["type"], c["name"]): c for c in doc["credentials"]}
    totals = [w["total"] for w in doc["windows"]]
    users = [c for c in doc["credentials"] if c["type"] == "user"]
    for n, total in enumerate(totals):  # every job has a user: users add up to the total
        assert sum(c["usage"][n] for c in users) == pytest.approx(total)
    weights = [1, 0.5, 0.25, 0.125]
    u1037 = creds[("user", "1037")]
    assert u1037["effective"] == pytest.approx(np.dot(u1037["usage"], weights) / np.dot(totals, weights))
    assert (u1037["target"], u1037["target_mode"]) == (5.0, "cap")
    assert u1037["priority"] == pytest.approx(min(0.0, 5 - 100 * u1037["effective"]))
    assert creds[("user", "836")]["over_cap"] is (100 * creds[("user", "836")]["effective"] >= 8)
    assert creds[("user", "62")]["priority"] == 10.0  # no usage in these 4 weeks: its whole floor
    # Maui's window files, one per window, each category adding up to TOTAL
    files = sorted((tmp_path / "fs").iterdir())
    assert [f.name for f in files] == [f"FS.{int(w['start'])}" for w in reversed(doc["windows"])]
    lines = (tmp_path / "fs" / "FS.1364428800").read_text().splitlines()
    assert lines[0] == "# Fairshare Data File (Duration: 604800 Seconds) Starting: Thu Mar 28 00:00:00"
    sums: dict[str, float] = {}
    for line in lines[2:-1]:
        kind, _, value = line.split()
        sums[kind] = sums.get(kind, 0.0) + float(value)
    total = float(lines[-1].split()[1])
    assert lines[-1].startswith("TOTAL ") and total == pytest.approx(totals[0], abs=0.01)
    assert sums["User"] == pytest.approx(total, rel=1e-9) and sums["Group"] == pytest.approx(total, rel=1e-9)
    assert sums["Class"] == pytest.approx(total, rel=1e-9)
    assert set(sums) == {"User", "Group", "Class"}  # SWF logs name no account and no QOS


def test_the_fairshare_table_names_the_credentials_with_targets(wagap: tuple[Path, Path], tmp_path: Path) -> None:
    swf, machines = wagap
    source = ("--swf", str(swf), "--machines", str(machines), "--at", "2013-03-30T00:00:00Z")
    code, out, err = run("fairshare", *source)
    assert code == 0, err
    assert "credentials with targets" not in out  # none configured: no table of one nameless row
    config = tmp_path / "fs.toml"
    config.write_text('[fairshare]\ntargets = { user = { "1037" = "5-", "62" = "10+" } }\n')
    code, out, err = run("fairshare", "--config", str(config), *source)
    assert code == 0, err
    table = out.split("credentials with targets")[1].split("\n== ")[0].splitlines()[1:]
    assert table[0].split()[:2] == ["type", "name"]
    assert sorted(line.split()[:2] for line in table[1:] if line.strip()) == [["user", "1037"], ["user", "62"]]


def test_the_seed_004_fairshare_data_file() -> None:
    """The sample of seed 004, 6.3.2.3, rebuilt from jobs (2-day windows; Aug 18 2006 00:00 UTC)."""
    k = 1000.0
    start = 1155859200  # Fri Aug 18 2006 00:00:00 UTC, a multiple of 172800
    rows = [
        ("USERA", "GROUPA", "ACCTA", "0", 50 * k), ("USERA", "GROUPA", "ACCTA", "1", 100 * k),
        ("USERB", "GROUPA", "ACCTA", "1", 150 * k), ("USERC", "GROUPA", "ACCTB", "1", 50 * k),
        ("USERC", "GROUPB", "ACCTB", "1", 150 * k), ("USERD", "GROUPB", "ACCTC", "2", 100 * k),
    ]  # fmt: skip
    jobs = pd.DataFrame(
        [
            {"user": u, "group": g, "project": a, "queue": None, "qos": q, "end": start + 60.0, "walltime_s": 1.0}
            for u, g, a, q, _ in rows
        ]
    )
    result = fairshare(jobs, [r[4] for r in rows], FairsharePolicy(interval_s=172800, depth=1), at=start + 3600)
    assert fs_files(result) == {
        f"FS.{start}": (
            "# Fairshare Data File (Duration: 172800 Seconds) Starting: Fri Aug 18 00:00:00\n"
            "\n"
            "User USERA 150000.000\n"
            "User USERB 150000.000\n"
            "User USERC 200000.000\n"
            "User USERD 100000.000\n"
            "Group GROUPA 350000.000\n"
            "Group GROUPB 250000.000\n"
            "Account ACCTA 300000.000\n"
            "Account ACCTB 200000.000\n"
            "Account ACCTC 100000.000\n"
            "QOS 0 50000.000\n"
            "QOS 1 450000.000\n"
            "QOS 2 100000.000\n"
            "TOTAL 600000.00\n"
        )
    }


def test_diagnose_f_on_seed_004_john() -> None:
    interval = 43200.0
    john, total = [60.0, 0.0, 10.0, 50.0], [110.0, 125.0, 100.0, 150.0]
    rows = []
    for n in range(4):
        end = (1000 - n) * interval + 60
        if john[n]:
            rows.append({"user": "john", "end": end, "walltime_s": 1.0, "u": john[n]})
        rows.append({"user": "mary", "end": end, "walltime_s": 1.0, "u": total[n] - john[n]})
    jobs = pd.DataFrame(rows)
    policy = FairsharePolicy(interval_s=interval, depth=4, decay=0.5, targets={"user": {"john": "20+"}})
    text = diagnose_f(fairshare(jobs, jobs["u"], policy, at=1000 * interval + 3600))
    lines = text.splitlines()
    assert lines[:6] == [
        "FairShare Information",
        "",
        "Depth: 4 intervals   Interval Length: 12:00:00   Decay Rate: 0.50",
        "",
        "FS Policy: DEDICATEDPS",
        "",
    ]
    assert lines[6] == "FSInterval        %     Target       0       1       2       3"
    assert lines[7] == "FSWeight       ------- -------  1.0000  0.5000  0.2500  0.1250"
    assert lines[8] == "TotalUsage      100.00 -------     0.0     0.0     0.0     0.0"  # hours of usage
    # 68.75 / 216.25 = 31.79 %; per window 60/110, -, 10/100, 50/150; above its floor of 20
    assert "john             31.79  20.00+   54.55 -------   10.00   33.33" in lines
    assert lines[lines.index("USER") + 1] == "-------------"


def test_penalty_of_the_demo_pool() -> None:
    code, out, err = run("penalty", "--config", str(ROOT / "config/demo.toml"), "--json")
    assert code == 0, err
    doc = json.loads(out)
    jobs = {j["job_id"].split("#")[1]: j for j in doc["jobs"]}
    assert len(jobs) == 60
    # 4143.3: 8 cores, 32768 MiB, 1 GPU; cheapest on a 64-core 512 GiB 8-GPU node:
    # max(8/64, 32768/524288) x 64 = 8; it ran at HEPSPEC 14.1 for 14191 s
    dave = jobs["4143.3"]
    assert (dave["penalty"], dave["speed"], dave["ran_on"]) == (8.0, 14.1, "c32-m131072-g4")
    assert dave["usage"] == pytest.approx(14191 * 14.1 * 8)
    # Moab's PE of 4147.0 (1 core, 8192 MiB) against the pool's totals
    snapshot, _ = read_status([DEMO / "status.ads"])
    cores, memory = snapshot.slots["total_cpus"].sum(), snapshot.slots["total_memory"].sum()
    assert jobs["4147.0"]["global_pe"] == pytest.approx(max(1 / cores, 8192 / memory) * cores)
    assert doc["summary"]["users_paying_more"] == []  # a pool generous in memory: nobody pays more


def test_fairshare_needs_no_machines_for_dedicated_ps(tmp_path: Path) -> None:
    config = tmp_path / "fs.toml"
    config.write_text("[fairshare]\ninterval_s = 1e9\ndepth = 1\n")
    code, out, err = run("fairshare", "--config", str(config), "--history", str(DEMO / "history.ads"), "--json")
    assert code == 0, err
    doc = json.loads(out)
    jobs, _ = read_history([DEMO / "history.ads"])
    # one window of 1e9 s holds every job: cores x walltime, per user
    expected = (jobs["cpus"] * jobs["walltime_s"]).groupby(jobs["user"]).sum()
    got = {c["name"]: c["usage"][0] for c in doc["credentials"] if c["type"] == "user"}
    assert got == pytest.approx(expected.to_dict())
    assert doc["windows"][0]["total"] == pytest.approx(float(expected.sum()))


def test_speed_and_cost_from_expressions(metacentrum: Path, condor25: Path) -> None:
    config = parse_config({"machines": {"speed_expression": "Column7 * 2", "cost_attribute": "Mips"}})
    machines, _ = alea_machines(metacentrum / "NGI_CZ.machines", config)
    adan = machines.set_index("name").loc["adan"]
    assert adan["speed"] == 11.8 and adan["node_cost"] == 1.0  # 5.9 x 2; Mips is undefined: kept
    config = parse_config({"machines": {"cost_expression": "TotalSlotGPUs > 0 ? 4 : 1", "speed_attribute": "HEPSPEC"}})
    snapshot, _ = read_status([condor25 / "status.ads"], config.slot_reading())
    classes = slot_machines(snapshot.slots, snapshot.ads, config)
    assert classes[["gpus", "node_cost", "speed"]].values.tolist() == [[0.0, 1.0, 10.5], [4.0, 4.0, 15.0]]


@pytest.mark.parametrize(
    ("argv", "code", "message"),
    [
        (["penalty", "--swf", "{swf}"], 2,
         ("fairacct: configuration error: no machines: give --machines (an Alea machines file) or --status-file, "
         "or set sources.status_files\n")),
        (["penalty", "--swf", "{swf}", "--history", "{swf}", "--machines", "{machines}"], 2,
         "fairacct: configuration error: give --history or --swf, not both\n"),
        (["penalty", "--machines", "{machines}"], 2,
         "fairacct: configuration error: no jobs: give --swf or --history, "
         "or set sources.history in the configuration\n"),
        (["penalty", "--swf", "/nonexistent.swf", "--machines", "{machines}"], 1,
         "fairacct: /nonexistent.swf: no such file\n"),
        (["fairshare", "--swf", "{swf}", "--at", "yesterday"], 2,
         ("fairacct: configuration error: --at: expected UNIX seconds or an ISO-8601 time like 2013-03-30T00:00:00Z, "
         "got 'yesterday'\n")),
        (["fairshare", "--swf", "{swf}", "--config", "{mrpe}"], 2,
         ("fairacct: configuration error: fairshare.metric 'mrpe' prices jobs against the machines: give --machines "
         "or --status-file\n")),
        (["fairshare", "--swf", "{swf}", "--config", "{billed}"], 2,
         ("fairacct: configuration error: {billed}: fairshare.metric: 'billed' is not available yet: bills are not "
         "stored per job; use dedicated_ps, dedicated_pes, utilized_ps or mrpe\n")),
    ],
)  # fmt: skip
def test_errors_are_one_line_and_an_exit_code(tmp_path: Path, argv: list[str], code: int, message: str) -> None:
    swf = tmp_path / "tiny.swf"
    swf.write_text("1 0 0 10 1 -1 -1 1 60 1024 1 7 1 -1 1 1 -1 -1\n")
    machines = tmp_path / "tiny.machines"
    machines.write_text("0\ttiny\t1\t8\t1\t16\n")
    (tmp_path / "mrpe.toml").write_text('[fairshare]\nmetric = "mrpe"\n')
    (tmp_path / "billed.toml").write_text('[fairshare]\nmetric = "billed"\n')
    names = {"swf": swf, "machines": machines, "mrpe": tmp_path / "mrpe.toml", "billed": tmp_path / "billed.toml"}
    got, out, err = run(*[a.format(**names) for a in argv])
    assert (got, err) == (code, message.format(**names)), out


def test_a_tiny_workload_by_hand(tmp_path: Path) -> None:
    """One SWF job of 2 processors x 4 GiB each on 8-core 16 GB nodes (RAM in GB), run 100 s."""
    swf = tmp_path / "tiny.swf"
    swf.write_text("1 0 0 100 2 -1 -1 2 600 4194304 1 7 1 -1 1 1 -1 -1\n")
    machines = tmp_path / "tiny.machines"
    machines.write_text("0\ttiny\t4\t8\t1\t16\n")
    code, out, err = run("penalty", "--swf", str(swf), "--machines", str(machines), "--json")
    assert code == 0, err
    (job,) = json.loads(out)["jobs"]
    # each processor: max(1/8, 4/16) x 8 = 2; two of them: 4; usage 100 s x 1.0 x 4
    assert (job["penalty"], job["cpu_only"], job["usage"], job["nodes"]) == (4.0, 2.0, 400.0, 2.0)
    # standard job (1 core, 1 GiB): 2 x max(1, 4) = 8; Moab's PE: max(2/32, 8/64) x 32 = 4
    assert (job["standard_job"], job["global_pe"]) == (8.0, 4.0)
    assert "RAM per node read as GB" in err


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("1364601600", 1364601600.0), ("2013-03-30T00:00:00Z", 1364601600.0), ("2013-03-30T00:00:00", 1364601600.0),
     ("2013-03-30T01:00:00+01:00", 1364601600.0)],
)  # fmt: skip
def test_times(text: str, seconds: float) -> None:
    assert parse_time(text) == seconds
