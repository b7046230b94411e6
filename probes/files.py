"""Writing files: whole (a reader, or a crash, never sees half of one), and only where it can."""

from __future__ import annotations

import errno
import os
import tempfile
from pathlib import Path

from collector.errors import ConfigError

__all__ = ["atomic_write", "check_writable"]


def check_writable(directory: Path, setting: str) -> None:
    """Create ``directory`` if needed and make sure files can be created in it; raise
    ConfigError naming ``setting``, the path and the reason (read-only, permission) if not."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=directory, prefix=".fairacct-write-check.")
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        why = {
            errno.EROFS: "it is on a read-only file system",
            errno.EACCES: f"permission denied: user id {os.geteuid()} may not write there",
            errno.EPERM: f"permission denied: user id {os.geteuid()} may not write there",
            errno.ENOSPC: "the file system is full",
        }.get(exc.errno or 0, exc.strerror or type(exc).__name__)
        raise ConfigError(
            f"{setting}: cannot write in {directory} ({why}); the outbox and the checkpoints live there: "
            "make it writable (systemd: StateDirectory= or ReadWritePaths=) or choose another directory"
        ) from None


def atomic_write(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file in the same directory (created if
    needed), fsync'ed, then renamed over ``path``: the rename is atomic, so ``path`` holds
    either its old content or all of the new."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
