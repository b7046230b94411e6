"""A flush's batch is bounded by bytes as well as records (issue 54, point 4): records of a few
MB each no longer make batches of a hundred MB, and a record larger than the budget goes alone."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from collector.encoded import Encoded
from collector.outbox import BATCH_BYTES, Outbox, Parcel
from collector.sinks.base import SendResult
from collector.sinks.sqlite import EmbeddedStore


class _Recording(EmbeddedStore):
    """The embedded store, noting each batch it is sent: its ids and the bytes of its records."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.batches: list[tuple[list[str], int]] = []

    def send_encoded(self, kind: str, records: Encoded) -> SendResult:
        self.batches.append((list(records.ids), sum(len(d) for d in records.docs)))
        return super().send_encoded(kind, records)


class _Refusing(EmbeddedStore):
    """The embedded store, refusing every record for good (to make dead letters)."""

    def send_encoded(self, kind: str, records: Encoded) -> SendResult:
        return SendResult(rejected=dict.fromkeys(records.ids, "refused by the test"))


def job(i: int | str, pad: int) -> dict[str, Any]:
    return {"id": f"j{i:>03}", "kind": "job", "timestamp": "2026-11-21T14:00:00Z", "user": "alice", "pad": "x" * pad}


def size(doc: dict[str, Any]) -> int:
    return len(Parcel.encoded("job", [doc]).docs.docs[0])


def test_a_batch_is_cut_by_bytes_as_well_as_records(tmp_path: Path) -> None:
    # Before: a batch was 2000 records whatever their size, so sixteen records of 7.8 MB made one of 125 MB.
    docs = [job(i, 10_000) for i in range(10)] + [job("big", 50_000)] + [job(i, 10_000) for i in range(10, 15)]
    each, big = size(docs[0]), size(docs[10])
    with Outbox(tmp_path / "outbox.sqlite") as outbox, _Recording(tmp_path / "store.sqlite") as store:
        outbox.commit({"job": docs}, {})  # one parcel
        result = outbox.flush(store, batch_size=2000, batch_bytes=4 * each)
        assert result.sent["job"] == 16 and outbox.status().depth == {}
        assert [len(ids) for ids, _ in store.batches] == [4, 4, 2, 1, 4, 1]  # the big one alone
        assert [n for _, n in store.batches] == [4 * each, 4 * each, 2 * each, big, 4 * each, each]
        assert [i for ids, _ in store.batches for i in ids] == [d["id"] for d in docs]  # in order, each once
        assert store.count("job") == 16


def test_parcels_of_one_record_each_fill_a_batch_up_to_its_bytes(tmp_path: Path) -> None:
    # The collector commits one parcel a request: sixteen requests of one large record each.
    docs = [job(i, 20_000) for i in range(16)]
    each = size(docs[0])
    with Outbox(tmp_path / "outbox.sqlite") as outbox, _Recording(tmp_path / "store.sqlite") as store:
        outbox.commit_parcels([Parcel.encoded("job", [d]) for d in docs])
        assert outbox.flush(store, batch_bytes=5 * each + 1).sent["job"] == 16
        assert [len(ids) for ids, _ in store.batches] == [5, 5, 5, 1]
        assert max(n for _, n in store.batches) == 5 * each


def test_records_put_back_from_the_dead_letters_are_cut_by_bytes_too(tmp_path: Path) -> None:
    docs = [job(i, 10_000) for i in range(6)]
    each = size(docs[0])
    with Outbox(tmp_path / "outbox.sqlite") as outbox:
        outbox.commit({"job": docs}, {})
        with _Refusing(tmp_path / "refusing.sqlite") as refusing:
            assert outbox.flush(refusing).dead["job"] == 6
        assert outbox.retry_dead_letters() == {"job": 6}  # back as items
        with _Recording(tmp_path / "store.sqlite") as store:
            assert outbox.flush(store, batch_bytes=2 * each).sent["job"] == 6
            assert [len(ids) for ids, _ in store.batches] == [2, 2, 2]
            assert store.count("job") == 6


def test_the_default_budget_holds_a_batch_of_ordinary_records_whole(tmp_path: Path) -> None:
    docs = [job(i, 100) for i in range(2000)]
    with Outbox(tmp_path / "outbox.sqlite") as outbox, _Recording(tmp_path / "store.sqlite") as store:
        outbox.commit({"job": docs}, {})
        assert outbox.flush(store).sent["job"] == 2000
        assert [len(ids) for ids, _ in store.batches] == [2000]
        assert store.batches[0][1] < BATCH_BYTES
