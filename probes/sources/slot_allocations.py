"""The allocations of a snapshot, built from startd ads: a dynamic slot's own, a claimed static
slot held whole, and the entries of a partitionable slot's ``Child*`` lists; each named after who
holds it and where (:func:`named`).

Units are HTCondor's: cpus in cores, memory in MiB, disk in KiB, gpus in devices, times in UNIX
seconds (UTC).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from probes.accounting import RESOURCES
from probes.sources.classad import AdColumns
from probes.sources.credentials import identities
from probes.sources.settings import SlotReading

__all__ = [
    "CHILD",
    "DYNAMIC_NAME",
    "OWN",
    "TOTAL",
    "child_allocations",
    "dynamic_slots",
    "held",
    "held_sums",
    "named",
    "parents",
    "partitionable_slots",
    "without_dynamic_ads",
    "zero",
]

#: A slot's own amounts, per resource: a p-slot's are what its startd last said is unallocated.
OWN = {"cpus": "Cpus", "memory": "Memory", "disk": "Disk", "gpus": "GPUs"}
#: What a p-slot's ``Child*`` lists say its dynamic slots hold, per resource.
CHILD = {"cpus": "ChildCpus", "memory": "ChildMemory", "disk": "ChildDisk", "gpus": "ChildGPUs"}
#: A slot's size, per resource.
TOTAL = {"cpus": "TotalSlotCpus", "memory": "TotalSlotMemory", "disk": "TotalSlotDisk", "gpus": "TotalSlotGPUs"}
#: A dynamic slot's ``Name``, ``slotN_M@host``: its parent is ``slotN@host``.
DYNAMIC_NAME = re.compile(r"^(slot\d+)_\d+@")


def dynamic_slots(ads: AdColumns) -> np.ndarray:
    """Whether each ad is of a dynamic slot (its ``SlotType``, else ``DynamicSlot``)."""
    slot_type = pd.Series(ads["SlotType"], dtype=object).fillna("").str.lower().to_numpy()
    out: np.ndarray = (slot_type == "dynamic") | (ads["DynamicSlot"] == True)  # noqa: E712 - object array of bools/None
    return out


def held(
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
            "ad_row": rows,  # who holds it and where: named
            **amounts,
            "from_child_lists": False,
            "observed_at": observed[rows],
        }
    )


def parents(names: np.ndarray) -> np.ndarray:
    """The partitionable slot (``slotN@host``) of each dynamic slot name (``slotN_M@host``)."""
    return pd.Series(names, dtype=object).str.replace(DYNAMIC_NAME, r"\1@", regex=True).to_numpy()


def held_sums(allocations: pd.DataFrame, names: np.ndarray, observed: np.ndarray) -> dict[str, np.ndarray]:
    """What the dynamic slots of each slot (``names``, at ``observed``) hold, per resource."""
    sums = allocations.groupby(["parent", "observed_at"])[list(RESOURCES)].sum()
    at = pd.MultiIndex.from_arrays([names, observed])
    return {r: sums[r].reindex(at).fillna(0.0).to_numpy(dtype=np.float64) for r in RESOURCES}


def child_allocations(ads: AdColumns, rows: Sequence[int], observed: np.ndarray, pool: str) -> pd.DataFrame:
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
                    "ad_row": i,  # who holds it and where: named, from the lists' entry ``child``
                    "child": k,
                    **{r: float(item(CHILD[r], k) or 0) for r in RESOURCES},
                    "from_child_lists": True,
                    "observed_at": observed[i],
                }
            )
    return pd.DataFrame.from_records(records)


def named(
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


def zero(values: np.ndarray) -> np.ndarray:
    """``values`` as float64, a missing amount (NaN) as none."""
    return np.nan_to_num(values.astype(np.float64), nan=0.0)


def without_dynamic_ads(snapshot: np.ndarray, rows: np.ndarray, dynamic: np.ndarray) -> np.ndarray:
    """Whether each slot of ``rows`` is of a snapshot (a query, a dump, or the files that are
    parts of one) that holds no dynamic-slot ads at all: there, and only there, its ``Child*``
    lists say what it holds (a dump's p-slots beside their dynamic slots' file: billed once)."""
    with_dynamic = set(snapshot[dynamic].tolist())
    return ~pd.Series(snapshot[rows]).isin(with_dynamic).to_numpy(dtype=bool)


def partitionable_slots(ads: AdColumns) -> np.ndarray:
    """Whether each ad is of a partitionable slot (its ``SlotType``, else ``PartitionableSlot``)."""
    slot_type = pd.Series(ads["SlotType"], dtype=object).fillna("").str.lower().to_numpy()
    out: np.ndarray = (slot_type == "partitionable") | (ads["PartitionableSlot"] == True)  # noqa: E712
    return out
