"""Every store, once: a URL's scheme names a sink class, and a store is opened here only.

:data:`STORES` maps a store's name to a :class:`Store`: the URL prefixes that name it, its sink
class as ``"module:Class"`` (imported when a store of it is opened, so that the Elasticsearch and
OpenSearch clients load only for them) and how its URL is written. A sink class declares the
settings it reads as a protocol of its own module (``url`` and the keys of ``[store]`` it needs)
and opens itself from them with ``from_settings(settings, opening)``. ``[store]``,
``[upstream]`` and ``[collector.store]`` check their URL with :func:`check_url`, and
:func:`open_store` opens the store they name. Adding a store is its module and one entry here.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, cast
from urllib.parse import SplitResult, urlsplit, urlunsplit

from collector.errors import ConfigError
from collector.sinks.base import Sink

__all__ = [
    "STORES",
    "Opening",
    "Store",
    "StoreSettings",
    "check_url",
    "describe_url",
    "described",
    "endpoint",
    "kind_of",
    "open_sink",
    "open_store",
    "sqlite_path",
]

_CREDENTIALS = "give username with password_file or password_env, or api_key_file or api_key_env"


@dataclass(frozen=True)
class Store:
    """A kind of store. ``prefixes``: the URL starts that name it; ``sink``: its class as
    ``"module:Class"``, imported when one is opened; ``form``: its URL as a person writes it;
    ``what``: what is behind it, in a few words (``--store``'s help); ``exact``: the form its own
    URL check names (a host, no query, no fragment); ``credentials``: what to do instead of
    credentials in the URL (empty: the URL names a file, no host)."""

    prefixes: tuple[str, ...]
    sink: str
    form: str
    what: str = ""
    exact: str = ""
    credentials: str = _CREDENTIALS


STORES: dict[str, Store] = {
    "sqlite": Store(
        ("sqlite:///",), "collector.sinks.sqlite:EmbeddedStore", "sqlite:///PATH", "the embedded store", credentials=""
    ),
    "elasticsearch": Store(
        ("http://", "https://"),
        "collector.sinks.elasticsearch:ElasticsearchSink",
        "http(s)://HOST:PORT",
        "Elasticsearch",
    ),
    "opensearch": Store(
        ("opensearch+http://", "opensearch+https://"),
        "collector.sinks.elasticsearch:ElasticsearchSink",
        "opensearch+http(s)://HOST:PORT",
        "OpenSearch",
    ),
    "collector": Store(
        ("collector+http://", "collector+https://"),
        "collector.sinks.http:CollectorSink",
        "collector+http(s)://HOST[:PORT]",
        "a fairacct collector",
        exact="collector+https://HOST[:PORT][/PREFIX]",
        credentials="no credentials in a collector URL; put the probe's token in store.token_file",
    ),
    "gratia": Store(
        ("gratia+http://", "gratia+https://"),
        "collector.sinks.gratia:GratiaSink",
        "gratia+http(s)://HOST[:PORT]/gratia-servlets/rmi",
        "a Gratia collector: GRACC",
        exact="gratia+https://HOST[:PORT]/gratia-servlets/rmi",
        credentials="no credentials in a Gratia collector URL",
    ),
}
"""The stores there are sinks for, by name (a test adds one of its own)."""


class StoreSettings(Protocol):
    """What every store's settings hold: its URL. A sink's own protocol adds the keys it reads."""

    @property
    def url(self) -> str: ...


@dataclass(frozen=True)
class Opening:
    """How a store is opened, beside its settings: ``base``, the directory a relative
    ``sqlite:///`` path is under; without ``create``, an embedded store that does not exist is an
    error; ``timeout_s`` (seconds a request may take) and ``bulk_bytes`` (bytes of one bulk
    request), for the stores that take them, when not their defaults."""

    base: Path
    create: bool = True
    timeout_s: float | None = None
    bulk_bytes: int | None = None


class _FromSettings(Protocol):
    def from_settings(self, settings: Any, opening: Opening) -> Sink: ...

    def from_url(self, url: str, **options: Any) -> Sink: ...


def kind_of(url: str) -> str:
    """The name of the store ``url`` names (a key of :data:`STORES`); a :class:`ConfigError`
    naming every store's form when there is none."""
    for name, store in STORES.items():
        if url.startswith(store.prefixes):
            return name
    forms = [store.form for store in STORES.values()]
    raise ConfigError(f"store.url: expected {', '.join(forms[:-1])} or {forms[-1]}, got {url!r}")


def described() -> str:
    """Every store's URL form and what is behind it, in one sentence (``--store``'s help)."""
    forms = [f"{store.form} ({store.what})" if store.what else store.form for store in STORES.values()]
    return f"{', '.join(forms[:-1])} or {forms[-1]}"


def check_url(url: str) -> str:
    """The name of the store ``url`` names; a :class:`ConfigError` unless there is a sink for it
    and it holds no credentials (those come from files or the environment)."""
    name = kind_of(url)
    store = STORES[name]
    if store.credentials:
        parts = urlsplit(url)
        if parts.username or parts.password:
            if store.credentials != _CREDENTIALS:
                raise ConfigError(f"store.url: {store.credentials}")
            bare = urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))
            raise ConfigError(f"store.url: credentials in the URL are not accepted ({bare}); {store.credentials}")
    return name


def endpoint(url: str, name: str) -> SplitResult:
    """``url``'s parts, checked as a store of ``name`` that takes a host and nothing after its
    path (a fairacct or a Gratia collector): a :class:`ConfigError` naming its form otherwise."""
    store = STORES[name]
    parts = urlsplit(url)
    if not url.startswith(store.prefixes) or not parts.hostname or parts.query or parts.fragment:
        raise ConfigError(f"store.url: expected {store.exact or store.form}, got {url!r}")
    if parts.username or parts.password:
        raise ConfigError(f"store.url: {store.credentials}")
    return parts


def _sink_class(name: str) -> _FromSettings:
    module, _, attribute = STORES[name].sink.partition(":")
    return cast(_FromSettings, getattr(importlib.import_module(module), attribute))


def open_store(settings: StoreSettings, opening: Opening) -> Sink:
    """The store ``settings`` name (``[store]``, ``[upstream]``, ``[collector.store]``), opened by
    its sink class from the settings it declares: the one place a configured store is opened."""
    return _sink_class(check_url(settings.url)).from_settings(settings, opening)


def open_sink(url: str, *, base: Path, auth: Mapping[str, Any] | None = None, create: bool = True) -> Sink:
    """The sink a store URL names, with its constructor's own options (tests, embedders); a
    configured store is opened with :func:`open_store`."""
    name = check_url(url)
    if name == "sqlite":
        return _sink_class(name).from_settings(_Url(url), Opening(base, create=create))
    return _sink_class(name).from_url(url, **dict(auth or {}))


@dataclass(frozen=True)
class _Url:
    url: str


def sqlite_path(url: str, base: Path) -> Path | None:
    """The file of a ``sqlite:///PATH`` URL (relative to ``base``); None for other URLs."""
    if not url.startswith("sqlite:///"):
        return None
    path = Path(url.removeprefix("sqlite:///"))
    return path if path.is_absolute() or str(path) == ":memory:" else base / path


def describe_url(url: str, base: Path) -> str:
    """The store as a person should be told of it: an embedded store by its real file."""
    path = sqlite_path(url, base)
    return url if path is None or str(path) == ":memory:" else f"sqlite:///{path.absolute()}"
