"""The generated records of :mod:`tests.collector.generated`, sent and summarized once per test
session in each store, whichever pytest-xdist worker asks first; every module then reads a copy.

Summarizing them is most of a minute of CPU in each store (the daily books of ten days whose
random snapshots leave hundreds of observed segments, a dozen aggregations each), and three
modules read them (summaries, exports, report): built once, not once a module.

- SQLite: the file is built under a lock in the session's shared temporary folder; a module
  gets a copy of it (SQLite's backup API), opened as an :class:`EmbeddedStore`.
- osmem: an ``osmem-server`` of the session's own, its base cluster holding the records and
  their summaries, frozen; a module gets a copy-on-write clone of it. It lives as long as the
  pytest process that started the workers (``--parent-pid``), not the worker that built it,
  whose end would otherwise take it from the modules still running on the others.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import sqlite3
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date
from pathlib import Path

from osmem_server import resolve_binary

from collector.sinks.elasticsearch import ElasticsearchSink
from collector.sinks.sqlite import EmbeddedStore
from collector.summaries import summarize

from .generated import generated_docs

__all__ = ["Clone", "osmem_clone", "session_folder", "sqlite_copy"]

FIRST, LAST = date(2026, 1, 1), date(2026, 1, 10)
"""The days summarized: the generated ten."""

_START_S = 30.0
"""How long the shared server may take to say where it listens (osmem-server's own default)."""


def session_folder(base: Path) -> Path:
    """The folder every worker of this session shares: the parent of a worker's base temporary
    folder under xdist (``pytest-N/popen-gwK``), the base itself otherwise (its parent holds
    other sessions' folders)."""
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Held by one process of the session at a time (the others wait for the build)."""
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _fill(sink: EmbeddedStore | ElasticsearchSink) -> None:
    for kind, docs in generated_docs().items():
        sink.send(kind, docs)
    summarize(sink, FIRST, LAST, probe="test")


def sqlite_copy(shared: Path, target: Path) -> EmbeddedStore:
    """An embedded store at ``target`` holding the generated records, summarized: a copy of the
    session's, built in ``shared`` by the first caller."""
    folder = shared / "generated-sqlite"
    folder.mkdir(exist_ok=True)
    built = folder / "store.sqlite"
    with _locked(folder / "lock"):
        if not (folder / "done").exists():
            with EmbeddedStore(built) as sink:
                _fill(sink)
            (folder / "done").touch()
    with sqlite3.connect(f"file:{built}?mode=ro", uri=True) as source, sqlite3.connect(target) as copy:
        source.backup(copy)
    source.close()
    copy.close()
    return EmbeddedStore(target)


def _shared_osmem(folder: Path) -> str:
    """Start the session's osmem-server for the generated records (its stdout, the one line
    saying where it listens, in a file: no pipe ties it to this worker); its URL."""
    said = folder / "server.json"
    said.touch()
    parent = os.getppid() if os.environ.get("PYTEST_XDIST_WORKER") else os.getpid()
    # started through a shell that returns at once: the server, not this process's child, needs
    # no waiting for (it ends when ``parent`` does, having been told its pid)
    subprocess.run(
        ["sh", "-c", '"$@" >"$0" </dev/null &', str(said), resolve_binary(), "--parent-pid", str(parent),
         "--no-stdin-watch", "--no-ja"],
        check=True, timeout=_START_S,
    )  # fmt: skip
    deadline = time.monotonic() + _START_S
    while True:
        line = said.read_text().partition("\n")[0]
        if line.endswith("}"):
            return str(json.loads(line)["url"])
        if time.monotonic() > deadline:
            raise RuntimeError(f"the shared osmem-server did not say where it listens within {_START_S:g} s")
        time.sleep(0.05)


def _post(url: str) -> dict[str, str]:
    request = urllib.request.Request(url, data=b"", method="POST")
    with urllib.request.urlopen(request, timeout=30) as answer:
        return dict(json.loads(answer.read()))


@dataclass(frozen=True)
class Clone:
    """A clone of the shared base, served on its own port (``url``) until closed."""

    server: str
    id: str
    url: str

    def close(self) -> None:
        request = urllib.request.Request(f"{self.server}/_osmem/clones/{self.id}", method="DELETE")
        with urllib.request.urlopen(request, timeout=30):
            pass


def osmem_clone(shared: Path) -> tuple[Clone, ElasticsearchSink]:
    """A clone of the session's osmem base holding the generated records, summarized, and a
    sink on it; the base built, then frozen, by the first caller."""
    folder = shared / "generated-osmem"
    folder.mkdir(exist_ok=True)
    with _locked(folder / "lock"):
        if not (folder / "url").exists():
            url = _shared_osmem(folder)
            base = ElasticsearchSink(url)
            base.install_templates()
            _fill(base)
            base.close()
            _post(f"{url}/_osmem/base/freeze")
            (folder / "url").write_text(url)
    url = (folder / "url").read_text()
    made = _post(f"{url}/_osmem/clones")
    clone = Clone(url, made["id"], made["url"])
    return clone, ElasticsearchSink(clone.url)
