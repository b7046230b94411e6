"""fairacct's probes: everything that knows HTCondor, and the accounting math.

The flow, one package per stage::

    sources -> tables -> accounting -> records -> outbox -> sinks
    (probes.sources)    (probes.accounting)  (probes.pipeline)  (collector)

- :mod:`probes.sources`: where ads come from (files, a live pool, workload logs) and the tables
  they become; the checkpoints of what was read;
- :mod:`probes.accounting`: pure math over tables (no I/O, no HTCondor); its References cite the
  papers the math follows, by the short forms the rest of the code uses;
- :mod:`probes.pipeline`: a snapshot's accounting, usage pricing, the records, one cycle;
- :mod:`probes.service`: the scheduler and its health endpoint;
- :mod:`probes.cli`: the ``fairacct`` command line;
- :mod:`probes.config`: the TOML configuration, handing each part its few settings.

The names below are the package's public surface; they are imported when first used, so that
``import probes.accounting`` stays as light as the math itself.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from probes.config import ProbeConfig, load_config
    from probes.sources.history import read_history
    from probes.sources.queue import read_idle
    from probes.sources.report import ReadReport
    from probes.sources.status import Snapshot, read_status

__all__ = [
    "ProbeConfig",
    "ReadReport",
    "Snapshot",
    "load_config",
    "read_history",
    "read_idle",
    "read_status",
]

_WHERE = {
    "ProbeConfig": "config",
    "load_config": "config",
    "ReadReport": "sources.report",
    "Snapshot": "sources.status",
    "read_status": "sources.status",
    "read_idle": "sources.queue",
    "read_history": "sources.history",
}


def __getattr__(name: str) -> object:
    # collector.lazy is imported only when a name is asked for: ``import probes.accounting``
    # imports nothing of the collector
    from collector.lazy import lazy_names

    return lazy_names(__name__, _WHERE, globals())(name)
