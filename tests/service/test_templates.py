"""The service checks the store's index templates after every reconnect.

A store that comes back empty (osmem-server stopped, a new one started on the same address)
must not receive records into indices whose types it would guess: the flush after the outage
checks the templates again, installs them when store.install_templates allows, and otherwise
keeps the records in the outbox with a message that says what to do.
"""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pytest

from collector.errors import SinkError
from collector.outbox import Outbox
from collector.sinks.elasticsearch import ElasticsearchSink

from ..collector.conftest import start_server, stop_server
from .conftest import fake_service


def indices(url: str) -> list[str]:
    with urllib.request.urlopen(f"{url}/_cat/indices?format=json", timeout=30) as reply:
        return sorted(i["index"] for i in json.loads(reply.read()) if i["index"].startswith("fairacct-"))


@pytest.mark.parametrize("install", [False, True])
def test_templates_are_checked_again_when_the_store_comes_back_empty(
    tmp_path: Path, condor25: Path, install: bool
) -> None:
    first = start_server()
    address = first.url.removeprefix("http://")
    with ElasticsearchSink.from_url(first.url) as sink:
        sink.install_templates()
    service = fake_service(tmp_path / "state", condor25, first.url, store={"install_templates": install})
    service.run_job("snapshot")
    assert service.run_job("flush") is not None  # templates found, records sent
    stop_server(first)

    service.run_job("history")  # 42 jobs, committed while the store is down
    with pytest.raises(SinkError):
        service.run_job("flush")
    second = start_server(address)  # back, and empty
    try:
        if install:
            assert service.run_job("flush") is not None
            with ElasticsearchSink.from_url(second.url) as sink:
                assert sink.count("job") == 42 and sink.check_templates().ok
                types = sink.field_types("job")
                assert types and all(t.get("user") == "keyword" for t in types.values())  # not guessed as text
        else:
            with pytest.raises(SinkError, match=r"index templates missing for .*run `fairacct mappings install` first"):
                service.run_job("flush")
            assert indices(second.url) == []  # nothing written with guessed types
            with Outbox(tmp_path / "state/outbox.sqlite") as outbox:
                assert outbox.status().depth["job"] == 42
    finally:
        stop_server(second)
