"""Named points where a test can make the probe die, to prove that nothing is lost.

``FAIRACCT_CRASH_AT=after-commit`` makes the process kill itself with SIGKILL when it reaches
that point of a cycle: no cleanup, no flush, as a power cut or the OOM killer would. Unset (as
in production), a point costs one dictionary lookup.
"""

from __future__ import annotations

import os
import signal

__all__ = ["point"]


def point(name: str) -> None:
    if os.environ.get("FAIRACCT_CRASH_AT") == name:
        os.kill(os.getpid(), signal.SIGKILL)
