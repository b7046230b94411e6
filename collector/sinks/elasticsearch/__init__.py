"""Records in Elasticsearch or OpenSearch: monthly indices, bulk writes by id, index templates.

- :mod:`~collector.sinks.elasticsearch.sink`: :class:`ElasticsearchSink`, the sink itself;
- :mod:`~collector.sinks.elasticsearch.templates`: ``mappings/`` and monthly index names;
- :mod:`~collector.sinks.elasticsearch.transport`: one request, in either client flavour;
- :mod:`~collector.sinks.elasticsearch.auth`: secrets from files or the environment, TLS.
"""

from __future__ import annotations

from collector.sinks.elasticsearch.sink import ElasticsearchSink, StoredDocument
from collector.sinks.elasticsearch.templates import load_templates, monthly_index

__all__ = ["ElasticsearchSink", "StoredDocument", "load_templates", "monthly_index"]
