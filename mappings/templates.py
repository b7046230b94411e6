"""The Elasticsearch / OpenSearch index template of a record kind, made from its declaration.

The files ``mappings/<kind>.json`` are these templates as text (:func:`template_text`),
written by ``python -m mappings`` and checked by a test to be what the declarations make: the
files are what an operator reads and what ``fairacct mappings install`` sends, the declarations
what they are made from. Every template maps the fields its kind names with their types (a
:data:`~mappings.fields.TIME` field as a ``long`` and its ``<name>_iso`` twin as a ``date``),
and the fields it does not name by its dynamic templates: ``*_iso`` strings as dates, other
strings as keywords, numbers as doubles; date and numeric detection off.
"""

from __future__ import annotations

import json
from typing import Any

from mappings.fields import Kind

__all__ = ["LINE", "MAX_INDEX_FIELDS", "template", "template_text"]

MAX_INDEX_FIELDS = 1000
"""``index.mapping.total_fields.limit`` of every template: Elasticsearch's default made explicit."""

LINE = 120
"""The width within which a JSON object or array of a template file is written on one line."""

_COMMON_DYNAMIC: tuple[dict[str, Any], ...] = (
    {"iso_times_as_dates": {"match": "*_iso", "match_mapping_type": "string", "mapping": {"type": "date"}}},
    {"strings_as_keywords": {"match_mapping_type": "string", "mapping": {"type": "keyword", "ignore_above": 1024}}},
    {"integers_as_doubles": {"match_mapping_type": "long", "mapping": {"type": "double"}}},
    {"floats_as_doubles": {"match_mapping_type": "double", "mapping": {"type": "double"}}},
)


def template(kind: Kind) -> dict[str, Any]:
    """The composable index template of ``kind``, for the prefix ``fairacct``."""
    properties = {
        name: {"type": type_, **next((dict(f.mapping) for f in kind.fields if f.name == name), {})}
        for name, type_ in sorted(kind.types().items())
    }
    return {
        "index_patterns": [f"fairacct-{kind.name}-*"],
        "priority": 200,
        "version": kind.version,
        "_meta": {"description": kind.description},
        "template": {
            "settings": {"index": {"number_of_shards": 1, "mapping": {"total_fields": {"limit": MAX_INDEX_FIELDS}}}},
            "mappings": {
                "dynamic": True,
                "date_detection": False,
                "numeric_detection": False,
                "dynamic_templates": [*map(dict, kind.dynamic_templates), *_COMMON_DYNAMIC],
                "properties": properties,
            },
        },
    }


def template_text(kind: Kind) -> str:
    """The template of ``kind`` as its file holds it: indented by two, an object or array on one
    line where it fits in :data:`LINE` characters, a newline at the end."""
    return _dump(template(kind), 0, "") + "\n"


def _dump(value: Any, depth: int, key: str) -> str:
    flat = json.dumps(value, ensure_ascii=False)
    if not isinstance(value, dict | list) or not value or (depth and 2 * depth + len(key) + len(flat) < LINE):
        return flat
    pad = "  " * (depth + 1)
    if isinstance(value, dict):
        items = [f"{pad}{json.dumps(k)}: {_dump(v, depth + 1, json.dumps(k) + ': ')}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + "  " * depth + "}"
    items = [pad + _dump(v, depth + 1, "") for v in value]
    return "[\n" + ",\n".join(items) + "\n" + "  " * depth + "]"
