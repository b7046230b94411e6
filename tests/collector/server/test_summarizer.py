"""The collector's summarizer: the [collector] settings of its cadence, and its schedules run
against a real embedded store with a clock the test moves (no waiting)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from collector.errors import ConfigError
from collector.server.summarizer import CRASH_RETRY_S, NIGHTLY_S, Schedule, Summarizer
from collector.settings import CollectorSettings
from collector.sinks.sqlite import EmbeddedStore
from probes.config import ProbeConfig

from ..generated import generated_docs, generated_frames

T0 = 1_768_046_400.0  # 2026-01-10T12:00:00Z: the generated jobs end 2026-01-01 .. 2026-01-10


def test_the_cadence_is_configured_in_the_collector_section() -> None:
    c = ProbeConfig().collector
    assert (c.summaries_recent_days, c.summaries_every_s, c.summaries_nightly_days) == (7, 900.0, 365)  # GRACC's
    c = ProbeConfig.model_validate(
        {"collector": {"summaries_recent_days": 3, "summaries_every_s": 60, "summaries_nightly_days": 0}}
    ).collector
    assert (c.summaries_recent_days, c.summaries_every_s, c.summaries_nightly_days) == (3, 60.0, 0)
    with pytest.raises(ValueError, match="summaries_recent_days"):
        ProbeConfig.model_validate({"collector": {"summaries_recent_days": -1}})


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"summaries_every_s": 0}, "collector summaries_every_s: expected more than 0, got 0"),
        ({"summaries_nightly_days": -1}, "collector summaries_nightly_days: expected at least 0, got -1"),
        ({"probes": [{"probe": "p1"}, {"probe": "p1", "sites": ["A"]}]},
         "collector probes: each probe is listed once in probes, got 'p1' more than once"),
        ({"probes": [{"probe": "p1", "site": ["A"]}]},
         r"collector probes.0.site: extra inputs are not permitted, got \['A'\]"),
        ({"max_fields_per_record": 1000}, "collector max_fields_per_record: expected at most 900, got 1000"),
    ],
)  # fmt: skip
def test_server_settings_name_the_key(tmp_path: Path, change: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        CollectorSettings.of(token_dir=tmp_path, state_dir=tmp_path, **change)


def test_schedules_run_when_due_and_count_late_records(tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite"
    jobs = generated_docs()["job"]
    with EmbeddedStore(path) as store:
        store.send("job", jobs)
    now = [T0]
    summarizer = Summarizer(
        lambda: EmbeddedStore(path),
        (Schedule("recent", 7, 900.0), Schedule("nightly", 365, NIGHTLY_S), Schedule("off", 0, 60.0)),
        probe="test",
        clock=lambda: now[0],
    )
    assert [s.name for s in summarizer.schedules] == ["recent", "nightly"]  # 0 days: never
    assert [s.name for s in summarizer.due(T0)] == ["nightly", "recent"]  # both at the start, the widest first

    assert summarizer.run_due() == ["nightly", "recent"]  # one run of 365 days covers the 7
    assert summarizer.state.runs == 1 and summarizer.next_due() == T0 + 900
    with EmbeddedStore(path) as store:
        summaries = [d for d in store.query("summary", limit=10_000) if d["record_kind"] == "job"]
    assert sum(d["n_jobs"] for d in summaries) == len(generated_frames()["job"])
    assert summarizer.state.last_summaries["nightly"] == len(summaries)

    late = dict(jobs[-1], id="late", job_id="late", user="late-user", walltime_s=1800.0)
    with EmbeddedStore(path) as store:
        store.send("job", [late])
    now[0] = T0 + 899
    assert summarizer.run_due() == []
    now[0] = T0 + 900
    assert summarizer.run_due() == ["recent"]
    assert summarizer.state.runs == 2 and summarizer.state.last_run == {"nightly": T0, "recent": T0 + 900}
    with EmbeddedStore(path) as store:
        [row] = [d for d in store.query("summary", limit=10_000) if d["user"] == "late-user"]
    assert (row["n_jobs"], row["walltime_hours"], row["day_iso"][:10]) == (1, 0.5, late["timestamp"][:10])
    assert summarizer.next_due() == T0 + 1800 and summarizer.due(T0 + NIGHTLY_S)[0].name == "nightly"


def test_a_store_that_fails_costs_one_run(tmp_path: Path) -> None:
    def broken() -> EmbeddedStore:
        return EmbeddedStore(tmp_path / "missing" / "store.sqlite", create=False)

    summarizer = Summarizer(broken, (Schedule("recent", 7, 900.0),), probe="test", clock=lambda: T0)
    assert summarizer.run_due() == []
    assert summarizer.state.failures == 1 and "no embedded store here" in str(summarizer.state.last_error)
    assert summarizer.next_due() == T0 + 900  # tried again at the next period, not at once


def test_runs_wait_while_the_store_is_not_ready_for_summaries(tmp_path: Path) -> None:
    """Until the flusher found the store's templates right (``ready``), a due run writes nothing and
    is neither a failure nor done: it stays due, and runs once the store is ready."""
    path = tmp_path / "store.sqlite"
    with EmbeddedStore(path) as store:
        store.send("job", generated_docs()["job"])
    ready = [False]
    summarizer = Summarizer(lambda: EmbeddedStore(path), (Schedule("recent", 365, 900.0),), probe="t",
                            ready=lambda: ready[0], clock=lambda: T0)  # fmt: skip
    assert summarizer.run_due() == [] and summarizer.state.waiting
    assert (summarizer.state.runs, summarizer.state.failures, summarizer.next_due()) == (0, 0, 0.0)  # still due
    with EmbeddedStore(path) as store:
        assert store.count("summary") == 0
    ready[0] = True
    assert summarizer.run_due() == ["recent"] and not summarizer.state.waiting
    with EmbeddedStore(path) as store:
        jobs = [d for d in store.query("summary", limit=10_000) if d["record_kind"] == "job"]
    assert sum(d["n_jobs"] for d in jobs) == len(generated_frames()["job"])


def _until(condition: Any, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "not within the time"
        time.sleep(0.02)


def _crashed_once(tmp_path: Path, now: float) -> Summarizer:
    """A summarizer started with its clock stopped at ``now`` (UNIX seconds), once its first run crashed."""
    path = tmp_path / "store.sqlite"
    EmbeddedStore(path).close()
    summarizer = Summarizer(lambda: EmbeddedStore(path), (Schedule("recent", 7, 900.0),), probe="t", clock=lambda: now)
    summarizer.start()
    try:
        _until(lambda: summarizer.state.crashes >= 1)
    except AssertionError:
        summarizer.stop()
        raise
    return summarizer


def test_a_run_that_crashes_is_counted_and_the_thread_goes_on(tmp_path: Path) -> None:
    """A clock past datetime's years (1e13 s, year 318,857) makes a run fail with no FairacctError:
    once the end of the thread, silently; now counted, shown, and tried again a minute later."""
    summarizer = _crashed_once(tmp_path, 1e13)
    try:
        assert summarizer.alive and summarizer.state.crashed is not None
        assert summarizer.state.crashed.startswith("ValueError: year 318857"), summarizer.state.crashed
        assert summarizer.next_due() == 1e13 + CRASH_RETRY_S and summarizer.state.runs == 0
        time.sleep(0.3)
        assert summarizer.state.crashes == 1  # waits for the retry, does not spin
    finally:
        summarizer.stop()


def test_a_clock_without_precision_does_not_make_a_busy_loop(tmp_path: Path) -> None:
    """At 1e20 s a float cannot add the minute's retry (1e20 + 60 == 1e20): the retry is due at once,
    and the thread crashed in a loop (the first version of the test above caught it only by chance)."""
    summarizer = _crashed_once(tmp_path, 1e20)
    try:
        time.sleep(0.5)
        assert summarizer.state.crashes == 1  # a second apart at least
    finally:
        summarizer.stop()


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")  # the SystemExit, on purpose
def test_a_thread_that_ended_is_started_again(tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite"
    EmbeddedStore(path).close()
    calls = [0]

    def clock() -> float:  # the first call ends the thread (as only a BaseException could)
        calls[0] += 1
        if calls[0] == 1:
            raise SystemExit
        return T0

    summarizer = Summarizer(lambda: EmbeddedStore(path), (Schedule("recent", 7, 900.0),), probe="t", clock=clock)
    assert summarizer.alive and not summarizer.revive()  # not started: nothing to revive
    summarizer.start()
    try:
        _until(lambda: not summarizer._thread.is_alive())
        assert not summarizer.alive
        assert summarizer.revive() and summarizer.state.restarts == 1
        _until(lambda: summarizer.state.runs == 1)
        assert summarizer.alive and summarizer.state.crashed is None and not summarizer.revive()
    finally:
        summarizer.stop()
