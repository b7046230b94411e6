"""Where records go: the :class:`Sink` protocol, its stores, and the choice by store URL.

Store URLs: ``sqlite:///PATH`` (the embedded store, :mod:`collector.sinks.sqlite`),
``http(s)://HOST:PORT`` (Elasticsearch) and ``opensearch+http(s)://HOST:PORT`` (OpenSearch),
both :mod:`collector.sinks.elasticsearch`, whose client libraries are imported only for them,
``collector+http(s)://HOST[:PORT]`` (a fairacct collector service, :mod:`collector.sinks.http`)
and ``gratia+http(s)://HOST[:PORT]/gratia-servlets/rmi`` (a Gratia collector, OSG's GRACC:
:mod:`collector.sinks.gratia`).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from collector.errors import ConfigError, SinkError
from collector.sinks.base import SendResult, Sink, TemplateCheck

__all__ = [
    "SCHEMES",
    "SendResult",
    "Sink",
    "TemplateCheck",
    "check_url",
    "describe_url",
    "ensure_templates",
    "open_sink",
    "sqlite_path",
    "upgrade_store",
]


def ensure_templates(sink: Sink, url: str, *, install: bool) -> list[str]:
    """Make sure the store has fairacct's index templates before records go in (without them
    Elasticsearch guesses the fields' types from the first documents: ``user`` as text, ``end``
    as a float). Missing or outdated ones are installed when ``install`` (store.install_templates)
    allows, and the names installed are returned; otherwise SinkError says what is wrong and
    what to do, and the records wait in the outbox."""
    found = sink.check_templates()
    if found.ok:
        return []
    if install:
        return sink.install_templates()
    problems = [f"missing for {', '.join(found.missing)}"] if found.missing else []
    problems += [f"{kind}: {what}" for kind, what in found.differ.items()]
    raise SinkError(
        f"{url}: index templates {'; '.join(problems)}: run `fairacct mappings install` first "
        "(or set store.install_templates = true)"
    )


def upgrade_store(sink: Sink) -> list[str]:
    """Bring an Elasticsearch or OpenSearch store's monthly indices up to the installed templates
    (:mod:`collector.sinks.elasticsearch.migration`), after :func:`ensure_templates`; a line per
    index moved. Other stores have nothing to do here: the embedded store migrates itself when
    opened (:mod:`collector.sinks.sqlite_layout`), a collector or Gratia service keeps its own."""
    if "collector.sinks.elasticsearch" not in sys.modules:  # not imported: not an Elasticsearch sink
        return []
    from collector.sinks.elasticsearch import ElasticsearchSink

    return sink.upgrade_indices() if isinstance(sink, ElasticsearchSink) else []


def sqlite_path(url: str, base: Path) -> Path | None:
    """The file of a ``sqlite:///PATH`` URL (relative to ``base``); None for other URLs."""
    if not url.startswith("sqlite:///"):
        return None
    path = Path(url.removeprefix("sqlite:///"))
    return path if path.is_absolute() or str(path) == ":memory:" else base / path


def describe_url(url: str, base: Path) -> str:
    """The store as a person should be told of it: an embedded store by its real file."""
    path = sqlite_path(url, base)
    return url if path is None or str(path) == ":memory:" else f"sqlite:///{path.absolute()}"


SCHEMES = (
    "sqlite:///", "http://", "https://", "opensearch+http://", "opensearch+https://", "collector+http://", "collector+https://",
    "gratia+http://", "gratia+https://",
)  # fmt: skip
"""The store URLs there are sinks for."""


def check_url(url: str) -> None:
    """A :class:`ConfigError` unless ``url`` names a store there is a sink for, without
    credentials in it (those come from files or the environment)."""
    if not url.startswith(SCHEMES):
        raise ConfigError(
            "store.url: expected sqlite:///PATH, http(s)://HOST:PORT, opensearch+http(s)://HOST:PORT, "
            f"collector+http(s)://HOST[:PORT] or gratia+http(s)://HOST[:PORT]/gratia-servlets/rmi, got {url!r}"
        )
    parts = urlsplit(url)
    if not url.startswith("sqlite:///") and (parts.username or parts.password):
        bare = urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))
        raise ConfigError(
            f"store.url: credentials in the URL are not accepted ({bare}); give username with password_file or "
            "password_env, or api_key_file or api_key_env"
        )


def open_sink(url: str, *, base: Path, auth: Mapping[str, Any] | None = None, create: bool = True) -> Sink:
    """The sink a store URL names (``sqlite:///PATH`` relative to ``base``); without
    ``create``, an embedded store that does not exist yet is an error, not a new empty one."""
    check_url(url)
    path = sqlite_path(url, base)
    if path is not None:
        from collector.sinks.sqlite import EmbeddedStore

        return EmbeddedStore(path, create=create)
    if url.startswith("collector+"):
        from collector.sinks.http import CollectorSink

        return CollectorSink.from_url(url, **dict(auth or {}))
    if url.startswith("gratia+"):
        from collector.sinks.gratia import GratiaSink

        return GratiaSink.from_url(url, **dict(auth or {}))
    from collector.sinks.elasticsearch import ElasticsearchSink  # the client libraries only when needed

    return ElasticsearchSink.from_url(url, **dict(auth or {}))
