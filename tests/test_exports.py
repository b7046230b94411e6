"""The public surface is what __all__ says, and the exception tree is what errors.py draws."""

from __future__ import annotations

import importlib
import inspect
import re

import pytest

import collector.errors as errors


MODULES = [
    "probes",
    "collector",
    "collector.errors",
    "collector.store",
    "probes.config",
    "probes.sources.classad",
    "probes.sources.status",
    "probes.sources.queue",
    "probes.sources.history",
    "probes.accounting",
    "probes.accounting.penalty",
    "probes.accounting.fairshare",
    "probes.accounting.machines",
    "collector.records",
    "collector.sinks",
    "collector.outbox",
    "collector.elasticsearch",
    "probes.cycle",
    "probes.overhead",
    "probes.views",
    "probes.matching",
    "probes.sources.live",
    "probes.sources.swf",
    "probes.sources.alea",
    "probes.sources.credentials",
    "probes.service",
    "probes.health",
    "probes.usage",
    "probes.usage_views",
    "collector.http_sink",
    "collector.server",
    "collector.server.app",
    "collector.server.body",
    "collector.server.committer",
    "collector.server.flusher",
    "collector.server.ingest",
    "collector.server.judge",
    "collector.server.metrics",
    "collector.server.openapi",
    "collector.server.replies",
    "collector.server.serve",
    "collector.server.settings",
    "collector.server.tokens",
    "collector.server.v1_records",
]


@pytest.mark.parametrize("module", MODULES)
def test_all_lists_exactly_the_public_names(module: str) -> None:
    mod = importlib.import_module(module)
    defined = {
        name
        for name, value in vars(mod).items()
        if not name.startswith("_") and (inspect.isclass(value) or inspect.isfunction(value)) and value.__module__ == module
    }
    assert set(mod.__all__) <= set(vars(mod)), "listed but missing"
    assert defined <= set(mod.__all__), f"public but not listed: {sorted(defined - set(mod.__all__))}"


def test_exception_tree() -> None:
    assert issubclass(errors.ConfigError, errors.FairacctError)
    assert issubclass(errors.ClassAdError, errors.SourceError)
    assert issubclass(errors.SourceError, errors.FairacctError)
    assert issubclass(errors.StoreError, errors.SinkError)
    assert issubclass(errors.SinkError, errors.FairacctError)
    drawn = set(re.findall(r"(\w+Error)\s", errors.__doc__ or ""))
    defined = {n for n, v in vars(errors).items() if inspect.isclass(v) and issubclass(v, Exception)}
    assert drawn == defined


def test_class_ad_error_names_file_line_and_attribute() -> None:
    err = errors.ClassAdError("history.1234.0", 17, "unterminated string", attribute="Args")
    assert str(err) == "history.1234.0 line 17: attribute 'Args': unterminated string"
