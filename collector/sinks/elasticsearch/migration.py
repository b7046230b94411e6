"""Monthly indices whose mapping is behind their kind's template, and how each is brought up.

Every template of ``mappings/`` has a ``version``; :func:`~collector.sinks.elasticsearch.templates.load_templates`
writes it into the template's mappings as ``_meta.fairacct_mapping_version``, so that every
index made from it carries the version it was made with (an index made before versions were
recorded has none: 0). An index behind the installed template is moved, by
:meth:`ElasticsearchSink.upgrade_indices <collector.sinks.elasticsearch.sink.ElasticsearchSink.upgrade_indices>`:

1. a new index ``<monthly name>-v<N>`` is made (the template gives it the current mapping);
2. ``_reindex`` copies every document into it, under the same ids and versions (``version_type``
   ``external``: a record's version, :data:`collector.records.VERSION`, guards it after the move
   as before; run again, it skips what it copied), in the background (a big month takes longer
   than one request may), watched until the new index holds as many documents as the old
   (given up once it copies nothing for :data:`REINDEX_STALL_S`);
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
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from collector.errors import ElasticsearchError

if TYPE_CHECKING:
    from collector.sinks.elasticsearch.transport import Client

__all__ = ["REINDEX_POLL_S", "REINDEX_STALL_S", "VERSION_KEY", "Move", "behind", "move_index", "swap_actions"]

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


def move_index(client: Client, where: str, move: Move, sleep: Callable[[float], None]) -> str:
    """Bring one index behind its template (steps 1 to 4 of the module docstring); the line
    that says what was done. ``where`` names the cluster in errors; ``sleep`` waits between two
    looks at the copy. Raises ElasticsearchError when the move fails."""
    doing = f"moving {move.index} to {move.target}"
    try:
        client.request("PUT", f"/{move.target}", None, what=f"{doing}: creating {move.target}")
    except ElasticsearchError as exc:
        if exc.status != 400 or "already_exists" not in str(exc):  # an earlier move cut short: fill it again
            raise
    # in the background: a month of a big pool takes longer than one request may (timeout_s);
    # external versions, so that each document keeps its own (internal ones would start at 1
    # again, below every copy still waiting in an outbox); what an earlier move copied, of the
    # same version, is a conflict to pass over
    answer = client.request(
        "POST", "/_reindex?wait_for_completion=false&refresh=true",
        {"source": {"index": move.index}, "dest": {"index": move.target, "version_type": "external"},
         "conflicts": "proceed"},
        what=f"{doing}: reindexing",
    )  # fmt: skip
    task = answer.get("task") if isinstance(answer, Mapping) else None
    want = _count_now(client, move.index, doing)
    counts = [want, _await_copy(client, where, doing, move, task, want, sleep)]
    if counts[0] != counts[1]:
        raise ElasticsearchError(
            f"{where}: {doing}: {move.index} holds {counts[0]} documents, {move.target} {counts[1]} after "
            f"the reindex (was something writing?); nothing swapped, {move.index} kept: run it again with the "
            "writers stopped"
        )
    client.request("POST", "/_aliases", swap_actions(move), what=f"{doing}: swapping the alias {move.alias}")
    return (
        f"{move.index}: mapping v{move.version} behind v{move.current}: {counts[0]} documents reindexed into "
        f"{move.target}, counts equal; {move.alias} is now an alias of {move.target}, {move.index} removed"
    )


def _count_now(client: Client, index: str, doing: str) -> int:
    client.request("POST", f"/{index}/_refresh", None, what=f"{doing}: refreshing {index}")
    return int(client.request("GET", f"/{index}/_count", None, what=f"{doing}: counting {index}")["count"])


def _await_copy(
    client: Client, where: str, doing: str, move: Move, task: object, want: int, sleep: Callable[[float], None]
) -> int:
    """The documents in ``move.target`` once the reindex has copied ``want`` (what
    ``move.index`` holds); raises ElasticsearchError when the copy stops growing for
    :data:`REINDEX_STALL_S`."""
    copied, grew = -1, time.monotonic()
    while (now := _count_now(client, move.target, doing)) < want:
        if now > copied:
            copied, grew = now, time.monotonic()
        elif time.monotonic() - grew > REINDEX_STALL_S:
            raise ElasticsearchError(
                f"{where}: {doing}: the reindex stopped at {now} of {want} documents for {REINDEX_STALL_S:g} "
                f"s (task {task}: GET _tasks/{task} says why); nothing swapped, {move.index} kept"
            )
        sleep(REINDEX_POLL_S)
    return now
