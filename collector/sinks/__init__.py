"""Where records go: the :class:`Sink` protocol, its stores, and the choice by store URL.

Store URLs: ``sqlite:///PATH`` (the embedded store, :mod:`collector.sinks.sqlite`),
``http(s)://HOST:PORT`` (Elasticsearch) and ``opensearch+http(s)://HOST:PORT`` (OpenSearch),
both :mod:`collector.sinks.elasticsearch`, whose client libraries are imported only for them.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from collector.errors import ConfigError
from collector.sinks.base import SendResult, Sink, TemplateCheck

__all__ = ["SendResult", "Sink", "TemplateCheck", "open_sink", "sqlite_path"]


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
        from collector.sinks.sqlite import EmbeddedStore

        return EmbeddedStore(path)
    if url.startswith(("http://", "https://", "opensearch+http://", "opensearch+https://")):
        from collector.sinks.elasticsearch import ElasticsearchSink  # the client libraries only when needed

        return ElasticsearchSink.from_url(url, **dict(auth or {}))
    raise ConfigError(
        f"store.url: expected sqlite:///PATH, http(s)://HOST:PORT or opensearch+http(s)://HOST:PORT, got {url!r}"
    )
