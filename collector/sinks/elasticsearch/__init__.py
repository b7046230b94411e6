"""Records in Elasticsearch or OpenSearch: monthly indices, bulk writes by id, index templates.

- :mod:`~collector.sinks.elasticsearch.sink`: :class:`ElasticsearchSink`, the sink itself;
- :mod:`~collector.sinks.elasticsearch.templates`: ``mappings/`` and monthly index names;
- :mod:`~collector.sinks.elasticsearch.transport`: one request, in either client flavour;
- :mod:`~collector.sinks.elasticsearch.auth`: secrets from files or the environment, TLS.

The sink and its client libraries (elastic_transport, httpx: 0.1-0.2 CPU-s) are imported when
one of the package's names is first asked for, not with the package: ``auth`` serves commands
that never open an Elasticsearch store (``export``, ``report``, ``summarize`` on SQLite).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from collector.lazy import lazy_names

if TYPE_CHECKING:
    from collector.sinks.elasticsearch.sink import ElasticsearchSink, StoredDocument
    from collector.sinks.elasticsearch.templates import load_templates, monthly_index

__all__ = ["ElasticsearchSink", "StoredDocument", "load_templates", "monthly_index"]

_LAZY = {
    "ElasticsearchSink": "sink",
    "StoredDocument": "sink",
    "load_templates": "templates",
    "monthly_index": "templates",
}
"""The package's names, by the module that defines them (imported on first use)."""


__getattr__ = lazy_names(__name__, _LAZY, globals())
