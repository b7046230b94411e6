"""A small real file system a test fills, for what fairacct does when its disk is full.

:func:`small_file_system` mounts a tmpfs of a given size on a directory of the test's own and
unmounts it when the test ends, whatever happens; where mounting is not permitted (not root, no
CAP_SYS_ADMIN, a container that forbids it) the test is skipped, saying so. Nothing outlives the
test: the mount is the test's, in its temporary directory. :func:`fill` takes what is free with a
file of its own, which the test removes (or cuts) to give the room back.
"""

from __future__ import annotations

import contextlib
import gc
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

__all__ = ["fill", "small_file_system"]


@contextlib.contextmanager
def small_file_system(where: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` (mount's form: ``8m``) mounted on ``where`` (made), unmounted after."""
    where.mkdir(parents=True, exist_ok=True)
    if shutil.which("mount") is None:
        pytest.skip("needs mount(8) to make a small file system to fill")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(where)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"needs to mount a tmpfs to fill (as root in CI); mount said: {done.stderr.strip()}")
    try:
        yield where
    finally:
        gc.collect()  # a connection a failed test left unclosed holds a file there
        if subprocess.run(["umount", str(where)], capture_output=True, check=False).returncode != 0:
            # still busy (a process the test could not end): detached now, gone with its last file
            subprocess.run(["umount", "--lazy", str(where)], capture_output=True, check=True)


def fill(directory: Path, *, leave: int = 0) -> Path:
    """A file in ``directory`` that takes all its file system's free space but ``leave`` bytes
    (a tmpfs gives a cut file's pages back at once); its path."""
    ballast = directory / "ballast"
    chunk = b"\0" * 65536
    fd = os.open(ballast, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        while True:
            try:
                if os.write(fd, chunk) == 0:
                    break
            except OSError:  # ENOSPC: what is left is less than a chunk, then nothing
                if len(chunk) == 1:
                    break
                chunk = chunk[: len(chunk) // 2]
        os.ftruncate(fd, max(0, os.fstat(fd).st_size - leave))
    finally:
        os.close(fd)
    return ballast
