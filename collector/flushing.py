"""A flush of the outbox (:meth:`collector.outbox.Outbox.flush`): batches read, sent to a sink,
and what the sink said of each written back (:mod:`collector.parcels` settles a batch).

What the sink took must be written down before anything more is sent: a batch the store
acknowledged but whose deletes the outbox could not commit (its file system is full: SQLite's
``database or disk is full``) would otherwise be read and sent again by every flush, for as long
as the disk stays full, never leaving the outbox. So a flush given an :class:`Unrecorded` keeps
such a batch's settling there, in memory, and raises; the next flush of that lane writes it
first, and sends nothing until it could. What the store took is then sent again only if the
process ends before the disk has room: one batch per lane at most, which the store keeps once
(records have deterministic ids; the embedded store and Elasticsearch replace a record by id).
"""

from __future__ import annotations

import functools
import sqlite3
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from collector import faults
from collector.errors import SinkError, StoreError
from collector.parcels import next_batch
from collector.sinks.base import SendResult, Sink

__all__ = ["FlushResult", "Unrecorded", "Writer", "flush"]

Writer = Callable[[Callable[[Any], object]], object]
"""Runs a write on the outbox (a function of a :class:`collector.outbox.Outbox`) where its owner
wants it (see :meth:`collector.outbox.Outbox.flush`); ``Any`` rather than the class, which imports
this module."""


def _counts(counts: Counter[str] | None = None) -> Mapping[str, int]:
    return MappingProxyType(counts if counts is not None else Counter())


@dataclass(frozen=True)
class FlushResult:
    """What one flush did, per kind (read-only: 0 for a kind it did not touch). Of the records
    ``sent``, the store said which were ``new`` to it and which it held ``already_stored`` (a
    backfill's jobs read again); those it did not say of (the collector, Gratia) are in neither."""

    sent: Mapping[str, int] = field(default_factory=_counts)
    retried: Mapping[str, int] = field(default_factory=_counts)
    dead: Mapping[str, int] = field(default_factory=_counts)
    errors: tuple[str, ...] = ()  # one line per failed batch
    new: Mapping[str, int] = field(default_factory=_counts)
    already_stored: Mapping[str, int] = field(default_factory=_counts)
    left_out: Mapping[str, int] = field(default_factory=_counts)  # by reason: settled without being sent, on purpose
    superseded: Mapping[str, int] = field(default_factory=_counts)  # of sent: the store kept a newer copy

    def untold(self, kind: str) -> int:
        """How many of the records of ``kind`` sent the store did not say were new or stored already."""
        return self.sent.get(kind, 0) - self.new.get(kind, 0) - self.already_stored.get(kind, 0)


@dataclass(frozen=True)
class _Taken:
    """A batch the sink answered, whose settling the outbox could not write yet."""

    kind: str  # as the flush's result names it (without its lane)
    settle: Callable[..., object]  # a write of the outbox (a Writer runs it)
    sent: SendResult


class Unrecorded:
    """What the sink took that the outbox could not write down yet, by lane: one batch at most
    each (a flush stops at it). Held by whoever flushes the same outbox again and again (the
    collector's flusher, the probe service), so that it outlives one flush and one connection;
    lost with the process, which then sends that batch again (see the module docstring)."""

    def __init__(self) -> None:
        self._taken: dict[str | None, _Taken] = {}

    def __repr__(self) -> str:
        return f"Unrecorded({self.records} records)"

    @property
    def records(self) -> int:
        """Records the store answered for that wait to be written down."""
        return sum(len(t.sent.acked) + len(t.sent.rejected) for t in self._taken.values())


@dataclass
class _Tally:
    sent: Counter[str] = field(default_factory=Counter)
    new: Counter[str] = field(default_factory=Counter)
    already: Counter[str] = field(default_factory=Counter)
    retried: Counter[str] = field(default_factory=Counter)
    dead: Counter[str] = field(default_factory=Counter)
    left_out: Counter[str] = field(default_factory=Counter)
    superseded: Counter[str] = field(default_factory=Counter)
    errors: list[str] = field(default_factory=list)

    def settled(self, kind: str, sent: SendResult) -> None:
        self.sent[kind] += len(sent.acked) - sent.left_out.total()  # those left out were settled, not sent
        self.new[kind] += len(sent.created)
        self.already[kind] += len(sent.existed)
        self.dead[kind] += len(sent.rejected)
        self.left_out.update(sent.left_out)
        self.superseded[kind] += len(sent.superseded)
        self.retried[kind] += len(sent.retry)
        if sent.retry:
            self.errors.append(f"{kind}: {len(sent.retry)} record(s) to retry, e.g. {next(iter(sent.retry.values()))}")

    def result(self) -> FlushResult:
        return FlushResult(
            _counts(self.sent),
            _counts(self.retried),
            _counts(self.dead),
            tuple(self.errors),
            _counts(self.new),
            _counts(self.already),
            _counts(self.left_out),
            _counts(self.superseded),
        )


def _record(write: Writer, taken: _Taken, lane: str | None, unrecorded: Unrecorded | None) -> None:
    """Write ``taken``'s settling; when the outbox cannot, keep it in ``unrecorded`` and raise
    the outbox's error, saying what waits (``unrecorded`` None: raise it as it is)."""
    try:
        write(taken.settle)
    except StoreError as exc:
        if unrecorded is None:
            raise
        unrecorded._taken[lane] = taken
        n = len(taken.sent.acked) + len(taken.sent.rejected)
        raise type(exc)(
            f"{exc}; the store answered for {n} {taken.kind} record(s) of it: they wait to be written down, "
            "and nothing more is sent until they are"
        ) from exc
    if unrecorded is not None:
        unrecorded._taken.pop(lane, None)


def flush(
    db: sqlite3.Connection,
    sink: Sink,
    write: Writer,
    *,
    batch_size: int,
    batch_bytes: int | None,
    max_batches: int | None,
    max_seconds: float | None,
    lane: str | None,
    unrecorded: Unrecorded | None,
) -> FlushResult:
    """:meth:`collector.outbox.Outbox.flush`, reading batches on ``db`` and writing through
    ``write``; first the batch ``unrecorded`` holds for ``lane``, if any (its error raised
    again while it cannot be written, nothing sent)."""
    tally = _Tally()
    if unrecorded is not None and (waiting := unrecorded._taken.get(lane)) is not None:
        _record(write, waiting, lane, unrecorded)
        tally.settled(waiting.kind, waiting.sent)
    batches = 0
    refused: set[str] = set()  # kinds (as stored) the sink refuses as a whole for now: not asked again this flush
    until = None if max_seconds is None else time.monotonic() + max_seconds
    while (max_batches is None or batches < max_batches) and (until is None or time.monotonic() < until):
        batch = next_batch(db, batch_size, lane, batch_bytes, skip=refused)
        if batch is None:
            break
        batches += 1
        records, kind = batch.records, batch.kind if lane is None else batch.kind.partition(":")[2]
        try:
            sent = sink.send_encoded(kind, records)
        except SinkError as exc:  # the whole batch failed: keep it, try again later
            write(functools.partial(batch.failed, error=str(exc)))
            tally.retried[kind] += len(records)
            tally.errors.append(f"{kind}: {exc}")
            break
        faults.point("during-flush")  # the sink has them, the outbox does not know yet
        _record(write, _Taken(kind, functools.partial(batch.settle, sent=sent), sent), lane, unrecorded)
        tally.settled(kind, sent)
        if sent.kind_refused:
            # a collector of an older release refuses this kind (one it does not know yet): its records
            # wait alone, and the other kinds, which it takes, are sent on rather than stopping behind them
            refused.add(batch.kind)
            continue
        if sent.retry or (not sent.acked and not sent.rejected):
            # the store took only part of it: what it did not take waits for a later flush, not
            # for the next batch of this one (which would pick the same records and send them again)
            break
    return tally.result()
