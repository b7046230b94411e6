"""fairacct's Elasticsearch/OpenSearch index templates (``<kind>.json``, one per record kind) and
its Kibana / OpenSearch Dashboards saved objects (``dashboards/*.ndjson``), shipped in the
wheel as package data so an installed fairacct finds them without its source tree."""

from pathlib import Path

__all__ = ["DIRECTORY"]

DIRECTORY = Path(__file__).resolve().parent
