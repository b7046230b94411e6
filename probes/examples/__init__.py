"""What a site starts from, shipped in the wheel: the example configuration (every key,
documented), the systemd units of the probe and the collector, and the HTCondor configuration
snippet that makes the probe a daemon of condor_master (``fairacct.config``).

The files are links to ``config/`` of the source tree, their one copy, which setuptools copies
into the wheel as package data; ``fairacct config example`` prints or writes them.
"""

from __future__ import annotations

from importlib.resources import files

__all__ = ["EXAMPLES", "example_text"]

EXAMPLES = ("example.toml", "fairacct-probe.service", "fairacct-collector.service", "fairacct.config")
"""The files shipped, by name."""


def example_text(name: str) -> str:
    """The text of the shipped file ``name`` (one of :data:`EXAMPLES`)."""
    if name not in EXAMPLES:
        raise ValueError(f"expected one of {', '.join(EXAMPLES)}, got {name!r}")
    return files(__name__).joinpath(name).read_text(encoding="utf-8")
