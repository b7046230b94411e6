"""A schedd down for a while is logged when it goes down and when it answers again (with how
many runs skipped it), not at every snapshot (issue 51, point 12)."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest

from probes.service.outages import SourceOutages

from ..sources.test_live import FakeCollector, FakeSchedd
from .test_scheduler import Clock, daemons, live_config, service  # noqa: F401 - the fake pool, as a fixture


def test_a_source_down_is_said_once_and_its_return_with_a_count() -> None:
    outages = SourceOutages()
    down = {"schedd:bad": "schedd bad: idle jobs: Failed to connect"}
    first = outages.lines("snapshot", down)
    assert first == [
        (logging.WARNING, "schedd:bad skipped: schedd bad: idle jobs: Failed to connect (said once while it is down)")
    ]
    assert outages.lines("snapshot", down) == [
        (logging.DEBUG, "schedd:bad skipped: schedd bad: idle jobs: Failed to connect")
    ]
    assert (
        outages.lines("history", {"schedd:bad": "schedd bad: history: refused"})[0][0] == logging.WARNING
    )  # its own job
    outages.lines("snapshot", down)
    assert outages.lines("snapshot", {}) == [
        (logging.INFO, "schedd:bad answers again (snapshot) after 3 run(s) that skipped it")
    ]
    assert outages.lines("snapshot", {}) == []
    assert outages.lines("history", {}) == [
        (logging.INFO, "schedd:bad answers again (history) after 1 run(s) that skipped it")
    ]


def test_the_service_logs_a_down_schedd_twice_in_five_snapshots(
    tmp_path: Path,
    daemons: tuple[FakeCollector, FakeSchedd, FakeSchedd],  # noqa: F811 - the fixture
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock(1795269500.0)
    config = live_config(tmp_path)
    _, _, bad = daemons
    bad.fail = "Failed to connect to <10.0.0.9:9618>"
    svc = service(config, daemons, clock)
    with caplog.at_level("DEBUG", logger="fairacct"):
        for k in range(5):
            if k == 4:
                bad.fail = None
            clock.now += 300
            svc._run("snapshot")
    warnings = [
        r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and "schedd:bad" in r.getMessage()
    ]
    assert warnings == [
        "schedd:bad skipped: schedd bad: idle jobs: Failed to connect to <10.0.0.9:9618> (said once while it is down)"
    ]
    assert re.search(r"schedd:bad answers again \(snapshot\) after 4 run\(s\) that skipped it", caplog.text)
    assert svc.metrics.source_failures == {"schedd:bad": 4}  # every skipped read still counted
