"""The command-line options that replace one setting each, described once as data: the
parser adds them (:func:`probes.cli.parser.add_options`), :func:`apply_overrides` applies them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from collector.sinks.registry import described
from probes.config.log import LOG_FORMATS, LOG_LEVELS
from probes.config.model import ProbeConfig, replaced

__all__ = ["OVERRIDES", "Override", "apply_overrides"]


@dataclass(frozen=True)
class Override:
    """A command-line option that replaces one setting."""

    option: str
    section: str
    key: str
    metavar: str
    help: str
    many: bool = True
    choices: tuple[str, ...] = ()


OVERRIDES = (
    Override("--status-file", "sources", "status_files", "FILE", "condor_status -long/-json dump (repeatable)"),
    Override("--idle-file", "sources", "idle_files", "FILE", "condor_q -long dump of the queue (repeatable)"),
    Override(
        "--history", "sources", "history", "FILE|DIR", "condor_history dump, history file or directory (repeatable)"
    ),
    Override(
        "--store",
        "store",
        "url",
        "URL",
        described(),  # every store of the registry, a new one too
        many=False,
    ),
    Override("--log-level", "log", "level", "LEVEL", "the least severe events logged (default: log.level)",
             many=False, choices=LOG_LEVELS),
    Override("--log-format", "log", "format", "FORMAT", "text lines or JSON objects (default: log.format)",
             many=False, choices=LOG_FORMATS),
)  # fmt: skip


def apply_overrides(config: ProbeConfig, values: Mapping[str, Any]) -> ProbeConfig:
    """Replace settings by command-line values (keyed by the option's dest name); paths from
    the command line are relative to the working directory."""
    for o in OVERRIDES:
        value = values.get(o.option.lstrip("-").replace("-", "_"))
        if value is None or value == []:
            continue
        section = getattr(config, o.section)
        if o.many:
            value = [Path(v).absolute() for v in value]
        config = replaced(config, **{o.section: replaced(section, **{o.key: value})})
    return config
