"""The slots and allocations tables, from startd ads (``condor_status -long`` / ``-json``).

A partitionable slot's own ``Cpus``/``Memory``/``Disk``/``GPUs`` are what its startd last said
is unallocated; ``TotalSlot*`` are its size. Each running job holds a dynamic slot, named
``slotN_M@host`` after its parent ``slotN@host``. A static slot is unallocated as a whole unless
it is claimed, and then its job holds all of it (an allocation whose parent is the slot itself).

A snapshot of a live pool is not one instant: the collector drops a released dynamic slot's ad
within a second, but its partitionable slot keeps listing it (``ChildName``, ``Child*``, its
own ``Cpus``) until the p-slot's next update, and a new dynamic slot may be advertised before
its p-slot lists it. So a node's allocations are the dynamic-slot ads present for it, and its
unallocated amounts are ``TotalSlot<r>`` minus their sum; a ``ChildName`` entry without an ad
is a released claim, unless an ad of that node was quarantined (then the node is
``incomplete``, and left unbilled). The ``Child*`` lists serve only a dump that holds no
dynamic-slot ads at all (``condor_status -long`` of p-slots only, or an old pool), or a live
query configured to leave them out (``pool.child_lists``): a live answer may hold none because
the pool was between two claims, its p-slots listing the released one or the next.

The pool is checked against itself (issue 41): a slot amount that is not a finite number
quarantines its ad (:attr:`~probes.sources.classad.Attr.finite`), and so do a node whose dynamic
slots hold more than its ``TotalSlot*`` and a dynamic slot whose ``Name`` places it on no node;
each leaves its node ``incomplete`` (:func:`incomplete_nodes`), never billed to its neighbours.
So do (issue 51, :mod:`probes.sources.slot_ads`) the last ad of a dump cut short, an ad with an
attribute written twice or without what HTCondor writes in every slot ad, a dynamic slot whose
p-slot is not in its snapshot or that is stale while its node is heard, and ``Child*`` lists
that are not amounts; files that are parts of one dump are one snapshot
(:func:`~probes.sources.slot_instants.snapshot_instants`).

Only what the pool still hears from is billed, and a job on one slot only
(:mod:`probes.sources.unheard`): a node whose ads are stale is left out and listed in
``Snapshot.unheard``; a dynamic slot that is stale or of its startd's previous run is left out;
a ``GlobalJobId`` on two slots of one instant is billed on the one heard from last.

Units are HTCondor's: cpus in cores, memory in MiB, disk in KiB, gpus in devices, times in
UNIX seconds (UTC).
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import classad2
import numpy as np
import pandas as pd

from probes.accounting import RESOURCES
from probes.sources.classad import AdColumns, Attr, Kind, fallbacks, unique_attrs
from probes.sources.classad.limits import AMOUNT, INSTANT
from probes.sources.classad_semantics import use_condor_functions
from probes.sources.credentials import IDENTITY_COLUMNS, identity_attrs
from probes.sources.kinds import MY_TYPE, AdKind, KindCheck
from probes.sources.report import Malformed, ReadReport, ReadTally
from probes.sources.settings import SlotReading
from probes.sources.slot_ads import missing_required, nameless, once_per_instant, set_aside_in_file
from probes.sources.slot_allocations import (
    CHILD,
    OWN,
    TOTAL,
    child_allocations,
    dynamic_slots,
    held,
    held_sums,
    named,
    parents,
    partitionable_slots,
    without_dynamic_ads,
    zero,
)
from probes.sources.slot_checks import (
    MACHINE_MEMORY,
    ORPHAN,
    bad_child_lists,
    of_nodes,
    orphans,
    overfull,
    quarantine,
    quarantined_nodes,
    startds,
    unnamed,
)
from probes.sources.slot_instants import set_aside_future, snapshot_instants
from probes.sources.unheard import DUPLICATE_JOB, UNHEARD_COLUMNS, heard_rules, one_slot_per_job

__all__ = [
    "DAEMON_START",
    "STARTD_ADDRESS",
    "Snapshot",
    "assign_partitions",
    "child_list_attrs",
    "incomplete_nodes",
    "read_status",
    "slot_attrs",
    "snapshot_tables",
]

SLOT_COLUMNS = (
    "pool", "name", "machine", "slot_type", "state", "site", "resource_name", "partition",
    *(f"total_{r}" for r in RESOURCES), *(f"unallocated_{r}" for r in RESOURCES),
    "n_dynamic", "incomplete", "speed", "node_cost", "glidein_to_retire", "glidein_to_die", "observed_at", "interval_s",
    "source", "line",
)  # fmt: skip
ALLOCATION_COLUMNS = (
    "pool", "name", "parent", "job_id", *IDENTITY_COLUMNS, "site", "resource_name",
    *RESOURCES, "from_child_lists", "observed_at", "interval_s",
)  # fmt: skip


#: When a slot's startd started: a dynamic slot older than its p-slot is a previous run's. Read
#: from dumps, and from a live answer that carries it (a glidein's GLIDEIN_ToRetire refers to it,
#: and the projection learns it), but not asked for: without it, a previous run's ads are stale
#: two update intervals after its startd died all the same.
DAEMON_START = Attr("DaemonStartTime", Kind.NUMBER, limits=INSTANT)
#: Which startd a slot's ad is of (its address): read where an answer carries it, not asked for,
#: to place a dynamic slot whose ``Name`` says no node (without it, its ``Machine`` does).
STARTD_ADDRESS = Attr("MyAddress", Kind.STRING)

#: A slot ad without a usable ``Name`` but with its ``Machine`` is kept here, and quarantined by
#: :func:`snapshot_tables` with its node left incomplete (never billed to its neighbours).
STARTD_ADS = AdKind("Machine", ("Name", "Machine"), "startd ads (condor_status -long or -json)")


@dataclass(frozen=True)
class Snapshot:
    """One instant of a pool: its slots (partitionable and static) and allocations (dynamic).

    ``unheard`` holds the nodes (partitionable or static slots) left out because their ads are
    stale, one row each (:data:`~probes.sources.unheard.UNHEARD_COLUMNS`; ``since``: their
    ``LastHeardFrom``): neither they nor their dynamic slots are in ``slots`` or ``allocations``.

    ``ads`` holds each slots row's own ad (text or JSON object), for evaluating expressions
    such as an idle job's Requirements against it; None when the source kept no ads. It is a
    read-only view of the array given (not a copy): writing into it raises.

    Immutable, but the tables are not copied (a snapshot of a global pool holds hundreds of MB):
    treat them as read-only. A step that changes a table makes a new snapshot with its new
    table (``dataclasses.replace(snapshot, allocations=...)``), never changes one in place.

    ``unheard``: one row per node (partitionable or static slot) left unbilled because its ads
    are stale (:data:`UNHEARD_COLUMNS`); empty when every node was heard from.
    """

    slots: pd.DataFrame
    allocations: pd.DataFrame
    ads: np.ndarray | None = None
    unheard: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=list(UNHEARD_COLUMNS)))

    def __post_init__(self) -> None:
        if self.ads is not None and self.ads.flags.writeable:
            view = self.ads.view()  # no copy: the caller's array stays as it was
            view.flags.writeable = False
            object.__setattr__(self, "ads", view)


def slot_attrs(reading: SlotReading) -> list[Attr]:
    """The startd attributes the tables need, with the configured extras."""
    n, s, b = Kind.NUMBER, Kind.STRING, Kind.BOOL
    attrs = [
        Attr("Name", s), Attr("Machine", s), Attr("SlotType", s), Attr("State", s),
        Attr("PartitionableSlot", b), Attr("DynamicSlot", b),
        *(Attr(OWN[r], n, limits=AMOUNT, finite=True) for r in RESOURCES),
        *(Attr(TOTAL[r], n, limits=AMOUNT, finite=True) for r in RESOURCES), Attr(MACHINE_MEMORY, n, limits=AMOUNT),
        Attr("MyCurrentTime", n, limits=INSTANT), Attr("LastHeardFrom", n, limits=INSTANT),
        Attr("UpdateInterval", n, limits=AMOUNT), Attr("UpdateSequenceNumber", n, limits=AMOUNT), DAEMON_START,
        Attr("GLIDEIN_ToRetire", n, limits=INSTANT), Attr("GLIDEIN_ToDie", n, limits=INSTANT),
        Attr("GlobalJobId", s), *identity_attrs(reading.identity), *child_list_attrs(reading),
        *fallbacks(reading.site_attributes, s), *fallbacks(reading.resource_attributes, s),
    ]  # fmt: skip
    for a in (reading.speed_attribute, reading.cost_attribute):
        if a:
            attrs.append(Attr(a, n))
    attrs += [Attr(a, Kind.ANY) for a in reading.extra_attributes]
    return unique_attrs(attrs)


def child_list_attrs(reading: SlotReading) -> list[Attr]:
    """A partitionable slot's ``Child*`` lists: what it says its dynamic slots hold, and whose."""
    names = ["ChildName", *(f"Child{a.name}" for a in identity_attrs(reading.identity)), *CHILD.values()]
    return [Attr(name, Kind.LIST) for name in names]


def read_status(
    paths: Sequence[str | os.PathLike[str]],
    reading: SlotReading = SlotReading(),
    *,
    strict: bool = False,
) -> tuple[Snapshot, ReadReport]:
    """Read startd dumps into the slots and allocations tables."""
    from probes.sources.classad import read_ads  # the scanner and numba: only where ads are read

    attrs = unique_attrs([*slot_attrs(reading), DAEMON_START, STARTD_ADDRESS, MY_TYPE])
    parts, tally = [], ReadTally()
    for path in paths:
        cols, rep = read_ads(path, attrs, strict=strict, keep_raw=True)
        tally.merge(rep)
        seen = len(tally.malformed)
        cols = nameless(set_aside_in_file(cols, os.fspath(path), tally), tally)
        if strict and len(tally.malformed) > seen:
            raise tally.malformed[seen].error()
        check = KindCheck(STARTD_ADS)
        parts.append(check.keep(cols, tally))
        check.verdict(path, len(rep.malformed))
    ads = once_per_instant(set_aside_future(AdColumns.concat(parts, attrs), tally), tally)
    snapshot, set_aside = snapshot_tables(ads, reading, tuple(tally.malformed))
    tally.merge(set_aside)
    return snapshot, tally.report()


def snapshot_tables(
    ads: AdColumns,
    reading: SlotReading,
    quarantined: Sequence[Malformed] = (),
    *,
    child_lists: bool = True,
    now: float | None = None,
) -> tuple[Snapshot, ReadReport]:
    """Turn startd ads (from files or a live collector) into the slots and allocations tables,
    and what was set aside: a report of the ads quarantined and of those left out, by reason,
    which the caller adds to its read's (nothing is counted anywhere else).

    Only the ads heard from recently are billed, and a job on one slot only
    (:mod:`probes.sources.unheard`): ``now``, when the collector answered (UTC s; None for a
    dump, judged at its newest ``LastHeardFrom``).

    ``quarantined``: the ads of the same read that could not be read (the reader's report), so
    that a node one of whose ads was lost is left ``incomplete`` rather than billed without it.
    ``child_lists``: whether a source without dynamic-slot ads is billed from its p-slots'
    ``Child*`` lists (a dump cannot say why it has none; a live query knows what it asked for).

    The pool is checked against itself (:mod:`probes.sources.slot_checks`): a slot ad without a
    ``Name``, or a dynamic slot's whose ``Name`` is not ``slotN_M@host``, and a partitionable slot
    whose dynamic slots hold more of a resource than its ``TotalSlot*`` are quarantined and their
    node is ``incomplete``: not billed, never billed to its neighbours (:func:`incomplete_nodes`).
    """
    ads, unplaced_on, unplaced = _placed(ads)
    dynamic = dynamic_slots(ads)
    observed, part_of = snapshot_instants(ads, dynamic)
    site = ads.first(reading.site_attributes, reading.site_default)
    resource = ads.first(reading.resource_attributes)
    parent = parents(ads["Name"])  # of a dynamic slot; a p-slot's own name elsewhere, unused
    heard, unheard, left_out, stale = heard_rules(
        ads, dynamic, parent, site, update_interval_s=reading.update_interval_s, now=now
    )
    rejects = Counter(left_out)

    # dynamic slots: one allocation each, under the parent named slotN@host; a job on one only
    d = np.flatnonzero(dynamic & heard)
    from_ads = held(ads, d, parent[d], {r: zero(ads[OWN[r]][d]) for r in RESOURCES}, observed, reading.pool)
    last_heard = ads["LastHeardFrom"].astype(np.float64)
    from_ads, twice = one_slot_per_job(from_ads, last_heard)

    # partitionable and static slots: a node is one of them
    nodes = _Nodes.of(ads, np.flatnonzero(~dynamic & heard), (dynamic, observed, part_of), child_lists=child_lists)
    amounts = held_sums(from_ads, ads["Name"][nodes.rows], nodes.observed)
    orphaned = d[orphans(parent[d], observed[d], ads["Name"][nodes.rows], nodes.observed)]
    lost = _Lost((*quarantined, *unplaced), unplaced_on, orphaned, stale)
    incomplete, overfull_ads = _incomplete(ads, nodes, from_ads, amounts, lost, part_of)
    if len(lost.orphans):
        rejects[ORPHAN] += len(lost.orphans)
    slots = _slot_amounts(ads, nodes, amounts, incomplete, site[nodes.rows], resource[nodes.rows], reading)
    allocations, again = _allocations(ads, nodes, slots, from_ads, (observed, last_heard), (site, resource), reading)
    slots = _slot_table(ads, nodes, slots, allocations, incomplete, reading)
    for dropped in (twice, again):  # a static slot's job on a dynamic one too
        if len(dropped):
            rejects[DUPLICATE_JOB] += len(dropped)
    snapshot = Snapshot(
        slots=slots.reset_index(drop=True),
        allocations=allocations.reset_index(drop=True),
        ads=ads.raw[nodes.rows] if ads.raw is not None else None,
        unheard=unheard,
    )
    return snapshot, ReadReport(malformed=(*unplaced, *overfull_ads), rejects=rejects)


@dataclass(frozen=True)
class _Nodes:
    """The partitionable and static slots of a snapshot: their ``rows`` of the ads, which are
    partitionable (``is_part``), claimed, billed from their ``Child*`` lists (``from_lists``),
    and the instant each was ``observed`` at (UTC s)."""

    rows: np.ndarray
    is_part: np.ndarray
    claimed: np.ndarray
    from_lists: np.ndarray
    observed: np.ndarray

    @classmethod
    def of(cls, ads: AdColumns, rows: np.ndarray, ad_times: tuple[np.ndarray, ...], *, child_lists: bool) -> _Nodes:
        """``ad_times``: per ad, whether it is a dynamic slot, its instant and its snapshot."""
        dynamic, observed, snapshot = ad_times
        is_part = partitionable_slots(ads)[rows]
        claimed = pd.Series(ads["State"][rows], dtype=object).fillna("").str.lower().to_numpy() == "claimed"
        from_lists = is_part & without_dynamic_ads(snapshot, rows, dynamic) & child_lists
        return cls(rows, is_part, claimed, from_lists, observed[rows])


def _placed(ads: AdColumns) -> tuple[AdColumns, set[str], list[Malformed]]:
    """``ads`` without those that cannot be placed on their node (:func:`unnamed`) or lack what
    HTCondor always writes (:func:`~probes.sources.slot_ads.missing_required`), the startds they
    were of, and their quarantine: every slot of that startd, in the same source, is incomplete
    (and the node their text names, :func:`~probes.sources.slot_checks.quarantined_nodes`)."""
    why = unnamed(ads, dynamic_slots(ads))
    why = np.where(why == "", missing_required(ads, partitionable_slots(ads)), why)
    unplaced = np.flatnonzero(why != "")
    if not len(unplaced):
        return ads, set(), []
    set_aside = [quarantine(ads, i, str(why[i])) for i in unplaced.tolist()]
    return ads.take(why == ""), set(startds(ads)[unplaced].tolist()), set_aside


@dataclass(frozen=True)
class _Lost:
    """What a snapshot set aside that its nodes miss: the ads ``quarantined`` (by the reader, or
    here), the startds ``unplaced_on`` of those set aside here, the rows of the dynamic slots
    whose p-slot is not in the snapshot (``orphans``) and which ads are dynamic slots left out as
    ``stale`` while their node is heard."""

    quarantined: Sequence[Malformed]
    unplaced_on: set[str]
    orphans: np.ndarray
    stale: np.ndarray


def _incomplete(
    ads: AdColumns,
    nodes: _Nodes,
    from_ads: pd.DataFrame,
    amounts: dict[str, np.ndarray],
    lost: _Lost,
    snapshot: np.ndarray,
) -> tuple[np.ndarray, list[Malformed]]:
    """Which partitionable slots of ``nodes`` are incomplete (an ad of theirs ``lost``, their
    ``Child*`` lists not amounts, or their dynamic slots, holding ``amounts``, holding more than
    their size), and the quarantine of those that contradict themselves. ``snapshot``: each ad's
    (:func:`~probes.sources.slot_instants.snapshot_instants`): the parts of one dump are one."""
    p, is_part = nodes.rows, nodes.is_part
    paths = pd.DataFrame({"path": pd.Series(ads.path, dtype=object).fillna(""), "at": snapshot})
    together = paths.drop_duplicates().groupby("at")["path"].agg(set)
    linked: dict[str, set[str]] = {}
    for at, path in zip(paths["at"].tolist(), paths["path"].tolist(), strict=True):
        linked.setdefault(path, set()).update(together[at])
    incomplete = is_part & quarantined_nodes(ads, p, from_ads, lost.quarantined, lambda a: linked.get(a, ()))
    if lost.unplaced_on:
        incomplete |= is_part & pd.Series(startds(ads)[p]).isin(lost.unplaced_on).to_numpy(dtype=bool)
    # a dynamic slot without its p-slot: the slots of its startd (one renamed?) are not whole
    incomplete |= is_part & of_nodes(ads, p, lost.orphans, snapshot)
    # a stale dynamic slot's node: what it held is not known to be free
    stale = np.flatnonzero(lost.stale)
    stale_parents = pd.Series(parents(ads["Name"][stale]), dtype=object).str.lower()
    of_stale = pd.MultiIndex.from_arrays([stale_parents, snapshot[stale]])
    node_keys = pd.MultiIndex.from_arrays([pd.Series(ads["Name"][p], dtype=object).str.lower(), snapshot[p]])
    incomplete |= is_part & node_keys.isin(of_stale)
    set_aside = []
    for k, why in bad_child_lists(ads, p[nodes.from_lists]).items():
        k = int(np.flatnonzero(nodes.from_lists)[k])
        set_aside.append(quarantine(ads, int(p[k]), why))
        incomplete[k] = True
        nodes.from_lists[k] = False  # not billed from lists that are not amounts (an array: the nodes' own)
    contradictions = overfull(ads, p, is_part & ~nodes.from_lists, amounts, from_ads, nodes.observed)
    for k, why in contradictions.items():
        set_aside.append(quarantine(ads, int(p[k]), why))
        incomplete[k] = True
    return incomplete, set_aside


def _slot_amounts(
    ads: AdColumns,
    nodes: _Nodes,
    amounts: dict[str, np.ndarray],
    incomplete: np.ndarray,
    site: np.ndarray,
    resource: np.ndarray,
    reading: SlotReading,
) -> pd.DataFrame:
    """The slots table's identity columns (``site`` and ``resource``: the nodes') and each
    resource's ``total_`` and ``unallocated_`` amounts (``amounts``: what their dynamic slots
    hold)."""
    p, is_part = nodes.rows, nodes.is_part
    slots = pd.DataFrame(
        {
            "pool": reading.pool,
            "name": ads["Name"][p],
            "machine": ads["Machine"][p],
            "slot_type": np.where(is_part, "Partitionable", "Static"),
            "state": ads["State"][p],
            "site": site,
            "resource_name": resource,
        }
    )
    for r in RESOURCES:
        own = zero(ads[OWN[r]][p])
        size = ads[TOTAL[r]][p]
        total = np.where(np.isnan(size), own, size)
        slots[f"total_{r}"] = total
        # a p-slot billed from its dynamic-slot ads: its size minus what they hold (its own amounts
        # may still count a released claim, or not yet a new one), never below nothing; from its
        # lists, or with an ad lost, or of unknown size: its own amounts, as its startd last said
        by_ads = np.maximum(size - amounts[r], 0.0)
        part = np.where(nodes.from_lists | incomplete | np.isnan(size), own, by_ads)
        # a static slot is all unallocated until it is claimed, and then not at all
        slots[f"unallocated_{r}"] = np.where(is_part, part, np.where(nodes.claimed, 0.0, total))
    return slots


def _allocations(
    ads: AdColumns,
    nodes: _Nodes,
    slots: pd.DataFrame,
    from_ads: pd.DataFrame,
    times: tuple[np.ndarray, np.ndarray],
    where: tuple[np.ndarray, np.ndarray],
    reading: SlotReading,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The allocations table: the dynamic slots' (``from_ads``), the claimed static slots' held
    whole by their jobs, and the ``Child*`` lists' entries; and the claims dropped as a job's
    second slot. Per ad: ``times``, when it was observed and last heard from (UTC s);
    ``where``, its site and resource."""
    p, (observed, last_heard), (site, resource) = nodes.rows, times, where
    whole_rows = ~nodes.is_part & nodes.claimed
    st = p[whole_rows]
    whole = {r: slots.loc[whole_rows, f"total_{r}"].to_numpy() for r in RESOURCES}
    from_static = held(ads, st, ads["Name"][st], whole, observed, reading.pool)
    listed = child_allocations(ads, p[nodes.from_lists], observed, reading.pool)
    allocations = pd.concat([f for f in (from_ads, from_static, listed) if len(f)] or [from_ads], ignore_index=True)
    allocations, dropped = one_slot_per_job(allocations, last_heard)
    allocations = named(allocations, ads, reading, site, resource)
    allocations["interval_s"] = reading.interval_s
    return allocations.reindex(columns=ALLOCATION_COLUMNS), dropped


def _slot_table(
    ads: AdColumns,
    nodes: _Nodes,
    slots: pd.DataFrame,
    allocations: pd.DataFrame,
    incomplete: np.ndarray,
    reading: SlotReading,
) -> pd.DataFrame:
    """The slots table whole: ``slots``' amounts with each node's claims counted, its price
    attributes, its glidein's times, when and where it was observed, its partition and extras."""
    p = nodes.rows
    slots["incomplete"] = incomplete
    counts = allocations.groupby(["parent", "observed_at"]).size()
    at = pd.MultiIndex.from_arrays([slots["name"], nodes.observed])
    slots["n_dynamic"] = counts.reindex(at).fillna(0).to_numpy(dtype=np.int64)
    slots["speed"] = _attr_or_one(ads, reading.speed_attribute, p)
    slots["node_cost"] = _attr_or_one(ads, reading.cost_attribute, p)
    slots["glidein_to_retire"] = ads["GLIDEIN_ToRetire"][p]
    slots["glidein_to_die"] = ads["GLIDEIN_ToDie"][p]
    slots["observed_at"] = nodes.observed
    slots["interval_s"] = reading.interval_s
    slots["source"] = ads.path[p]
    slots["line"] = ads.line[p]
    slots["partition"] = assign_partitions(ads, p, reading.partitions) if ads.raw is not None else None
    for extra in reading.extra_attributes:
        slots[extra] = ads[extra][p]
    return slots.reindex(columns=[*SLOT_COLUMNS, *reading.extra_attributes])


def incomplete_nodes(snapshot: Snapshot) -> list[str]:
    """The nodes of ``snapshot`` left unbilled because what the pool said of them is not whole or
    contradicts itself: those flagged ``incomplete``, and those whose own ad was quarantined (their
    dynamic slots' parent is not in the slots table), by name."""
    flagged = snapshot.slots.loc[snapshot.slots["incomplete"].fillna(False).astype(bool), "name"]
    known = set(snapshot.slots["name"])
    lost = {str(p) for p in snapshot.allocations["parent"].dropna() if p not in known}
    return sorted({str(n) for n in flagged} | lost)


def assign_partitions(ads: AdColumns, rows: np.ndarray, partitions: Sequence[tuple[str, str]]) -> np.ndarray:
    """The first of ``partitions`` (name, ``match`` expression) whose expression is true of
    each slot ad (None if none).

    Evaluated with classad2 against the whole slot ad; a ``match`` of "true" needs no ad.
    """
    use_condor_functions()  # slot ads of literals are read without classad2: these may be its first parse
    exprs = [(n, None if match.strip().lower() == "true" else classad2.ExprTree(match)) for n, match in partitions]
    out = np.full(len(rows), None, dtype=object)
    for k, i in enumerate(rows):
        ad = None
        for name, expr in exprs:
            if expr is None:
                out[k] = name
                break
            if ad is None:
                ad = ads.classad(int(i))
            if expr.eval(ad) is True:
                out[k] = name
                break
    return out


def _attr_or_one(ads: AdColumns, attr: str, rows: np.ndarray) -> np.ndarray:
    if not attr:
        return np.ones(len(rows))
    values = ads[attr][rows].astype(np.float64)
    return np.where(np.isnan(values), 1.0, values)
