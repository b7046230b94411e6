"""Live sources: a running pool read through the htcondor2 bindings.

One conversion path, two inputs: the ClassAd objects the bindings return go through
:func:`~probes.sources.classad.columns_from_classads` and then the very table builders the file
readers use (:func:`~probes.sources.status.snapshot_tables`,
:func:`~probes.sources.queue.idle_table`, :func:`~probes.sources.history.jobs_table`). What
this package adds is the network side, and it is kept to one call per query. Its modules, one
idea each, composed by :class:`LivePool`:

- :mod:`~probes.sources.live.projections`: what each query asks for (projections and
  constraints), pure functions;
- :mod:`~probes.sources.live.calls`: the one network call, with its deadline, its errors
  translated, a pool's collector replicas tried in order, projections widened by what answers
  refer to;
- :mod:`~probes.sources.live.slots`: the startd ads of every pool, streamed in and each slot
  kept once;
- :mod:`~probes.sources.live.schedds`: the schedds, their idle demand, who the jobs of the
  slots' claims are;
- :mod:`~probes.sources.live.accounting`: the negotiator's groups;
- :mod:`~probes.sources.live.history`: the history pass and its checkpoints.

A schedd's failure costs only that schedd's part of a cycle (it is listed in ``failures``); a
pool whose collectors all fail costs the cycle.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Sequence
from typing import Any

import classad2
import pandas as pd

from probes.config import PoolSettings
from probes.sources.bindings import Bindings
from probes.sources.checkpoints import checkpoint_key
from probes.sources.classad import AdColumns
from probes.sources.live.accounting import negotiator_groups
from probes.sources.live.calls import (
    Calls,
    CollectorFactory,
    CollectorLike,
    ScheddFactory,
    ScheddLike,
    replica_groups,
)
from probes.sources.live.history import PROGRESS_EVERY_S, HistoryPass, HistoryRead
from probes.sources.live.projections import (
    END_TIME,
    REQUEST_INPUTS,
    history_constraint,
    history_projection,
    history_since,
    idle_projection,
    slot_projection,
)
from probes.sources.live.schedds import IdleRead, Schedds
from probes.sources.live.slots import SlotStream
from probes.sources.report import ReadReport
from probes.sources.settings import JobReading, SlotReading
from probes.sources.status import Snapshot

__all__ = [
    "END_TIME",
    "PROGRESS_EVERY_S",
    "REQUEST_INPUTS",
    "CollectorFactory",
    "CollectorLike",
    "HistoryRead",
    "IdleRead",
    "LivePool",
    "ScheddFactory",
    "ScheddLike",
    "checkpoint_key",
    "history_constraint",
    "history_projection",
    "history_since",
    "idle_projection",
    "slot_projection",
]


class LivePool:
    """A pool (or several) read through htcondor2; see the package docstring.

    ``pool``: the pool's settings; ``slots`` and ``jobs``: what the table builders read;
    ``slot_expressions`` and ``slot_attributes``: more that slot ads must carry (the speed and
    cost expressions' references, the machine class attributes).
    ``collector_factory`` and ``schedd_factory`` make the clients of the single network calls:
    by default those of :class:`~probes.sources.bindings.Bindings`, which make every call in a
    worker process killed at ``pool.timeout_s`` (there ``pool.condor_config`` is loaded and
    ``pool.timeout_s`` becomes HTCondor's QUERY_TIMEOUT). :meth:`cancel` makes calls in flight
    give up at once (the service stopping).

    A facade: the calls (:class:`~probes.sources.live.calls.Calls`), the slot stream
    (:class:`~probes.sources.live.slots.SlotStream`), the schedd queries
    (:class:`~probes.sources.live.schedds.Schedds`) and the history pass
    (:class:`~probes.sources.live.history.HistoryPass`) share one set of clients, deadline and
    learned attributes. Its knobs are theirs: ``slot_chunk`` and ``on_slot_ads(source, ads)``
    (each chunk of startd ads as it arrives, a seam for tests), ``progress_every_s`` and
    ``on_progress(schedd, ads)`` (a long history answer's progress), ``learned`` and
    ``abandoned`` (calls given up on; their threads may still be waiting on a daemon).
    """

    def __init__(
        self,
        pool: PoolSettings,
        slots: SlotReading = SlotReading(),
        jobs: JobReading = JobReading(),
        *,
        slot_expressions: Sequence[str] = (),
        slot_attributes: Sequence[str] = (),
        collector_factory: CollectorFactory | None = None,
        schedd_factory: ScheddFactory | None = None,
    ) -> None:
        self.pool = pool
        self.slots = slots
        self.jobs = jobs
        self.groups = replica_groups(pool.collectors)
        self.calls = Calls(pool, collector_factory=collector_factory, schedd_factory=schedd_factory)
        self.slot_stream = SlotStream(
            self.calls, pool, self.groups, slots, slot_expressions=slot_expressions, slot_attributes=slot_attributes
        )
        self.schedd_queries = Schedds(self.calls, pool, self.groups, jobs)
        self.history_pass = HistoryPass(self.calls, pool, jobs)
        self._last_groups: frozenset[str] | None = None

    def __repr__(self) -> str:
        return f"LivePool(collectors={self.pool.collectors!r}, token={'set' if self.security else 'none'})"

    # -- what the parts share, and their knobs --------------------------------------------------

    @property
    def security(self) -> Any:
        return self.calls.security

    @property
    def bindings(self) -> Bindings | None:
        return self.calls.bindings

    @property
    def timeout_s(self) -> float:
        return self.calls.timeout_s

    @property
    def abandoned(self) -> int:
        return self.calls.abandoned

    @property
    def learned(self) -> dict[str, set[str]]:
        return self.calls.learned

    @property
    def slot_expressions(self) -> tuple[str, ...]:
        return self.slot_stream.slot_expressions

    @property
    def slot_attributes(self) -> tuple[str, ...]:
        return self.slot_stream.slot_attributes

    @property
    def slot_chunk(self) -> int:
        return self.slot_stream.chunk

    @slot_chunk.setter
    def slot_chunk(self, value: int) -> None:
        self.slot_stream.chunk = value

    @property
    def on_slot_ads(self) -> Callable[[str, list[classad2.ClassAd]], None] | None:
        return self.slot_stream.on_ads

    @on_slot_ads.setter
    def on_slot_ads(self, value: Callable[[str, list[classad2.ClassAd]], None] | None) -> None:
        self.slot_stream.on_ads = value

    @property
    def progress_every_s(self) -> float:
        return self.history_pass.progress_every_s

    @progress_every_s.setter
    def progress_every_s(self, value: float) -> None:
        self.history_pass.progress_every_s = value

    @property
    def on_progress(self) -> Callable[[str, int], None] | None:
        return self.history_pass.on_progress

    @on_progress.setter
    def on_progress(self, value: Callable[[str, int], None] | None) -> None:
        self.history_pass.on_progress = value

    def cancel(self) -> None:
        """Make calls in flight, and later ones, fail at once (the bindings' workers are killed)."""
        self.calls.cancel()

    # -- the reads --------------------------------------------------------------------------------

    def slot_columns(self) -> tuple[AdColumns, list[str], ReadReport]:
        """Startd ads of every pool, each slot once, as columns: (columns, the collector each row
        came from, report); see :meth:`~probes.sources.live.slots.SlotStream.columns`."""
        return self.slot_stream.columns()

    def snapshot(self, *, now: float) -> tuple[Snapshot, ReadReport]:
        """The slots and allocations tables of the pool, observed at ``now``.

        The answers of all its collectors are one query at one instant: a p-slot kept from one
        collector and its dynamic slots from another (a startd seen by both) are one node, and
        the Child* lists serve only when no collector held a dynamic-slot ad and ``child_lists``
        says the query leaves them out: an answer of a pool between two claims holds none, and its
        p-slots may still list released claims, or already list new ones. Each slot's
        ``source`` still names the collector its ad came from (``line``: its place in the answer).
        """
        return self.slot_stream.snapshot(now=now)

    def schedds(self) -> tuple[list[tuple[str, classad2.ClassAd]], dict[str, str]]:
        """The schedds to read, (name, location ad), each once; and the configured ones not found."""
        return self.schedd_queries.locate()

    def idle(self, schedds: Sequence[tuple[str, classad2.ClassAd]]) -> IdleRead:
        """The idle jobs of every schedd, grouped by autocluster."""
        return self.schedd_queries.idle(schedds)

    def job_identities(
        self, schedds: Sequence[tuple[str, classad2.ClassAd]], claimed: Collection[str], *, now: float
    ) -> tuple[pd.DataFrame, dict[str, str]]:
        """Who the jobs of the slots' claims (``claimed``: their ``GlobalJobId``) and every
        running job are, by their own ads, and their status; see
        :meth:`~probes.sources.live.schedds.Schedds.job_identities`."""
        return self.schedd_queries.job_identities(schedds, claimed, now=now)

    def negotiator_groups(self) -> tuple[frozenset[str] | None, str | None]:
        """The negotiators' group names (None: unknown, with why); see
        :func:`~probes.sources.live.accounting.negotiator_groups`. While the collector holds
        none, the last ones seen (the negotiator down, its ads expired): a job's group does not
        change for that."""
        groups, why = negotiator_groups(self.calls, self.groups)
        if groups is None and self._last_groups is not None:
            return self._last_groups, None
        self._last_groups = groups if groups is not None else self._last_groups
        return groups, why

    def history(self, schedds: Sequence[tuple[str, classad2.ClassAd]], checkpoint: Callable[[str], Any]) -> HistoryRead:
        """Every schedd's jobs past its checkpoint (``checkpoint(key)`` reads the committed one)."""
        return self.history_pass.read(schedds, checkpoint)

    def history_pieces(
        self, schedds: Sequence[tuple[str, classad2.ClassAd]], checkpoint: Callable[[str], Any]
    ) -> Iterator[HistoryRead]:
        """:meth:`history` in parts, each to be committed before the next is read; see
        :meth:`~probes.sources.live.history.HistoryPass.pieces`."""
        return self.history_pass.pieces(schedds, checkpoint)
