"""The stores' registry: a URL names a sink class, opened from its settings in one place; a new
store is its class and one entry (here one of the test's own, in memory)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, ClassVar

import pytest

from collector.errors import ConfigError
from collector.sinks import STORES, Opening, Store, check_url, kind_of, open_store
from collector.sinks.registry import described, endpoint
from collector.sinks.sqlite import EmbeddedStore
from probes.config import parse_config


class MemorySink(EmbeddedStore):
    """A store of the test's own: ``memory://NAME``, records in memory (an embedded store at
    ``:memory:``), one per name while the test runs."""

    opened: ClassVar[dict[str, MemorySink]] = {}

    @classmethod
    def from_settings(cls, settings: Any, opening: Opening) -> MemorySink:
        sink = cls(":memory:")
        cls.opened[settings.url.removeprefix("memory://")] = sink
        return sink


@pytest.fixture
def memory_store(monkeypatch: pytest.MonkeyPatch) -> None:
    """The one entry a new store needs."""
    entry = Store(("memory://",), f"{__name__}:MemorySink", "memory://NAME", credentials="")
    monkeypatch.setitem(STORES, "memory", entry)
    monkeypatch.setattr(MemorySink, "opened", {})


def test_a_new_store_is_its_class_and_one_entry(memory_store: None, tmp_path: Path) -> None:
    config = parse_config({"store": {"url": "memory://books"}, "probe": {"state_dir": str(tmp_path)}})
    assert config.store.kind == "memory"
    sink = open_store(config.store, config.opening())
    try:
        assert isinstance(sink, MemorySink) and MemorySink.opened == {"books": sink}
        sink.send("job", [{"id": "j1", "timestamp": "2026-11-21T13:55:02Z", "user": "alice"}])
        assert sink.count("job") == 1
    finally:
        sink.close()
    assert described().endswith("(a Gratia collector: GRACC) or memory://NAME")  # --store's help
    with pytest.raises(ConfigError, match=r"gratia-servlets/rmi or memory://NAME, got 'mysql://db'"):
        parse_config({"store": {"url": "mysql://db"}})


@pytest.mark.parametrize(
    ("url", "name"),
    [
        ("sqlite:///fairacct.sqlite", "sqlite"),
        ("http://es:9200", "elasticsearch"),
        ("https://es:9200", "elasticsearch"),
        ("opensearch+https://os:9200", "opensearch"),
        ("collector+https://c.example.org", "collector"),
        ("gratia+https://gracc.example.org/gratia-servlets/rmi", "gratia"),
    ],
)
def test_a_url_names_its_store_and_its_sink_class(url: str, name: str) -> None:
    assert kind_of(url) == check_url(url) == name
    module, _, attribute = STORES[name].sink.partition(":")
    assert callable(getattr(__import__(module, fromlist=[attribute]), attribute).from_settings)


@pytest.mark.parametrize(
    ("url", "name", "match"),
    [
        ("mysql://db", None, "^store.url: expected sqlite:///PATH, http\\(s\\)://HOST:PORT, opensearch"),
        ("http://elastic:s3cr3t@es:9200", None,
         "^store.url: credentials in the URL are not accepted \\(http://es:9200\\); give username with"),
        ("collector+https://p:s3cr3t@c.example.org", None, "^store.url: no credentials in a collector URL; put"),
        ("gratia+https://p:s3cr3t@g.example.org/rmi", None, "^store.url: no credentials in a Gratia collector URL$"),
        ("collector+https://c.example.org/?a=1", "collector",
         "^store.url: expected collector\\+https://HOST\\[:PORT\\]\\[/PREFIX\\], got"),
        ("gratia+http:///rmi", "gratia", "^store.url: expected gratia\\+https://HOST\\[:PORT\\]/gratia-servlets/rmi"),
        ("gratia+https://g.example.org/rmi#x", "gratia", "^store.url: expected gratia\\+https://HOST"),
    ],
)  # fmt: skip
def test_a_bad_url_is_named_with_what_to_write(url: str, name: str | None, match: str) -> None:
    with pytest.raises(ConfigError, match=match) as info:
        if name is None:
            check_url(url)
        else:
            endpoint(url, name)
    assert "s3cr3t" not in str(info.value)


def test_upstream_is_a_gratia_collector_checked_by_the_registry() -> None:
    with pytest.raises(ConfigError, match=r"upstream\.url: no credentials in a Gratia collector URL"):
        parse_config({"upstream": {"url": "gratia+https://p:s@g.example.org/rmi", "gratia_site": "SiteA"}})
    with pytest.raises(ConfigError, match="expected gratia\\+https://HOST/gratia-servlets/rmi or empty"):
        parse_config({"upstream": {"url": "https://es:9200"}})


def test_the_registry_imports_a_sink_only_when_its_store_is_opened(tmp_path: Path) -> None:
    """Checking every URL and opening an embedded store leave the other sinks and their clients
    (elasticsearch, opensearch-py, httpx) unimported."""
    code = (
        "import json, sys; from pathlib import Path; from collector.sinks import check_url, open_store, Opening; "
        "from probes.config import parse_config; "
        "[check_url(u) for u in ('https://es:9200', 'opensearch+http://os:9200', 'collector+https://c', "
        "'gratia+https://g/gratia-servlets/rmi')]; "
        f"c = parse_config({{'probe': {{'state_dir': {str(tmp_path)!r}}}}}); open_store(c.store, c.opening()).close(); "
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith(('collector.sinks.', 'elastic', "
        "'opensearchpy', 'httpx')))))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    loaded = json.loads(done.stdout)
    assert "collector.sinks.sqlite" in loaded, loaded
    others = ("collector.sinks.elasticsearch", "collector.sinks.http", "collector.sinks.gratia", "elastic",
              "opensearchpy", "httpx")  # fmt: skip
    assert not [m for m in loaded if m.startswith(others)], loaded


def test_the_sections_hold_every_setting_their_sinks_declare() -> None:
    """[store] holds what every sink reads, [upstream] what the Gratia sink reads, and
    [collector.store] what the embedded, Elasticsearch and Gratia sinks read."""
    from collector.settings import CollectorStoreSettings
    from collector.sinks.elasticsearch.sink import ElasticsearchSettings
    from collector.sinks.gratia import GratiaSinkSettings
    from collector.sinks.http import CollectorSinkSettings
    from probes.config.store import StoreSettings, UpstreamSettings

    def declared(protocol: type) -> set[str]:
        return {name for name, value in vars(protocol).items() if isinstance(value, property)}

    sinks = [ElasticsearchSettings, GratiaSinkSettings, CollectorSinkSettings]
    for section, protocols in [
        (StoreSettings(), sinks),
        (UpstreamSettings(), [GratiaSinkSettings]),
        (CollectorStoreSettings(), [ElasticsearchSettings, GratiaSinkSettings]),
    ]:
        for protocol in protocols:
            assert declared(protocol) and all(hasattr(section, name) for name in declared(protocol)), protocol
