"""The pool checked against itself (issue 41): the startd ads a snapshot sets aside, and why.

A slot ad without a ``Name``, or a dynamic slot's whose ``Name`` is not ``slotN_M@host``
(:func:`unnamed`), and a partitionable slot whose dynamic slots hold more of a resource than its
``TotalSlot*``, or whose ``TotalSlotMemory`` is more than its machine's ``TotalMemory`` (a size in
KiB, not MiB: :func:`overfull`), are quarantined (:func:`quarantine`, a :class:`Malformed` the
caller adds to its read's report) and their node left ``incomplete``; so is a node one of whose
ads the reader could not read (:func:`quarantined_nodes`), that of a dynamic slot without its
partitionable slot (:func:`orphans`, :func:`of_nodes`), and a partitionable slot whose ``Child*``
lists are not amounts (:func:`bad_child_lists`, :func:`past_64_bits`), issue 51.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Sequence

import numpy as np
import pandas as pd

from probes.accounting import RESOURCES
from probes.sources.classad import AdColumns
from probes.sources.classad.limits import AMOUNT
from probes.sources.report import Malformed
from probes.sources.slot_allocations import CHILD, DYNAMIC_NAME, TOTAL, parents

__all__ = [
    "MACHINE_MEMORY",
    "ORPHAN",
    "bad_child_lists",
    "of_nodes",
    "orphans",
    "overfull",
    "past_64_bits",
    "quarantine",
    "quarantined_nodes",
    "startds",
    "unnamed",
]

#: The reason counted for a dynamic slot whose partitionable slot is not in its snapshot.
ORPHAN = (
    "Name: dynamic slot whose partitionable slot is not in its snapshot (renamed, or its ad lost), not billed; "
    "the slots of its startd are left unbilled (incomplete)"
)

# ``Name = "..."`` (-long) or ``"Name": "..."`` (-json), not ``ChildName``: the identity of an ad
# that could not be read as a whole
_IDENTITY = re.compile(r'''(?im)(?:^|[{,\s])"?(Name|Machine|MyAddress)"?\s*[=:]\s*"([^"\\\n]*)"''')
_UNITS = {"cpus": "cores", "memory": "MiB", "disk": "KiB", "gpus": "devices"}
#: A node's dynamic slots may hold no more than its size: past this (relative) rounding, it
#: contradicts itself (a ``Cpus`` or a ``TotalSlotCpus`` is wrong, or a claim is counted twice).
_ROUNDING = 1e-9
#: The memory of a slot's machine (MiB), which no slot of it is larger than: a ``TotalSlotMemory``
#: above it is in another unit (KiB: every memory bill of the node 1,024 times too large).
MACHINE_MEMORY = "TotalMemory"
#: A ``Child*`` list line and the long integers in it: one past 64 bits, classad2 reads as 0 in a
#: list (a single value the reader reads itself, as a real, and the limits refuse).
_CHILD_LIST = re.compile(r"(?m)^[ \t]*(Child[A-Za-z]+)[ \t]*=[ \t]*\{([^\n]*)")
_LONG_INTEGER = re.compile(r"(?<![\w.])-?\d{19,}(?![\w.])")


def unnamed(ads: AdColumns, dynamic: np.ndarray) -> np.ndarray:
    """Why each ad cannot be placed on its node ("" where it can): no ``Name``, or a dynamic
    slot's ``Name`` not of the form ``slotN_M@host`` (its parent cannot be known)."""
    name = pd.Series(ads["Name"], dtype=object)
    out = np.full(len(ads), "", dtype=object)
    out[name.isna().to_numpy()] = "no Name (a string) to place the slot on its node"
    odd = dynamic & name.notna().to_numpy() & ~name.fillna("").str.match(DYNAMIC_NAME).to_numpy(dtype=bool)
    out[odd] = [f"dynamic slot Name {n!r} is not slotN_M@host: its partitionable slot is unknown" for n in name[odd]]
    return out


def startds(ads: AdColumns) -> np.ndarray:
    """The startd of each ad, in its source: its address (``MyAddress``: two startds of one host,
    a glidein's, have their own), else its ``Machine``."""
    address = ads["MyAddress"] if "MyAddress" in ads.columns else np.full(len(ads), None, dtype=object)
    where = pd.Series(address, dtype=object).fillna(pd.Series(ads["Machine"], dtype=object).str.lower())
    return (pd.Series(ads.path, dtype=object).fillna("").astype(str) + "\0" + where.fillna("").astype(str)).to_numpy()


def quarantine(ads: AdColumns, row: int, why: str) -> Malformed:
    """The ad of ``row`` quarantined for ``why`` (its node left unbilled): what the caller sets
    aside in its read's report."""
    raw = ads.raw[row] if ads.raw is not None else None
    text = raw if isinstance(raw, str) else json.dumps(raw, default=str) if isinstance(raw, dict) else ""
    if not text:  # no text kept: what the quarantine needs to find its node
        text = "".join(f'{a} = "{ads[a][row]}"\n' for a in ("Name", "Machine") if isinstance(ads[a][row], str))
    return Malformed(str(ads.path[row]), int(ads.line[row]), f"{why}; its node is left unbilled (incomplete)", text)


def overfull(
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
    billed from its own amounts, as before: it says nothing to contradict. A ``TotalSlotMemory``
    larger than its machine's :data:`MACHINE_MEMORY` (where the ad says it) contradicts it too."""
    out = _beyond_machine(ads, rows, checked)
    for r in RESOURCES:
        size = ads[TOTAL[r]][rows]
        with np.errstate(invalid="ignore"):  # NaN (unknown size) compares false
            over = checked & (held[r] > size * (1 + _ROUNDING) + _ROUNDING)
        for k in np.flatnonzero(over).tolist():
            if k in out:
                continue
            name = ads["Name"][rows[k]]
            mine = allocations[(allocations["parent"] == name) & (allocations["observed_at"] == observed[k])]
            listed = ", ".join(f"{n} {v:g}" for n, v in zip(mine["name"], mine[r], strict=True) if v)
            out[k] = (
                f"attribute '{TOTAL[r]}' = {size[k]:g}, but its dynamic slots hold {held[r][k]:g} {_UNITS[r]} "
                f"({listed}): the node contradicts itself"
            )
    return out


def _beyond_machine(ads: AdColumns, rows: np.ndarray, checked: np.ndarray) -> dict[int, str]:
    """The slots of ``rows`` (where ``checked``) larger than their machine in memory, with why."""
    if MACHINE_MEMORY not in ads.columns:
        return {}
    size, machine = ads[TOTAL["memory"]][rows], ads[MACHINE_MEMORY][rows]
    with np.errstate(invalid="ignore"):  # NaN (not said) compares false
        over = checked & (size > machine * (1 + _ROUNDING) + _ROUNDING)
    return {
        k: f"attribute '{TOTAL['memory']}' = {size[k]:g}, more than its machine's {MACHINE_MEMORY} = {machine[k]:g} "
        "MiB (a size in KiB?): the node contradicts itself"
        for k in np.flatnonzero(over).tolist()
    }


def quarantined_nodes(
    ads: AdColumns,
    rows: np.ndarray,
    from_ads: pd.DataFrame,
    quarantined: Sequence[Malformed],
    linked: Callable[[str], Iterable[str]] = lambda path: (),
) -> np.ndarray:
    """Whether an ad of each slot of ``rows`` (its own dynamic slots') was quarantined.

    A quarantined ad left no columns, and its line does not say whose it was; but its text nearly
    always still holds its ``Name`` (a parse fails on one line, not on all), and the node is the
    parent of that name; else its ``Machine``, and every slot of that machine. An ad with neither
    (a region of garbage) may have been any node's: every node that lists a child without an ad
    is suspect. Only slots of the quarantined ad's source are touched, when the source names
    match (a live read names its malformed ads after the query, not after the collector), and of
    the files ``linked`` to it (parts of one dump: the paths of its snapshot)."""
    names = pd.Series(ads["Name"][rows], dtype=object).str.lower().to_numpy()
    address = ads["MyAddress"] if "MyAddress" in ads.columns else np.full(len(ads), None, dtype=object)
    addresses = pd.Series(address[rows], dtype=object).str.lower().to_numpy()
    machines = pd.Series(ads["Machine"][rows], dtype=object).str.lower().to_numpy()
    sources = pd.Series(ads.path[rows], dtype=object).to_numpy()
    known_sources = set(pd.Series(ads.path, dtype=object).dropna())
    out = np.zeros(len(rows), dtype=bool)
    for ad in quarantined:
        found = _identity(ad.text)
        where = ((sources == ad.path) if ad.path in known_sources else True) | _isin(sources, linked(ad.path))
        # the parents of its names (two ads merged name two nodes), else its startds, else its
        # machines, else any node that lists a child without an ad: a name that places it on no
        # node here (its own p-slot's, set aside; one garbled by NUL bytes) as if it had none
        hit = _isin(names, parents(np.array(found["name"], dtype=object)).tolist()) & where
        if not hit.any():
            hit = _isin(addresses, found["myaddress"]) & where
        if not hit.any() and not found["myaddress"]:
            hit = _isin(machines, found["machine"]) & where
        if not hit.any() and not found["myaddress"] and not found["machine"]:
            hit = _unmatched_children(ads, rows, from_ads) & where
        out |= hit
    return out


def _isin(values: np.ndarray, wanted: Iterable[object]) -> np.ndarray:
    """Whether each of ``values`` (objects, None among them) is one of ``wanted``."""
    return pd.Series(values, dtype=object).isin(list(wanted)).to_numpy(dtype=bool)


def _identity(text: str) -> dict[str, list[str]]:
    """The ``Name``, ``Machine`` and ``MyAddress`` values an ad's text gives (case-folded), by
    attribute (lower case)."""
    found: dict[str, list[str]] = {"name": [], "machine": [], "myaddress": []}
    for m in _IDENTITY.finditer(text):
        found[m[1].lower()].append(m[2].lower())
    return found


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


def orphans(parent: np.ndarray, observed: np.ndarray, node_names: np.ndarray, node_observed: np.ndarray) -> np.ndarray:
    """Whether each dynamic slot (its ``parent`` name, ``observed`` at) has no partitionable slot
    of that name at its instant among the nodes (``node_names`` at ``node_observed``)."""
    known = pd.MultiIndex.from_arrays([pd.Series(node_names, dtype=object).str.lower(), node_observed])
    mine = pd.MultiIndex.from_arrays([pd.Series(parent, dtype=object).str.lower(), observed])
    return ~mine.isin(known)


def of_nodes(ads: AdColumns, rows: np.ndarray, lost: np.ndarray, where: np.ndarray) -> np.ndarray:
    """Whether each slot of ``rows`` is of the startd (:func:`startds`, within its snapshot
    ``where``) of an ad of ``lost`` (rows too)."""
    if not len(lost):
        return np.zeros(len(rows), dtype=bool)
    startd = pd.Series(startds(ads), dtype=object).str.split("\0", n=1).str[1].fillna("")
    key = pd.Series(where, dtype=object).astype(str) + "\0" + startd
    return key.iloc[rows].isin(set(key.iloc[lost])).to_numpy(dtype=bool)


def bad_child_lists(ads: AdColumns, rows: np.ndarray) -> dict[int, str]:
    """The partitionable slots of ``rows`` whose ``Child*`` lists hold an amount that is not one
    (negative, past 2^53, undefined, not a number), by position in ``rows``, each with why: such lists
    cannot be billed from (one entry is wrong, and its share would go to the others)."""
    out: dict[int, str] = {}
    low, high = AMOUNT
    for k, text in enumerate(ads.raw[rows].tolist() if ads.raw is not None else []):
        if isinstance(text, str) and (huge := past_64_bits(text)):
            out[k] = f"attribute '{huge[0]}' holds {huge[1]}, an integer past 64 bits (classad2 reads it as 0)"
    for r, attr in CHILD.items():
        for k, values in enumerate(ads[attr][rows].tolist()):
            if k in out or not isinstance(values, list):
                continue
            for v in values:
                number = isinstance(v, int | float) and not isinstance(v, bool)
                if not (number and low <= float(v) < high):  # undefined too: HTCondor lists amounts
                    out[k] = f"attribute '{attr}' holds {v!r}: expected amounts of {_UNITS[r]} from 0 to below 2^53"
                    break
    return out


def past_64_bits(text: str) -> tuple[str, str] | None:
    """The first ``Child*`` list of an ad's text holding an integer past 64 bits, and it."""
    if "Child" not in text:
        return None
    for line in _CHILD_LIST.finditer(text):
        for number in _LONG_INTEGER.findall(line[2]):
            if not -(2**63) <= int(number) < 2**63:
                return line[1], number
    return None
