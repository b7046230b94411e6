"""The probe's records' one way to the store: :class:`RecordLane`.

Every command that stores records goes through it (``probe once``, ``probe run``, ``fairness
--store-records``, ``priority sync|restore``, ``probe checkpoints --reset``, ``probe
from-condor-ap``): it owns the outbox (``probe.state_dir/outbox.sqlite``), the store (opened by
:func:`collector.sinks.open_store`, the one opener), the ``[upstream]`` lane and the state of
the store's index templates (:class:`~collector.sinks.gate.TemplateGate`).

A commit (:meth:`RecordLane.commit`) puts :class:`Batch` es in one outbox transaction, under the
lane's lock (the fairshare ledger is read and written there, by jobs in several threads) and
between the fault points ``before-commit`` and ``after-commit`` (:mod:`collector.faults`), job
records in the ``upstream:job`` lane too when ``[upstream]`` is set. A delivery
(:meth:`RecordLane.deliver`) sends the ``[upstream]`` lane first, whatever the store does, checks
the store's templates on the first delivery and on the first after the store failed (it may come
back empty), installs them where ``store.install_templates`` allows, else the records wait; then
sends the outbox to the store and says what became of it (:class:`Delivery`, judged by
:func:`probes.pipeline.verdict.judge`).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from collector import faults
from collector.errors import SinkError
from collector.outbox import PROBE_SHRINK_KEEP_BYTES, FlushResult, Outbox, OutboxStatus, Unrecorded
from collector.sinks import Sink, open_store
from collector.sinks.gate import TemplateGate
from probes.config import ProbeConfig
from probes.config.store import UPSTREAM, UPSTREAM_JOBS
from probes.pipeline.reading import Checkpoint
from probes.pipeline.records import Records

__all__ = ["Batch", "Delivery", "Derived", "RecordLane"]

Derived = Callable[[Checkpoint], tuple[Records, dict[str, Any]]]
"""Records and checkpoints made from the checkpoints as the commit's transaction sees them."""


@dataclass(frozen=True)
class Batch:
    """Records and the checkpoints committed with them, in one outbox transaction.

    ``derive``, when set, makes more at commit time from the checkpoints as they stand in the
    transaction (earlier batches of the same commit included): the fairshare ledger, which a
    step cannot compute ahead without losing another thread's update."""

    records: Records = field(default_factory=dict)
    checkpoints: dict[str, Any] = field(default_factory=dict)
    derive: Derived | None = None

    def counts(self) -> dict[str, int]:
        """Records by kind."""
        return {kind: len(docs) for kind, docs in self.records.items()}


@dataclass(frozen=True)
class Delivery:
    """What became of the outbox's records: what the store took, retried or refused
    (``flushed``; None when nothing was sent), why records were left unsent (``unsent``), the
    index templates installed first (``installed``) and the outbox after it (``status``)."""

    status: OutboxStatus
    flushed: FlushResult | None = None
    unsent: str | None = None
    installed: tuple[str, ...] = ()
    upstream: FlushResult | None = None
    """What ``[upstream]``'s Gratia collector took of its lane; None without one."""
    dead_example: dict[str, Any] | None = None
    """The outbox's latest dead letter (kind, id, error) when the store refused records for good."""


class RecordLane:
    """The outbox, the store, the ``[upstream]`` lane and the templates' state of one probe
    configuration (see the module docstring). One lane per process: its lock orders the commits
    of the jobs that run in several threads, each with its own :class:`Outbox` (:meth:`open`).

    A store held with :meth:`holding` (``probe once`` opens it before the outbox, so that a
    missing token is refused before anything is read) is the one delivered to and summarized;
    otherwise each use opens the configured store and closes it after."""

    def __init__(self, config: ProbeConfig) -> None:
        self.config = config
        self.path = config.probe.state_dir / "outbox.sqlite"
        self._commits = threading.Lock()
        self._templates = TemplateGate(config.store.url, install=config.store.install_templates)
        self._unrecorded = Unrecorded()  # what a store took that a full state directory kept from being written down
        self._held: Sink | None = None

    def __repr__(self) -> str:
        return f"RecordLane(outbox={str(self.path)!r}, store={self.config.store.url.split('@')[-1]!r})"

    def open(self) -> Outbox:
        """The probe's outbox, opened (a connection of the calling thread's own)."""
        return Outbox(self.path)

    @contextlib.contextmanager
    def holding(self, sink: Sink) -> Iterator[Sink]:
        """Deliver to and summarize ``sink`` while inside (the caller closes it)."""
        before, self._held = self._held, sink
        try:
            yield sink
        finally:
            self._held = before

    @contextlib.contextmanager
    def store(self) -> Iterator[Sink]:
        """The store: the one held, or the configured one opened for the while."""
        if self._held is not None:
            yield self._held
            return
        sink = open_store(self.config.store, self.config.opening())
        try:
            yield sink
        finally:
            sink.close()

    def commit(self, outbox: Outbox, batches: Sequence[Batch]) -> Batch:
        """Commit ``batches`` in one outbox transaction, in order, under the lane's lock and between
        its fault points; what each derives sees the checkpoints of the batches before it. Job
        records wait for ``[upstream]`` too, in the same transaction, when it is set. Returns what
        was committed, as one batch."""
        with self._commits:
            return _commit(outbox, batches, upstream=bool(self.config.upstream.url))

    def store_records(self, records: Records, checkpoints: dict[str, Any] | None = None) -> Batch:
        """:meth:`commit` of ``records`` (and ``checkpoints``) to the probe's outbox, opened for it."""
        with self.open() as outbox:
            return self.commit(outbox, [Batch(records, dict(checkpoints or {}))])

    def deliver(self, outbox: Outbox) -> Delivery:
        """Send the outbox to the store (the ``[upstream]`` lane first), checking the store's
        index templates first on the first delivery and on the first after the store failed."""
        gate = self._templates
        check = None if gate.checked else (lambda s: list(gate.ensure(s).installed))
        up = self.config.upstream
        upstream = open_store(up, self.config.opening()) if up.url else None
        try:
            with self.store() as sink:
                delivery = _deliver(outbox, sink, check=check, upstream=upstream, unrecorded=self._unrecorded)
        except SinkError:
            gate.forget()
            raise
        finally:
            if upstream is not None:
                upstream.close()
        if delivery.flushed is not None:  # else the templates' check failed, and the gate says so
            gate.settle(errors=bool(delivery.flushed.errors), waiting=sum(delivery.status.depth.values()))
        return delivery


def _commit(outbox: Outbox, batches: Sequence[Batch], *, upstream: bool) -> Batch:
    """:meth:`RecordLane.commit` without the lock."""
    records: Records = {}
    marks: dict[str, Any] = {}

    def checkpoint(key: str) -> Any:
        return marks[key] if key in marks else outbox.checkpoint(key)

    for batch in batches:
        derived: tuple[Records, dict[str, Any]] = batch.derive(checkpoint) if batch.derive else ({}, {})
        for part in (batch.records, derived[0]):
            for kind, docs in part.items():
                records[kind] = records[kind] + docs if kind in records else docs
        marks |= batch.checkpoints | derived[1]
    faults.point("before-commit")
    lanes = {UPSTREAM_JOBS: records["job"]} if upstream and len(records.get("job", ())) else {}
    outbox.commit(records | lanes, marks)
    faults.point("after-commit")
    return Batch(records, marks)


def _deliver(
    outbox: Outbox,
    sink: Sink,
    *,
    check: Callable[[Sink], list[str]] | None,
    upstream: Sink | None,
    unrecorded: Unrecorded,
) -> Delivery:
    """Send the outbox to ``sink``, the :data:`UPSTREAM` lane to ``upstream`` first, whatever the
    store does. ``check(sink)`` runs first (the index templates; it returns those it installed):
    a :class:`SinkError` from it leaves the records queued, and ``unsent`` says why. A drained
    outbox gives its pages back to the file system. ``unrecorded``: where what a store took waits
    while the outbox cannot write it down (a full state directory), so that the next delivery
    writes it down rather than send it again (:mod:`collector.flushing`)."""
    lane = None if upstream is None else outbox.flush(upstream, lane=UPSTREAM, unrecorded=unrecorded)
    try:
        installed = tuple(check(sink)) if check is not None else ()
    except SinkError as exc:
        return Delivery(outbox.status(), unsent=str(exc), upstream=lane)
    flushed = outbox.flush(sink, unrecorded=unrecorded)
    faults.point("after-flush")
    status = outbox.status()
    if not status.depth:
        outbox.shrink(keep_free_bytes=PROBE_SHRINK_KEEP_BYTES)  # a drained backlog's pages back
    dead = outbox.dead_letters(limit=1) if sum(flushed.dead.values()) else []
    unsent = flushed.errors[0] if flushed.errors else None
    return Delivery(status, flushed, unsent, installed, lane, dead[0] if dead else None)
