"""Fuzzing the collector from its own OpenAPI document (schemathesis): whatever comes, no 5xx,
no crash, and every reply has a status, a content type and a body the document declares."""

from __future__ import annotations

from typing import Any

import httpx
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from .conftest import Collector

CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]


def test_no_reply_is_a_server_error(shared_collector: Collector) -> None:
    """Every operation of the document, with generated headers and bodies (schemathesis's
    strategies driven by hypothesis here: its pytest plugin does not load under pytest 9)."""
    schema = schemathesis.openapi.from_url(f"{shared_collector.url}/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    assert {"/v1/records", "/gratia-servlets/rmi", "/healthz", "/metrics", "/stats"} <= {op.path for op in operations}
    for operation in operations:
        examples = 150 if operation.method.upper() == "POST" else 5

        @given(case=operation.as_strategy())
        @settings(max_examples=examples, deadline=None, suppress_health_check=list(HealthCheck), database=None)
        def call(case: Any) -> None:
            case.call_and_validate(base_url=shared_collector.url, headers=shared_collector.auth("p1"), checks=CHECKS)

        call()


def test_the_collector_is_still_up_and_counted_no_internal_error(shared_collector: Collector) -> None:
    assert httpx.get(f"{shared_collector.url}/healthz").status_code == 200
    assert 'reason="internal"' not in httpx.get(f"{shared_collector.url}/metrics").text
    assert shared_collector.process is not None and shared_collector.process.poll() is None
