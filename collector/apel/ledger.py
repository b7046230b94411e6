"""What was sent to APEL, per site and month: what a re-send must cancel, and what it cannot.

APEL's server replaces a record only by one of the same key (``REPLACE INTO``), keeps the v0.3
and v0.4 summaries of a month under two keys (one table, ``NormalisedSummaries``, whose key
holds the benchmark type only a v0.4 message names), and the individual job records in a table
of their own, ``JobRecords``, which its summariser adds to the summaries. So a
month sent again replaces the month in APEL's tables only if, beside the new records, it sends
a record of zero jobs and zero times for each key sent before and no longer produced (after a
``vo_map`` change, say), and a sync record of zero jobs for each submit host no longer
reported. The ledger keeps, per site and month, the kind of its summaries (``summary``,
``normalised`` or ``jobs``), their keys (the jobs' keys for ``jobs``), and the submit hosts of
its sync records.

Keys are compared as APEL's server compares them (:func:`collector.apel.keys.general_ci_key`):
a site spelled ``T2_US_Nebraska`` in one send and ``T2_US_NEBRASKA`` in the next is one site's
month, whose keys the second send replaces, never zeroes.

Job records cannot be cancelled: APEL keys them by site, id and end time, and a record of
zero seconds is still a job. A month sent as jobs can be sent again as jobs while every job
sent before is sent again with the same key (its numbers may change: APEL replaces it); a job
removed, or whose end moved, makes the send refused, with why, and so does a month sent as jobs
sent as summaries (APEL would count it twice); so does a job whose user, VO, submit host, cores or
benchmark changed so that a summary APEL's summariser made of the jobs sent before is left
without a job (the summariser replaces the summaries that have jobs and never removes one).
The arithmetic is pure; the file is read and written by the caller (a JSON object in the
probe's state directory).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from collector.apel.jobs import job_key, summary_group
from collector.apel.keys import NAME_KEYS, general_ci_key, unsendable
from collector.errors import ConfigError

__all__ = [
    "KEY_FIELDS",
    "SUMMARY_KINDS",
    "ZERO_FIELDS",
    "Plan",
    "folded_id",
    "ledger_entry",
    "month_id",
    "plan",
    "zero_records",
]

KEY_FIELDS = (
    "Site", "Month", "Year", "GlobalUserName", "VO", "VOGroup", "VORole", "SubmitHost", "Infrastructure", "NodeCount",
    "Processors",
)  # fmt: skip
"""The fields of a summary record that make its key in APEL's tables."""

ZERO_FIELDS = ("WallDuration", "CpuDuration", "NormalisedWallDuration", "NormalisedCpuDuration", "NumberOfJobs")

SUMMARY_KINDS = ("summary", "normalised", "jobs")
"""The kinds that carry a month's usage (``sync`` only counts it)."""


def month_id(site: str, year: int, month: int) -> str:
    """The ledger's name of a site's month: ``SITE YYYY-MM``."""
    return f"{site} {year:04d}-{month:02d}"


def folded_id(name: str) -> str:
    """A ledger name as APEL's server tells sites apart: the site under its collation."""
    site, _, month = name.rpartition(" ")
    return f"{general_ci_key(site)} {month}"


def _apel_key(record: Mapping[str, Any], fields: Sequence[str] = KEY_FIELDS) -> tuple[Any, ...]:
    """The key as APEL compares it: names under its collation."""
    return tuple(
        general_ci_key(record[k]) if k in NAME_KEYS and isinstance(record.get(k), str) else record.get(k)
        for k in fields
    )


def ledger_entry(kind: str, records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """What the ledger keeps of one site's month: the kind, and each record's key fields."""
    return {"kind": kind, "keys": [{k: _plain(r.get(k)) for k in KEY_FIELDS} for r in records]}


def _plain(value: Any) -> Any:
    """A JSON value of a record's field (numpy's integers as Python's)."""
    return value.item() if hasattr(value, "item") else value


def zero_records(
    sent: Sequence[Mapping[str, Any]], now: Sequence[Mapping[str, Any]], site: str | None = None
) -> list[dict[str, Any]]:
    """A record of zero jobs and times for each key of ``sent`` (a ledger entry's keys) that
    ``now`` (the records of this send) no longer holds, as APEL compares keys; spelled with
    ``site`` when given (the month's site as this send spells it). A key APEL's loader could
    never have taken (:func:`collector.apel.keys.unsendable`) is not zeroed: it is not there."""
    current = {_apel_key(r) for r in now}
    zeros, seen = [], set()
    for key in sent:
        k = _apel_key(key)
        if k in current or k in seen or unsendable(key):
            continue
        seen.add(k)
        zeros.append({**{f: key.get(f) for f in KEY_FIELDS}, **dict.fromkeys(ZERO_FIELDS, 0)})
        if site is not None:
            zeros[-1]["Site"] = site
    return zeros


@dataclass
class Plan:
    """What one send puts in APEL's queue: the records per kind and site-month (the zero
    records among them), the ledger's new entries and the names they replace."""

    records: dict[tuple[str, str], list[dict[str, Any]]] = field(default_factory=dict)
    """By (kind, folded month id): the records of one message (or of one site-month's job messages)."""
    entries: dict[str, dict[str, Any]] = field(default_factory=dict)
    dropped: list[str] = field(default_factory=list)
    """Ledger names of the same site-months spelled otherwise: replaced by ``entries``."""
    zeroed: int = 0


def _sent(ledger: Mapping[str, Any], wanted: set[str]) -> dict[str, tuple[list[str], dict[str, Any]]]:
    """The ledger's entries of the months ``wanted`` (YYYY-MM), by folded id: the names (spellings)
    and one entry holding them all (keys, jobs and sync hosts together; the kind of the last)."""
    out: dict[str, tuple[list[str], dict[str, Any]]] = {}
    for name in sorted(ledger):
        entry = ledger[name]
        if name.rpartition(" ")[2] not in wanted or not isinstance(entry, dict):
            continue
        names, merged = out.setdefault(folded_id(name), ([], {}))
        names.append(name)
        for part in ("keys", "jobs", "groups", "sync"):
            if part in entry:
                merged[part] = [*merged.get(part, []), *entry[part]]
        if "kind" in entry:
            merged["kind"] = entry["kind"]
    return out


def plan(
    kind: str,
    now: Mapping[str, Sequence[Mapping[str, Any]]],
    months: Sequence[str],
    ledger: Mapping[str, Any],
    *,
    switch: bool = False,
) -> Plan:
    """The records to send of ``kind`` for ``now`` (per ledger name, ``SITE YYYY-MM``: the
    summary, sync or job records of this send) over the ``months`` (YYYY-MM) asked for, with the
    zero records that cancel what the ledger says was sent before and is no longer produced.
    Raises ConfigError when the send cannot make APEL hold what it says (see the module)."""
    sent = _sent(ledger, set(months))
    current = {folded_id(name): name for name in now}
    out = Plan()
    refused: list[str] = []
    for fid in sorted(set(current) | set(sent)):
        name = current.get(fid) or sent[fid][0][-1]
        site = name.rpartition(" ")[0]
        records = [dict(r) for r in now.get(current.get(fid, ""), [])]
        old_names, before = sent.get(fid, ([], {}))
        entry = dict(before)
        out.dropped.extend(n for n in old_names if n != name)
        if kind == "sync":
            zeros = _sync_zeros(before.get("sync", []), records, site, name.rpartition(" ")[2])
            entry["sync"] = [{"SubmitHost": _plain(r.get("SubmitHost"))} for r in records]
            out.records[kind, fid] = [*records, *zeros]
            out.zeroed += len(zeros)
            out.entries[name] = entry
            continue
        was = before.get("kind")
        if was == "jobs" and kind != "jobs":
            refused.append(
                f"{name} was sent to APEL as --kind jobs; APEL keeps job records beside summaries and cannot "
                f"remove them, so --kind {kind} would count the month twice: send --kind jobs again"
            )
            continue
        if was is not None and was != kind and not switch:
            refused.append(
                f"{name} was sent to APEL as --kind {was}; APEL keeps the two kinds under two keys, so sending "
                f"it as --kind {kind} would count the month twice. Send --kind {was} again, or give "
                f"--switch-kind, which sends zero records for what the {was} messages held"
            )
            continue
        if was is not None and was != kind:  # switched: the old kind's records all zeroed
            zeros = zero_records(before.get("keys", []), [], site)
            out.records.setdefault((str(was), fid), []).extend(zeros)
            out.zeroed += len(zeros)
        if kind == "jobs":
            gone = {job_key(j) for j in before.get("jobs", [])} - {job_key(r) for r in records}
            groups = {tuple(summary_group(r)) for r in records}
            emptied = {tuple(g) for g in before.get("groups", [])} - groups
            if (gone or emptied) and was == "jobs":
                refused.append(
                    f"{name}: {len(gone)} jobs sent to APEL before are gone from the store or end at another "
                    "time; APEL keys job records by site, id and end and cannot remove one, so it would keep "
                    "them beside the new ones. Ask the APEL team to delete the month's job records, then send it "
                    "again"
                    if gone
                    else f"{name}: {len(emptied)} of the summaries APEL made of the jobs sent before would have no "
                    "job left (a job's user, VO, submit host, cores or benchmark changed); APEL's summariser "
                    "never removes such a summary, so it would keep counting them. Ask the APEL team to delete "
                    "the month's job records and summaries, then send it again"
                )
                continue
            entry.update(kind=kind, jobs=[_job_entry(r) for r in records], groups=sorted(list(g) for g in groups))
            entry.pop("keys", None)
            out.records[kind, fid] = records
        else:
            zeros = zero_records(before.get("keys", []), records, site) if was == kind else []
            out.records[kind, fid] = [*records, *zeros]
            out.zeroed += len(zeros)
            entry.update(ledger_entry(kind, records))
            entry.pop("jobs", None)
            entry.pop("groups", None)
        out.entries[name] = entry
    if refused:
        raise ConfigError("; ".join(refused))
    return out


def _job_entry(record: Mapping[str, Any]) -> dict[str, Any]:
    return {"Site": record["Site"], "LocalJobId": record["LocalJobId"], "EndTime": _plain(record["EndTime"])}


def _sync_zeros(
    sent: Sequence[Mapping[str, Any]], now: Sequence[Mapping[str, Any]], site: str, month: str
) -> list[dict[str, Any]]:
    """A sync record of zero jobs for each submit host sent before (``sent``) that ``now`` no
    longer has, for ``site`` and ``month`` (YYYY-MM)."""
    current = {_apel_key(r, ("SubmitHost",)) for r in now}
    zeros, seen = [], set()
    for host in sent:
        k = _apel_key(host, ("SubmitHost",))
        if k in current or k in seen or unsendable(host):
            continue
        seen.add(k)
        zeros.append({"Site": site, "SubmitHost": host.get("SubmitHost"), "NumberOfJobs": 0,
                      "Month": int(month[5:7]), "Year": int(month[:4])})  # fmt: skip
    return zeros
