"""The slots of a live pool: startd ads streamed from every collector, each slot kept once.

``Collector.query(AdType.Startd, constraint, projection)`` on every configured pool
(``pool.collectors``). An entry ``"cm1:9618, cm2:9618"`` lists the replicas of one pool: they
are tried in order until one answers (failover). Several entries are several pools, all
queried; a slot seen twice (same ``Name``) is kept once, the copy heard from last. Each answer
is read as it streams in, a chunk of :data:`~probes.sources.bindings.CHUNK` ads converted to
columns at a time, and never held whole as ClassAds: the duplicates are found over the columns
once every collector has answered (:func:`kept_slots`). A live snapshot is observed when the
collector answered (the ``now`` passed in), not at the startd's last update, so that snapshots
taken more often than startds update are distinct; and its ads are judged stale or not at that
instant (:mod:`probes.sources.unheard`).
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import logging
import math
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import classad2
import htcondor2
import numpy as np
import pandas as pd

from probes.config import PoolSettings
from probes.errors import SourceError
from probes.sources.bindings import CHUNK
from probes.sources.classad import AdColumns, Attr, columns_from_classads, unique_attrs
from probes.sources.live.calls import Calls, CollectorLike, close_stream, collector_name, missing_refs
from probes.sources.live.projections import slot_projection
from probes.sources.report import ReadReport, ReadTally
from probes.sources.settings import SlotReading
from probes.sources.slot_allocations import dynamic_slots
from probes.sources.status import DAEMON_START, STARTD_ADDRESS, Snapshot, slot_attrs, snapshot_tables

__all__ = ["SlotStream", "kept_slots"]

log = logging.getLogger("fairacct.live")


class SlotStream:
    """The startd ads of every pool of ``groups`` (see :func:`~probes.sources.live.calls.replica_groups`),
    as columns and as a :class:`~probes.sources.status.Snapshot`.

    ``slot_expressions`` and ``slot_attributes``: more that slot ads must carry (the speed and
    cost expressions' references, the machine class attributes). ``chunk``: ads converted at a
    time as they arrive (the bindings' worker sends :data:`~probes.sources.bindings.CHUNK` a
    message). ``on_ads(source, ads)`` sees each chunk as it arrives (before the de-duplication;
    a chunk of an answer abandoned to ask again too): a seam for tests that compare a snapshot
    with its collector's answer, which is never kept whole.
    """

    def __init__(
        self,
        calls: Calls,
        pool: PoolSettings,
        groups: Sequence[Sequence[str | None]],
        reading: SlotReading,
        *,
        slot_expressions: Sequence[str] = (),
        slot_attributes: Sequence[str] = (),
    ) -> None:
        self.calls = calls
        self.pool = pool
        self.groups = groups
        self.reading = reading
        self.slot_expressions = tuple(slot_expressions)
        self.slot_attributes = tuple(slot_attributes)
        self.chunk = CHUNK
        self.on_ads: Callable[[str, list[classad2.ClassAd]], None] | None = None

    def columns(self) -> tuple[AdColumns, list[str], ReadReport]:
        """Startd ads of every pool, each slot once, as columns: (columns, the collector each row
        came from, report). Each answer is converted a chunk at a time as it arrives
        (:meth:`_answer`); the slots are then chosen from all of them at once
        (:func:`kept_slots`), so that no answer is ever held whole as ClassAds."""
        base = slot_projection(
            self.reading, self.slot_expressions, self.slot_attributes, child_lists=self.pool.child_lists
        )
        answers: list[_SlotAnswer] = []
        for group in self.groups:
            projection = self.calls.projection("startd", base)
            answer = self._failover(group, projection, again=True)
            if answer is None:  # its expressions referred to attributes the projection lacked
                projection = self.calls.projection("startd", projection)
                answer = self._failover(group, projection, again=False)
            assert answer is not None  # the second answer is always read whole
            answers.append(answer)
        return kept_slots(answers, unique_attrs([*slot_attrs(self.reading), DAEMON_START, STARTD_ADDRESS]))

    def snapshot(self, *, now: float) -> tuple[Snapshot, ReadReport]:
        """The slots and allocations tables of the pool, observed at ``now``; see
        :meth:`probes.sources.live.LivePool.snapshot`."""
        columns, origins, report = self.columns()
        snapshot, set_aside = snapshot_tables(
            columns, self.reading, report.malformed, child_lists=self.pool.child_lists, now=now
        )
        where = np.array(origins, dtype=object)
        lines = snapshot.slots["line"].to_numpy(dtype=np.int64) - 1
        slots = snapshot.slots.assign(source=where[lines], observed_at=float(now))
        allocations = snapshot.allocations.assign(observed_at=float(now))
        unheard = snapshot.unheard.assign(source=where[snapshot.unheard["line"].to_numpy(dtype=np.int64) - 1])
        return dataclasses.replace(snapshot, slots=slots, allocations=allocations, unheard=unheard), report | set_aside

    def _failover(self, group: Sequence[str | None], projection: list[str], *, again: bool) -> _SlotAnswer | None:
        """The startd ads of the first replica of ``group`` that answers whole (see
        :meth:`_answer`); a replica that fails midway costs only its partial answer."""
        constraint = self.pool.slot_constraint.strip() or None

        def ask(address: str | None, what: str) -> _SlotAnswer | None:
            query = functools.partial(_startd_query, constraint, projection)
            answer = self.calls.call(what, functools.partial(self.calls.collector, query, address))
            return self._answer(what, address, answer, projection, again=again)

        answer, _ = self.calls.first_answer(group, "startd ads", ask)
        return answer

    def _answer(
        self, what: str, address: str | None, answer: Any, projection: list[str], *, again: bool
    ) -> _SlotAnswer | None:
        """One collector's answer, converted to columns :attr:`chunk` ads at a time as it
        arrives (the bindings' worker sends it in chunks of that size). Each ad's place in the
        answer is its row's ``line``, and its ``Name`` (case-folded) and the time it was heard
        from are kept beside, for :func:`kept_slots`. None when ``again`` and the answer's
        expressions refer to attributes the projection lacks, decided on each chunk as it comes:
        the chunks after the first such one are only checked for what else is lacking (never
        converted), all of it is learned, and the caller asks again, once."""
        if isinstance(answer, (str, bytes, Mapping)) or not isinstance(answer, Iterable):
            raise SourceError(f"{what}: expected a list of ClassAds, got {type(answer).__name__}")
        attrs = unique_attrs([*slot_attrs(self.reading), DAEMON_START, STARTD_ADDRESS])
        out = _SlotAnswer(f"collector {collector_name(address)}")
        missing: set[str] = set()
        ads = iter(answer)
        try:
            for first in itertools.count(0, self.chunk):
                chunk = self.calls.next_ads(what, ads, self.chunk, first)
                if not chunk:
                    break
                if self.on_ads is not None:
                    self.on_ads(out.origin, chunk)
                missing |= missing_refs(chunk, projection)
                if not (missing and again):
                    out.add(chunk, attrs)
                # else: the answer is asked again; the rest is read only for what else it lacks,
                # so that one more query asks for all of it (a chunk at a time, never converted)
        finally:
            close_stream(ads)
        if missing:
            self.calls.learned["startd"] |= missing
            then = "asking again with them" if again else "asked for from now on"
            log.info("startd ads: the answer refers to %s, which the projection lacked; %s",
                     ", ".join(sorted(missing)), then)  # fmt: skip
            if again:
                return None
        return out


def _startd_query(
    constraint: str | None, projection: list[str], collector: CollectorLike
) -> Iterable[classad2.ClassAd]:
    return collector.query(ad_type=htcondor2.AdType.Startd, constraint=constraint, projection=projection)


@dataclass
class _SlotAnswer:
    """One collector's startd ads, converted a chunk at a time (:meth:`SlotStream._answer`).

    ``keys`` and ``heard``: per ad with a ``Name``, in the answer's order, its name case-folded
    and when its collector last heard from it (UTC seconds); a row of ``parts`` has its ad's place
    among them as its ``line`` (1-based), as has a quarantined ad in ``tally.malformed``.
    """

    origin: str
    parts: list[AdColumns] = field(default_factory=list)
    keys: list[str] = field(default_factory=list)
    heard: list[float] = field(default_factory=list)
    tally: ReadTally = field(default_factory=ReadTally)

    def add(self, chunk: Sequence[classad2.ClassAd], attrs: Sequence[Attr]) -> None:
        """Convert one chunk of the answer; ads without a Name are counted and skipped."""
        first = len(self.keys)
        named = []
        for ad in chunk:
            name = ad.get("Name")
            if not isinstance(name, str) or not name:
                self.tally.reject("Name: missing, the slot ad was skipped")
                continue
            named.append(ad)
            self.keys.append(name.lower())
            self.heard.append(_heard(ad))
        columns, rep = columns_from_classads(named, attrs, origin="collector")
        if columns.raw is not None:
            # an ad's text serves its p-slot or static slot (partitions, Snapshot.ads), never a
            # dynamic slot: dropped here, it is not held for the ~10 dynamic slots of every node
            columns.raw[dynamic_slots(columns)] = None
        _share_repeats(columns)
        columns.line = columns.line + first
        self.tally.merge(rep.shifted(first))
        self.parts.append(columns)


def _share_repeats(ads: AdColumns) -> None:
    """Make equal strings of a column, or of its lists' items, one object (``sys.intern``) where
    most of them repeat: a global pool's ads name a few thousand machines, users, groups, sites
    and states over and over (a node's ~10 dynamic slots and the ``Child*`` lists of its p-slot),
    and the columns of a whole answer are held until the tables are built. Columns mostly of
    distinct values (``Name``, ``GlobalJobId``) are left as they are, not filling the table of
    interned strings."""
    for column in ads.columns.values():
        if column.dtype != object or not len(column):
            continue
        values = column.tolist()
        strings = [v for v in values if type(v) is str]
        if strings and len(set(strings)) <= len(strings) // 2:
            column[:] = [sys.intern(v) if type(v) is str else v for v in values]
        lists = [v for v in values if type(v) is list]
        items = [e for v in lists for e in v if type(e) is str]
        if items and len(set(items)) <= len(items) // 2:
            for v in lists:
                v[:] = [sys.intern(e) if type(e) is str else e for e in v]


def kept_slots(answers: Sequence[_SlotAnswer], attrs: Sequence[Attr]) -> tuple[AdColumns, list[str], ReadReport]:
    """Each slot once from the collectors' answers: the copy heard from last (the first of
    them, on a tie), at the place of its first copy. Rows are numbered (``line``, 1-based) by
    their place among the kept ads, a quarantined one included, as the origins are listed; the
    answers give up their columns. A slot whose kept copy was quarantined has no row, as if it
    alone had been read (its value rejects of a copy that was not kept stay counted)."""
    sizes = [len(a.keys) for a in answers]
    offsets = np.cumsum([0, *sizes])[:-1]
    keys = np.array([k for a in answers for k in a.keys], dtype=object)
    heard = np.array([h for a in answers for h in a.heard], dtype=np.float64)
    origin = np.repeat(np.array([a.origin for a in answers], dtype=object), sizes)
    tally = ReadTally()
    if len(keys):
        # idxmax: the first of the latest copies; sort=False: the slots in order of first appearance
        order = pd.Series(heard).groupby(keys, sort=False).idxmax().to_numpy(dtype=np.int64)
    else:
        order = np.array([], dtype=np.int64)
    if len(keys) > len(order):
        tally.reject("Name: seen twice (two pools or replicas), kept once", len(keys) - len(order))
    place = np.zeros(len(keys), dtype=np.int64)  # 1-based place among the kept ads; 0: not kept
    place[order] = np.arange(1, len(order) + 1)
    parts = []
    for answer, offset in zip(answers, offsets, strict=True):
        for part in answer.parts:
            part.line = part.line - 1 + offset  # the ad's place among all the answers' (0-based)
            parts.append(part)
        kept = tuple(
            dataclasses.replace(m, line=int(place[m.line - 1 + offset]))
            for m in answer.tally.malformed
            if place[m.line - 1 + offset]
        )
        tally.merge(dataclasses.replace(answer.tally.report(), malformed=kept))
    columns = AdColumns.concat(parts, attrs)
    if len(order) < len(keys):
        row_of = np.full(len(keys), -1, dtype=np.int64)
        row_of[columns.line] = np.arange(len(columns))
        rows = row_of[order]
        columns = columns.take(rows[rows >= 0])
        columns.line = np.flatnonzero(rows >= 0) + 1
    else:  # every ad kept, in its place
        columns.line = columns.line + 1
    tally.ads = len(columns)
    return columns, origin[order].tolist(), tally.report()


def _heard(ad: classad2.ClassAd) -> float:
    for attr in ("LastHeardFrom", "MyCurrentTime"):
        value = ad.get(attr)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            return float(value)
    return -math.inf
