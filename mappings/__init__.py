"""fairacct's record kinds, each declared once (:mod:`mappings.kinds`: the fields of every kind,
their types, units and roles), the Elasticsearch/OpenSearch index templates made from them
(``<kind>.json``, one per record kind: :mod:`mappings.templates`, ``python -m mappings``) and its
Kibana / OpenSearch Dashboards saved objects (``dashboards/*.ndjson``), shipped in the wheel as
package data so an installed fairacct finds them without its source tree."""

from pathlib import Path

__all__ = ["DIRECTORY"]

DIRECTORY = Path(__file__).resolve().parent
