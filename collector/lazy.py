"""A package whose heavy modules are imported when one of their names is first asked for.

A command pays for what it uses: the ClassAd readers bring the compiled scanner and numba, the
Elasticsearch sink its client libraries, and a command that needs neither should not import
them with the package (PEP 562's module ``__getattr__``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, MutableMapping
from importlib import import_module

__all__ = ["lazy_names"]


def lazy_names(
    package: str, names: Mapping[str, str], namespace: MutableMapping[str, object]
) -> Callable[[str], object]:
    """The module ``__getattr__`` of ``package`` (its ``globals()``: ``namespace``) that imports
    each of ``names`` (name -> the module of the package defining it) on first use."""

    def attribute(name: str) -> object:
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        loaded = import_module(f"{package}.{module}")
        # the module's names all at once: the next lookups find them without this function
        namespace.update({n: getattr(loaded, n) for n, m in names.items() if m == module})
        return namespace[name]

    return attribute
