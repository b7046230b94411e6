"""Where the commands that read a store find it."""

from __future__ import annotations

import tomllib
from pathlib import Path

from collector.settings import SinkSettings
from probes.config import ProbeConfig

__all__ = ["store_base", "store_of"]


def store_of(config_file: str | None, config: ProbeConfig, store_url: str | None) -> tuple[SinkSettings, Path]:
    """The store a command reads, and the directory a relative ``sqlite:///`` store is under.
    A collector's configuration (a ``[collector]`` section and no ``[probe]``) names the
    collector's store (``[collector.store]``, or ``[store]`` in a file written before that
    section; ``store_url``, the command's ``--store``, replaces its URL) under the collector's
    state directory, where its service keeps it; any other names the probe's ``[store]``."""
    if _is_a_collectors(config_file):
        return config.collector_settings(store_url).store, config.collector.state_dir
    return config.store, config.probe.state_dir


def store_base(config_file: str | None, config: ProbeConfig) -> Path:
    """The directory a relative ``sqlite:///`` store is under: the collector's state directory
    when ``config_file`` is a collector's (a ``[collector]`` section and no ``[probe]``), whose
    service keeps its store there, else the probe's."""
    return config.collector.state_dir if _is_a_collectors(config_file) else config.probe.state_dir


def _is_a_collectors(config_file: str | None) -> bool:
    if not config_file:
        return False
    try:
        raw = tomllib.loads(Path(config_file).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):  # load_config read it already
        return False
    return "collector" in raw and "probe" not in raw
