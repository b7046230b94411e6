"""Where the commands that read a store find it."""

from __future__ import annotations

import tomllib
from pathlib import Path

from probes.config import ProbeConfig

__all__ = ["store_base"]


def store_base(config_file: str | None, config: ProbeConfig) -> Path:
    """The directory a relative ``sqlite:///`` store is under: the collector's state directory
    when ``config_file`` is a collector's (a ``[collector]`` section and no ``[probe]``), whose
    service keeps its store there, else the probe's."""
    if config_file:
        try:
            raw = tomllib.loads(Path(config_file).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):  # load_config read it already
            raw = {}
        if "collector" in raw and "probe" not in raw:
            return config.collector.state_dir
    return config.probe.state_dir
