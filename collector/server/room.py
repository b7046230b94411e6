"""Room on the collector's outbox's file system: what a commit may use, and what is kept back.

An outbox that fills its file system wedges itself. Deleting what the store took is a write
too (SQLite appends it to the WAL), and the WAL is emptied only by a checkpoint, which copies
its pages into the database file and so may need as much room again: with no byte free, the
flusher could neither write down what the store took nor give any space back, and sent its
first batch again for ever. So the collector stops taking records while what is free, less the
WAL's size (the room its checkpoint may need), is under ``collector.outbox_reserve_mib`` plus
what the records would take: the reserve is the flusher's, to write down what the store took,
checkpoint, and give the file's free pages back, after which records are taken again.

The WAL's file size stands for what its checkpoint may need: an upper bound (a WAL already
copied is written over from its start, needing nothing), never less than the truth.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from collector.transaction import free_bytes

__all__ = ["Room", "room_of"]


@dataclass(frozen=True)
class Room:
    """The outbox's file system as one look at it found it (bytes). ``free`` is None when it
    could not be asked (then every check passes: the commit itself says whether it fits)."""

    free: int | None
    wal: int
    reserve: int

    @property
    def usable(self) -> int | None:
        """What commits may still use: free, less the WAL's checkpoint and the reserve."""
        return None if self.free is None else self.free - self.wal - self.reserve

    def fits(self, size: int) -> bool:
        """Whether ``size`` more bytes of records may be committed."""
        return self.usable is None or self.usable >= size

    def says(self, size: int) -> str:
        """Why ``size`` bytes do not fit, for /healthz, the log and an operator."""
        return (
            f"{_mib(self.free or 0)} free on the outbox's file system, of which its WAL may need {_mib(self.wal)} "
            f"and the flusher keeps {_mib(self.reserve)} (collector.outbox_reserve_mib): no room for "
            f"{_mib(size)} more"
        )


def room_of(outbox: Path, reserve: int) -> Room:
    """The room for commits to the outbox file ``outbox`` now (two system calls: cheap enough
    to ask before every group commit and every request)."""
    try:
        wal = os.stat(f"{outbox}-wal").st_size
    except OSError:  # none yet, or removed by the last close
        wal = 0
    return Room(free_bytes(outbox), wal, reserve)


def _mib(size: int) -> str:
    return f"{size / 2**20:.1f} MiB"
