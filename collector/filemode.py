"""The mode of the files the outputs write: what the process's umask gives a new file.

Outputs are written whole, under a temporary name then renamed (``tempfile.mkstemp``), and
``mkstemp`` makes its file 0600 whatever the umask: a web server serving the report or a
committee's group reading the exports could not open them. :func:`as_umask_allows` gives the
file the mode ``open()`` would have given it (0644 under the usual umask 022, 0640 under 027).
"""

from __future__ import annotations

import os
import threading

__all__ = ["as_umask_allows", "current_umask"]

_LOCK = threading.Lock()


def current_umask() -> int:
    """The process's umask, read without changing it where Linux says it (``/proc``)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    with _LOCK:  # elsewhere the only way to read it is to set it and put it back
        mask = os.umask(0o022)
        os.umask(mask)
    return mask


def as_umask_allows(fd: int) -> None:
    """Give the open file ``fd`` the mode a new file of ``open()`` gets: 0666 less the umask."""
    os.fchmod(fd, 0o666 & ~current_umask())
