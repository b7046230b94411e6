"""The public surface is what __all__ says, every module of both packages is covered without a
hand-kept list, and the exception tree is what errors.py draws."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re

import pytest

import collector
import collector.errors as errors
import probes
import probes.errors as probe_errors


def _modules() -> list[str]:
    names = []
    for package in (probes, collector):
        names.append(package.__name__)
        for info in pkgutil.walk_packages(package.__path__, f"{package.__name__}."):
            if not info.name.endswith("__main__"):
                names.append(info.name)
    return sorted(names)


MODULES = _modules()


def test_every_module_is_found() -> None:
    # a module left out by the walk would escape every check below
    assert {
        "probes.accounting.ledger",
        "probes.sources.classad.kernel",
        "collector.sinks.elasticsearch.auth",
        "collector.gratia.wire",
    } <= set(MODULES)
    assert len(MODULES) > 50


@pytest.mark.parametrize("module", MODULES)
def test_all_lists_exactly_the_public_names(module: str) -> None:
    mod = importlib.import_module(module)
    assert hasattr(mod, "__all__") or not _defined(mod, module), f"{module} defines public names but has no __all__"
    listed = set(getattr(mod, "__all__", ()))
    for name in listed:
        getattr(mod, name)  # listed but missing raises (lazy packages resolve here)
    assert _defined(mod, module) <= listed, f"public but not listed: {sorted(_defined(mod, module) - listed)}"


def _defined(mod: object, module: str) -> set[str]:
    return {
        name
        for name, value in vars(mod).items()
        if not name.startswith("_")
        and (inspect.isclass(value) or inspect.isfunction(value))
        and value.__module__ == module
    }


@pytest.mark.parametrize("package", [m for m in MODULES if hasattr(importlib.import_module(m), "__path__")])
def test_a_package_lists_what_its_modules_offer(package: str) -> None:
    """A package's __all__ names only what its modules (or it) define: a facade, not a second home."""
    mod = importlib.import_module(package)
    for name in getattr(mod, "__all__", ()):
        value = getattr(mod, name)
        owner = getattr(value, "__module__", package)
        assert owner.startswith(package.split(".")[0]), f"{package}.{name} comes from {owner}"


def test_exception_tree() -> None:
    assert issubclass(errors.ConfigError, errors.FairacctError)
    assert issubclass(probe_errors.ClassAdError, probe_errors.SourceError)
    assert issubclass(probe_errors.SourceError, errors.FairacctError)
    assert issubclass(errors.StoreError, errors.SinkError)
    assert issubclass(errors.SinkError, errors.FairacctError)
    for module in (errors, probe_errors):  # each module draws the classes it defines, and only those
        drawn = set(re.findall(r"(\w+Error)\s", module.__doc__ or ""))
        defined = {
            n
            for n, v in vars(module).items()
            if inspect.isclass(v) and issubclass(v, Exception) and v.__module__ == module.__name__
        }
        assert defined <= drawn, module.__name__
        assert drawn - defined <= {"FairacctError", "ConfigError"}, module.__name__  # the probes' tree hangs from those


def test_class_ad_error_names_file_line_and_attribute() -> None:
    err = probe_errors.ClassAdError("history.1234.0", 17, "unterminated string", attribute="Args")
    assert str(err) == "history.1234.0 line 17: attribute 'Args': unterminated string"
