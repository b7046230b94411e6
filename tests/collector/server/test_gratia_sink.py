"""The gratia+http:// sink under the probe's outbox, against a fairacct collector process taking
Gratia records (its /gratia-servlets/rmi answers as GRACC's collector does): the jobs of a real
history come back once each with their wall, CPU, cores and times; sent twice, stored once; a
sender the collector does not know, or does not take for its site, keeps its records; a record
refused goes to the dead letters with the reply while the rest of its bundle is stored."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from collector.outbox import Outbox
from collector.records import table_docs
from collector.sinks import open_sink
from collector.sinks.gratia import GratiaSink
from probes.pipeline.records import job_docs
from probes.sources.condor_ap import LEFT_OUT
from probes.sources.history import read_history
from probes.sources.settings import JobReading

from .conftest import Collector
from .test_gratia import drained, senders, stored

PROBE = "condor:ap.example.org"


def _seconds(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC).timestamp()


def _history_records(condor25: Path) -> tuple[Any, list[dict[str, Any]]]:
    """The job records of the condor25 history as the probe commits them, and decoded."""
    jobs, _ = read_history([condor25 / "history.ads"], JobReading(gratia=True))
    return job_docs(jobs, probe="p")["job"], table_docs("job", jobs, probe="p")


def _demo_config(folder: Path, more: str) -> Path:
    """config/demo.toml (the demo pool's files, 60 jobs) with ``more`` added, its state in ``folder``/state."""
    from ...conftest import ROOT

    demo = (ROOT / "config/demo.toml").read_text().replace('"demo/', f'"{ROOT}/config/demo/')
    config = folder / "probe.toml"
    config.write_text(demo.replace('"../.demo"', '"state"') + more)
    return config


def _sink(c: Collector, **options: Any) -> GratiaSink:
    sink = open_sink(f"gratia+{c.url}/gratia-servlets/rmi", base=Path("."), auth={"probe_name": PROBE, **options})
    assert isinstance(sink, GratiaSink)
    return sink


def test_every_job_comes_back_once_with_its_numbers_and_twice_sent_is_stored_once(
    start_collector: Any, tmp_path: Path, condor25: Path
) -> None:
    c = start_collector(gratia_senders=senders(PROBE))
    encoded, docs = _history_records(condor25)
    with Outbox(tmp_path / "probe-outbox.sqlite") as outbox, _sink(c, bundle_size=10) as sink:
        outbox.commit({"job": encoded}, {"history:x": 1})
        result = outbox.flush(sink, batch_size=25)
        assert (result.sent["job"], result.dead["job"], outbox.status().depth) == (40, 0, {})
        drained(c)
        first = stored(c)
        # the probe killed after the send, before it deleted: the same records again
        outbox.commit({"job": encoded}, {"history:x": 2})
        assert outbox.flush(sink).sent["job"] == 40
    drained(c)
    again = stored(c)
    # 42 jobs, 2 of them removed before they started: condor-ap would send those without times
    # and GRACC quarantine them, so they are acknowledged unsent
    assert len(first) == len(again) == 40
    by_job = {d["GlobalJobId"]: d for d in again}
    assert sorted(by_job) == sorted(f"condor.{d['job_id']}" for d in docs if not d.get("gratia_left_out"))
    for job in docs:
        if job.get("gratia_left_out"):
            continue
        got = by_job[f"condor.{job['job_id']}"]
        start = job["first_start"]
        # condor-ap's EndTime is CompletionDate; a removed job has none and GRACC ends it at
        # StartTime + WallDuration (its removal here: HTCondor stops the wall clock then)
        end = job.get("gratia_end") or start + job["walltime_s"]
        assert (got["WallDuration"], got["CpuDuration"], got["Processors"]) == (
            job["walltime_s"], job["gratia_cpu_user_s"] + job["gratia_cpu_system_s"], job["gratia_processors"]
        ), job["job_id"]  # fmt: skip
        assert (_seconds(got["StartTime"]), _seconds(got["EndTime"])) == (start, end), job["job_id"]
        assert (got["ProbeName"], got["ResourceType"]) == (PROBE, "Payload" if job["resource_name"] else "Batch")


def test_a_sender_the_collector_does_not_know_keeps_its_records(start_collector: Any, tmp_path: Path) -> None:
    c = start_collector(gratia_senders=senders("condor:someone-else"))
    doc = {"id": "j1", "job_id": "ap#1.0#1", "cluster": 1, "proc": 0, "end": 1795269302.0, "walltime_s": 6.0,
           "timestamp": "2026-11-21T13:55:02Z"}  # fmt: skip
    with Outbox(tmp_path / "o.sqlite") as outbox, _sink(c) as sink:
        outbox.commit({"job": [doc]}, {})
        result = outbox.flush(sink)
        assert result.retried["job"] == 1 and outbox.status().depth == {"job": 1} and not outbox.dead_letters()
        assert f"sender '{PROBE}' is not allowed" in result.errors[0]


def test_records_for_a_site_not_listed_wait_in_the_outbox_until_it_is(start_collector: Any, tmp_path: Path) -> None:
    """Issue 54: the collector refuses an envelope with a record for a site its sender may not
    report for (403, "... is not allowed to report for ..."): the operator's to mend, like a sender
    not listed, so the probe keeps the records (none a dead letter) and sends them once it is."""
    c = start_collector(gratia_senders=senders(PROBE, sites=["SiteB"]))

    def job(i: int) -> dict[str, Any]:
        return {"id": f"j{i}", "job_id": f"ap#{i}.0#1", "cluster": i, "proc": 0, "end": 1795269302.0 + i,
                "walltime_s": 6.0, "cpus": 1.0, "timestamp": "2026-11-21T13:55:02Z"}  # fmt: skip

    with Outbox(tmp_path / "o.sqlite") as outbox, _sink(c, site="EXAMPLE_AP", bundle_size=2) as sink:
        outbox.commit({"job": [job(i) for i in range(3)]}, {})
        result = outbox.flush(sink)
        assert result.retried["job"] == 3 and outbox.status().depth == {"job": 3} and not outbox.dead_letters()
        assert (
            f"answered 403: \"Error handling request: record 0 is for SiteName 'EXAMPLE_AP', which sender '{PROBE}' "
            "is not allowed to report for (its SiteNames: SiteB)"
        ) in result.errors[0]
        c.stop()
        c.settings["gratia_senders"] = senders(PROBE, sites=["SiteB", "EXAMPLE_AP"])
        c.start()
        assert outbox.flush(sink).sent["job"] == 3 and outbox.status().depth == {}
    drained(c)
    assert {(d["LocalJobId"], d["SiteName"]) for d in stored(c)} == {("0", "EXAMPLE_AP"), ("1", "EXAMPLE_AP"),
                                                                      ("2", "EXAMPLE_AP")}  # fmt: skip


def test_a_record_refused_goes_to_the_dead_letters_and_its_bundle_goes_through(
    start_collector: Any, tmp_path: Path
) -> None:
    c = start_collector(gratia_senders=senders(PROBE), max_body_size="8 KiB")

    def job(i: int, project: str = "P") -> dict[str, Any]:
        return {"id": f"j{i}", "job_id": f"ap#{i}.0#1", "cluster": i, "proc": 0, "end": 1795269302.0 + i,
                "walltime_s": 6.0, "cpus": 1.0, "project": project, "timestamp": "2026-11-21T13:55:02Z"}  # fmt: skip

    docs = [job(i) for i in range(6)] + [job(6, "x" * 9000)]
    with Outbox(tmp_path / "o.sqlite") as outbox, _sink(c) as sink:
        outbox.commit({"job": docs}, {})
        result = outbox.flush(sink)
        assert (result.sent["job"], result.dead["job"], outbox.status().depth) == (6, 1, {})
        (dead,) = outbox.dead_letters()
        assert dead["id"] == "j6" and "refused by the Gratia collector (413): Error: " in dead["error"]
    drained(c)
    assert sorted(d["LocalJobId"] for d in stored(c)) == ["0", "1", "2", "3", "4", "5"]


def test_other_kinds_are_acknowledged_unsent_and_a_bad_url_is_named() -> None:
    from collector.errors import ConfigError

    with GratiaSink("gratia+http://127.0.0.1:9/gratia-servlets/rmi", probe_name=PROBE) as sink:
        assert sink.send("slot", [{"id": "s1", "timestamp": "2026-11-21T13:55:02Z"}]).acked == ["s1"]
    with pytest.raises(ConfigError, match="expected gratia\\+https://HOST"):
        GratiaSink("gratia+http:///rmi")


def test_a_site_points_probe_once_at_a_gratia_collector(
    start_collector: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    from probes.cli import main

    c = start_collector(gratia_senders=senders(PROBE))
    store = f'\n[store]\nurl = "gratia+{c.url}/gratia-servlets/rmi"\ngratia_probe_name = "{PROBE}"\n'
    config = _demo_config(tmp_path, store + 'gratia_site = "EXAMPLE_AP"\ngratia_bundle_size = 7\n')
    code = main(["probe", "once", "--config", str(config), "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert json.loads(out)["sent"]["job"] == 59 and json.loads(out)["dead"] == {}
    # one of the demo's 60 jobs (4127.1) was removed before it started: left out, and said so
    assert json.loads(out)["left_out"] == {LEFT_OUT["no_end"]: 1}
    drained(c)
    docs = stored(c)
    assert len(docs) == 59 and {(d["ProbeName"], d["SiteName"]) for d in docs} == {(PROBE, "EXAMPLE_AP")}


def test_the_collector_killed_between_bundles_loses_nothing_and_stores_nothing_twice(
    start_collector: Any, tmp_path: Path, condor25: Path
) -> None:
    import signal

    c = start_collector(gratia_senders=senders(PROBE))
    encoded, docs = _history_records(condor25)
    with Outbox(tmp_path / "probe-outbox.sqlite") as outbox, _sink(c, bundle_size=5) as sink:
        outbox.commit({"job": encoded}, {"history:x": 1})
        # the first 20 records hold one job removed before it started: settled, not sent
        assert outbox.flush(sink, batch_size=10, max_batches=2).sent["job"] == 19
        c.stop(signal.SIGKILL)  # the OKs it gave are durable; nothing after them was sent
        result = outbox.flush(sink, batch_size=10)
        assert result.sent["job"] == 0 and outbox.status().depth == {"job": 22}
        assert "no answer from the Gratia collector" in result.errors[0]
        c.start()
        outbox.commit({"job": encoded}, {"history:x": 2})  # and the probe, killed too, sends all again
        assert outbox.flush(sink, batch_size=10).sent["job"] == 22 + 42 - 3  # 3 of them left out
    drained(c)
    reported = [f"condor.{d['job_id']}" for d in docs if not d.get("gratia_left_out")]
    assert sorted(d["GlobalJobId"] for d in stored(c)) == sorted(reported) and len(reported) == 40


def test_the_bundles_answered_before_the_collector_died_are_not_sent_again(
    start_collector: Any, tmp_path: Path
) -> None:
    # the collector stores its 2nd bundle and is SIGKILLed before it answers (a test-only fault point)
    c = start_collector(gratia_senders=senders(PROBE), env={"FAIRACCT_CRASH_AT": "gratia-after-commit:2"})

    def job(i: int) -> dict[str, Any]:
        return {"id": f"j{i}", "job_id": f"ap#{i}.0#1", "cluster": i, "proc": 0, "end": 1795269302.0 + i,
                "walltime_s": 6.0, "cpus": 1.0, "timestamp": "2026-11-21T13:55:02Z"}  # fmt: skip

    with Outbox(tmp_path / "o.sqlite") as outbox, _sink(c, bundle_size=3) as sink:
        outbox.commit({"job": [job(i) for i in range(9)]}, {})
        result = outbox.flush(sink)
        assert c.process is not None and c.process.wait(30) == -9, c.log
        # the 1st bundle was answered OK: settled; the 2nd (stored, unanswered) and the 3rd wait
        assert (result.sent["job"], result.dead["job"], outbox.status().depth) == (3, 0, {"job": 6})
        assert "no answer from the Gratia collector" in result.errors[0]
        assert sorted(d["id"] for d in outbox.waiting("job")) == ["j3", "j4", "j5", "j6", "j7", "j8"]
        c.process, c.env = None, {}
        c.start()
        assert outbox.flush(sink).sent["job"] == 6 and outbox.status().depth == {}
    drained(c)
    assert sorted(d["LocalJobId"] for d in stored(c)) == [str(i) for i in range(9)]  # each once


def test_upstream_reports_the_job_records_to_a_gratia_collector_besides_the_store(
    start_collector: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    from collector.sinks.sqlite import EmbeddedStore
    from probes.cli import main

    c = start_collector(gratia_senders=senders(PROBE))
    c.stop()  # down at the first cycle
    upstream = f'\n[upstream]\nurl = "gratia+{c.url}/gratia-servlets/rmi"\ngratia_probe_name = "{PROBE}"\n'
    config = _demo_config(tmp_path, upstream + 'gratia_site = "EXAMPLE_AP"\ngratia_bundle_size = 7\n')
    # the store takes every record; the job records wait in [upstream]'s lane, and the exit says so
    assert main(["probe", "once", "--config", str(config), "--json"]) == 3
    out, err = capsys.readouterr()
    assert json.loads(out)["sent"]["job"] == 60 and json.loads(out)["upstream"]["sent"] == {}
    assert json.loads(out)["upstream"]["left_out"] == {LEFT_OUT["no_end"]: 1}  # 4127.1, removed before it started
    assert "[upstream] did not take every job record: " in err and "no answer from the Gratia collector" in err
    with Outbox(tmp_path / "state" / "outbox.sqlite") as outbox:  # 4127.1 (left out) is settled all the same
        assert outbox.status().depth == {"upstream:job": 59}
    c.start()
    assert main(["probe", "once", "--config", str(config), "--json"]) == 0, capsys.readouterr().err
    out, _ = capsys.readouterr()
    assert json.loads(out)["upstream"] == {"sent": {"job": 59}, "retry": {}, "dead": {}, "left_out": {}}
    with Outbox(tmp_path / "state" / "outbox.sqlite") as outbox:
        assert outbox.status().depth == {}
    drained(c)
    with EmbeddedStore(tmp_path / "state" / "fairacct.sqlite") as store:
        jobs = store.query("job")
    docs = stored(c)
    assert len(jobs) == 60 and len(docs) == 59  # each job once in each place, with the same numbers
    by_job = {d["GlobalJobId"]: d for d in docs}
    assert sorted(by_job) == sorted(f"condor.{j['job_id']}" for j in jobs if not j.get("gratia_left_out"))
    for job in jobs:
        if job.get("gratia_left_out"):
            continue
        got = by_job[f"condor.{job['job_id']}"]
        assert (got["WallDuration"], got["CpuDuration"], got["Processors"], got["ProbeName"]) == (
            job["walltime_s"], job["cpu_time_s"], job["cpus"], PROBE
        ), job["job_id"]  # fmt: skip
