"""The pool checked against itself (issue 41): the startd ads a snapshot sets aside, and why.

A slot ad without a ``Name``, or a dynamic slot's whose ``Name`` is not ``slotN_M@host``
(:func:`unnamed`), and a partitionable slot whose dynamic slots hold more of a resource than its
``TotalSlot*``, or whose ``TotalSlotMemory`` is more than its machine's ``TotalMemory`` (a size in
KiB, not MiB: :func:`overfull`), are quarantined (:func:`quarantine`, a :class:`Malformed` the
caller adds to its read's report) and their node left ``incomplete``; so is a node one of whose
ads the reader could not read (:func:`quarantined_nodes`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

import numpy as np
import pandas as pd

from probes.accounting import RESOURCES
from probes.sources.classad import AdColumns
from probes.sources.report import Malformed
from probes.sources.slot_allocations import DYNAMIC_NAME, TOTAL, parents

__all__ = ["MACHINE_MEMORY", "overfull", "quarantine", "quarantined_nodes", "startds", "unnamed"]

# ``Name = "..."`` (-long) or ``"Name": "..."`` (-json), not ``ChildName``: the identity of an ad
# that could not be read as a whole
_IDENTITY = re.compile(r'''(?im)(?:^|[{,\s])"?(Name|Machine)"?\s*[=:]\s*"([^"\\\n]*)"''')
_UNITS = {"cpus": "cores", "memory": "MiB", "disk": "KiB", "gpus": "devices"}
#: A node's dynamic slots may hold no more than its size: past this (relative) rounding, it
#: contradicts itself (a ``Cpus`` or a ``TotalSlotCpus`` is wrong, or a claim is counted twice).
_ROUNDING = 1e-9
#: The memory of a slot's machine (MiB), which no slot of it is larger than: a ``TotalSlotMemory``
#: above it is in another unit (KiB: every memory bill of the node 1,024 times too large).
MACHINE_MEMORY = "TotalMemory"


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
            hit = names == str(parents(np.array([name.lower()], dtype=object))[0])
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
