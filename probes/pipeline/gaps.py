"""Losses named, never absorbed: the nodes a snapshot does not bill, as ``gap`` rows.

A node (a partitionable or static slot, by its ``Name``) is billed by the snapshots that list
it, each for the time it stands for, ``(observed_at - interval_s, observed_at]``. The probe
remembers the nodes of the last snapshot accounted (the :data:`~probes.sources.checkpoints.NODES_KEY`
checkpoint, one entry per node: what it offered and ran when last seen, and up to when its time
was accounted), so that every stretch of a remembered node's time that no snapshot billed is a
gap of its own, with a reason:

============  ================================================================================
reason        the stretch
============  ================================================================================
missing       the snapshot lacks a node the previous one had (a collector restarted, a replica
              behind, a startd gone): the time it stands for, and, when the node comes back,
              nothing more (each snapshot that lacked it named its part)
unheard       the snapshot lists the node but its ads are stale (:attr:`Snapshot.unheard`):
              the time the snapshot stands for, ``since`` its ``LastHeardFrom``
unobserved    no snapshot stands for it at all (the probe, or the collector it reads, was down
              longer than the cadence): every remembered node, from the last snapshot to the
              start of the time the next one stands for
============  ================================================================================

A node missing for longer than ``pool.max_interval_s`` since it was last seen, or past its
glidein's ``GLIDEIN_ToDie``, has left the pool: it is forgotten (its gaps stop there), so the
checkpoint holds the pool's nodes and the recent departures only. A node never seen before has
no gap: nothing says it existed.

A gap row: ``pool``, ``name``, ``machine``, ``site``, ``reason``, ``start``, ``end`` (UTC
seconds), ``seconds``, ``since`` (when the node was last seen, or last heard from), the
``cpus``, ``memory`` (MiB) and ``gpus`` the node offered and the ``running_cpus``,
``running_memory`` and ``running_gpus`` its dynamic slots held when last seen (what went
unbilled), and ``observed_at``, the snapshot that named it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from probes.sources.status import Snapshot

__all__ = ["GAP_COLUMNS", "NodeMemory", "node_gaps"]

GAP_COLUMNS = (
    "pool", "name", "machine", "site", "reason", "start", "end", "seconds", "since",
    "cpus", "memory", "gpus", "running_cpus", "running_memory", "running_gpus", "observed_at",
)  # fmt: skip

NodeMemory = dict[str, dict[str, Any]]
"""The remembered nodes by name: ``machine``, ``site``, ``at`` (their time is accounted up to
it), ``seen`` (last listed), ``missing`` (absent from the last snapshot), ``to_die`` (their
glidein's GLIDEIN_ToDie, None), ``cpus``, ``memory``, ``gpus`` (offered) and ``running_cpus``,
``running_memory``, ``running_gpus`` (held by their dynamic slots when last seen)."""

_RESOURCES = ("cpus", "memory", "gpus")


def _num(value: Any) -> float | None:
    """A number of a table or a checkpoint; None when missing."""
    if value is None:
        return None
    v = float(value)
    return None if math.isnan(v) else v


def _text(value: Any) -> str | None:
    """A name of a table (machine, site) as a checkpoint keeps it; None when missing."""
    return value if isinstance(value, str) else None


def _seen_nodes(snapshot: Snapshot, observed_at: float) -> NodeMemory:
    """The nodes a snapshot lists (its slots), as they are remembered."""
    slots = snapshot.slots
    allocs = snapshot.allocations
    running: dict[str, dict[str, float]] = {}
    if len(allocs) and "parent" in allocs.columns:
        sums = allocs.groupby("parent", sort=False)[[r for r in _RESOURCES if r in allocs.columns]].sum()
        running = {str(k): {str(r): float(v) for r, v in row.items()} for k, row in sums.iterrows()}
    nodes: NodeMemory = {}
    for row in slots.to_dict("records"):
        name = str(row["name"])
        held = running.get(name, {})
        nodes[name] = {
            "machine": _text(row.get("machine")),
            "site": _text(row.get("site")),
            "at": observed_at,
            "seen": observed_at,
            "missing": False,
            "to_die": _num(row.get("glidein_to_die")),
            **{r: _num(row.get(f"total_{r}")) or 0.0 for r in _RESOURCES},
            **{f"running_{r}": held.get(r, 0.0) for r in _RESOURCES},
        }
    return nodes


def node_gaps(
    snapshot: Snapshot,
    remembered: Mapping[str, Mapping[str, Any]] | None,
    *,
    pool: str,
    observed_at: float,
    interval_s: float,
    horizon_s: float,
) -> tuple[pd.DataFrame, NodeMemory]:
    """The gap rows of a snapshot observed at ``observed_at`` that stands for ``interval_s``
    seconds, against the nodes ``remembered`` from the snapshots before it (the checkpoint;
    None: none), and the nodes to remember after it. ``horizon_s``: how long after it was last
    seen a missing node is still named (``pool.max_interval_s``). See the module docstring."""
    window = observed_at - interval_s
    seen = _seen_nodes(snapshot, observed_at)
    unheard = snapshot.unheard
    unheard_names = {str(n) for n in unheard["name"]} if len(unheard) else set()
    rows: list[dict[str, Any]] = []

    def gap(name: str, node: Mapping[str, Any], reason: str, start: float, end: float, since: float | None) -> None:
        rows.append(
            {
                "pool": pool, "name": name, "machine": node.get("machine"), "site": node.get("site"),
                "reason": reason, "start": start, "end": end, "seconds": end - start, "since": since,
                **{k: float(node.get(k) or 0.0) for k in ("cpus", "memory", "gpus")},
                **{f"running_{r}": float(node.get(f"running_{r}") or 0.0) for r in _RESOURCES},
                "observed_at": observed_at,
            }
        )  # fmt: skip

    after: NodeMemory = {}
    for name, node in (remembered or {}).items():
        at, last = float(node["at"]), float(node["seen"])
        before = "missing" if node.get("missing") else "unobserved"
        if name in seen or name in unheard_names:
            if at < window:  # back, or seen again after a stretch no snapshot stands for
                gap(name, node, before, at, window, last)
            if name in unheard_names:
                after[name] = dict(node) | {"at": observed_at, "missing": False}
            continue
        if before == "unobserved" and at < window:
            gap(name, node, "unobserved", at, window, last)
            at = window
        to_die = _num(node.get("to_die"))
        forget = min(last + horizon_s, to_die if to_die is not None else math.inf)
        end = min(observed_at, forget)
        if end > at:
            gap(name, node, "missing", at, end, last)
        if observed_at < forget:
            after[name] = dict(node) | {"at": observed_at, "missing": True}
    for row in unheard.to_dict("records") if len(unheard) else []:
        name = str(row["name"])
        known = after.get(name) or dict(remembered.get(name, {}) if remembered else {})
        node = {
            "machine": _text(row.get("machine")), "site": _text(row.get("site")),
            "seen": observed_at, "to_die": known.get("to_die"),
            **{r: _num(row.get(r)) or 0.0 for r in _RESOURCES},
            **{f"running_{r}": float(known.get(f"running_{r}") or 0.0) for r in _RESOURCES},
        }  # fmt: skip
        gap(name, node, "unheard", window, observed_at, _num(row.get("since")))
        after[name] = node | {"at": observed_at, "missing": False}
    after |= {k: v for k, v in seen.items() if k not in unheard_names}
    frame = pd.DataFrame(rows, columns=list(GAP_COLUMNS))
    for c in ("start", "end", "seconds", "since", "observed_at", *_RESOURCES, *(f"running_{r}" for r in _RESOURCES)):
        frame[c] = pd.to_numeric(frame[c]).astype(np.float64)
    return frame, after
