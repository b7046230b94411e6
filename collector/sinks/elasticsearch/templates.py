"""fairacct's index templates (the JSON files of ``mappings/``) and monthly index names."""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from collector.errors import ConfigError, ElasticsearchError
from collector.records import KINDS
from collector.sinks.base import TemplateCheck
from collector.sinks.elasticsearch.migration import VERSION_KEY
from mappings import DIRECTORY

if TYPE_CHECKING:  # the client libraries only when a sink is made (see the package's docstring)
    from collector.sinks.elasticsearch.transport import Client

__all__ = [
    "DIGEST_KEY",
    "INDEX_PREFIX",
    "KIND_NAME",
    "MAPPINGS",
    "check_installed",
    "field_types_of",
    "load_templates",
    "monthly_index",
    "template_difference",
]

MAPPINGS = DIRECTORY  # package data: the files of mappings/, installed or not
# An index name part: lowercase, and none of the characters index names or patterns reserve.
INDEX_PREFIX = re.compile(r"[a-z0-9][a-z0-9_-]{0,99}")
KIND_NAME = re.compile(r"[a-z][a-z_]{0,30}")
DIGEST_KEY = "fairacct_digest"


def monthly_index(prefix: str, kind: str, timestamp: object) -> str:
    """The index of a record: ``<prefix>-<kind>-YYYY.MM`` by its own ISO-8601 ``timestamp``."""
    if not isinstance(timestamp, str) or not timestamp:
        raise ValueError(f"expected an ISO-8601 UTC 'timestamp' like '2026-11-21T14:00:00Z', got {timestamp!r}")
    try:
        moment = datetime.fromisoformat(timestamp)
    except ValueError:
        raise ValueError(
            f"expected an ISO-8601 UTC 'timestamp' like '2026-11-21T14:00:00Z', got {timestamp!r}"
        ) from None
    if moment.tzinfo is None:  # a record's time without a zone is UTC by the schema
        moment = moment.replace(tzinfo=UTC)
    return f"{prefix}-{kind}-{moment.astimezone(UTC):%Y.%m}"


def load_templates(
    prefix: str = "fairacct", directory: str | os.PathLike[str] | None = None
) -> dict[str, dict[str, Any]]:
    """The index template of every kind, from ``<directory>/<kind>.json`` (default ``mappings/``).

    The files are written for the prefix ``fairacct``; another prefix gets the patterns
    ``<prefix>-<kind>-*``. ``_meta.fairacct_digest`` fingerprints each template as installed,
    so :meth:`ElasticsearchSink.check_templates` can tell an outdated one; the template's
    ``version`` is written as ``_meta.fairacct_mapping_version`` of the template and of its
    mappings (every index made from it carries it: :mod:`collector.sinks.elasticsearch.migration`).
    """
    folder = Path(directory) if directory is not None else MAPPINGS
    templates = {}
    for kind in KINDS:
        path = folder / f"{kind}.json"
        try:
            template = json.loads(path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise ConfigError(f"{path}: cannot read the {kind} index template ({exc.strerror})") from exc
        except ValueError as exc:
            raise ConfigError(f"{path}: the {kind} index template is not JSON ({exc})") from exc
        if not isinstance(template, dict) or not isinstance(template.get("template"), dict):
            raise ConfigError(f"{path}: expected a composable index template with a 'template' object")
        template["index_patterns"] = [f"{prefix}-{kind}-*"]
        version = template.get("version")
        if type(version) is not int or version < 1:
            raise ConfigError(
                f"{path}: the {kind} index template's 'version' must be a whole number >= 1, got {version!r}"
            )
        # in the mappings too, so that every index made from it says which it was made with
        mappings = template["template"].setdefault("mappings", {})
        mappings["_meta"] = {**dict(mappings.get("_meta") or {}), VERSION_KEY: version}
        meta = {k: v for k, v in dict(template.get("_meta") or {}).items() if k != DIGEST_KEY}
        meta[VERSION_KEY] = version
        template["_meta"] = meta
        digest = hashlib.sha256(json.dumps(template, sort_keys=True).encode()).hexdigest()[:16]
        template["_meta"] = {**meta, DIGEST_KEY: digest}
        templates[kind] = template
    return templates


def field_types_of(mappings: Mapping[str, Any]) -> dict[str, str]:
    return {name: str(spec.get("type", "object")) for name, spec in mappings.get("properties", {}).items()}


def template_difference(installed: Mapping[str, Any], expected: Mapping[str, Any]) -> str:
    """What differs between an installed template and the expected one ('' if nothing that
    matters: the fingerprint, the patterns and the field types)."""
    found = []
    digest = dict(installed.get("_meta") or {}).get(DIGEST_KEY)
    if digest != expected["_meta"][DIGEST_KEY]:
        found.append("installed from another version of mappings/")
    if sorted(installed.get("index_patterns", [])) != sorted(expected["index_patterns"]):
        found.append(f"index patterns {installed.get('index_patterns')}, expected {expected['index_patterns']}")
    have = field_types_of(installed.get("template", {}).get("mappings", {}))
    for name, want in field_types_of(expected["template"]["mappings"]).items():
        if have.get(name) != want:
            found.append(f"field {name} is {have.get(name, 'not mapped')}, expected {want}")
    return "; ".join(found)


def check_installed(client: Client, templates: Mapping[str, Mapping[str, Any]], prefix: str) -> TemplateCheck:
    """Which kinds of ``templates`` (:func:`load_templates`) have no template on the server, or
    one that differs."""
    missing: list[str] = []
    differ: dict[str, str] = {}
    for kind, expected in templates.items():
        name = f"{prefix}-{kind}"
        try:
            answer = client.request("GET", f"/_index_template/{name}", None, what=f"reading index template {name}")
        except ElasticsearchError as exc:
            if exc.status == 404:
                missing.append(kind)
                continue
            raise
        found = [t.get("index_template", {}) for t in answer.get("index_templates", []) if t.get("name") == name]
        if not found:
            missing.append(kind)
            continue
        difference = template_difference(found[0], expected)
        if difference:
            differ[kind] = difference
    return TemplateCheck(missing, differ)
