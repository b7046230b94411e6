"""A site switches from condor-ap to fairacct, and GRACC's numbers do not move.

On the same per-job history files (parity_history.py: real ads made into every case condor-ap
treats apart), the real condor-ap (../shared/gratia/run-condor-ap.sh) and fairacct's Gratia
sender (``fairacct probe once`` into a ``gratia+http://`` store) post to recording collectors;
GRACC's own collector code (graccjson) reads both, and GRACC's raw pipeline and daily summary
(judges.py) make of them what GRACC's dashboards show. The summaries must be equal row for row;
the jobs condor-ap leaves out fairacct leaves out too, counted by reason; a job's record is the
same bytes every time fairacct sends it; and a switch at condor-ap's exact cutoff (``fairacct
probe from-condor-ap``) neither sends a job condor-ap sent nor skips one it did not.

Skips, saying why, without ``make gratia-judges`` or ../shared/gratia.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from probes.sources.condor_ap import LEFT_OUT
from probes.sources.handoff import SENT_BY_CONDOR_AP
from probes.sources.history import read_history
from probes.sources.settings import JobReading

from .judges import CaptureCollector, daily_summary, gracc_docs, raw_documents, require_judges, run_condor_ap
from .parity_history import HistoryCase, write_history

pytestmark = pytest.mark.slow

PROBE, SITE = "condor-ap:ap.parity.example.org", "Parity_AP"
GRID_LOCAL = {"scheduler_universe": "scheduler", "local_universe": "local", "routed": "routed",
              "local_job": "local_job"}  # fmt: skip


@dataclass
class Sent:
    """What one sender posted: GRACC's documents of the bundles the collector answered OK, and the
    envelopes (``arg1``) by post."""

    docs: list[dict[str, Any]]
    envelopes: list[str]
    output: dict[str, Any]


def _posts(collector: CaptureCollector) -> tuple[list[Path], list[str]]:
    """The posts the collector answered OK (a handshake holds no record), and their envelopes."""
    ok, envelopes = [], []
    for post in collector.posts():
        capture = json.loads(post.read_text())
        if capture["action"] in ("ok", "oknl"):
            ok.append(post)
            envelopes.append(dict(capture["form"]).get("arg1", ""))
    return ok, envelopes


def _config(root: Path, history: Path, port: int, user_vo_map: Path) -> Path:
    config = root / "probe.toml"
    config.write_text(
        f'[pool]\nname = "parity"\n[sources]\nhistory = ["{history}"]\n'
        f'[credentials]\nuser_vo_map = "{user_vo_map}"\n'
        f'[store]\nurl = "gratia+http://127.0.0.1:{port}/gratia-servlets/rmi"\n'
        f'gratia_probe_name = "{PROBE}"\ngratia_site = "{SITE}"\ngratia_bundle_size = 7\n'
        f'[probe]\nstate_dir = "{root / "state"}"\n'
    )
    return config


def _fairacct(*args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", "probes", *args], capture_output=True, text=True, timeout=300, check=False,
        env={**os.environ, "CONDOR_CONFIG": "/dev/null"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done


def _fairacct_sends(root: Path, history: Path, user_vo_map: Path, *, before: list[str] | None = None) -> Sent:
    with CaptureCollector(root / "collector") as collector:
        config = _config(root, history, collector.port, user_vo_map)
        if before:
            _fairacct(*before, "--config", str(config))
        output = json.loads(_fairacct("probe", "once", "--config", str(config), "--json").stdout)
        posts, envelopes = _posts(collector)
    return Sent(gracc_docs(posts) if posts else [], envelopes, output)


def _condor_ap_sends(root: Path, history: Path, user_vo_map: Path, *, script: str = "") -> Sent:
    with CaptureCollector(root / "collector", mode="503" if script else "ok") as collector:
        if script:
            (collector.out / "script").write_text(script)
        run_condor_ap(collector.port, history, root / "ap", user_vo_map=user_vo_map, probe_name=PROBE,
                      site_name=SITE, bundle_size=7)  # fmt: skip
        posts, envelopes = _posts(collector)
    return Sent(gracc_docs(posts) if posts else [], envelopes, {})


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> HistoryCase:
    require_judges()
    return write_history(tmp_path_factory.mktemp("history"), base_end=int(time.time()) - 3600)


@pytest.fixture(scope="module")
def both(history: HistoryCase, tmp_path_factory: pytest.TempPathFactory) -> tuple[Sent, Sent]:
    condor_ap = _condor_ap_sends(tmp_path_factory.mktemp("condor-ap"), history.folder, history.user_vo_map)
    fairacct = _fairacct_sends(tmp_path_factory.mktemp("fairacct"), history.folder, history.user_vo_map)
    return condor_ap, fairacct


def _summary(docs: list[dict[str, Any]]) -> pd.DataFrame:
    summary = daily_summary(docs)
    keys = [c for c in summary.columns if summary[c].dtype == object]
    return summary.sort_values(keys).reset_index(drop=True)


def test_gracc_daily_summaries_are_condor_aps(both: tuple[Sent, Sent]) -> None:
    condor_ap, fairacct = both
    ours, theirs = _summary(fairacct.docs), _summary(condor_ap.docs)
    assert len(theirs) >= 15 and theirs["Count"].sum() == 24  # the 24 jobs GRACC counts, over 7 days
    pd.testing.assert_frame_equal(ours, theirs)
    for total in ("WallDuration", "CpuDuration_user", "CpuDuration_system", "CoreHours"):
        assert ours[total].sum() == pytest.approx(theirs[total].sum()) and theirs[total].sum() > 0
    # the raw documents GRACC keeps: the same jobs, by condor-ap's GlobalJobId
    assert sorted(d["GlobalJobId"] for d in raw_documents(fairacct.docs).values() if not d.get("Quarantine")) == sorted(
        d["GlobalJobId"] for d in raw_documents(condor_ap.docs).values() if not d.get("Quarantine")
    )


def test_the_jobs_condor_ap_leaves_out_are_left_out_and_counted(history: HistoryCase, both: tuple[Sent, Sent]) -> None:
    _, fairacct = both
    expected = Counter(LEFT_OUT[GRID_LOCAL[j.case]] for j in history.left_out().values() if j.case in GRID_LOCAL)
    expected[LEFT_OUT["dagman"]] = len(history.cases()["dagman"])
    # condor-ap sends the jobs removed before they started, and GRACC quarantines them: not sent
    expected[LEFT_OUT["no_end"]] = len(history.cases()["removed_before_start"])
    assert fairacct.output["left_out"] == dict(expected)
    sent = {d["GlobalJobId"] for d in fairacct.docs}
    assert len(sent) == len(fairacct.docs) == len(history.jobs) - sum(expected.values())  # each once


def test_a_jobs_record_is_the_same_bytes_every_time_it_is_sent(
    history: HistoryCase, both: tuple[Sent, Sent], tmp_path: Path
) -> None:
    _, first = both
    # read again from nothing (a new state directory): every record as sent the first time
    again = _fairacct_sends(tmp_path, history.folder, history.user_vo_map)

    def records(sent: Sent) -> dict[str, str]:
        out = {}
        for envelope in sent.envelopes:
            for record in envelope.split("<JobUsageRecord ")[1:]:
                out[record.split("<GlobalJobId>", 1)[1].split("<", 1)[0]] = record
        return out

    assert records(again) == records(first) and len(records(first)) == len(first.docs)


def test_switching_at_condor_aps_cutoff_sends_each_job_once(history: HistoryCase, tmp_path: Path) -> None:
    jobs, _ = read_history([history.folder], JobReading(gratia=True))
    ends = dict(zip(jobs["job_id"], pd.to_numeric(jobs["end"]), strict=True))
    by_file = {p: next(ends[j.global_job_id] for j in history.jobs.values() if j.path == p) for p in history.files}
    cutoff = sorted(by_file.values())[len(by_file) // 2]  # condor-ap's last run: half the jobs had ended
    # a job that ended before its last run but whose file the schedd wrote after its listing
    late = max((j for j in history.sent().values() if j.end and by_file[j.path] <= cutoff), key=lambda j: j.end or 0)
    first = tmp_path / "first"
    first.mkdir()
    for path, end in by_file.items():
        if end <= cutoff and path != late.path:
            shutil.copy(path, first / path.name)
    # condor-ap runs on the first half: its collector answers the handshake and one bundle, then
    # is down (503): the rest waits in its outbox when its cron is stopped for the switch
    ap_root = tmp_path / "condor-ap"
    condor_ap = _condor_ap_sends(ap_root, first, history.user_vo_map, script="ok\nok\n")
    out = ap_root / "ap"
    assert condor_ap.docs and (out / "outbox.txt").read_text().strip(), "condor-ap left no outbox"
    shutil.copy(late.path, out / "data" / late.path.name)
    for log in (out / "log").iterdir():
        os.utime(log, (cutoff, cutoff))  # its last run ended at the cutoff
    # a fresh install takes the handoff, then reads the whole history
    fairacct = _fairacct_sends(
        tmp_path / "fairacct", history.folder, history.user_vo_map,
        before=["probe", "from-condor-ap", "--data", str(out / "data"), "--working", str(out / "working"),
                "--logs", str(out / "log")],
    )  # fmt: skip
    whole = _condor_ap_sends(tmp_path / "condor-ap-whole", history.folder, history.user_vo_map)

    def gracc_jobs(sent: Sent) -> Counter[str]:
        return Counter(d["GlobalJobId"] for d in raw_documents(sent.docs).values() if not d.get("Quarantine"))

    theirs, ours = gracc_jobs(condor_ap), gracc_jobs(fairacct)
    assert not theirs & ours  # no job condor-ap sent is sent again
    assert theirs + ours == gracc_jobs(whole)  # and none it did not send is skipped
    assert theirs and ours and f"condor.{late.global_job_id}" in ours
    assert fairacct.output["left_out"][SENT_BY_CONDOR_AP] == len(theirs)


def test_a_bundle_refused_after_two_taken_is_posted_once_and_counted_once(tmp_path: Path) -> None:
    """Three bundles; the collector takes two and answers the third 503: the third waits for the
    next flush, posted once in this one, and its records are counted once as to retry."""
    from collector.outbox import Outbox
    from collector.sinks.gratia import GratiaSink

    docs = [{"id": f"j{i}", "job_id": f"ap#{i}.0#1", "cluster": i, "proc": 0, "end": 1795269302.0 + i,
             "walltime_s": 6.0, "cpus": 1.0, "timestamp": "2026-11-21T13:55:02Z"} for i in range(45)]  # fmt: skip
    with CaptureCollector(tmp_path / "collector", mode="503") as collector:
        (collector.out / "script").write_text("ok\nok\n")
        url = f"gratia+http://127.0.0.1:{collector.port}/gratia-servlets/rmi"
        with Outbox(tmp_path / "outbox.sqlite") as outbox, GratiaSink(url, probe_name=PROBE, bundle_size=15) as sink:
            outbox.commit({"job": docs}, {})
            result = outbox.flush(sink)
            assert (result.sent["job"], result.retried["job"], outbox.status().depth) == (30, 15, {"job": 15})
            assert len(collector.posts()) == 3  # the third bundle once, not again by a next batch
            (collector.out / "mode").write_text("ok")
            assert outbox.flush(sink).sent["job"] == 15 and outbox.status().depth == {}
        assert len(collector.posts()) == 4
