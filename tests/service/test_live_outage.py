"""The probe service while the real pool's collector hangs (the ``htcondor_pool`` fixture).

A collector stopped with SIGSTOP accepts connections and never answers: the htcondor2 bindings
wait on it holding Python's global interpreter lock. Calls into the bindings run in worker
processes killed at ``pool.timeout_s`` (probes/sources/bindings.py), so the service's other
threads run meanwhile: /healthz answers at once, flushes keep their cadence, and the snapshot
fails at the configured timeout, then succeeds again once the collector is back.
"""

from __future__ import annotations

import json
import logging
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from probes.config import parse_config
from probes.service.scheduler import ProbeService
from tests.htcondor_pool import HTCondorPool, free_port

TIMEOUT_S = 3.0
PAUSED_S = 8.0


def healthz(port: int) -> tuple[tuple[float, float], dict[str, object]]:
    """((when /healthz was asked, when it answered), its document), whatever its status
    (time.monotonic(), seconds)."""
    started = time.monotonic()
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=30) as reply:
            body = reply.read()
    except urllib.error.HTTPError as exc:  # 503 while a job is stale: still an answer
        body = exc.read()
    return (started, time.monotonic()), json.loads(body)


def test_a_stopped_collector_does_not_stall_the_service(
    htcondor_pool: HTCondorPool, tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    port = free_port()
    cfg = parse_config(
        {
            "pool": {"name": "real", "condor_config": str(htcondor_pool.condor_config), "timeout_s": TIMEOUT_S,
                     "interval_s": 2},
            "sources": {"live": True},
            "probe": {"state_dir": str(tmp_path / "state"), "flush_every_s": 1, "history_every_s": 2,
                      "health_port": port},
        }
    )  # fmt: skip
    service = ProbeService(cfg, probe="test")
    metrics = service.metrics
    asked: list[tuple[float, float]] = []  # (asked, answered) of each /healthz
    runs: list[tuple[float, str, bool, float, str | None]] = []  # (when it ended, job, ok, duration, error)
    count = metrics.finished

    def finished(job: str, *, ok: bool, duration_s: float, error: str | None = None) -> None:
        runs.append((time.monotonic(), job, ok, duration_s, error))
        count(job, ok=ok, duration_s=duration_s, error=error)

    monkeypatch.setattr(metrics, "finished", finished)
    with caplog.at_level(logging.INFO, logger="fairacct"):
        service.start()
        try:
            deadline = time.monotonic() + 60
            while metrics.jobs["snapshot"].last_success is None:  # the workers started, the pool answered
                assert time.monotonic() < deadline, "no snapshot of the real pool within 60 s"
                time.sleep(0.2)
            pid = htcondor_pool.pause_collector()
            try:
                paused = time.monotonic()
                while time.monotonic() - paused < PAUSED_S:
                    span, _ = healthz(port)
                    asked.append(span)
                    time.sleep(0.2)
                resumed = time.monotonic()
            finally:
                htcondor_pool.resume_collector(pid)
            recovered = time.monotonic()
            before = metrics.jobs["snapshot"].last_success or 0.0
            while (metrics.jobs["snapshot"].last_success or 0.0) <= before:
                assert time.monotonic() - recovered < 120, "no snapshot within 120 s of the collector's return"
                time.sleep(0.2)
        finally:
            service.stop()

    failed = [r for r in runs if r[1] == "snapshot" and not r[2]]
    assert failed, "the snapshot never failed with the collector stopped"
    # Orders of events, not bounds on seconds (a loaded machine only stretches them): were the
    # bindings' wait on the stopped collector holding the interpreter, nothing of this process
    # would run while a snapshot waits; /healthz is asked and answered, and a flush runs from start
    # to end, within a failed snapshot's span
    spans = [(end - duration, end) for end, _, _, duration, _ in failed]
    within = [s for s in spans if any(s[0] < a and b < s[1] for a, b in asked)]
    assert within, f"/healthz was never answered while a snapshot waited on the stopped collector: {spans} {asked}"
    flushes = [(end - duration, end) for end, job, ok, duration, _ in runs if job == "flush"]
    assert any(s[0] < a and b < s[1] for s in spans for a, b in flushes), "no flush ran while a snapshot waited"
    # at pool.timeout_s: the worker killed at the deadline, or HTCondor's own QUERY_TIMEOUT (set to
    # the same seconds) giving up a moment before it, not at the collector's return
    assert failed[0][0] < resumed, "the first failed snapshot waited for the collector's return"
    for _, _, _, duration, error in failed:
        assert duration >= TIMEOUT_S - 0.1, f"the snapshot failed after {duration:.2f} s: {error}"
        assert error is not None and (
            f"no answer within {TIMEOUT_S:g} s (pool.timeout_s)" in error
            or "Failed communication with collector" in error
        ), error
