"""Fixtures for the collector's tests: a real in-memory OpenSearch-compatible server (osmem).

The session's server and its per-test clones come from osmem-server's pytest plugin; this
overrides the session server only to close the pipe osmem leaves open, which would otherwise
surface as a ResourceWarning (and warnings are errors here). Tests that stop a server start
their own with :func:`start_server` and end it with :func:`stop_server`.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from osmem_server import OsmemServer


def start_server(addr: str | None = None) -> OsmemServer:
    """A fresh osmem server on loopback (on ``addr`` 'HOST:PORT' if given)."""
    return OsmemServer.start(japanese=False, addr=addr)


def stop_server(server: OsmemServer) -> None:
    """Stop ``server`` and close the pipe it reported its address on."""
    server.close()
    if server.process.stdout is not None:
        server.process.stdout.close()


@pytest.fixture(scope="session")
def osmem_server() -> Iterator[OsmemServer]:
    server = start_server()
    yield server
    stop_server(server)
