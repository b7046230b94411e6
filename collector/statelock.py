"""One process per state directory: an exclusive lock on ``fairacct.lock`` inside it.

Two probes (or collectors) on one state directory would send each other's outbox and advance
each other's checkpoints. ``probe run``, ``probe once`` and ``collector serve`` take this lock
before they open anything there; the second one is refused with who holds it (pid, command
line, start time, written into the lock file by the holder). The lock is ``flock(2)``: the kernel
drops it when its holder exits, however it exits, so a crash leaves no stale lock to clear.
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from collector.errors import ConfigError
from collector.transaction import is_disk_full

__all__ = ["LOCK_NAME", "hold_state_dir"]

LOCK_NAME = "fairacct.lock"


@contextmanager
def hold_state_dir(directory: Path, setting: str) -> Iterator[Path]:
    """Hold ``directory``'s lock while inside (its path is yielded); a :class:`ConfigError`
    naming the directory (the ``setting`` that names it) and the holder when another process
    holds it."""
    path = directory / LOCK_NAME
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        raise ConfigError(f"{setting}: cannot open the lock file {path}: {exc.strerror}") from exc
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ConfigError(
                f"{setting} {directory} is in use by {_holder(fd)}; one probe or collector per state directory: "
                "stop that one first, or give this one a state_dir of its own"
            ) from None
        _name_holder(fd)
        yield path
    finally:
        os.close(fd)  # releases the lock; the file stays, naming the last holder


def _name_holder(fd: int) -> None:
    """Write who holds the lock into the lock file, over what the last holder wrote (its block
    reused, then cut to length). Only a courtesy to whoever is refused: on a full file system it
    is skipped, since a full disk must not stop a collector from starting to send its outbox
    (nor a probe from saying, in its own words, that its outbox has no room)."""
    holder = (json.dumps({"pid": os.getpid(), "command": " ".join(sys.argv), "started": _now()}) + "\n").encode()
    try:
        os.pwrite(fd, holder, 0)
        os.ftruncate(fd, len(holder))
    except OSError as exc:
        if not is_disk_full(exc):
            raise


def _holder(fd: int) -> str:
    """Who holds the lock, as its holder wrote it."""
    try:
        holder = json.loads(os.pread(fd, 4096, 0).decode())
        return f"pid {holder['pid']} ({holder['command']}, started {holder['started']})"
    except (OSError, ValueError, KeyError, TypeError):  # written as we read, or by another version
        return "another process"


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
