"""Rolling upgrades (issue 39, point 1): a collector takes the record schema of the previous
release and its own, counts which it got on /metrics, and refuses a newer one whole (409
``schema_too_new``, naming both versions); a probe keeps what a collector of an older release
refuses for being older, and says so in one line.

The ``slow`` tests build the previous release's wheel from its git revision (nothing
downloaded), install it into a venv of its own that borrows this venv's dependencies, and run
its probe against today's collector and today's probe against its collector, as processes on
127.0.0.1."""

from __future__ import annotations

import re
import shutil
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from collector.outbox import Outbox
from collector.records import ACCEPTED_SCHEMA_VERSIONS, SCHEMA_VERSION
from collector.release import NOT_SAID, RELEASE_HEADER, release
from collector.sinks.http import CollectorSink, older_collector

from ...conftest import DEMO, ROOT
from .conftest import FAIRACCT, Collector, record

PREVIOUS_RELEASE = "909f578"
"""The git revision of the release before this one (docs/upgrading.md)."""

PROBE = f"fairacct@{socket.gethostname()}"
"""The name both releases' probes give their records on this host."""

DEMO_SITES = ["CIT_CMS_T2", "FNAL", "Nebraska", "Purdue", "UCSD", "unknown"]
"""The sites of the demo pool's records (today's collector takes a probe's records for the sites listed)."""

OLD_REFUSAL = "'schema_version' must be 1 (this collector's), got 2"
"""How the previous release's collector words the refusal of a record of a newer schema."""


def metric(c: Collector, name: str, **labels: str) -> float | None:
    text = httpx.get(f"{c.url}/metrics").text
    want = ",".join(f'{k}="{v}"' for k, v in labels.items())
    match = re.search(rf"^{name}{{{re.escape(want)}}} (\S+)$", text, re.M)
    return None if match is None else float(match[1])


def token(tmp_path: Path, c: Collector, probe: str) -> Path:
    path = tmp_path / f"{probe}.token"
    path.write_text(c.tokens[probe] + "\n")
    path.chmod(0o600)
    return path


def test_the_collector_takes_the_previous_schema_and_its_own_and_counts_each(start_collector: Any) -> None:
    assert (SCHEMA_VERSION, ACCEPTED_SCHEMA_VERSIONS) == (1, (0, 1))  # the schema did not change since 909f578
    c: Collector = start_collector()
    docs = [record(i, "p1") for i in range(3)] + [record(i, "p1", schema_version=0) for i in range(3, 5)]
    reply = httpx.post(f"{c.url}/v1/records", json=docs, headers=c.auth("p1"))
    assert (reply.status_code, reply.json()) == (202, {"accepted": 5, "rejected": []})
    assert metric(c, "fairacct_collector_records_by_schema_total", schema_version="1") == 3
    assert metric(c, "fairacct_collector_records_by_schema_total", schema_version="0") == 2
    odd = httpx.post(f"{c.url}/v1/records", json=[record(9, "p1", schema_version=-1)], headers=c.auth("p1"))
    assert odd.status_code == 400
    assert odd.json()["rejected"][0]["reason"] == "'schema_version' must be 0 or 1 (this collector's), got -1"


def test_the_collector_counts_records_and_probes_by_the_senders_release(start_collector: Any, tmp_path: Path) -> None:
    """A rollout followed in /metrics (issue 50, point 3): the release each probe's last batch
    named, and the records by release; a probe that names none is of a release before 0.2.0."""
    c: Collector = start_collector(tokens={"p1": "token-one", "p2": "token-two", "p3": "token-three"})
    with (
        Outbox(tmp_path / "o.sqlite") as outbox,
        CollectorSink(f"collector+{c.url}", token_file=token(tmp_path, c, "p1")) as sink,
    ):
        outbox.commit({"job": [record(i, "p1") for i in range(3)]}, {})
        assert outbox.flush(sink).sent["job"] == 3
    old = httpx.post(f"{c.url}/v1/records", json=[record(9, "p2")], headers=c.auth("p2"))  # as 909f578's probe
    forged = httpx.post(f"{c.url}/v1/records", json=[], headers={**c.auth("p3"), RELEASE_HEADER: 'x{bad} "1"'})
    assert (old.status_code, forged.status_code) == (202, 202)
    assert metric(c, "fairacct_collector_records_by_release_total", release=release()) == 3
    assert metric(c, "fairacct_collector_records_by_release_total", release=NOT_SAID) == 1
    assert metric(c, "fairacct_collector_probes_by_release", release=release()) == 1
    assert metric(c, "fairacct_collector_probe_release", probe="p1", release=release()) == 1
    assert metric(c, "fairacct_collector_probe_release", probe="p2", release=NOT_SAID) == 1
    assert metric(c, "fairacct_collector_probe_release", probe="p3", release="invalid") == 1  # never free text


def test_a_newer_schema_is_refused_whole_naming_both_versions(start_collector: Any) -> None:
    c: Collector = start_collector()
    docs = [record(1, "p1"), record(2, "p1", schema_version=2)]
    reply = httpx.post(f"{c.url}/v1/records", json=docs, headers=c.auth("p1"))
    assert reply.status_code == 409
    assert reply.json() == {
        "error": "record 1 has schema_version 2, newer than this collector's 1 (it takes 0 or 1): upgrade the "
        "collector before its probes; nothing was stored, keep the records"
    }
    assert metric(c, "fairacct_collector_request_errors_total", endpoint="records", reason="schema_too_new") == 1
    assert metric(c, "fairacct_collector_records_by_schema_total", schema_version="1") is None  # nothing stored
    assert httpx.get(f"{c.url}/healthz").json()["outbox"]["depth"] == 0


def test_a_probe_keeps_what_a_collector_refuses_as_too_new_and_says_so_in_one_line(
    start_collector: Any, tmp_path: Path
) -> None:
    c: Collector = start_collector()
    with (
        Outbox(tmp_path / "o.sqlite") as outbox,
        CollectorSink(f"collector+{c.url}", token_file=token(tmp_path, c, "p1")) as sink,
    ):
        outbox.commit({"job": [record(1, "p1", schema_version=2), record(2, "p1", schema_version=2)]}, {})
        result = outbox.flush(sink)
        assert result.retried["job"] == 2 and outbox.status().depth == {"job": 2} and not outbox.dead_letters()
        assert len(result.errors) == 1 and "\n" not in result.errors[0]
        assert "the collector is of an older release than this probe: record 0 has schema_version 2, newer than " \
            "this collector's 1" in result.errors[0]  # fmt: skip
        assert result.errors[0].endswith("the records stay in the outbox until then")


def test_the_older_collectors_wording_is_recognised() -> None:
    assert older_collector(OLD_REFUSAL) == (
        "the collector is of an older release: it takes schema_version 1, this record is 2; upgrade the collector "
        "(collector first, then probes); the records stay in the outbox until then"
    )
    kinds = (
        "'kind' must be one of slot, allocation, job, fairshare, fairness, priority, got 'gap' (summaries are made "
        "by the collector, Gratia records come from Gratia probes to /gratia-servlets/rmi)"
    )
    assert older_collector(kinds) == (
        "the collector is of an older release: it does not know 'gap' records yet; upgrade the collector "
        "(collector first, then probes); the records stay in the outbox until then"
    )
    assert older_collector("'schema_version' must be 1 (this collector's), got 0") is None  # an old record's fault
    assert older_collector(kinds.replace("'gap'", "'nonsense'")) is None
    assert older_collector("'timestamp' must be an ISO-8601 UTC time") is None


# -- the previous release, as processes --------------------------------------------------------


@pytest.fixture(scope="module")
def previous_fairacct(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The ``fairacct`` of the previous release: its wheel built from its git revision offline
    and installed (without dependencies) in a venv that reads this venv's site-packages."""
    git = shutil.which("git")
    if git is None or not (ROOT / ".git").exists():
        pytest.skip("needs git and the project's history (a source checkout) to build the previous release")
    if subprocess.run([git, "-C", str(ROOT), "cat-file", "-e", f"{PREVIOUS_RELEASE}^{{commit}}"]).returncode:
        pytest.skip(f"revision {PREVIOUS_RELEASE} (the previous release) is not in this checkout's history")
    root = tmp_path_factory.mktemp("previous")
    src = root / "src"
    src.mkdir()
    archive = subprocess.run([git, "-C", str(ROOT), "archive", PREVIOUS_RELEASE], capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(src)], input=archive.stdout, check=True)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input"]
    subprocess.run([*pip, "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-w", str(root / "wheel"),
                    str(src)], capture_output=True, check=True, timeout=600)  # fmt: skip
    venv = root / "venv"
    subprocess.run([sys._base_executable, "-m", "venv", "--without-pip", str(venv)], check=True)  # type: ignore[attr-defined]
    (site,) = venv.glob("lib/python*/site-packages")
    ours = [p for p in sys.path if Path(p).name == "site-packages"]
    (site / "dependencies.pth").write_text("".join(f"{p}\n" for p in ours))  # paths: not our editable install
    (wheel,) = (root / "wheel").glob("fairacct-*.whl")
    subprocess.run([*pip, "--python", str(venv / "bin" / "python"), "install", "--no-deps", "--no-index",
                    "--ignore-installed", str(wheel)], capture_output=True, check=True, timeout=600)  # fmt: skip
    check = subprocess.run([str(venv / "bin" / "python"), "-c", "import collector; print(collector.__file__)"],
                           capture_output=True, text=True, check=True, cwd=root)  # fmt: skip
    assert check.stdout.startswith(str(site)), check.stdout  # the old release, not this checkout
    yield str(venv / "bin" / "fairacct")


def probe_config(tmp_path: Path, url: str, token: Path) -> Path:
    path = tmp_path / "probe.toml"
    path.write_text(
        f"""[pool]
name = "demo"
[sources]
status_files = ["{DEMO / "status.ads"}"]
history = ["{DEMO / "history.ads"}"]
[probe]
state_dir = "state"
[store]
url = "collector+{url}"
token_file = "{token}"
"""
    )
    return path


def probe_once(fairacct: str, config: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([fairacct, "probe", "once", "--config", str(config)], capture_output=True, text=True,
                          timeout=900, cwd=config.parent)  # fmt: skip


def drained(c: Collector, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while httpx.get(f"{c.url}/healthz").json()["outbox"]["depth"]:
        assert time.monotonic() < deadline, c.log
        time.sleep(0.2)


@pytest.mark.slow
def test_the_previous_releases_probe_sends_to_todays_collector(
    previous_fairacct: str, start_collector: Any, tmp_path: Path
) -> None:
    scope = {"probe": PROBE, "sites": DEMO_SITES, "pools": ["demo"]}
    c: Collector = start_collector(tokens={PROBE: "token-demo"}, probes=[scope])
    run = probe_once(previous_fairacct, probe_config(tmp_path, c.url, token(tmp_path, c, PROBE)))
    assert run.returncode == 0, run.stdout + run.stderr
    with Outbox(tmp_path / "state" / "outbox.sqlite") as outbox:
        assert outbox.status().depth == {} and outbox.dead_letters() == []  # every record taken
    drained(c)
    sent = metric(c, "fairacct_collector_records_total", endpoint="records", probe=PROBE)
    assert sent is not None and sent > 0
    assert metric(c, "fairacct_collector_records_by_schema_total", schema_version="1") == sent
    assert metric(c, "fairacct_collector_record_errors_total", endpoint="records", probe=PROBE) is None
    # schema 1 for both releases: the release says which probe still runs the old one (issue 50, point 3)
    assert metric(c, "fairacct_collector_records_by_release_total", release=NOT_SAID) == sent
    assert metric(c, "fairacct_collector_probe_release", probe=PROBE, release=NOT_SAID) == 1


@pytest.mark.slow
def test_todays_probe_sends_to_the_previous_releases_collector_and_keeps_what_it_cannot_take(
    previous_fairacct: str, start_collector: Any, tmp_path: Path
) -> None:
    c: Collector = start_collector(tokens={PROBE: "token-demo", "p1": "token-one"}, command=previous_fairacct)
    run = probe_once(FAIRACCT, probe_config(tmp_path, c.url, token(tmp_path, c, PROBE)))
    with Outbox(tmp_path / "state" / "outbox.sqlite") as outbox:
        assert outbox.dead_letters() == []  # nothing lost for the collector being older
        waiting = outbox.status().depth
    drained(c)
    sent = metric(c, "fairacct_collector_records_total", endpoint="records", probe=PROBE)
    assert sent is not None and sent > 0, run.stdout + run.stderr
    assert set(waiting) <= {"gap"}, run.stdout + run.stderr  # a kind 909f578 does not know waits
    if waiting:
        assert "it does not know 'gap' records yet; upgrade the collector" in run.stdout + run.stderr
    # a record of a newer schema than the old collector's: kept, said in one line
    with (
        Outbox(tmp_path / "o.sqlite") as outbox,
        CollectorSink(f"collector+{c.url}", token_file=token(tmp_path, c, "p1")) as sink,
    ):
        outbox.commit({"job": [record(1, "p1"), record(2, "p1", schema_version=2)]}, {})
        result = outbox.flush(sink, max_batches=1)
        assert (result.sent["job"], result.retried["job"]) == (1, 1) and not outbox.dead_letters()
        assert outbox.status().depth == {"job": 1}
        assert result.errors == (
            f"job: 1 record(s) to retry, e.g. {c.url}/v1/records: the collector is of an older release: it takes "
            "schema_version 1, this record is 2; upgrade the collector (collector first, then probes); the records "
            "stay in the outbox until then",
        )
    with (
        Outbox(tmp_path / "o2.sqlite") as outbox,
        CollectorSink(f"collector+{c.url}", token_file=token(tmp_path, c, "p1")) as sink,
    ):
        outbox.commit({"gap": [record(3, "p1", kind="gap")]}, {})  # a kind 909f578 does not know yet
        # the kinds it takes, queued behind the one it refuses (issue 50, point 2: they stalled behind it)
        outbox.commit({"slot": [record(4, "p1", kind="slot")], "job": [record(5, "p1"), record(6, "p1")]}, {})
        result = outbox.flush(sink)
        assert result.retried["gap"] == 1 and outbox.status().depth == {"gap": 1} and not outbox.dead_letters()
        assert "it does not know 'gap' records yet; upgrade the collector" in result.errors[0]
        assert (result.sent["slot"], result.sent["job"]) == (1, 2)  # every other kind goes on
        again = outbox.flush(sink)  # the next flush asks once for the refused kind, and it waits alone
        assert again.retried["gap"] == 1 and outbox.status().depth == {"gap": 1}


@pytest.mark.slow
def test_an_embedded_store_the_previous_release_wrote_is_migrated_and_kept_whole(
    previous_fairacct: str, tmp_path: Path
) -> None:
    config = probe_config(tmp_path, "", tmp_path / "unused")
    config.write_text(config.read_text().replace('url = "collector+"', 'url = "sqlite:///store.sqlite"'))
    run = probe_once(previous_fairacct, config)
    assert run.returncode == 0, run.stdout + run.stderr
    path = tmp_path / "state" / "store.sqlite"
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone() == (0,)  # the previous release's: no number
        before = {kind: db.execute(f'SELECT count(*), total(length(doc)) FROM "{kind}"').fetchone()
                  for (kind,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}  # fmt: skip
    db.close()
    assert before["job"][0] == 60 and before["slot"][0] == 36
    run = probe_once(FAIRACCT, config)  # today's probe, on the same state directory
    assert run.returncode == 0, run.stdout + run.stderr
    assert f"{path}: embedded store migrated from layout 0 to 2: " in run.stderr
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone() == (2,)
        (jobs,) = db.execute("SELECT count(*) FROM job").fetchone()
        kept = {kind: db.execute(f'SELECT count(*), total(length(doc)) FROM "{kind}"').fetchone() for kind in before}
    db.close()
    assert jobs == 60  # the history was read once: nothing doubled
    assert all(kept[k][0] >= before[k][0] for k in before), (before, kept)  # nothing lost
