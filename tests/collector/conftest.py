"""Fixtures for the collector's tests: a real in-memory OpenSearch-compatible server (osmem).

The session's server and its per-test clones come from osmem-server's pytest plugin; this
overrides the session server only to close the pipe osmem leaves open, which would otherwise
surface as a ResourceWarning (and warnings are errors here). Tests that stop a server start
their own with :func:`start_server` and end it with :func:`stop_server`; a store that fails
as osmem cannot (resets, 413 over a size) is :func:`fake_store`, a process too.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from osmem_server import OsmemServer


def start_server(addr: str | None = None) -> OsmemServer:
    """A fresh osmem server on loopback (on ``addr`` 'HOST:PORT' if given)."""
    return OsmemServer.start(japanese=False, addr=addr)


@contextlib.contextmanager
def fake_store(mode: str, upstream: str | None = None) -> Iterator[str]:
    """A :mod:`tests.collector.fake_store` process in ``mode`` (in front of ``upstream``), on
    loopback: its URL. Ended with the block."""
    command = [sys.executable, str(Path(__file__).with_name("fake_store.py")), mode]
    command += ["--upstream", upstream] if upstream else []
    process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert process.stdin is not None and process.stdout is not None
    try:
        line = process.stdout.readline()
        assert line, f"the fake store ({mode}) did not start"
        yield str(json.loads(line)["url"])
    finally:
        process.stdin.close()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
        process.stdout.close()


def opened_at_once(
    use: Callable[[Path], None], directory: Path, attempts: int = 50, threads: int = 4
) -> list[BaseException]:
    """What went wrong when ``threads`` threads opened and used one new SQLite file at the same
    moment (``use(path)``), ``attempts`` times, each with a file of its own."""
    errors: list[BaseException] = []
    for attempt in range(attempts):
        barrier = threading.Barrier(threads, timeout=60)
        path = directory / f"shared-{attempt}.sqlite"

        def run(barrier: threading.Barrier = barrier, path: Path = path) -> None:
            try:
                barrier.wait()  # then all open at once
                use(path)
            except threading.BrokenBarrierError:
                pass
            except BaseException as exc:  # noqa: BLE001 (the caller asserts on them)
                errors.append(exc)

        workers = [threading.Thread(target=run) for _ in range(threads)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
    return errors


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


@pytest.fixture(scope="module", params=["sqlite", "osmem"])
def generated_store(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A store (embedded, or a clone of an osmem server's base) holding the generated records
    of :mod:`tests.collector.generated`, summarized; one per test module, which only reads it.
    Each store is filled and summarized once a session (:mod:`tests.collector.generated_stores`)
    and copied for each module."""
    from .generated_stores import osmem_clone, session_folder, sqlite_copy

    shared = session_folder(tmp_path_factory.getbasetemp())
    if request.param == "sqlite":
        sink = sqlite_copy(shared, tmp_path_factory.mktemp("store") / "store.sqlite")
        yield sink
        sink.close()
    else:
        clone, sink = osmem_clone(shared)
        yield sink
        sink.close()
        clone.close()


@pytest.fixture(params=["sqlite", "osmem"])
def empty_store(request: pytest.FixtureRequest, tmp_path: Any) -> Iterator[Any]:
    """An empty store of each flavour, its templates installed: the embedded SQLite store, and
    an Elasticsearch sink on a per-test clone of the session's osmem server."""
    from collector.sinks.elasticsearch import ElasticsearchSink
    from collector.sinks.sqlite import EmbeddedStore

    if request.param == "sqlite":
        sink: Any = EmbeddedStore(tmp_path / "store.sqlite")
    else:
        sink = ElasticsearchSink(request.getfixturevalue("osmem_url"))
        sink.install_templates()
    yield sink
    sink.close()
