"""Where records go: the :class:`Sink` protocol, its stores, and the choice by store URL
(:mod:`collector.sinks.registry`, every store once, where one is opened: :func:`open_store`).

Store URLs: ``sqlite:///PATH`` (the embedded store, :mod:`collector.sinks.sqlite`),
``http(s)://HOST:PORT`` (Elasticsearch) and ``opensearch+http(s)://HOST:PORT`` (OpenSearch),
both :mod:`collector.sinks.elasticsearch`, whose client libraries are imported only for them,
``collector+http(s)://HOST[:PORT]`` (a fairacct collector service, :mod:`collector.sinks.http`)
and ``gratia+http(s)://HOST[:PORT]/gratia-servlets/rmi`` (a Gratia collector, OSG's GRACC:
:mod:`collector.sinks.gratia`).
"""

from __future__ import annotations

import sys

from collector.errors import SinkError
from collector.sinks.base import SendResult, Sink, TemplateCheck
from collector.sinks.registry import (
    STORES,
    Opening,
    Store,
    check_url,
    describe_url,
    kind_of,
    open_sink,
    open_store,
    sqlite_path,
)

__all__ = [
    "STORES",
    "Opening",
    "SendResult",
    "Sink",
    "Store",
    "TemplateCheck",
    "check_url",
    "describe_url",
    "ensure_templates",
    "kind_of",
    "open_sink",
    "open_store",
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
