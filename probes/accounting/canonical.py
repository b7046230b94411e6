"""Canonical units and the true overhead of a node (Andrijauskas et al. 2023, "Defining a
canonical unit for accounting purposes", sections 3 and 4).

A *canonical unit* (CU) is a threshold per resource, e.g. ``{cpus: 1, memory: 2048}`` for CPU
nodes or ``{gpus: 1}`` for GPU nodes. The *true overhead* of a node is the number of whole CUs
that are still unallocated in every resource of the definition at once:

    overhead_cu = min over r with threshold_r > 0 of floor(unallocated_r / threshold_r)

Leftovers idle in one dimension only (all cores busy, memory free) are not overhead: no job
could have used them.

Units are HTCondor's throughout: cpus = cores, memory = MiB, disk = KiB, gpus = devices
(the paper's "2 GB" is taken as 2048 MiB, HTCondor's memory unit).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

import numpy as np
import numpy.typing as npt
import pandas as pd

from probes.accounting._tables import RESOURCES, require_columns

__all__ = ["RESOURCES", "CanonicalUnit", "row_thresholds", "true_overhead"]

# floor(4096 / 2048) is exact, but thresholds such as 0.1 core or sums of float memory are
# not: 0.3 / 0.1 == 2.9999999999999996. A relative nudge well below one unit keeps such
# quotients on the integer they mean without ever rounding a real 2.9 up to 3.
_FLOOR_EPS = 1e-9

# Above 2**53 a float no longer holds every integer; no real node comes near this, but a
# tiny threshold on a huge disk must not overflow the integer column.
_MAX_CU = float(2**53)


@dataclass(frozen=True)
class CanonicalUnit:
    """The canonical unit definition of one partition.

    ``thresholds`` maps a resource of :data:`RESOURCES` to its threshold in HTCondor's unit
    (cores, MiB, KiB, devices). Only resources with a threshold > 0 take part in the
    definition; a missing resource is the same as a threshold of 0. At least one threshold
    must be > 0.
    """

    partition: str
    thresholds: Mapping[str, float]

    def __post_init__(self) -> None:
        if not isinstance(self.partition, str):
            raise TypeError(f"canonical unit partition must be a string, got {self.partition!r}")
        if not self.partition:
            raise ValueError("canonical unit partition must be a non-empty string, got ''")
        if not isinstance(self.thresholds, Mapping):
            raise TypeError(
                f"thresholds of partition {self.partition!r} must be a mapping of resource to "
                f"threshold, got {type(self.thresholds).__name__}"
            )
        unknown = sorted(str(r) for r in self.thresholds if r not in RESOURCES)
        if unknown:
            raise ValueError(
                f"thresholds of partition {self.partition!r} name unknown resources {unknown}; "
                f"expected some of {list(RESOURCES)}"
            )
        clean: dict[str, float] = {}
        for resource in RESOURCES:
            if resource not in self.thresholds:
                continue
            value = self.thresholds[resource]
            # bool is an int subclass; True as "1 core" is far more likely a config slip.
            if isinstance(value, bool) or not isinstance(value, (int, float, np.number)):
                raise TypeError(f"{resource} threshold of partition {self.partition!r} must be a number, got {value!r}")
            number = float(value)
            if not math.isfinite(number) or number < 0:
                raise ValueError(
                    f"{resource} threshold of partition {self.partition!r} must be a finite number >= 0, got {value!r}"
                )
            if number > 0:  # 0 is the same as absent; dropping it makes equal units compare equal
                clean[resource] = number
        if not clean:
            raise ValueError(
                f"canonical unit of partition {self.partition!r} needs at least one threshold "
                f"> 0, got {dict(self.thresholds)!r}"
            )
        # A read-only copy: the caller's dict changing later must not change a frozen unit.
        object.__setattr__(self, "thresholds", MappingProxyType(clean))

    def __hash__(self) -> int:
        return hash((self.partition, tuple(sorted(self.thresholds.items()))))

    @property
    def resources(self) -> tuple[str, ...]:
        """The resources that take part (threshold > 0), in :data:`RESOURCES` order."""
        return tuple(r for r in RESOURCES if self.thresholds.get(r, 0.0) > 0)

    def threshold(self, resource: str) -> float:
        """The threshold of ``resource`` (0.0 when it does not take part)."""
        if resource not in RESOURCES:
            raise ValueError(f"unknown resource {resource!r}; expected one of {list(RESOURCES)}")
        return float(self.thresholds.get(resource, 0.0))


def _check_units(units: Mapping[str, CanonicalUnit]) -> None:
    if not isinstance(units, Mapping):
        raise TypeError(f"units must be a mapping of partition name to CanonicalUnit, got {type(units).__name__}")
    for name, unit in units.items():
        if not isinstance(unit, CanonicalUnit):
            raise TypeError(f"units[{name!r}] must be a CanonicalUnit, got {type(unit).__name__}")
        if unit.partition != name:
            raise ValueError(
                f"units[{name!r}] is the canonical unit of partition {unit.partition!r}; "
                "the key and the partition must agree"
            )


def row_thresholds(
    partition: pd.Series, units: Mapping[str, CanonicalUnit], input_name: str
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.bool_]]:
    """Thresholds of every row's partition, as an ``(n, len(RESOURCES))`` array.

    Returns ``(thresholds, unmatched)``; rows whose partition is missing (None/NaN) get all
    zeros and ``unmatched`` True. A partition name with no definition in ``units`` is a
    configuration error, not an unmatched slot, so it raises ``ValueError``.
    """
    _check_units(units)
    names = list(units)
    missing = partition.isna().to_numpy(dtype=bool)
    # One hash lookup per row maps it to its definition (-1 = missing or not in `names`).
    codes = np.asarray(
        pd.Index(names, dtype=object).get_indexer(pd.Index(partition.to_numpy(dtype=object))),
        dtype=np.int64,
    )
    unknown = (codes < 0) & ~missing
    if unknown.any():
        bad = sorted({str(p) for p in partition.to_numpy()[unknown]})
        raise ValueError(
            f"{input_name} has partitions {bad} that have no canonical unit definition; defined partitions are {names}"
        )
    table = np.zeros((len(names) + 1, len(RESOURCES)), dtype=np.float64)
    for i, name in enumerate(names):
        table[i] = [units[name].threshold(r) for r in RESOURCES]
    # The extra last row (all zeros) is where unmatched rows point.
    codes = np.where(codes < 0, len(names), codes)
    return table[codes], missing


def true_overhead(slots: pd.DataFrame, units: Mapping[str, CanonicalUnit]) -> pd.DataFrame:
    """True overhead of every slot, in canonical units and per resource.

    ``slots`` needs, one row per partitionable (or static) slot at one instant:

    - ``partition`` (str): the key of ``units`` whose definition applies; None/NaN for a slot
      that matched no partition.
    - ``total_<r>`` and ``unallocated_<r>`` for r in :data:`RESOURCES` (float; cores, MiB,
      KiB, devices).
    - ``interval_s`` (float, seconds): how long this observation stands for.

    Returns a copy of ``slots`` (the input is not modified) with these columns added:

    - ``overhead_cu`` (Int64): ``min over the definition's r of floor(unallocated_r /
      threshold_r)``, clipped at 0; <NA> for unmatched slots and for slots where a resource
      of the definition is NaN (unknown).
    - ``unmatched`` (bool): the slot had no partition.
    - ``overhead_<r>`` (float, resource units): ``overhead_cu * threshold_r``; 0 for
      resources outside the definition, NaN where ``overhead_cu`` is <NA>.
    - ``overhead_cu_hours`` (float): ``overhead_cu * interval_s / 3600``.
    """
    unallocated_cols = [f"unallocated_{r}" for r in RESOURCES]
    require_columns(
        slots,
        ["partition", *[f"total_{r}" for r in RESOURCES], *unallocated_cols, "interval_s"],
        "slots table",
    )
    thresholds, unmatched = row_thresholds(slots["partition"], units, "slots table")
    unallocated = slots[unallocated_cols].to_numpy(dtype=np.float64)

    with np.errstate(divide="ignore", invalid="ignore"):
        quotient = unallocated / thresholds
        quotient = np.floor(quotient + _FLOOR_EPS * np.maximum(1.0, np.abs(quotient)))
        # Resources outside the definition must never be the minimum.
        per_resource = np.where(thresholds > 0, quotient, np.inf)
    # np.min propagates NaN, so an unknown amount of a defining resource gives unknown overhead.
    cu = per_resource.min(axis=1)
    cu[unmatched] = np.nan  # all-inf rows: no definition, so no overhead to speak of
    cu = np.clip(cu, 0.0, _MAX_CU)

    out = slots.copy()
    out["overhead_cu"] = pd.array(cu, dtype="Int64")
    out["unmatched"] = unmatched
    for i, r in enumerate(RESOURCES):
        out[f"overhead_{r}"] = cu * thresholds[:, i]
    interval = pd.to_numeric(slots["interval_s"], errors="raise").to_numpy(dtype=np.float64)
    out["overhead_cu_hours"] = cu * interval / 3600.0
    return out
