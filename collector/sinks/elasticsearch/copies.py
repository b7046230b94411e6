"""What a bulk request writes for each record: one document per id, whatever month its
``timestamp`` names, and never an older copy over a newer one.

A record goes to the index of the month of its ``timestamp``
(:func:`~collector.sinks.elasticsearch.templates.monthly_index`), so the same id sent again with
its time moved across a month's end (30 November to 1 December) would otherwise be two
documents, counted twice by every sum over the kind's indices. So each bulk request is preceded
(:class:`~collector.sinks.elasticsearch.bulk.Bulks`) by one lookup (:func:`lookup_body`): a
search of every month of the kind for the request's ids, each in the months other than its own
(no ``_source``; each hit's index, ``_version``, ``_seq_no`` and ``_primary_term``), an ``ids``
query the cluster answers from each index's id terms. A record's month rarely changes, so the
answer is nearly always empty, however many of the ids are stored already: a batch sent again
costs one small request more, not a hit per id. Of an id's copies found and the one sent, the
one of the highest version wins (:data:`collector.records.VERSION`; the one sent on a tie, or
when it has no version): the one sent is written to its month (:func:`plan`) and the copies
found are deleted in the same bulk request, or, when a copy found is newer, the one sent is not
written at all (``superseded``) and the other copies found are deleted (a copy in the record's
own month is not looked for: only the race below leaves one beside a newer copy in another
month). Each delete is guarded by the ``_seq_no`` the lookup saw (a copy changed since is left,
and the record is tried again: the next lookup sees the change).

The index action of a record with a version carries it (``version_type`` ``external_gte``), so
the cluster itself keeps a newer copy in the record's own month (stored by another collector, or
meanwhile): its 409 is read as *superseded*, an acknowledgement (:func:`settle`). The same copy
sent again (equal versions) replaces itself.

A search sees what the cluster has refreshed (every second by default): a copy written into
another month less than that before the lookup is not seen then, and is deleted by the next
write of its id. Ids are deterministic and hold their record's time (:mod:`collector.records`),
so only a sender that moves the time of an id it made itself meets this at all."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from collector.sinks.base import SendResult
from collector.sinks.elasticsearch.transport import error_text, is_transient

__all__ = ["LOOKUP_IDS", "Copy", "Pending", "Plan", "copies_of", "lookup_body", "plan", "settle"]

LOOKUP_IDS = 5000
"""Ids per lookup: twice as many hits fit in a search's default result window (10,000)."""


@dataclass(frozen=True)
class Pending:
    """A record to write: the monthly ``index`` of its timestamp, its JSON, its version (None: none)."""

    index: str
    source: bytes
    version: int | None


@dataclass(frozen=True)
class Copy:
    """A stored copy of an id in another month than the record's, as the lookup found it: its
    concrete ``index`` (a monthly index, or the index a monthly alias stands for), its version
    and sequence number."""

    index: str
    version: int
    seq_no: int
    primary_term: int


@dataclass(frozen=True)
class Plan:
    """The bulk lines of one id (its index action, when the one sent wins, then the deletes of
    the other copies) and what the lookup said: ``superseded`` (a stored copy is newer: the one
    sent is not written) and ``existed`` (a copy was stored)."""

    lines: bytes
    actions: tuple[str, ...]  # "index" or "delete", one per item the bulk response will hold for the id
    superseded: bool
    existed: bool


def lookup_body(pending: Mapping[str, Pending]) -> dict[str, Any]:
    """The search that finds the stored copies of the ids of ``pending`` (at most
    :data:`LOOKUP_IDS`) in the months other than each one's own: an index moved by a migration
    (``<monthly name>-vN``, behind the monthly alias) is its month's, so each month is left out
    by its name as a prefix (an index name ends with the month, or with ``-vN`` after it). Up to
    two copies an id (one stored twice before this lookup existed); more are seen by the next
    write of the id."""
    months: dict[str, list[str]] = {}
    for id_, record in pending.items():
        months.setdefault(record.index, []).append(id_)
    others = [
        {"bool": {"filter": [{"ids": {"values": ids}}], "must_not": [{"prefix": {"_index": index}}]}}
        for index, ids in months.items()
    ]
    return {
        "query": others[0] if len(others) == 1 else {"bool": {"should": others, "minimum_should_match": 1}},
        "_source": False,
        "version": True,
        "seq_no_primary_term": True,
        "size": 2 * len(pending),
        "track_total_hits": False,
    }


def copies_of(answer: Any) -> dict[str, list[Copy]]:
    """The copies of each id a lookup's answer holds."""
    hits = answer.get("hits", {}).get("hits", []) if isinstance(answer, Mapping) else []
    found: dict[str, list[Copy]] = {}
    for hit in hits:
        copy = Copy(str(hit["_index"]), int(hit["_version"]), int(hit["_seq_no"]), int(hit["_primary_term"]))
        found.setdefault(str(hit["_id"]), []).append(copy)
    return found


def plan(id_: str, record: Pending, found: Sequence[Copy]) -> Plan:
    """What to write for ``record`` (id ``id_``), given the copies of it ``found`` in other
    months (see the module docstring)."""
    newest = max(found, key=lambda c: c.version, default=None)
    superseded = record.version is not None and newest is not None and newest.version > record.version
    lines: list[bytes] = []
    actions: list[str] = []
    if not superseded:
        action: dict[str, Any] = {"_index": record.index, "_id": id_}
        if record.version is not None:
            action |= {"version": record.version, "version_type": "external_gte"}
        lines += [_line({"index": action}), record.source + b"\n"]
        actions.append("index")
    for c in found:
        if superseded and c is newest:
            continue
        lines.append(
            _line({"delete": {"_index": c.index, "_id": id_, "if_seq_no": c.seq_no, "if_primary_term": c.primary_term}})
        )
        actions.append("delete")
    return Plan(b"".join(lines), tuple(actions), superseded, bool(found))


def settle(id_: str, plan: Plan, items: Sequence[Any], result: SendResult) -> str | None:
    """Put what became of ``id_`` into ``result``, from the bulk response's ``items`` of its
    ``plan`` (none when it had nothing to write); the error when it is worth another try (the
    record is then in none of ``result``'s lists)."""
    told: Any = None
    superseded = plan.superseded
    for action, item in zip(plan.actions, items, strict=True):
        outcome: Any = next(iter(item.values()), {}) if isinstance(item, Mapping) else {}
        status = outcome.get("status") if isinstance(outcome, Mapping) else None
        if not isinstance(status, int):
            return "no status for this document in the bulk response"
        error = outcome.get("error")
        conflict = status == 409 and isinstance(error, Mapping) and error.get("type") == _CONFLICT
        if 200 <= status < 300 or (action == "delete" and status == 404):  # deleted, or gone already
            told = outcome.get("result") if action == "index" else told
        elif action == "index" and conflict:  # a copy of a higher version was stored meanwhile
            superseded = True
        elif action == "delete" and conflict:
            return f"a copy in {outcome.get('_index')} changed while it was being replaced ({error_text(error)})"
        elif is_transient(status):
            return f"{status} {error_text(error)}"
        else:
            result.rejected[id_] = error_text(error)
            return None
    result.acked.append(id_)
    if superseded:
        result.superseded.append(id_)
    if plan.existed or superseded or told in ("updated", "noop"):  # the id was stored already
        result.existed.append(id_)
    elif told == "created":
        result.created.append(id_)
    return None


_CONFLICT = "version_conflict_engine_exception"


def _line(action: Mapping[str, Any]) -> bytes:
    return json.dumps(action, separators=(",", ":")).encode() + b"\n"
