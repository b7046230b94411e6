"""fairacct's probes: everything that knows HTCondor, and the accounting math.

The public surface is listed here once; ``tests/test_exports.py`` keeps it from drifting.
"""

from probes.config import ProbeConfig, load_config
from probes.sources.classad import ReadReport
from probes.sources.history import read_history
from probes.sources.queue import read_idle
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
