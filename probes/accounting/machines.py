"""The machine inventory that penalties are priced against (Klusáček & Rudová 2015,
"Multi-resource aware fairsharing for heterogeneous systems", section 3).

A *machine class* is a set of identical nodes: the resources of one node, how many such nodes
there are, the node cost and speed of the class, the properties a job can pin (e.g. a cluster
name) and the host names of its members. The machines table has one row per class:

- ``name`` (str, unique): the class, e.g. an Alea cluster name or a shape like ``c16-m32768-g0``.
- ``count`` (int64 >= 1): nodes in the class.
- ``cpus`` (float > 0, cores), ``memory`` (MiB), ``disk`` (KiB), ``gpus`` (devices): one node's
  resources. NaN memory or disk means unknown: no request is refused for it and it takes no
  part in a price; NaN GPUs are none.
- ``node_cost`` (float > 0, default 1.0) and ``speed`` (float > 0, default 1.0).
- ``properties`` (frozenset of str): what a request can pin, e.g. ``GLIDEIN_Site=UCSD``.
- ``hosts`` (tuple of str): the machines and slot names of the class's nodes, to find the class
  a job ran on from its host.

From a slots table every partitionable or static slot is one node: a static slot cannot be
shared with the slot beside it, so it is a node of its own size. Glideins of the same shape
(cores, memory, GPUs, node cost, speed and the configured attributes) collapse into one class;
disk does not split classes (a glidein's scratch space differs by a few KiB from one to the
next), the class's disk is the smallest of its members' so that a request that fits the class
fits every node of it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from probes.accounting._tables import RESOURCES, require_columns

__all__ = ["MACHINE_COLUMNS", "class_of_hosts", "machine_classes", "machines_table", "pool_totals"]

MACHINE_COLUMNS = ("name", "count", *RESOURCES, "node_cost", "speed", "properties", "hosts")

_SLOT_NEEDS = ("name", "machine", *(f"total_{r}" for r in RESOURCES), "speed", "node_cost")


def machines_table(
    rows: pd.DataFrame | Sequence[Mapping[str, Any]], input_name: str = "machines table"
) -> pd.DataFrame:
    """Check a machines table (or build one from records) and fill what is optional.

    Needs ``name`` and ``cpus`` (cores per node); ``count`` defaults to 1, ``memory``/``disk``
    to NaN (unknown), ``gpus`` to 0 (also where NaN), ``node_cost`` and ``speed`` to 1.0 (also where NaN),
    ``properties`` to an empty frozenset and ``hosts`` to an empty tuple. Returns a new table
    with exactly :data:`MACHINE_COLUMNS`, in that order; raises ``ValueError`` naming
    ``input_name``, the class and the column for a value that cannot be priced against.
    """
    frame = pd.DataFrame.from_records(list(rows)) if not isinstance(rows, pd.DataFrame) else rows
    require_columns(frame, ["name", "cpus"], input_name)
    n = len(frame)
    out = pd.DataFrame({"name": frame["name"].astype(object).to_numpy()})
    if out["name"].isna().any() or not all(isinstance(v, str) and v for v in out["name"]):
        raise ValueError(f"{input_name}: every class needs a non-empty string name, got {frame['name'].tolist()[:5]}")
    dupes = sorted(set(out["name"][out["name"].duplicated()]))
    if dupes:
        raise ValueError(f"{input_name}: class names must be unique, got {dupes} more than once")

    def column(name: str, default: float) -> np.ndarray:
        if name not in frame.columns:
            return np.full(n, default)
        return pd.to_numeric(frame[name], errors="raise").to_numpy(dtype=np.float64)

    count = column("count", 1.0)
    count = np.where(np.isnan(count), 1.0, count)
    _check(out["name"], count, count >= 1, input_name, "count", "a whole number of nodes >= 1")
    _check(out["name"], count, count == np.floor(count), input_name, "count", "a whole number of nodes >= 1")
    out["count"] = count.astype(np.int64)
    for r, default in (("cpus", np.nan), ("memory", np.nan), ("disk", np.nan), ("gpus", 0.0)):
        values = column(r, default)
        if r == "gpus":  # HTCondor: a machine that says nothing of GPUs has none
            values = np.where(np.isnan(values), 0.0, values)
        if r == "cpus":
            _check(out["name"], values, values > 0, input_name, r, "cores per node greater than 0")
        else:
            _check(out["name"], values, np.isnan(values) | (values >= 0), input_name, r, "0 or more (NaN: unknown)")
        out[r] = values
    for attr in ("node_cost", "speed"):
        values = column(attr, 1.0)
        values = np.where(np.isnan(values), 1.0, values)
        _check(out["name"], values, (values > 0) & np.isfinite(values), input_name, attr, "a number greater than 0")
        out[attr] = values
    out["properties"] = _objects(frame, "properties", n, frozenset)
    out["hosts"] = _objects(frame, "hosts", n, tuple)
    return out


def _check(names: pd.Series, values: np.ndarray, ok: np.ndarray, input_name: str, column: str, expected: str) -> None:
    bad = np.flatnonzero(~ok)
    if len(bad):
        i = int(bad[0])
        raise ValueError(
            f"{input_name}: class {names.iloc[i]!r}: {column} must be {expected}, got {float(values[i])!r}"
        )


def _objects(frame: pd.DataFrame, name: str, n: int, kind: type) -> np.ndarray:
    out = np.empty(n, dtype=object)
    values = frame[name].tolist() if name in frame.columns else [None] * n
    for i, v in enumerate(values):
        out[i] = kind() if v is None or (isinstance(v, float) and np.isnan(v)) else kind(v)
    return out


def machine_classes(slots: pd.DataFrame, *, attributes: Sequence[str] = ()) -> pd.DataFrame:
    """Collapse a slots table into machine classes: one class per distinct node shape.

    ``slots`` needs ``name`` and ``machine`` (str), ``total_<r>`` for r in cpus, memory, disk,
    gpus (cores, MiB, KiB, devices), ``speed`` and ``node_cost`` (float; NaN is 1.0), and a
    column per name in ``attributes`` (slot attributes that split classes and that requests
    can pin as ``NAME=value``). Slots with no cores (e.g. a GPU-only slot) cannot be priced
    against and are left out.

    Returns a machines table (:data:`MACHINE_COLUMNS`) in order of first appearance. A
    class's name is its shape, ``c<cores>-m<MiB>-g<GPUs>``, then its attribute values, then
    its speed and node cost where two classes would otherwise share a name.
    """
    attributes = list(attributes)
    require_columns(slots, [*_SLOT_NEEDS, *attributes], "slots table")
    frame = pd.DataFrame(
        {
            "cpus": pd.to_numeric(slots["total_cpus"]).to_numpy(dtype=np.float64),
            "memory": pd.to_numeric(slots["total_memory"]).to_numpy(dtype=np.float64),
            "disk": pd.to_numeric(slots["total_disk"]).to_numpy(dtype=np.float64),
            "gpus": np.nan_to_num(pd.to_numeric(slots["total_gpus"]).to_numpy(dtype=np.float64), nan=0.0),
            "speed": _one_if_missing(slots["speed"]),
            "node_cost": _one_if_missing(slots["node_cost"]),
            "slot": slots["name"].astype(object).to_numpy(),
            "machine": slots["machine"].astype(object).to_numpy(),
        }
    )
    for k, attr in enumerate(attributes):
        frame[f"_a{k}"] = slots[attr].astype(object).where(slots[attr].notna(), None).to_numpy()
    frame = frame[frame["cpus"] > 0]
    keys = ["cpus", "memory", "gpus", "node_cost", "speed", *(f"_a{k}" for k in range(len(attributes)))]
    # sort=False numbers the groups in order of first appearance
    codes = frame.groupby(keys, sort=False, dropna=False).ngroup().to_numpy()
    rows = []
    for _, members in frame.groupby(codes, sort=True):
        first = members.iloc[0]
        values = [first[f"_a{k}"] for k in range(len(attributes))]
        hosts = tuple(dict.fromkeys([*members["machine"].dropna(), *members["slot"].dropna()]))
        rows.append(
            {
                "name": _shape_name(first["cpus"], first["memory"], first["gpus"], values),
                "count": len(members),
                "cpus": first["cpus"],
                "memory": first["memory"],
                "disk": members["disk"].min(),
                "gpus": first["gpus"],
                "node_cost": first["node_cost"],
                "speed": first["speed"],
                "properties": frozenset(f"{a}={v}" for a, v in zip(attributes, values, strict=True) if v is not None),
                "hosts": hosts,
            }
        )
    names = [r["name"] for r in rows]
    for r in rows:  # only where needed, so the common name stays short
        if names.count(r["name"]) > 1:
            r["name"] += f"-s{r['speed']:g}-k{r['node_cost']:g}"
    return machines_table(rows) if rows else machines_table(pd.DataFrame({"name": [], "cpus": []}))


def _shape_name(cpus: float, memory: float, gpus: float, values: Iterable[Any]) -> str:
    mem = "?" if np.isnan(memory) else f"{memory:g}"
    return "-".join([f"c{cpus:g}", f"m{mem}", f"g{gpus:g}", *(str(v) for v in values if v is not None)])


def _one_if_missing(values: pd.Series) -> np.ndarray:
    v = pd.to_numeric(values).to_numpy(dtype=np.float64)
    return np.where(np.isnan(v) | (v <= 0), 1.0, v)


def pool_totals(machines: pd.DataFrame) -> dict[str, float]:
    """The pool's total of each resource: the sum over classes of ``count * <r>``.

    ``machines`` needs ``count`` and ``<r>`` for r in cpus, memory, disk, gpus. A resource
    unknown (NaN) in any class has a NaN total: it cannot take part in a pool-wide share.
    """
    require_columns(machines, ["count", *RESOURCES], "machines table")
    count = machines["count"].to_numpy(dtype=np.float64)
    return {r: float(np.sum(count * machines[r].to_numpy(dtype=np.float64))) for r in RESOURCES}


def class_of_hosts(machines: pd.DataFrame, hosts: Sequence[Any] | np.ndarray) -> np.ndarray:
    """The position in ``machines`` of the class each host belongs to; -1 where unknown.

    ``machines`` needs ``hosts`` (tuples of machine and slot names). A host is a job's
    ``LastRemoteHost`` (``slot1_3@glidein_1@node.site.org``) or a machine name: it is looked up
    as given, as its partitionable slot (``slot1@...``) and as the part after its last ``@``.
    """
    require_columns(machines, ["hosts"], "machines table")
    lookup: dict[str, int] = {}
    for i, members in enumerate(machines["hosts"]):
        for h in members:
            lookup.setdefault(h, i)
    codes, uniques = pd.factorize(np.asarray(hosts, dtype=object), use_na_sentinel=True)
    out = np.full(len(codes), -1, dtype=np.int64)
    if not lookup or not len(uniques):
        return out
    # look each distinct host up once: a history repeats its hosts many times
    values = pd.Series(np.asarray(uniques, dtype=object), dtype=object)
    as_given = values.map(lookup)
    parent = values.str.replace(r"^(slot\d+)_\d+@", r"\1@", regex=True).map(lookup)
    machine = values.str.rsplit("@", n=1).str[-1].map(lookup)
    found = as_given.fillna(parent).fillna(machine).fillna(-1).to_numpy(dtype=np.int64)
    known = codes >= 0
    out[known] = found[codes[known]]
    return out
