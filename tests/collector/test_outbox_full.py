"""The outbox on a full file system (issue 54, point 5): a real tmpfs, filled by the test.

It opens and counts what waits whatever room is left; a batch the store took whose deletes
cannot be written waits in memory, is written down first once there is room, and is never sent
again meanwhile; a full disk is a DiskFullError that says so, apart from other store failures.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from collector.encoded import Encoded
from collector.errors import DiskFullError
from collector.outbox import Outbox, Unrecorded
from collector.sinks.base import SendResult
from collector.sinks.sqlite import EmbeddedStore

from ..fullfs import fill, small_file_system


def docs(n: int, start: int = 0) -> list[dict[str, Any]]:
    return [
        {"id": f"job-{i}", "kind": "job", "timestamp": "2026-11-21T14:00:00Z", "cpus": 1.0, "pad": "x" * 200}
        for i in range(start, start + n)
    ]


class CountingStore(EmbeddedStore):
    """The embedded store, noting every batch it is sent (ids in order)."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.batches: list[tuple[str, ...]] = []

    def send_encoded(self, kind: str, records: Encoded) -> SendResult:
        self.batches.append(tuple(records.ids))
        return super().send_encoded(kind, records)


def test_an_outbox_on_a_full_disk_opens_and_counts_what_waits(tmp_path: Path) -> None:
    """As the collector restarted on a full disk found it: records in a WAL that was never
    copied back (its writer checkpoints in another thread), not a byte free. Opening wrote the
    database's header (PRAGMA auto_vacuum, even unchanged) and failed, so the flusher died and
    /healthz said depth 0 with every record still there."""
    with small_file_system(tmp_path / "fs", "4m") as fs:
        writer = Outbox(fs / "outbox.sqlite", autocheckpoint=False)
        try:
            writer.commit({"job": docs(300)}, {"history:x": {"end": 5}})
            fill(fs)
            with pytest.raises(DiskFullError) as refused:
                writer.commit({"job": docs(300, start=300)}, {})
            assert str(refused.value) == (
                f"{fs}/outbox.sqlite: cannot commit the cycle to the outbox: its file system is full "
                f"(database or disk is full; 0.0 MiB free in {fs})"
            )
            with Outbox(fs / "outbox.sqlite") as again:
                assert again.status().depth == {"job": 300}
                assert again.checkpoint("history:x") == {"end": 5}
        finally:
            writer.close()


def test_what_the_store_took_is_written_down_once_there_is_room_and_never_sent_twice(tmp_path: Path) -> None:
    """The store takes a batch, the outbox cannot delete it (no room even for that): before,
    every flush read that batch again and sent it again, for as long as the disk stayed full."""
    with CountingStore(tmp_path / "store.sqlite") as store, small_file_system(tmp_path / "fs", "4m") as fs:
        with Outbox(fs / "outbox.sqlite") as outbox:
            outbox.commit({"job": docs(2500)}, {})  # three batches of 1000
            ballast = fill(fs)
            unrecorded = Unrecorded()
            for _ in range(4):  # the first takes the batch; the others only try to write it down
                with pytest.raises(DiskFullError) as full:
                    outbox.flush(store, batch_size=1000, unrecorded=unrecorded)
                assert str(full.value) == (
                    f"{fs}/outbox.sqlite: cannot record what the sink acknowledged: its file system is full "
                    f"(database or disk is full; 0.0 MiB free in {fs}); the store answered for 1000 job "
                    "record(s) of it: they wait to be written down, and nothing more is sent until they are"
                )
                assert unrecorded.records == 1000 and outbox.status().depth == {"job": 2500}
            assert store.batches == [tuple(f"job-{i}" for i in range(1000))]
            ballast.unlink()
            result = outbox.flush(store, batch_size=1000, unrecorded=unrecorded)
            assert dict(result.sent) == {"job": 2500} and dict(result.new) == {"job": 2500}
            assert unrecorded.records == 0 and outbox.status().depth == {}
        assert [len(batch) for batch in store.batches] == [1000, 1000, 500]
        assert sorted(i for batch in store.batches for i in batch) == sorted(d["id"] for d in docs(2500))
        assert store.count("job") == 2500


def test_a_shrink_short_of_room_gives_back_a_bounded_step(tmp_path: Path) -> None:
    """While the collector is short of room a backlog is half sent: its free pages go back a step
    at a time (what is given back is moved through the WAL first), not only once it is drained."""
    with Outbox(tmp_path / "outbox.sqlite") as outbox, EmbeddedStore(tmp_path / "store.sqlite") as store:
        outbox.commit({"job": docs(30_000)}, {})  # about 9 MiB in 30 parcels
        outbox.flush(store, batch_size=1000, max_batches=20)  # two thirds sent: their pages are free
        assert outbox.status().depth == {"job": 10_000}
        outbox.wal_checkpoint(truncate=True)
        size = (tmp_path / "outbox.sqlite").stat().st_size
        given = outbox.shrink(keep_free_bytes=0, max_bytes=2 << 20)
        assert given == 2 << 20  # 32 pages of 64 KiB, no more
        outbox.wal_checkpoint(truncate=True)  # the file is cut when the WAL is copied back
        assert (tmp_path / "outbox.sqlite").stat().st_size == size - given
        assert (tmp_path / "outbox.sqlite-wal").stat().st_size == 0
        assert outbox.status().depth == {"job": 10_000} and len(outbox.waiting("job")) == 10_000
