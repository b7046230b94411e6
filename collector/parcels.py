"""How records wait in the outbox, and how a batch the sink answered is settled.

A *parcel* is one row of the outbox holding records of one kind (see :mod:`collector.outbox`):
their JSON documents as they were encoded, one a line (encoding ``records``), and beside them,
in ``fields``, their ids and the fields they carry (:class:`~collector.encoded.Encoded`), so
that a flush hands the sink the very bytes that were committed, decoding none. Parcels of
earlier versions (a JSON array, or the gzip-compressed one a request brought) and the ``item``
rows (one record each, as text) are read too; their records are encoded again then, once.

The settling functions write what a sink's answer (:class:`~collector.sinks.base.SendResult`)
means for the rows a batch was read from: deleted when taken, rewritten with what is left,
counted as an attempt when not taken, the refused records moved to the dead letters with the
sink's reason. They run inside one write transaction of the outbox.
"""

from __future__ import annotations

import gzip
import sqlite3
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import orjson

from collector.encoded import Encoded
from collector.records import VERSION, carried_fields, encode_docs
from collector.sinks.base import SendResult

__all__ = [
    "Fail",
    "Parcel",
    "ReadBatch",
    "Settle",
    "Writes",
    "lane_kind",
    "next_batch",
    "parcel_row",
    "read_parcel",
]


@dataclass(frozen=True)
class Parcel:
    """Records of one kind committed as one row (:meth:`~collector.outbox.Outbox.commit_parcels`)."""

    kind: str
    docs: Encoded

    @classmethod
    def encoded(cls, kind: str, docs: Sequence[Mapping[str, Any]], *, version: int | None = None) -> Parcel:
        """A parcel whose documents are encoded now: a collector encodes each request's in that
        request, so that one that cannot be encoded fails its request alone, never the group
        committed with it. Each document needs a string ``id``. ``version``: each record's
        (:data:`collector.records.VERSION`: the moment the collector took them), carried
        beside it through the outbox to the store."""
        records = encode_docs(kind, docs)
        return cls(kind, records if version is None else records.carrying(VERSION, version))


def parcel_row(kind: str, records: Encoded, now: float) -> tuple[str, int, bytes, str, bytes, float]:
    """The values of a ``parcel`` row (kind, count, docs, encoding, fields, enqueued_at) of ``records``."""
    fields = orjson.dumps({"id": records.ids, "columns": dict(records.columns)})
    return kind, len(records), b"\n".join(records.docs), "records", fields, now


def read_parcel(kind: str, blob: bytes, encoding: str, fields: bytes | None) -> Encoded:
    """The records of a parcel row, as :func:`parcel_row` wrote them (or an earlier version did)."""
    if encoding == "records" and fields is not None:
        carried = orjson.loads(fields)
        columns = {name: tuple(values) for name, values in carried["columns"].items()}
        return Encoded(tuple(carried["id"]), tuple(bytes(blob).split(b"\n")), columns)
    return encode_docs(kind, orjson.loads(gzip.decompress(blob) if encoding == "gzip" else blob))


def _read_items(kind: str, ids: Sequence[str], texts: Sequence[str]) -> Encoded:
    """Records of ``item`` rows (one document each, as text): their fields read from them."""
    docs = [orjson.loads(t) for t in texts]
    columns = {c: tuple(d.get(c) for d in docs) for c in carried_fields(kind)}
    return Encoded(tuple(ids), tuple(t.encode() for t in texts), columns)


class Writes(Protocol):
    """What settling needs of an outbox: its connection, clock and write transaction."""

    @property
    def db(self) -> sqlite3.Connection: ...

    def now(self) -> float: ...

    def transaction(self, what: str) -> Any: ...


class Settle(Protocol):
    """A batch's write once the sink answered (the keyword names are what a flush binds)."""

    def __call__(self, outbox: Writes, sent: SendResult) -> None: ...


class Fail(Protocol):
    """A batch's write once the sink failed as a whole."""

    def __call__(self, outbox: Writes, error: str) -> object: ...


@dataclass(frozen=True)
class ReadBatch:
    """One batch to send: its kind and records, and what to write, with a given outbox, once the
    sink has answered (``settle``) or failed (``failed``)."""

    kind: str
    records: Encoded
    settle: Settle
    failed: Fail


_Read = tuple[int, Encoded, int]  # a parcel's seq, its records, how many of them are in the batch


def lane_kind(lane: str, kind: str) -> str:
    """The kind under which records of ``kind`` wait for the destination ``lane`` (``upstream:job``)."""
    return f"{lane}:{kind}"


def _lane(lane: str | None) -> tuple[str, tuple[str, ...]]:
    """The SQL condition on ``kind`` of the records of ``lane`` (None: the store's, no lane)."""
    if lane is None:
        return "instr(kind, ':') = 0", ()
    return "substr(kind, 1, length(?)) = ?", (f"{lane}:", f"{lane}:")


def next_batch(
    db: sqlite3.Connection,
    batch_size: int,
    lane: str | None = None,
    batch_bytes: int | None = None,
    skip: Collection[str] = (),
) -> ReadBatch | None:
    """The oldest items of one kind, or else the records of the oldest parcels of one kind, at
    most ``batch_size`` records and ``batch_bytes`` bytes of documents (the first ones of a
    parcel that holds more; a record larger than ``batch_bytes`` makes a batch alone), each
    record once: its newest copy. Of ``lane``'s kinds only (:func:`lane_kind`), or of none (None);
    never of the kinds in ``skip`` (as stored, lane included: those the destination refuses for now).

    Bytes bound a batch as well as records because what a batch costs, in the flusher's memory
    (a few copies of it on the way to the store) and in the store's request (Elasticsearch
    refuses a body over ``http.max_content_length``), is its size: 2,000 records of a few KB are
    a few MB, 16 of 7.8 MB were 125 MB (issue 54, point 4)."""
    budget = _Budget(batch_size, batch_bytes)
    where, args = _lane(lane)
    if skip:
        where += f" AND kind NOT IN ({', '.join('?' * len(skip))})"
        args = (*args, *skip)
    cursor = db.execute(
        f"SELECT seq, kind, id, doc FROM item WHERE kind = (SELECT kind FROM item WHERE {where} ORDER BY seq LIMIT 1) "
        "ORDER BY seq LIMIT ?",
        (*args, batch_size),
    )
    rows = []
    for row in cursor:
        if not budget.takes(len(row[3].encode())):
            break
        rows.append(row)
    cursor.close()
    if rows:
        kind = rows[0][1]
        return ReadBatch(
            kind,
            _read_items(kind, [r[2] for r in rows], [r[3] for r in rows]),
            lambda outbox, sent: _settle_items(outbox, kind, rows, sent),
            lambda outbox, error: outbox.db.executemany(
                "UPDATE item SET attempts = attempts + 1, last_error = ? WHERE seq = ?", [(error, r[0]) for r in rows]
            ),
        )
    cursor = db.execute(
        "SELECT seq, kind, docs, encoding, fields FROM parcel "
        f"WHERE kind = (SELECT kind FROM parcel WHERE {where} ORDER BY seq LIMIT 1) ORDER BY seq",
        args,
    )
    parcels: list[_Read] = []
    for seq, kind, blob, encoding, fields in cursor:
        records = read_parcel(kind, blob, encoding, fields)
        n = 0
        while n < len(records) and budget.takes(len(records.docs[n])):
            n += 1
        if n:
            parcels.append((seq, records, n))
        if n < len(records) or budget.full:
            break
    cursor.close()
    if not parcels:
        return None
    batch = Encoded.join(records.pick(range(n)) for _, records, n in parcels)
    return ReadBatch(
        kind,
        batch.newest(),  # a later copy replaces an earlier one
        lambda outbox, sent: _settle_parcels(outbox, kind, parcels, sent),
        lambda outbox, error: outbox.db.executemany(
            "UPDATE parcel SET attempts = attempts + 1, last_error = ? WHERE seq = ?",
            [(error, seq) for seq, _, _ in parcels],
        ),
    )


class _Budget:
    """What a batch may still take: ``records`` and ``size`` bytes (None: any); its first record
    is always taken, however large, so that a record over the budget is sent (and, if the
    store refuses it, set aside) rather than never read."""

    def __init__(self, records: int, size: int | None) -> None:
        self._records, self._size = records, size
        self.taken = self.used = 0

    def takes(self, size: int) -> bool:
        """Whether a record of ``size`` bytes fits; if so, it is counted in."""
        over = self._size is not None and self.used + size > self._size
        if self.taken >= self._records or (self.taken and over):
            return False
        self.taken += 1
        self.used += size
        return True

    @property
    def full(self) -> bool:
        return self.taken >= self._records or (self._size is not None and self.used >= self._size)


def _settle_parcels(outbox: Writes, kind: str, parcels: Sequence[_Read], sent: SendResult) -> None:
    """Delete the parcels the sink took whole; rewrite the others with the records it did not
    take (or that were not sent: past ``batch_size``), counting an attempt when one that was
    sent is left; move the refused records to the dead letters. Every copy of a record in the
    batch is settled by the answer for its id."""
    done = set(sent.acked) | sent.rejected.keys()
    error = next(iter(sent.retry.values()), "not acknowledged by the sink")
    now = outbox.now()
    deleted, rewritten, touched, dead = [], [], [], []
    for seq, records, n in parcels:
        ids = records.ids
        failed = [i for i in range(n) if ids[i] not in done]
        dead += [
            (kind, ids[i], records.docs[i].decode(), sent.rejected[ids[i]], now)
            for i in range(n)
            if ids[i] in sent.rejected
        ]
        left = failed + list(range(n, len(records)))
        if not left:
            deleted.append((seq,))
        elif len(left) < len(records):
            _, count, docs, _, fields, _ = parcel_row(kind, records.pick(left), now)
            rewritten.append((docs, fields, count, 1 if failed else 0, error if failed else None, seq))
        else:
            touched.append((error, seq))
    with outbox.transaction("cannot record what the sink acknowledged"):
        outbox.db.executemany("DELETE FROM parcel WHERE seq = ?", deleted)
        outbox.db.executemany(
            "UPDATE parcel SET docs = ?, fields = ?, count = ?, encoding = 'records', attempts = attempts + ?, "
            "last_error = coalesce(?, last_error) WHERE seq = ?",
            rewritten,
        )
        outbox.db.executemany("UPDATE parcel SET attempts = attempts + 1, last_error = ? WHERE seq = ?", touched)
        outbox.db.executemany(
            "INSERT OR REPLACE INTO dead_letter(kind, id, doc, error, failed_at) VALUES (?, ?, ?, ?, ?)", dead
        )


def _settle_items(outbox: Writes, kind: str, rows: Sequence[tuple[int, str, str, str]], sent: SendResult) -> None:
    seq_of = {id_: seq for seq, _, id_, _ in rows}
    doc_of = {id_: doc for _, _, id_, doc in rows}
    now = outbox.now()
    # An item is never changed while it waits (commits write parcels; a dead letter put back
    # does not replace a waiting item), and a seq is never reused (AUTOINCREMENT): deleting
    # by seq deletes the copy that was sent, never a newer one.
    delete = "DELETE FROM item WHERE seq = ?"
    with outbox.transaction("cannot record what the sink acknowledged"):
        outbox.db.executemany(delete, [(seq_of[i],) for i in sent.acked if i in seq_of])
        outbox.db.executemany(
            "INSERT OR REPLACE INTO dead_letter(kind, id, doc, error, failed_at) VALUES (?, ?, ?, ?, ?)",
            [(kind, i, doc_of[i], err, now) for i, err in sent.rejected.items() if i in doc_of],
        )
        outbox.db.executemany(delete, [(seq_of[i],) for i in sent.rejected if i in seq_of])
        outbox.db.executemany(
            "UPDATE item SET attempts = attempts + 1, last_error = ? WHERE seq = ?",
            [(err, seq_of[i]) for i, err in sent.retry.items() if i in seq_of],
        )
