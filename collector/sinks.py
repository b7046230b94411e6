"""Where records go: the interface every sink implements, and the choice by store URL.

A sink takes a batch of documents of one kind and says, per document, what became of it:
stored (``acked``), worth another try later (``retry``: an outage, 429, 5xx), or refused for
good (``rejected``: a mapping conflict, a malformed document). The outbox deletes only what
was acknowledged and moves rejected documents to its dead-letter table.

Store URLs: ``sqlite:///PATH`` (the embedded store), ``http(s)://HOST:PORT`` (Elasticsearch),
``opensearch+http(s)://HOST:PORT`` (OpenSearch), ``collector+http(s)://HOST[:PORT]`` (a fairacct
collector service, with ``token_file``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from collector.errors import ConfigError

__all__ = ["SendResult", "Sink", "open_sink", "sqlite_path"]


@dataclass
class SendResult:
    """What a sink did with each document of a batch, by id."""

    acked: list[str] = field(default_factory=list)
    retry: dict[str, str] = field(default_factory=dict)  # id -> error, transient
    rejected: dict[str, str] = field(default_factory=dict)  # id -> error, permanent


class Sink(Protocol):
    def send(self, kind: str, docs: Sequence[Mapping[str, Any]]) -> SendResult:
        """Store documents of one kind (each with ``id`` and ``timestamp``)."""

    def close(self) -> None: ...


def sqlite_path(url: str, base: Path) -> Path | None:
    """The file of a ``sqlite:///PATH`` URL (relative to ``base``); None for other URLs."""
    if not url.startswith("sqlite:///"):
        return None
    path = Path(url.removeprefix("sqlite:///"))
    return path if path.is_absolute() else base / path


def open_sink(url: str, *, base: Path, auth: Mapping[str, Any] | None = None) -> Sink:
    """The sink a store URL names."""
    path = sqlite_path(url, base)
    if path is not None:
        from collector.store import EmbeddedStore

        return EmbeddedStore(path)
    if url.startswith(("http://", "https://", "opensearch+http://", "opensearch+https://")):
        from collector.elasticsearch import ElasticsearchSink

        return ElasticsearchSink.from_url(url, **dict(auth or {}))
    if url.startswith(("collector+http://", "collector+https://")):
        from collector.http_sink import CollectorSink

        return CollectorSink.from_url(url, **dict(auth or {}))
    raise ConfigError(
        "store.url: expected sqlite:///PATH, http(s)://HOST:PORT, opensearch+http(s)://HOST:PORT or "
        f"collector+http(s)://HOST[:PORT], got {url!r}"
    )
