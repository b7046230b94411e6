"""A Gratia sender reports under its own name and for its own sites (issue 54, point 8), against a
real collector process on 127.0.0.1 and a real client: a listed sender (ce02, from its own
network) sent records whose ProbeName was ce01's and SiteName SiteA, and the collector's Gratia
summaries, which group by the record's own names, put its 400 core-hours in ce01/SiteA's rows.
Now such an envelope is refused whole (403, a text gratia-probe keeps its records on, counted as
``forbidden``), and the summaries hold each sender's own records only."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from collector.sinks.sqlite import EmbeddedStore

from ..gratia.conftest import envelope, jur
from .conftest import Collector
from .test_gratia import LOOPBACK, drained, form, post

CE01, CE02 = "condor:ce01.example.org", "condor:ce02.example.org"
# yesterday at noon (UTC): a day the collector's own summarizer re-summarizes (its last 7 days)
END = (datetime.now(UTC) - timedelta(days=1)).replace(hour=12, minute=0, second=0, microsecond=0)


def job(n: int, probe: str, site: str, wall_s: int, cores: int) -> bytes:
    """A JobUsageRecord of ``wall_s`` x ``cores`` core-seconds, reported by ``probe`` for ``site``."""
    return jur(
        f"<JobIdentity><LocalJobId>{n}</LocalJobId></JobIdentity><WallDuration>PT{wall_s}S</WallDuration>"
        f"<Processors>{cores}</Processors><EndTime>{END:%Y-%m-%dT%H:%M:%SZ}</EndTime>"
        f"<ProbeName>{probe}</ProbeName><SiteName>{site}</SiteName>",
        record_id=f"{probe}:{n}",
    )


def send(c: Collector, sender: str, *records: bytes) -> httpx.Response:
    return post(c, form(envelope(records), sender=sender))


def summary_rows(c: Collector) -> dict[tuple[str, str], float]:
    """The collector's own Gratia summaries of END's day: core-hours by (ProbeName, SiteName)."""
    path = c.root / "collector" / "store.sqlite"
    if not path.exists():
        return {}
    with EmbeddedStore(path) as store:
        docs = [d for d in store.query("summary", limit=1000) if d["record_kind"] == "gratia"]
    return {(d["ProbeName"], d["SiteName"]): round(d["CoreHours"], 9) for d in docs}


@pytest.fixture
def two_sites(start_collector: Any) -> Collector:
    """ce01 may report for SiteA, ce02 for SiteB and SiteC; both send from loopback. The summarizer
    runs every second."""
    c: Collector = start_collector(
        gratia_senders=[{"probe": CE01, "networks": LOOPBACK, "sites": ["SiteA"]},
                        {"probe": CE02, "networks": LOOPBACK, "sites": ["SiteB", "SiteC"]}],
        summaries_every_s=1,
    )  # fmt: skip
    return c


def test_a_sender_cannot_report_in_anothers_name_or_for_anothers_site(two_sites: Collector) -> None:
    c = two_sites
    assert (send(c, CE01, job(1, CE01, "SiteA", 3600, 8)).text) == "OK"  # 3600 s x 8 cores: 8 core-hours
    # ce02 sends 180000 s x 8 cores (400 core-hours) as ce01, at SiteA: the attack of the issue
    forged = send(c, CE02, job(2, CE01, "SiteA", 180_000, 8))
    assert (forged.status_code, forged.text) == (403, (
        f"Error handling request: record 0 is for ProbeName '{CE01}', which sender '{CE02}' is not allowed to "
        f"report for (its ProbeNames: {CE02}); a Gratia sender reports under its own name (the form's 'from') "
        "only; the envelope was refused whole and nothing of it stored"
    ))  # fmt: skip
    # in its own name, for ce01's site
    borrowed = send(c, CE02, job(3, CE02, "SiteA", 180_000, 8))
    assert (borrowed.status_code, borrowed.text) == (403, (
        f"Error handling request: record 0 is for SiteName 'SiteA', which sender '{CE02}' is not allowed to "
        "report for (its SiteNames: SiteB, SiteC); the collector's operator lists them in "
        "collector.gratia_senders; the envelope was refused whole and nothing of it stored"
    ))  # fmt: skip
    # one such record among its own refuses the whole envelope, as GRACC refuses one with a bad record
    mixed = send(c, CE02, job(4, CE02, "SiteB", 1800, 4), job(5, CE02, "SiteA", 180_000, 8))
    assert mixed.status_code == 403 and mixed.text.startswith("Error handling request: record 1 is for SiteName")
    # its own records, for its own sites: 1800 s x 4 = 2 core-hours, 900 s x 4 = 1
    assert send(c, CE02, job(4, CE02, "SiteB", 1800, 4), job(6, CE02, "SiteC", 900, 4)).text == "OK"
    drained(c)
    expected = {(CE01, "SiteA"): 8.0, (CE02, "SiteB"): 2.0, (CE02, "SiteC"): 1.0}
    deadline = time.monotonic() + 30
    while (rows := summary_rows(c)) != expected and time.monotonic() < deadline:
        time.sleep(0.2)  # the summarizer's next run (every second)
    assert rows == expected
    text = httpx.get(f"{c.url}/metrics").text
    assert 'fairacct_collector_request_errors_total{endpoint="gratia",reason="forbidden"} 3' in text
    assert f'fairacct_collector_records_total{{endpoint="gratia",probe="{CE02}"}} 2' in text


def test_a_sender_listed_without_its_sites_is_a_configuration_error(tmp_path: Path) -> None:
    """A sender listed before senders had sites: the collector does not start (a listed sender
    taken for every site would keep the hole open), and says what to write."""
    import subprocess

    from .conftest import FAIRACCT

    config = tmp_path / "c.toml"
    config.write_text(
        f'[collector]\ntoken_dir = "{tmp_path}"\nstate_dir = "{tmp_path}/state"\nport = 0\n'
        f'gratia_senders = [{{probe = "{CE01}", networks = ["192.0.2.0/24"]}}]\n'
    )
    proc = subprocess.run([FAIRACCT, "collector", "serve", "--config", str(config)], capture_output=True, text=True,
                          timeout=20, check=False)  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert (
        f"{config}: collector.gratia_senders[0]: sites is missing: a Gratia sender reports only for the sites "
        f'listed for it (its records\' SiteName); write {{probe = "{CE01}", networks = [...], sites = ["SiteA"]}}'
    ) in proc.stderr
