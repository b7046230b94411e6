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

Only what the pool still hears from is billed, and a job on one slot only
(:mod:`probes.sources.unheard`): a node whose ads are stale is left out and listed in
``Snapshot.unheard``; a dynamic slot that is stale or of its startd's previous run is left out;
a ``GlobalJobId`` on two slots of one instant is billed on the one heard from last.

Units are HTCondor's: cpus in cores, memory in MiB, disk in KiB, gpus in devices, times in
UNIX seconds (UTC).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import classad2
import numpy as np
import pandas as pd

from probes.accounting import RESOURCES
from probes.errors import SourceError
from probes.sources.classad import AdColumns, Attr, Kind, fallbacks, unique_attrs
from probes.sources.classad.limits import AMOUNT, INSTANT
from probes.sources.credentials import IDENTITY_COLUMNS, identities, identity_attrs
from probes.sources.kinds import MY_TYPE, AdKind, KindCheck
from probes.sources.report import Malformed, ReadReport, ReadTally
from probes.sources.settings import SlotReading
from probes.sources.unheard import UNHEARD_COLUMNS, heard_rules, one_slot_per_job

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

_OWN = {"cpus": "Cpus", "memory": "Memory", "disk": "Disk", "gpus": "GPUs"}
_CHILD = {"cpus": "ChildCpus", "memory": "ChildMemory", "disk": "ChildDisk", "gpus": "ChildGPUs"}
_TOTAL = {"cpus": "TotalSlotCpus", "memory": "TotalSlotMemory", "disk": "TotalSlotDisk", "gpus": "TotalSlotGPUs"}
# ``Name = "..."`` (-long) or ``"Name": "..."`` (-json), not ``ChildName``: the identity of an ad
# that could not be read as a whole
_IDENTITY = re.compile(r'''(?im)(?:^|[{,\s])"?(Name|Machine)"?\s*[=:]\s*"([^"\\\n]*)"''')
_DYNAMIC_NAME = re.compile(r"^(slot\d+)_\d+@")
_UNITS = {"cpus": "cores", "memory": "MiB", "disk": "KiB", "gpus": "devices"}
#: A node's dynamic slots may hold no more than its size: past this (relative) rounding, it
#: contradicts itself (a ``Cpus`` or a ``TotalSlotCpus`` is wrong, or a claim is counted twice).
_ROUNDING = 1e-9

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
        *(Attr(_OWN[r], n, limits=AMOUNT, finite=True) for r in RESOURCES),
        *(Attr(_TOTAL[r], n, limits=AMOUNT, finite=True) for r in RESOURCES),
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
    names = ["ChildName", *(f"Child{a.name}" for a in identity_attrs(reading.identity)), *_CHILD.values()]
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
        check = KindCheck(STARTD_ADS)
        parts.append(check.keep(cols, tally))
        check.verdict(path, len(rep.malformed))
    ads = _once(AdColumns.concat(parts, attrs), tally)
    snapshot = snapshot_tables(ads, reading, tuple(tally.malformed), tally=tally)
    return snapshot, tally.report()


def _once(ads: AdColumns, tally: ReadTally) -> AdColumns:
    """Each slot once per instant: the same dump given twice (or its ``-long`` and ``-json``
    forms) must not double the overhead. Slots of different instants are all kept; they are
    accounted instant by instant."""
    name = pd.Series(ads["Name"], dtype=object).str.lower()
    observed = pd.Series(_first_number(ads, ("MyCurrentTime", "LastHeardFrom")))
    repeated = pd.DataFrame({"name": name, "at": observed}).duplicated().to_numpy() & name.notna().to_numpy()
    if not repeated.any():
        return ads
    n = int(repeated.sum())
    tally.rejects["Name: a slot ad seen again at the same instant (the same dump given twice?), counted once"] += n
    return ads.take(~repeated)


def snapshot_tables(
    ads: AdColumns,
    reading: SlotReading,
    quarantined: Sequence[Malformed] = (),
    *,
    child_lists: bool = True,
    now: float | None = None,
    tally: ReadTally | None = None,
) -> Snapshot:
    """Turn startd ads (from files or a live collector) into the slots and allocations tables.

    Only the ads heard from recently are billed, and a job on one slot only
    (:mod:`probes.sources.unheard`): ``now``, when the collector answered (UTC s; None for a
    dump, judged at its newest ``LastHeardFrom``); what was left out is counted in ``tally``.

    ``quarantined``: the ads of the same read that could not be read (the reader's report), so
    that a node one of whose ads was lost is left ``incomplete`` rather than billed without it.
    ``child_lists``: whether a source without dynamic-slot ads is billed from its p-slots'
    ``Child*`` lists (a dump cannot say why it has none; a live query knows what it asked for).

    The pool is checked against itself: a slot ad without a ``Name``, or a dynamic slot's whose
    ``Name`` is not ``slotN_M@host``, and a partitionable slot whose dynamic slots hold more of a
    resource than its ``TotalSlot*`` are quarantined (added to ``tally``) and their node is
    ``incomplete``: not billed, never billed to its neighbours (:func:`incomplete_nodes`).
    """
    unnamed = _unnamed(ads, _dynamic(ads))
    unplaced = np.flatnonzero(unnamed != "")
    for i in unplaced.tolist():
        _quarantine(ads, i, str(unnamed[i]), tally)
    # their node is known by their startd only: every slot of it, in the same source, is incomplete
    unplaced_on = set(_startds(ads)[unplaced].tolist()) if len(unplaced) else set()
    if len(unplaced):
        ads = ads.take(unnamed == "")
    slot_type = pd.Series(ads["SlotType"], dtype=object).fillna("").str.lower().to_numpy()
    dynamic = _dynamic(ads)
    partitionable = ~dynamic & ((slot_type == "partitionable") | (ads["PartitionableSlot"] == True))  # noqa: E712
    observed = _instants(ads)
    site = ads.first(reading.site_attributes, reading.site_default)
    resource = ads.first(reading.resource_attributes)
    name = ads["Name"]
    parents = _parents(name)  # of a dynamic slot; a p-slot's own name elsewhere, unused
    heard, unheard = heard_rules(
        ads, dynamic, parents, site, update_interval_s=reading.update_interval_s, now=now, tally=tally
    )

    # dynamic slots: one allocation each, under the parent named slotN@host; a job on one only
    d = np.flatnonzero(dynamic & heard)
    from_ads = _held(ads, d, parents[d], {r: _zero(ads[_OWN[r]][d]) for r in RESOURCES}, observed, reading.pool)
    last_heard = ads["LastHeardFrom"].astype(np.float64)
    from_ads, _ = one_slot_per_job(from_ads, last_heard, tally)

    # partitionable and static slots
    p = np.flatnonzero(~dynamic & heard)
    is_part = partitionable[p]
    claimed = pd.Series(ads["State"][p], dtype=object).fillna("").str.lower().to_numpy() == "claimed"
    slots = pd.DataFrame(
        {
            "pool": reading.pool,
            "name": name[p],
            "machine": ads["Machine"][p],
            "slot_type": np.where(is_part, "Partitionable", "Static"),
            "state": ads["State"][p],
            "site": site[p],
            "resource_name": resource[p],
        }
    )
    from_lists = is_part & _without_dynamic_ads(ads, p, dynamic) & child_lists
    incomplete = is_part & _quarantined_nodes(ads, p, from_ads, quarantined)
    if unplaced_on:
        incomplete |= is_part & pd.Series(_startds(ads)[p]).isin(unplaced_on).to_numpy(dtype=bool)
    held = _held_sums(from_ads, name[p], observed[p])
    overfull = _overfull(ads, p, is_part & ~from_lists, held, from_ads, observed[p])
    for k, why in overfull.items():
        _quarantine(ads, int(p[k]), why, tally)
        incomplete[k] = True
    for r in RESOURCES:
        own = _zero(ads[_OWN[r]][p])
        size = ads[_TOTAL[r]][p]
        total = np.where(np.isnan(size), own, size)
        slots[f"total_{r}"] = total
        # a p-slot billed from its dynamic-slot ads: its size minus what they hold (its own amounts
        # may still count a released claim, or not yet a new one), never below nothing; from its
        # lists, or with an ad lost, or of unknown size: its own amounts, as its startd last said
        by_ads = np.maximum(size - held[r], 0.0)
        part = np.where(from_lists | incomplete | np.isnan(size), own, by_ads)
        # a static slot is all unallocated until it is claimed, and then not at all
        slots[f"unallocated_{r}"] = np.where(is_part, part, np.where(claimed, 0.0, total))

    # a claimed static slot is held whole by its job
    st = p[~is_part & claimed]
    whole = {r: slots.loc[~is_part & claimed, f"total_{r}"].to_numpy() for r in RESOURCES}
    from_static = _held(ads, st, name[st], whole, observed, reading.pool)
    listed = _child_allocations(ads, p[from_lists], observed, reading.pool)
    allocations = pd.concat([f for f in (from_ads, from_static, listed) if len(f)] or [from_ads], ignore_index=True)
    allocations, _ = one_slot_per_job(allocations, last_heard, tally)  # a static slot's job on a dynamic one too
    allocations = _named(allocations, ads, reading, site, resource)
    allocations["interval_s"] = reading.interval_s
    allocations = allocations.reindex(columns=ALLOCATION_COLUMNS)

    slots["incomplete"] = incomplete
    counts = allocations.groupby(["parent", "observed_at"]).size()
    at = pd.MultiIndex.from_arrays([slots["name"], observed[p]])
    slots["n_dynamic"] = counts.reindex(at).fillna(0).to_numpy(dtype=np.int64)
    slots["speed"] = _attr_or_one(ads, reading.speed_attribute, p)
    slots["node_cost"] = _attr_or_one(ads, reading.cost_attribute, p)
    slots["glidein_to_retire"] = ads["GLIDEIN_ToRetire"][p]
    slots["glidein_to_die"] = ads["GLIDEIN_ToDie"][p]
    slots["observed_at"] = observed[p]
    slots["interval_s"] = reading.interval_s
    slots["source"] = ads.path[p]
    slots["line"] = ads.line[p]
    slots["partition"] = assign_partitions(ads, p, reading.partitions) if ads.raw is not None else None
    for extra in reading.extra_attributes:
        slots[extra] = ads[extra][p]
    slots = slots.reindex(columns=[*SLOT_COLUMNS, *reading.extra_attributes])
    return Snapshot(
        slots=slots.reset_index(drop=True),
        allocations=allocations.reset_index(drop=True),
        ads=ads.raw[p] if ads.raw is not None else None,
        unheard=unheard,
    )


def incomplete_nodes(snapshot: Snapshot) -> list[str]:
    """The nodes of ``snapshot`` left unbilled because what the pool said of them is not whole or
    contradicts itself: those flagged ``incomplete``, and those whose own ad was quarantined (their
    dynamic slots' parent is not in the slots table), by name."""
    flagged = snapshot.slots.loc[snapshot.slots["incomplete"].fillna(False).astype(bool), "name"]
    known = set(snapshot.slots["name"])
    lost = {str(p) for p in snapshot.allocations["parent"].dropna() if p not in known}
    return sorted({str(n) for n in flagged} | lost)


def _dynamic(ads: AdColumns) -> np.ndarray:
    """Whether each ad is of a dynamic slot (its ``SlotType``, else ``DynamicSlot``)."""
    slot_type = pd.Series(ads["SlotType"], dtype=object).fillna("").str.lower().to_numpy()
    out: np.ndarray = (slot_type == "dynamic") | (ads["DynamicSlot"] == True)  # noqa: E712 - object array of bools/None
    return out


def _unnamed(ads: AdColumns, dynamic: np.ndarray) -> np.ndarray:
    """Why each ad cannot be placed on its node ("" where it can): no ``Name``, or a dynamic
    slot's ``Name`` not of the form ``slotN_M@host`` (its parent cannot be known)."""
    name = pd.Series(ads["Name"], dtype=object)
    out = np.full(len(ads), "", dtype=object)
    out[name.isna().to_numpy()] = "no Name (a string) to place the slot on its node"
    odd = dynamic & name.notna().to_numpy() & ~name.fillna("").str.match(_DYNAMIC_NAME).to_numpy(dtype=bool)
    out[odd] = [f"dynamic slot Name {n!r} is not slotN_M@host: its partitionable slot is unknown" for n in name[odd]]
    return out


def _startds(ads: AdColumns) -> np.ndarray:
    """The startd of each ad, in its source: its address (``MyAddress``: two startds of one host,
    a glidein's, have their own), else its ``Machine``."""
    address = ads["MyAddress"] if "MyAddress" in ads.columns else np.full(len(ads), None, dtype=object)
    where = pd.Series(address, dtype=object).fillna(pd.Series(ads["Machine"], dtype=object).str.lower())
    return (pd.Series(ads.path, dtype=object).fillna("").astype(str) + "\0" + where.fillna("").astype(str)).to_numpy()


def _quarantine(ads: AdColumns, row: int, why: str, tally: ReadTally | None) -> Malformed:
    """The ad of ``row`` quarantined for ``why`` (its node left unbilled), counted in ``tally``."""
    raw = ads.raw[row] if ads.raw is not None else None
    text = raw if isinstance(raw, str) else json.dumps(raw, default=str) if isinstance(raw, dict) else ""
    if not text:  # no text kept: what the quarantine needs to find its node
        text = "".join(f'{a} = "{ads[a][row]}"\n' for a in ("Name", "Machine") if isinstance(ads[a][row], str))
    m = Malformed(str(ads.path[row]), int(ads.line[row]), f"{why}; its node is left unbilled (incomplete)", text)
    if tally is not None:
        tally.add_malformed(m)
    return m


def _overfull(
    ads: AdColumns,
    rows: np.ndarray,
    checked: np.ndarray,
    held: dict[str, np.ndarray],
    allocations: pd.DataFrame,
    observed: np.ndarray,
) -> dict[int, str]:
    """The partitionable slots of ``rows`` (where ``checked``) whose dynamic slots hold more of a
    resource than their size (``TotalSlot<r>``), by position in ``rows``, each with why: a node
    that contradicts itself cannot be billed (one of its numbers is wrong, and a wrong one bills
    its neighbours). A slot that does not say its size (a pool older than ``TotalSlot*``) is
    billed from its own amounts, as before: it says nothing to contradict."""
    out: dict[int, str] = {}
    for r in RESOURCES:
        size = ads[_TOTAL[r]][rows]
        with np.errstate(invalid="ignore"):  # NaN (unknown size) compares false
            over = checked & (held[r] > size * (1 + _ROUNDING) + _ROUNDING)
        for k in np.flatnonzero(over).tolist():
            if k in out:
                continue
            name = ads["Name"][rows[k]]
            mine = allocations[(allocations["parent"] == name) & (allocations["observed_at"] == observed[k])]
            listed = ", ".join(f"{n} {v:g}" for n, v in zip(mine["name"], mine[r], strict=True) if v)
            out[k] = (
                f"attribute '{_TOTAL[r]}' = {size[k]:g}, but its dynamic slots hold {held[r][k]:g} {_UNITS[r]} "
                f"({listed}): the node contradicts itself"
            )
    return out


def assign_partitions(ads: AdColumns, rows: np.ndarray, partitions: Sequence[tuple[str, str]]) -> np.ndarray:
    """The first of ``partitions`` (name, ``match`` expression) whose expression is true of
    each slot ad (None if none).

    Evaluated with classad2 against the whole slot ad; a ``match`` of "true" needs no ad.
    """
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


def _held(
    ads: AdColumns,
    rows: np.ndarray,
    parent: np.ndarray,
    amounts: dict[str, np.ndarray],
    observed: np.ndarray,
    pool: str,
) -> pd.DataFrame:
    """Allocations of the slots ``rows`` (dynamic slots, or claimed static slots held whole),
    each under its ``parent`` and holding ``amounts`` of each resource."""
    return pd.DataFrame(
        {
            "pool": pool,
            "name": ads["Name"][rows],
            "parent": parent,
            "job_id": ads["GlobalJobId"][rows],
            "ad_row": rows,  # who holds it and where: _named
            **amounts,
            "from_child_lists": False,
            "observed_at": observed[rows],
        }
    )


def _parents(names: np.ndarray) -> np.ndarray:
    """The partitionable slot (``slotN@host``) of each dynamic slot name (``slotN_M@host``)."""
    return pd.Series(names, dtype=object).str.replace(_DYNAMIC_NAME, r"\1@", regex=True).to_numpy()


def _held_sums(allocations: pd.DataFrame, names: np.ndarray, observed: np.ndarray) -> dict[str, np.ndarray]:
    """What the dynamic slots of each slot (``names``, at ``observed``) hold, per resource."""
    sums = allocations.groupby(["parent", "observed_at"])[list(RESOURCES)].sum()
    at = pd.MultiIndex.from_arrays([names, observed])
    return {r: sums[r].reindex(at).fillna(0.0).to_numpy(dtype=np.float64) for r in RESOURCES}


def _without_dynamic_ads(ads: AdColumns, rows: np.ndarray, dynamic: np.ndarray) -> np.ndarray:
    """Whether each slot of ``rows`` came from a query or dump (its source) that holds no
    dynamic-slot ads at all: there, and only there, its ``Child*`` lists say what it holds."""
    source = pd.Series(ads.path, dtype=object).fillna("")
    with_dynamic = set(source[dynamic])
    return ~source.iloc[rows].isin(with_dynamic).to_numpy(dtype=bool)


def _quarantined_nodes(
    ads: AdColumns, rows: np.ndarray, from_ads: pd.DataFrame, quarantined: Sequence[Malformed]
) -> np.ndarray:
    """Whether an ad of each slot of ``rows`` (its own dynamic slots') was quarantined.

    A quarantined ad left no columns, and its line does not say whose it was; but its text nearly
    always still holds its ``Name`` (a parse fails on one line, not on all), and the node is the
    parent of that name; else its ``Machine``, and every slot of that machine. An ad with neither
    (a region of garbage) may have been any node's: every node that lists a child without an ad
    is suspect. Only slots of the quarantined ad's source are touched, when the source names
    match (a live read names its malformed ads after the query, not after the collector)."""
    names = pd.Series(ads["Name"][rows], dtype=object).str.lower().to_numpy()
    machines = pd.Series(ads["Machine"][rows], dtype=object).str.lower().to_numpy()
    sources = pd.Series(ads.path[rows], dtype=object).to_numpy()
    known_sources = set(pd.Series(ads.path, dtype=object).dropna())
    out = np.zeros(len(rows), dtype=bool)
    for ad in quarantined:
        name, machine = _identity(ad.text)
        if name is not None:
            hit = names == str(_parents(np.array([name.lower()], dtype=object))[0])
        elif machine is not None:
            hit = machines == machine.lower()
        else:
            hit = _unmatched_children(ads, rows, from_ads)
        out |= hit & ((sources == ad.path) if ad.path in known_sources else True)
    return out


def _identity(text: str) -> tuple[str | None, str | None]:
    """The ``Name`` and ``Machine`` an ad's text gives (either None if it cannot be found)."""
    found: dict[str, str] = {}
    for m in _IDENTITY.finditer(text):
        found.setdefault(m[1].lower(), m[2])
    return found.get("name"), found.get("machine")


def _unmatched_children(ads: AdColumns, rows: np.ndarray, from_ads: pd.DataFrame) -> np.ndarray:
    """Whether each slot of ``rows`` lists in ``ChildName`` a child that has no ad here."""
    present = set(pd.Series(from_ads["name"], dtype=object).str.lower())
    return np.array(
        [
            isinstance(listed, list) and any(str(c).lower() not in present for c in listed)
            for listed in ads["ChildName"][rows]
        ],
        dtype=bool,
    )


def _child_allocations(ads: AdColumns, rows: Sequence[int], observed: np.ndarray, pool: str) -> pd.DataFrame:
    """The allocations the ``Child*`` lists of the p-slots ``rows`` give, one per ``ChildCpus``
    entry (none for a p-slot without the lists)."""
    records = []
    for i in rows:
        n = len(ads["ChildCpus"][i]) if isinstance(ads["ChildCpus"][i], list) else 0

        def item(attr: str, k: int, i: int = i) -> Any:  # i bound: the row of this iteration
            values = ads[attr][i]
            return values[k] if isinstance(values, list) and k < len(values) else None

        for k in range(n):
            records.append(
                {
                    "pool": pool,
                    "name": item("ChildName", k),
                    "parent": ads["Name"][i],
                    "job_id": None,
                    "ad_row": i,  # who holds it and where: _named, from the lists' entry ``child``
                    "child": k,
                    **{r: float(item(_CHILD[r], k) or 0) for r in RESOURCES},
                    "from_child_lists": True,
                    "observed_at": observed[i],
                }
            )
    return pd.DataFrame.from_records(records)


def _named(
    allocations: pd.DataFrame, ads: AdColumns, reading: SlotReading, site: np.ndarray, resource: np.ndarray
) -> pd.DataFrame:
    """``allocations`` with who holds each claim (:data:`IDENTITY_COLUMNS`, from the slot
    attributes of ``reading``; for an allocation of a p-slot's ``Child*`` lists, from the same
    attributes' ``Child<name>`` lists) and where (the ``site`` and ``resource`` of its slot's
    ad), without the rows of ``ads`` they came from."""
    rows = allocations["ad_row"].to_numpy(dtype=np.int64)
    listed = allocations["from_child_lists"].to_numpy(dtype=bool)
    children = allocations["child"].to_numpy()[listed] if listed.any() else []
    entries = [(int(r), int(k)) for r, k in zip(rows[listed], children, strict=True)]

    def values(attr: str) -> np.ndarray:
        out: np.ndarray = ads[attr][rows]
        if entries:  # a p-slot's own attribute says nothing of its children: their list entries do
            lists = ads[f"Child{attr}"]
            out[listed] = [_entry(lists[r], k) for r, k in entries]
        return out

    names = identities(values, len(allocations), reading.identity)
    return allocations.drop(columns=["ad_row", "child"], errors="ignore").assign(
        **names, site=site[rows], resource_name=resource[rows]
    )


def _entry(values: Any, k: int) -> str | None:
    """The ``k``-th entry of a ``Child*`` list of names, None where the list is missing or
    shorter or the entry is not a string (``undefined``)."""
    value = values[k] if isinstance(values, list) and k < len(values) else None
    return value if isinstance(value, str) else None


def _zero(values: np.ndarray) -> np.ndarray:
    return np.nan_to_num(values.astype(np.float64), nan=0.0)


def _instants(ads: AdColumns) -> np.ndarray:
    """The instant each ad was observed at: that of its snapshot (the latest ``MyCurrentTime``,
    else ``LastHeardFrom``, of the ads of one snapshot of a file or collector). Startds update at
    their own times, so the ads of one ``condor_status`` differ by seconds; they are one snapshot,
    and a p-slot and its dynamic slots must share its instant to be accounted together.

    A file may hold several snapshots one after the other (``condor_status -long`` run twice into
    it): a slot named again starts the next one, and each is its own instant, read in order. Two
    snapshots that come out at one instant (the same slot, the same second, in two files or twice
    in one) cannot be told apart: the input is refused, naming the slot and both places."""
    own = _first_number(ads, ("MyCurrentTime", "LastHeardFrom"))
    if not len(own):
        return own
    source = pd.Series(ads.path, dtype=object).fillna("").to_numpy()
    names = pd.Series(ads["Name"], dtype=object).str.lower().to_numpy()
    snapshot = _snapshots(source, names)
    instants = pd.Series(own).groupby([source, snapshot]).transform("max").to_numpy(dtype=np.float64)
    twice = pd.DataFrame({"name": names, "at": instants}).duplicated(keep=False).to_numpy()
    if twice.any():
        first, again = np.flatnonzero(twice)[:2]
        raise SourceError(
            f"{source[again]} line {int(ads.line[again])}: the slot {ads['Name'][again]!r} is also at "
            f"{source[first]} line {int(ads.line[first])}, in a snapshot of the same instant ({instants[again]:.0f}, "
            "the latest MyCurrentTime of each): two snapshots of one instant cannot be accounted; give each "
            "condor_status dump once"
        )
    return instants


def _snapshots(source: np.ndarray, names: np.ndarray) -> np.ndarray:
    """Per ad, the number of its snapshot in its file (0, 1, ...): a new one starts at a slot
    named again since the current one started."""
    out = np.zeros(len(names), dtype=np.int64)
    current: dict[object, set[object]] = {}
    number: dict[object, int] = {}
    for i, (path, name) in enumerate(zip(source.tolist(), names.tolist(), strict=True)):
        seen = current.setdefault(path, set())
        if name is not None and name in seen:
            number[path] = number.get(path, 0) + 1
            seen = current[path] = set()
        seen.add(name)
        out[i] = number.get(path, 0)
    return out


def _first_number(ads: AdColumns, names: Sequence[str]) -> np.ndarray:
    out = ads[names[0]].astype(np.float64).copy()
    for name in names[1:]:
        missing = np.isnan(out)
        out[missing] = ads[name][missing]
    return out


def _attr_or_one(ads: AdColumns, attr: str, rows: np.ndarray) -> np.ndarray:
    if not attr:
        return np.ones(len(rows))
    values = ads[attr][rows].astype(np.float64)
    return np.where(np.isnan(values), 1.0, values)
