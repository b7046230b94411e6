"""Fixtures of the service's outage tests: a store that a test may stop, and a service on the
fake daemons of tests/sources/test_live.py over a real pool's ads (every snapshot a new one)."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from osmem_server import OsmemServer

from collector.sinks.elasticsearch import ElasticsearchSink
from probes.config import parse_config
from probes.service.scheduler import ProbeService

from ..collector.conftest import start_server, stop_server
from ..sources.test_live import FakeCollector, FakePool, FakeSchedd, parse


@pytest.fixture
def store() -> Iterator[OsmemServer]:
    """osmem-server with fairacct's templates; resumed (if a test stopped it) and ended after."""
    server = start_server()
    with ElasticsearchSink.from_url(server.url) as sink:
        sink.install_templates()
    yield server
    os.kill(server.process.pid, signal.SIGCONT)  # never leave it stopped
    stop_server(server)


def fake_service(state: Path, condor25: Path, url: str, **sections: dict[str, Any]) -> ProbeService:
    """The service on the fake daemons (a collector and schedd 'vm' answering condor25's ads),
    its state in ``state``, its store at ``url``; ``sections`` add to the configuration."""
    raw: dict[str, Any] = {
        # the dump's startds are taken as heard from however long ago it was taken
        "pool": {"name": "test", "update_interval_s": 1e7},
        "sources": {"live": True},
        "machines": {"speed_attribute": "HEPSPEC"},
        "probe": {"state_dir": str(state)},
        "store": {"url": url},
    }
    for name, values in sections.items():
        raw[name] = {**raw.get(name, {}), **values}
    cfg = parse_config(raw)
    vm = FakeSchedd("vm", parse(condor25 / "queue.ads"), parse(condor25 / "history.ads"))
    collector = FakeCollector(parse(condor25 / "status.ads"), [vm.location()])
    return ProbeService(cfg, probe="test", pool=FakePool({None: collector}, [vm]).live(cfg))
