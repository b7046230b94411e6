"""Monthly indices whose mapping is behind their kind's template, and how each is brought up.

Every template of ``mappings/`` has a ``version``; :func:`~collector.sinks.elasticsearch.templates.load_templates`
writes it into the template's mappings as ``_meta.fairacct_mapping_version``, so that every
index made from it carries the version it was made with (an index made before versions were
recorded has none: 0). An index behind the installed template is moved, by
:meth:`ElasticsearchSink.upgrade_indices <collector.sinks.elasticsearch.sink.ElasticsearchSink.upgrade_indices>`:

1. a new index ``<monthly name>-v<N>`` is made (the template gives it the current mapping);
2. ``_reindex`` copies every document into it, under the same ids (run again, it replaces them),
   in the background (a big month takes longer than one request may), watched until the new
   index holds as many documents as the old (given up once it copies nothing for
   :data:`REINDEX_STALL_S`);
3. the two indices' document counts are compared; unequal, nothing is swapped and the old
   index stays as it was (an error says so);
4. one ``_aliases`` request makes the monthly name an alias of the new index and removes the
   old index, at once: readers and writers (which use the monthly name, or the kind's pattern)
   never see both, nor neither.

Run it while nothing writes to the store (the collector does it at start, before its flusher;
``fairacct mappings install`` is for a store whose writers are stopped): a document written
to the old index between the reindex and the swap would be caught by the count, and the
move refused.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["REINDEX_POLL_S", "REINDEX_STALL_S", "VERSION_KEY", "Move", "behind", "swap_actions"]

VERSION_KEY = "fairacct_mapping_version"

REINDEX_POLL_S = 0.5
"""Seconds between two looks at how many documents the reindex has copied."""

REINDEX_STALL_S = 300.0
"""Seconds a reindex may copy nothing before the move is given up (its old index kept)."""


@dataclass(frozen=True)
class Move:
    """One index to bring up: the concrete ``index``, its mapping ``version`` (0: none recorded),
    the monthly ``alias`` its records are written and read under, the ``target`` index."""

    index: str
    version: int
    alias: str
    target: str
    current: int  # the template's version, the target's


def behind(mappings: Mapping[str, Any], prefix: str, kind: str, current: int) -> list[Move]:
    """The indices of ``kind`` in a ``GET <prefix>-<kind>-*/_mapping`` answer whose mapping
    version is below ``current``, in name order; indices not named as fairacct names them
    (``<prefix>-<kind>-YYYY.MM``, or ``...-vN`` after a move) are left alone."""
    named = re.compile(rf"({re.escape(prefix)}-{re.escape(kind)}-\d{{4}}\.\d{{2}})(?:-v\d+)?")
    moves = []
    for index in sorted(mappings):
        match = named.fullmatch(index)
        if match is None:
            continue
        meta = dict(mappings[index].get("mappings", {}).get("_meta") or {})
        version = meta.get(VERSION_KEY, 0)
        version = version if type(version) is int else 0
        if version < current:
            moves.append(Move(index, version, match[1], f"{match[1]}-v{current}", current))
    return moves


def swap_actions(move: Move) -> dict[str, Any]:
    """The one ``_aliases`` request that puts ``move.target`` behind the monthly name and
    removes the old index (and, after an earlier move, the alias's old link)."""
    actions: list[dict[str, Any]] = []
    if move.index != move.alias:  # the old index is itself behind the alias
        actions.append({"remove": {"index": move.index, "alias": move.alias}})
    actions.append({"add": {"index": move.target, "alias": move.alias}})
    actions.append({"remove_index": {"index": move.index}})
    return {"actions": actions}
