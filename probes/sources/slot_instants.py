"""The instant each startd ad was observed at: that of its snapshot (a ``condor_status`` run).

An ad whose ``MyCurrentTime`` or ``LastHeardFrom`` is after the time of reading (a startd or
collector whose clock went wrong, a damaged value: :mod:`probes.sources.future`) moves no
snapshot's instant (nor, :mod:`probes.sources.unheard`, which nodes are heard from): a dump's
reader sets it aside (:func:`set_aside_future`), its node left incomplete.

Times are UNIX seconds (UTC).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np
import pandas as pd

from probes.errors import SourceError
from probes.sources.classad import AdColumns
from probes.sources.future import credible, from_the_future
from probes.sources.report import ReadTally
from probes.sources.slot_allocations import dynamic_slots, parents
from probes.sources.slot_checks import quarantine

__all__ = [
    "LIFETIME_S",
    "OWN_TIMES",
    "first_number",
    "instants",
    "newest_credible",
    "set_aside_future",
    "snapshot_instants",
]

#: The times a startd ad says it was observed at: the startd's clock, then the collector's.
OWN_TIMES = ("MyCurrentTime", "LastHeardFrom")

#: HTCondor's ``CLASSAD_LIFETIME`` default (s): the ads of one collector's answer were all heard
#: within it of each other (an older one is dropped), so parts of one dump are no further apart.
LIFETIME_S = 900.0


def set_aside_future(ads: AdColumns, tally: ReadTally, now: float | None = None) -> AdColumns:
    """``ads`` without those whose :data:`OWN_TIMES` are after the time of reading (``now``, else
    the clock's), each quarantined in ``tally`` with why: its node is left incomplete (the
    snapshot reader finds it by the quarantined ad's ``Name``)."""
    reasons = from_the_future({a: ads[a] for a in OWN_TIMES}, time.time() if now is None else now)
    if not reasons:
        return ads
    for row, why in sorted(reasons.items()):
        tally.add_malformed(quarantine(ads, row, why))
    keep = np.ones(len(ads), dtype=bool)
    keep[list(reasons)] = False
    return ads.take(keep)


def instants(ads: AdColumns) -> np.ndarray:
    """:func:`snapshot_instants`' instants, each ad's type read from it."""
    return snapshot_instants(ads, dynamic_slots(ads))[0]


def snapshot_instants(ads: AdColumns, dynamic: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The instant each ad was observed at: that of its snapshot (the latest ``MyCurrentTime``,
    else ``LastHeardFrom``, of the ads of one snapshot of a file or collector). Startds update at
    their own times, so the ads of one ``condor_status`` differ by seconds; they are one snapshot,
    and a p-slot and its dynamic slots must share its instant to be accounted together.

    A file may hold several snapshots one after the other (``condor_status -long`` run twice into
    it): a slot named again starts the next one, and each is its own instant, read in order. Two
    snapshots that come out at one instant (the same slot, the same second, in two files or twice
    in one) cannot be told apart: the input is refused, naming the slot and both places.

    One dump may also come in parts, files given together (issue 51: a p-slot in one, its dynamic
    slots in another): a snapshot whose dynamic slot's p-slot is not in it but in one snapshot of
    another file, with no slot of both, within :data:`LIFETIME_S` of it, is one snapshot with it
    (one instant, the latest of both). Parts that cannot be told (the p-slot in two such files), or
    that are further apart, are refused with the reason. Returns (the instants, each ad's snapshot
    as a number: the same for the parts of one); ``dynamic``: which ads are dynamic slots."""
    own = first_number(ads, OWN_TIMES)
    if not len(own):
        return own, np.zeros(0, dtype=np.int64)
    source = pd.Series(ads.path, dtype=object).fillna("").to_numpy()
    names = pd.Series(ads["Name"], dtype=object).str.lower().to_numpy()
    within = _snapshots(source, names)
    group = pd.factorize(pd.Series(source).astype(str) + "\0" + pd.Series(within).astype(str))[0]
    # an ad from the future stands at its snapshot's instant (the newest of the others), as one
    # without a time does
    instants = newest_credible(own, [group])
    group, instants = _parts(ads, dynamic, source, names, group, instants)
    twice = pd.DataFrame({"name": names, "at": instants}).duplicated(keep=False).to_numpy()
    if twice.any():
        first, again = np.flatnonzero(twice)[:2]
        raise SourceError(
            f"{source[again]} line {int(ads.line[again])}: the slot {ads['Name'][again]!r} is also at "
            f"{source[first]} line {int(ads.line[first])}, in a snapshot of the same instant ({instants[again]:.0f}, "
            "the latest MyCurrentTime of each): two snapshots of one instant cannot be accounted; give each "
            "condor_status dump once"
        )
    return instants, group


def _parts(
    ads: AdColumns, dynamic: np.ndarray, source: np.ndarray, names: np.ndarray, group: np.ndarray, at: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``group`` and ``at`` with the snapshots that are parts of one dump joined (see
    :func:`snapshot_instants`)."""
    in_group = pd.DataFrame({"name": names, "group": group}).dropna()
    members = in_group.groupby("group")["name"].agg(set).to_dict()
    where: dict[object, list[int]] = {}
    for n, g in zip(in_group["name"].tolist(), in_group["group"].tolist(), strict=True):
        where.setdefault(n, []).append(int(g))
    parent = parents(names)
    joined = {int(g): int(g) for g in np.unique(group).tolist()}

    def root(g: int) -> int:
        while joined[g] != g:
            g = joined[g]
        return g

    for i in np.flatnonzero(dynamic & pd.notna(parent)).tolist():
        g, p = int(group[i]), parent[i]
        if p in members.get(g, ()):
            continue
        apart = [h for h in where.get(p, []) if source[group == h][0] != source[i] and not members[h] & members[g]]
        if not apart:
            continue  # its p-slot in no other part: an orphan, set aside where it is billed
        place = f"{source[i]} line {int(ads.line[i])}"
        if len(apart) > 1:
            raise SourceError(
                f"{place}: the dynamic slot {ads['Name'][i]!r} has its partitionable slot {p!r} in "
                f"{len(apart)} other files ({', '.join(sorted({source[group == h][0] for h in apart}))}): which "
                "dump it is a part of cannot be told; give the parts of one condor_status dump together, or each "
                "dump whole"
            )
        h = apart[0]
        gap = abs(float(at[group == g][0]) - float(at[group == h][0]))
        if gap > LIFETIME_S:
            raise SourceError(
                f"{place}: the dynamic slot {ads['Name'][i]!r} has its partitionable slot {p!r} only in "
                f"{source[group == h][0]}, a dump {gap:.0f} s apart (more than the {LIFETIME_S:.0f} s a collector "
                "keeps an ad): not parts of one dump; give each condor_status dump whole"
            )
        joined[root(g)] = root(h)
    merged = np.array([root(int(g)) for g in group.tolist()], dtype=np.int64)
    if (merged != group).any():
        at = pd.Series(at).groupby(merged).transform("max").to_numpy(dtype=np.float64)
    return merged, at


def newest_credible(times: np.ndarray, groups: list[np.ndarray]) -> np.ndarray:
    """Per time, the newest of ``times`` (UTC s) of its group that is not after the time of
    reading (:func:`~probes.sources.future.credible`); of a group all of whose times are after it, their newest."""
    return _newest(times, np.isnan(credible(times)) & ~np.isnan(times), groups)


def _newest(times: np.ndarray, later: np.ndarray, groups: list[np.ndarray]) -> np.ndarray:
    by = pd.Series(np.where(later, np.nan, times)).groupby(groups)
    newest = by.transform("max").to_numpy(dtype=np.float64)
    every = pd.Series(times).groupby(groups).transform("max").to_numpy(dtype=np.float64)
    out: np.ndarray = np.where(np.isnan(newest), every, newest)
    return out


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


def first_number(ads: AdColumns, names: Sequence[str]) -> np.ndarray:
    """Per ad, the first of the numeric attributes ``names`` it has (NaN if none)."""
    out = ads[names[0]].astype(np.float64).copy()
    for name in names[1:]:
        missing = np.isnan(out)
        out[missing] = ads[name][missing]
    return out
