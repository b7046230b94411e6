"""Judging a batch of fairacct records one by one, as :mod:`collector.records` makes them.

A record is a flat JSON object with ``id`` (a string of 1 to 128 characters), ``kind`` (one of
the kinds a probe makes, :data:`collector.records.PROBE_KINDS`), ``schema_version`` (one of
:data:`~collector.records.ACCEPTED_SCHEMA_VERSIONS`: the previous release's and this one's),
``probe`` (the sender's name) and ``timestamp`` (ISO-8601 with a UTC offset, the time sinks index by, within
:func:`collector.instants.timestamp_range`); every other field must be one the store can hold
(:func:`collector.schema.record_fault`: at most ``max_fields`` fields, types, ranges, string
sizes, no nesting). A record that breaks a rule is refused by itself, with its index and the
reason; the others are accepted, their times written in the one form of
:mod:`collector.instants` (``2025-12-31T00:00:00Z``). A record in another probe's name, or for
a site or pool its probe may not report for (:class:`~collector.server.scopes.Scope`), refuses
the whole request (:class:`ForbiddenError`), and so does a record of a newer schema than this
collector takes (:class:`SchemaTooNewError`: its probe was upgraded first, and keeps its records).

An accepted record is stored under :func:`collector.records.owned_id` of its sender and its
``id`` (the probe's own id kept as ``source_id``): a probe can neither overwrite nor shadow
another probe's records, whatever ids it sends, and its own re-sends replace themselves.

This is plain Python on purpose: a per-record pydantic model costs about five times as much
(see the module docstring of :mod:`collector.server.app`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, cast

from collector.errors import ForbiddenError, SchemaTooNewError
from collector.instants import timestamp_range, utc_second
from collector.records import ACCEPTED_SCHEMA_VERSIONS, PROBE_KINDS, SCHEMA_VERSION, owned_id
from collector.schema import MAX_FIELDS, records_faults, show, utc_times
from collector.server.body import Unreadable
from collector.server.scopes import Scope

__all__ = ["Judgement", "Refusal", "judge_records"]

_KIND_NAMES = ", ".join(PROBE_KINDS)
_ACCEPTED = " or ".join(map(str, ACCEPTED_SCHEMA_VERSIONS))
_MAX_ID = 128


@dataclass(frozen=True)
class Refusal:
    """One refused record: its position in the batch (from 0), its id when it had one, why."""

    index: int
    id: str | None
    reason: str

    def as_json(self) -> dict[str, Any]:
        return {"index": self.index, "id": self.id, "reason": self.reason}


@dataclass
class Judgement:
    """The accepted records by kind, and the refused ones in batch order; ``schemas``: the
    accepted records by their ``schema_version``."""

    accepted: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    count: int = 0
    refused: list[Refusal] = field(default_factory=list)
    schemas: Counter[int] = field(default_factory=Counter)


def judge_records(
    items: Iterable[object], scope: Scope | str, *, now: float, max_fields: int = MAX_FIELDS
) -> Judgement:
    """Sort ``items`` (parsed JSON values) into accepted and refused records for the probe of
    ``scope`` (a probe's name alone: it may report for no site or pool); a refused item is not
    kept (only its :class:`Refusal`). The fields are checked kind by kind over the whole batch
    (:func:`collector.schema.records_faults`), once the rest of each record passed. ``now``:
    the collector's clock (UNIX seconds), which bounds the timestamps. Costs time linear in
    the batch's fields."""
    if isinstance(scope, str):
        scope = Scope.of(scope, ())
    probe = scope.probe
    window = timestamp_range(now)
    out = Judgement()
    candidates: dict[str, list[tuple[int, dict[str, Any]]]] = {}
    for index, item in enumerate(items):
        reason = _fault(item, probe, index, window)
        if reason is None:
            scope.check(item, index)  # type: ignore[arg-type]  # _fault checked it is a dict
        if reason is None:
            doc = cast(dict[str, Any], item)  # _fault checked it is a dict
            candidates.setdefault(doc["kind"], []).append((index, doc))
        else:
            out.refused.append(Refusal(index, _id_of(item), reason))
    for kind, pairs in candidates.items():
        docs = [doc for _, doc in pairs]
        faults = records_faults(kind, docs, max_fields=max_fields)
        accepted = out.accepted.setdefault(kind, [])
        for position, (index, doc) in enumerate(pairs):
            if position in faults:
                out.refused.append(Refusal(index, _id_of(doc), faults[position]))
                continue
            utc_times(kind, doc)
            doc["source_id"] = doc["id"]
            doc["id"] = owned_id(probe, doc["id"])
            out.schemas[doc["schema_version"]] += 1
            accepted.append(doc)
        if not accepted:
            del out.accepted[kind]
    out.count = sum(map(len, out.accepted.values()))
    out.refused.sort(key=lambda r: r.index)
    return out


def _id_of(item: object) -> str | None:
    id_ = item.get("id") if type(item) is dict else None
    return id_ if isinstance(id_, str) else None


def _fault(item: object, probe: str, index: int, window: tuple[str, str]) -> str | None:
    """Why ``item`` cannot be accepted, or None; raises ForbiddenError for another probe's
    record, SchemaTooNewError for a record of a newer schema than this collector takes. Its
    ``timestamp`` is written in the one form, within ``window`` (first, last)."""
    if type(item) is not dict:
        if isinstance(item, Unreadable):
            return item.reason
        return f"expected a JSON object (a record), got {show(item)}"
    id_ = item.get("id")
    if type(id_) is not str or not 0 < len(id_) <= _MAX_ID:
        return f"'id' must be a string of 1 to {_MAX_ID} characters, got {show(id_)}"
    kind = item.get("kind")
    if kind not in PROBE_KINDS:
        return (
            f"'kind' must be one of {_KIND_NAMES}, got {show(kind)} (summaries are made by the collector, "
            "Gratia records come from Gratia probes to /gratia-servlets/rmi)"
        )
    version = item.get("schema_version")
    if type(version) is int and version > SCHEMA_VERSION:
        raise SchemaTooNewError(
            f"record {index} has schema_version {version}, newer than this collector's {SCHEMA_VERSION} (it takes "
            f"{_ACCEPTED}): upgrade the collector before its probes; nothing was stored, keep the records"
        )
    if type(version) is not int or version not in ACCEPTED_SCHEMA_VERSIONS:
        return f"'schema_version' must be {_ACCEPTED} (this collector's), got {show(version)}"
    sender = item.get("probe")
    if sender != probe:
        if type(sender) is not str:
            return f"'probe' must be the sending probe's name, {probe!r}, got {show(sender)}"
        raise ForbiddenError(
            f"record {index} is in the name of probe {show(sender)}, but the token is {probe!r}'s; "
            "a probe may send only its own records"
        )
    stamp = item.get("timestamp")
    try:
        if type(stamp) is not str:
            raise ValueError("not a string")
        utc = utc_second(stamp)
    except ValueError as exc:
        return f"'timestamp' must be an ISO-8601 UTC time like '2026-11-21T14:00:00Z', got {show(stamp)} ({exc})"
    first, last = window
    if not first <= utc <= last:
        return (
            f"'timestamp' {show(stamp)} is {utc}, outside the times this collector takes: from {first} "
            f"to a day after its clock, {last}"
        )
    item["timestamp"] = utc
    if "source_id" in item:
        return "'source_id' is the collector's to set (the id the probe sent)"
    return None
