"""osmem-server for a benchmark: an in-memory OpenSearch-compatible cluster on loopback."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

__all__ = ["osmem_server"]


@contextlib.contextmanager
def osmem_server() -> Iterator[Any]:
    """A fresh osmem server, stopped at the end with the pipe it reported its address on
    (left open, it would surface as a ResourceWarning)."""
    from osmem_server import OsmemServer  # only the benchmarks that use it need the wheel

    server = OsmemServer.start(japanese=False)
    try:
        yield server
    finally:
        server.close()
        if server.process.stdout is not None:
            server.process.stdout.close()
