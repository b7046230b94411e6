"""The probe's configuration: one TOML file, described once here and validated on load.

Every setting is a pydantic field with its type, default, constraint and help text (the
collector service's, the ``[collector]`` section and its ``[collector.store]``, in
:mod:`collector.settings`); the TOML validation, the command-line overrides (``OVERRIDES``),
the readers' settings (:mod:`probes.sources.settings`) and the documented example
(``fairacct config example``, checked against this package by the tests) all follow from it.
Errors name the file, the key's path and what was expected::

    demo.toml: partitions[0].memory: expected a size like "2 GiB", "512 MiB" or "4 GB", got '2 gigs'

Relative paths in the file are taken relative to the file's own directory, so a configuration
means the same thing from wherever it is used. Help texts cite papers by the short forms of
:mod:`probes.accounting`'s References.

One module per part of the file:

- :mod:`~probes.config.fields`: the section base and the value types keys share (sizes, ClassAd expressions);
- :mod:`~probes.config.pool`: ``[pool]``; :mod:`~probes.config.sources`: ``[sources]``;
- :mod:`~probes.config.credentials`: ``[credentials]`` and ``[site]``;
- :mod:`~probes.config.machines`: ``[machines]`` and ``[[partitions]]``;
- :mod:`~probes.config.store`: ``[store]``; :mod:`~probes.config.probe`: ``[probe]``;
- :mod:`~probes.config.policies`: ``[penalty]``, ``[fairshare]``, ``[priority]``, ``[fairness]``, ``[summaries]``;
- :mod:`~probes.config.apel`: ``[apel]``;
- :mod:`~probes.config.collector`: ``[collector]``, and a file that gives the collector's store in ``[store]``;
- :mod:`~probes.config.model`: :class:`ProbeConfig`, the whole file, and what it hands each part;
- :mod:`~probes.config.overrides`: the command-line options that replace a setting;
- :mod:`~probes.config.loading`: reading a file, and the wording of its errors.
"""

from __future__ import annotations

from probes.config.apel import ApelSettings
from probes.config.collector import COLLECTOR_STORE_NOTE
from probes.config.credentials import CredentialSettings, SiteSettings
from probes.config.loading import load_config, parse_config
from probes.config.machines import DEFAULT_PARTITIONS, MachineSettings, Partition
from probes.config.model import ProbeConfig
from probes.config.overrides import OVERRIDES, Override, apply_overrides
from probes.config.policies import (
    FairnessSettings,
    FairshareSettings,
    PenaltySettings,
    PrioritySettings,
    SummarySettings,
)
from probes.config.pool import PoolSettings
from probes.config.probe import ProbeSettings
from probes.config.sources import SourceSettings
from probes.config.store import StoreSettings

__all__ = [
    "COLLECTOR_STORE_NOTE",
    "DEFAULT_PARTITIONS",
    "OVERRIDES",
    "ApelSettings",
    "CredentialSettings",
    "FairnessSettings",
    "FairshareSettings",
    "MachineSettings",
    "Override",
    "Partition",
    "PenaltySettings",
    "PoolSettings",
    "PrioritySettings",
    "ProbeConfig",
    "ProbeSettings",
    "SiteSettings",
    "SourceSettings",
    "StoreSettings",
    "SummarySettings",
    "apply_overrides",
    "load_config",
    "parse_config",
]
