"""A Gratia record's document as stored: GRACC's JSON plus what GRACC's raw pipeline and
fairacct's record schema add to it.

GRACC's collector publishes its JSON to a broker; a Logstash pipeline (opensciencegrid/gracc-raw,
``gracc-raw.conf``) then indexes it. What that pipeline adds, we add here, without a clock:

* ``CoreHours`` = ``WallDuration`` (seconds) x ``Processors`` / 3600, with ``Processors`` read
  as Logstash's integer conversion reads it (leading digits: ``"8"`` -> 8, ``"2.7"`` -> 2, text
  without digits -> 0) and 1 when the record has none. The document keeps ``Processors`` as the
  text GRACC's collector gives (the conformance documents have ``"Processors": "1"``).
* ``id``: the pipeline's ``checksum`` is a hash of the document without the fields Gratia's own
  duplicate check left out (``RecordId``, ``CreateTime``, the user's identity, ``SiteName``,
  ``Grid``, ``RawXML``, ``type``) and without the pipeline's times; it is the document id, so
  a record sent twice is stored once. Ours leaves out the same fields and fairacct's own
  (``id``, ``kind``, ``schema_version``, ``probe``, ``timestamp``), so a record re-sent by a
  probe (with a new ``RecordId`` and ``CreateTime``), or the same record sent by two senders,
  gets the same id. It is SHA-256 of the sorted JSON, cut to 32 hex digits like every other
  record id (GRACC's is MD5 of Ruby's JSON, which nothing here needs to reproduce).
* ``timestamp``: the pipeline dates a record by ``EndTime`` (else by when it arrived). Ours is
  ``EndTime`` in UTC, else ``StartTime``: never the arrival time, which would put a re-sent
  record in another monthly index than its first copy. A record with neither is refused.

And fairacct's record schema (collector/records.py): ``kind`` ``"gratia"``, ``schema_version``,
``probe`` (the sender, the form's ``from``; without one, the record's ``ProbeName``). These
five names are fairacct's: a record element of the same name would be replaced.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

import orjson

from collector.errors import RecordError
from collector.gratia.isotime import utc_iso
from collector.records import KINDS, SCHEMA_VERSION

__all__ = ["DEDUP_EXCLUDED", "KIND", "META_FIELDS", "content_id", "core_hours", "raw_doc"]

KIND = KINDS["gratia"].name
_DATED_BY = (KINDS[KIND].time_field, "StartTime")  # EndTime, else StartTime
META_FIELDS = ("id", "kind", "schema_version", "probe", "timestamp")
DEDUP_EXCLUDED = frozenset(
    {
        # gracc-raw.conf: "fields omitted by Gratia", and the pipeline's own
        "RecordId", "CreateTime", "GlobalUsername", "LocalUserId", "VOName", "ReportableVOName",
        "CommonName", "SiteName", "Grid", "RawXML", "type",
        *META_FIELDS,
    }
)  # fmt: skip
_EXCLUDED = tuple(sorted(DEDUP_EXCLUDED))
_LEADING_INTEGER = re.compile(r"\s*([+-]?[0-9]+)", re.ASCII)  # Ruby's String#to_i, as Logstash converts


def core_hours(fields: dict[str, Any]) -> float:
    """``WallDuration`` x ``Processors`` / 3600, as GRACC's raw pipeline computes it."""
    processors: float = 1.0
    if fields.get("Processors") is not None:
        match = _LEADING_INTEGER.match(str(fields["Processors"]))
        processors = float(match.group(1)) if match else 0.0
    return float(fields.get("WallDuration") or 0.0) * processors / 3600.0


def content_id(doc: dict[str, Any]) -> str:
    """The id of a Gratia document: a hash of its content without :data:`DEDUP_EXCLUDED`."""
    content = dict(doc)
    for name in _EXCLUDED:  # a third of the cost of a comprehension over every field
        content.pop(name, None)
    return hashlib.sha256(b"gratia\n" + orjson.dumps(content, option=orjson.OPT_SORT_KEYS)).hexdigest()[:32]


def raw_doc(fields: dict[str, Any], *, probe: str | None) -> dict[str, Any]:
    """The stored document of GRACC's JSON ``fields`` (changed in place and returned): with
    ``CoreHours``, ``id``, ``kind``, ``schema_version``, ``probe`` and ``timestamp``.
    RecordError when the record has neither ``EndTime`` nor ``StartTime`` to date it."""
    fields["CoreHours"] = core_hours(fields)
    for dated_by in _DATED_BY:
        if fields.get(dated_by):
            break
    else:
        raise RecordError(f"the record has neither {' nor '.join(_DATED_BY)}: it cannot be dated")
    try:
        timestamp = utc_iso(fields[dated_by])
    except ValueError as exc:
        raise RecordError(f"{dated_by}: {exc}") from None
    fields["id"] = content_id(fields)
    fields["kind"] = KIND
    fields["schema_version"] = SCHEMA_VERSION
    fields["probe"] = probe if probe is not None else fields.get("ProbeName")
    fields["timestamp"] = timestamp
    return fields
