"""The keys sent to APEL, per site and month: what a re-send must cancel.

APEL's server replaces a summary only by one of the same key (``REPLACE INTO``), and keeps the
v0.3 and v0.4 summaries of a month in two tables. So a month sent again replaces the month in
APEL's tables only if, beside the new records, it sends a record of zero jobs and zero times
for each key sent before and no longer produced (after a ``vo_map`` change, say). The ledger
is the keys and the message kind last sent for each site and month; the arithmetic is pure,
the file is read and written by the caller (a JSON object in the probe's state directory).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from collector.apel.keys import NAME_KEYS, collation_key

__all__ = ["KEY_FIELDS", "ZERO_FIELDS", "ledger_entry", "month_id", "zero_records"]

KEY_FIELDS = (
    "Site", "Month", "Year", "GlobalUserName", "VO", "VOGroup", "VORole", "SubmitHost", "Infrastructure", "NodeCount",
    "Processors",
)  # fmt: skip
"""The fields of a summary record that make its key in APEL's tables."""

ZERO_FIELDS = ("WallDuration", "CpuDuration", "NormalisedWallDuration", "NormalisedCpuDuration", "NumberOfJobs")


def month_id(site: str, year: int, month: int) -> str:
    """The ledger's name of a site's month: ``SITE YYYY-MM``."""
    return f"{site} {year:04d}-{month:02d}"


def _apel_key(record: Mapping[str, Any]) -> tuple[Any, ...]:
    """The key as APEL compares it: names under its collation."""
    return tuple(
        collation_key(record[k]) if k in NAME_KEYS and isinstance(record.get(k), str) else record.get(k)
        for k in KEY_FIELDS
    )


def ledger_entry(kind: str, records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """What the ledger keeps of one site's month: the kind, and each record's key fields."""
    return {"kind": kind, "keys": [{k: _plain(r.get(k)) for k in KEY_FIELDS} for r in records]}


def _plain(value: Any) -> Any:
    """A JSON value of a record's field (numpy's integers as Python's)."""
    return value.item() if hasattr(value, "item") else value


def zero_records(sent: Sequence[Mapping[str, Any]], now: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """A record of zero jobs and times for each key of ``sent`` (a ledger entry's keys) that
    ``now`` (the records of this send) no longer holds, as APEL compares keys."""
    current = {_apel_key(r) for r in now}
    zeros, seen = [], set()
    for key in sent:
        k = _apel_key(key)
        if k in current or k in seen:
            continue
        seen.add(k)
        zeros.append({**{f: key.get(f) for f in KEY_FIELDS}, **dict.fromkeys(ZERO_FIELDS, 0)})
    return zeros
