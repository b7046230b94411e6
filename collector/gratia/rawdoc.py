"""A Gratia record's document as stored: GRACC's JSON plus what GRACC's raw pipeline and
fairacct's record schema add to it, or the reason GRACC's raw pipeline sets the record aside.

GRACC's collector publishes its JSON to a broker; a Logstash pipeline then indexes it. What the
pipeline of GRACC's ``raw3`` indices does (``gracc-stash-raw/logstash.conf`` in
opensciencegrid/gracc-docker; opensciencegrid/gracc-raw's ``gracc-raw.conf`` is its older
form), we do here, without a clock but the arrival time its caller gives:

* **Numbers**: ``Processors``, ``Njobs`` and ``NodeCount`` become integers, ``Memory``, ``Swap``
  and ``Network`` floats, as its ``mutate convert`` makes them (Logstash 6's lenient
  conversion: commas dropped, then Ruby's ``String#to_i``/``to_f``: ``"8"`` -> 8, ``"2.7"`` ->
  2, ``"1,024"`` -> 1024, text without digits -> 0). GRACC's collector sends them as text
  (its conformance documents have ``"Processors": "1"``); its raw indices hold numbers, which
  its summaries group and sum.
* ``CoreHours`` = ``WallDuration`` (seconds) x ``Processors`` / 3600, 1 processor when the
  record has none; and ``PayloadSiteName``, a ``Payload`` record's ``Host_description`` (the
  text ``%{Host_description}`` when it has none: Logstash's ``add_field`` keeps a reference
  to a missing field as it is written).
* **Times**: a record without ``EndTime`` ends at ``StartTime`` + the whole seconds of its
  ``WallDuration``, but no later than when it arrived (its ``StartTime`` then moved back by
  as much); one without ``StartTime`` starts at ``EndTime`` - ``WallDuration``. Both written
  as Ruby's ``Time#iso8601(3)`` writes them (milliseconds, ``Z`` or the sender's offset).
* **Quarantine**: a record with neither time (``MissingEndTime``: a job removed before it
  started, as HTCondor's condor-ap probe reports it), or one that started on the first day of
  1970 or before (``EpochStartTime``: a time that was never set), or that carries its own
  ``Quarantine`` field, goes to GRACC's quarantine index, which its summaries do not read.
  Here such a document keeps GRACC's reason in ``Quarantine`` and gets no ``id``: it is not
  to be stored (collector/gratia/envelope.py sets it aside, counted). So does a record that
  GRACC's raw index would refuse, which its Elasticsearch drops: a number over the field's
  type (``Processors`` or ``NodeCount`` over an int32, ``Njobs`` over an int64, a float that
  is not finite) or a time outside the years 1 to 9999. Unlike GRACC, so is a record of more
  fields than any record may have, or whose ``EndTime`` is outside the times a collector takes
  (collector/instants.py: from 1990 to a day after it arrived).
* ``id``: the pipeline's ``checksum`` is a hash of the document without the fields Gratia's own
  duplicate check left out (``RecordId``, ``CreateTime``, the user's identity, ``SiteName``,
  ``Grid``, ``RawXML``, ``type``) and without the pipeline's times; it is the document id, so
  a record sent twice is stored once. Ours leaves out the same fields and fairacct's own
  (``id``, ``kind``, ``schema_version``, ``probe``, ``timestamp``), so a record re-sent by a
  probe (with a new ``RecordId`` and ``CreateTime``) gets the same id. That content hash
  (:func:`content_id`) is SHA-256 of the sorted JSON of GRACC's collector's fields and
  ``CoreHours`` (before the numbers are converted and the times derived), cut to 32 hex
  digits like every other record id (GRACC's is MD5 of Ruby's JSON, which nothing here needs
  to reproduce). Unlike GRACC's, the stored ``id`` is that hash within its sender
  (:func:`collector.records.owned_id` of the sender and the hash, as a fairacct probe's
  records are): the fields the hash leaves out (``SiteName``, the VO, the user) are the ones
  that say whose record it is, so with the hash alone any listed sender could replace another
  sender's record by sending its content again under another site, VO or user. A sender
  replaces only what it sent; the same job sent by two senders is two records, one each.
* ``timestamp``: the pipeline dates a record by its ``EndTime`` (given or derived); ours is
  that instant in UTC, to the second.

And fairacct's record schema (collector/records.py): ``kind`` ``"gratia"``, ``schema_version``,
``probe`` (the sender, the form's ``from``; without one, the record's ``ProbeName``). These
five names are fairacct's: a record element of the same name would be replaced.
"""

from __future__ import annotations

import hashlib
import math
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson

from collector.gratia.isotime import utc_iso
from collector.instants import EARLIEST, timestamp_range
from collector.records import KINDS, SCHEMA_VERSION, owned_id
from collector.schema import MAX_FIELDS

__all__ = [
    "DEDUP_EXCLUDED", "KIND", "META_FIELDS", "QUARANTINE", "content_id", "core_hours", "logstash_float",
    "logstash_integer", "raw_doc",
]  # fmt: skip

KIND = KINDS["gratia"].name
META_FIELDS = ("id", "kind", "schema_version", "probe", "timestamp")
QUARANTINE = "Quarantine"
"""The field that holds why GRACC's raw pipeline sets a record aside (its own name for it)."""
DEDUP_EXCLUDED = frozenset(
    {
        # gracc-raw.conf: "fields omitted by Gratia", and the pipeline's own
        "RecordId", "CreateTime", "GlobalUsername", "LocalUserId", "VOName", "ReportableVOName",
        "CommonName", "SiteName", "Grid", "RawXML", "type",
        *META_FIELDS,
    }
)  # fmt: skip
_EXCLUDED = tuple(sorted(DEDUP_EXCLUDED))
# The pipeline's conversions, and the range of the field in GRACC's raw3 index template
# (gracc-stash-raw/gracc-raw-template.json: Processors and NodeCount "integer", Njobs "long").
_INTEGERS = (("Processors", 2**31), ("Njobs", 2**63), ("NodeCount", 2**31))
_FLOATS = ("Memory", "Swap", "Network")
# Ruby's String#to_i and #to_f: leading white space, a sign, digits with single underscores
# between them (and for #to_f a fraction and an exponent, each only when digits follow).
_RUBY_INTEGER = re.compile(r"\s*([+-]?[0-9]+(?:_[0-9]+)*)", re.ASCII)
_RUBY_FLOAT = re.compile(
    r"\s*([+-]?(?:[0-9]+(?:_[0-9]+)*(?:\.[0-9]+(?:_[0-9]+)*)?|\.[0-9]+(?:_[0-9]+)*)(?:[eE][+-]?[0-9]+)?)", re.ASCII
)
_EPOCH_DAY = 86400  # the pipeline's EpochStartTime: a StartTime at or before 1970-01-02T00:00:00Z


def logstash_integer(value: object) -> int:
    """A value as Logstash 6's lenient ``convert => "integer"`` makes it (see the module docstring)."""
    if value.__class__ is str and len(value) < 19 and value.isascii() and value.isdigit():  # what probes send: "8"
        return int(value)
    if isinstance(value, (int, float)):
        return int(value)  # Ruby's Float#to_i truncates, as int() does
    match = _RUBY_INTEGER.match(str(value).replace(",", ""))
    if match is None:
        return 0
    digits = match.group(1)
    if len(digits) > 40:  # a Bignum to Ruby, out of every field's range; int() would refuse thousands of digits
        return -(10**40) if digits.startswith("-") else 10**40
    return int(digits)


def logstash_float(value: object) -> float:
    """A value as Logstash 6's lenient ``convert => "float"`` makes it (see the module docstring)."""
    if value.__class__ is str and value.isascii() and value.isdigit():
        return float(value)
    if isinstance(value, (int, float)):
        return float(value)
    match = _RUBY_FLOAT.match(str(value).replace(",", ""))
    return float(match.group(1)) if match else 0.0


def core_hours(fields: dict[str, Any]) -> float:
    """``WallDuration`` x ``Processors`` / 3600, as GRACC's raw pipeline computes it."""
    processors = fields.get("Processors")
    wall = float(fields.get("WallDuration") or 0.0)
    return wall * (1.0 if processors is None else logstash_integer(processors)) / 3600.0


def content_id(doc: dict[str, Any]) -> str:
    """The id of a Gratia document: a hash of its content without :data:`DEDUP_EXCLUDED`."""
    content = dict(doc)
    for name in _EXCLUDED:  # a third of the cost of a comprehension over every field
        content.pop(name, None)
    return hashlib.sha256(b"gratia\n" + orjson.dumps(content, option=orjson.OPT_SORT_KEYS)).hexdigest()[:32]


def raw_doc(fields: dict[str, Any], *, probe: str | None, received: float | None = None) -> dict[str, Any]:
    """The stored document of GRACC's JSON ``fields`` (changed in place and returned), as the
    module docstring says; ``received``: when it arrived (UNIX seconds), the latest a derived
    ``EndTime`` may be (None: no limit). A document holding :data:`QUARANTINE` is set aside:
    it has no ``id`` nor ``timestamp`` and is not to be stored."""
    numbers: dict[str, int | float] = {}
    too_big = None
    for name, limit in _INTEGERS:
        value = fields.get(name)
        if value is not None:
            number = logstash_integer(value)
            numbers[name] = number
            if not -limit <= number < limit:
                too_big = f"{name} {number} is outside the range of GRACC's {name} field"
    for name in _FLOATS:
        value = fields.get(name)
        if value is not None:
            real = numbers[name] = logstash_float(value)
            if not math.isfinite(real):
                too_big = f"{name} {value!r} is not a finite number"
    processors = numbers.get("Processors", 1)
    fields["CoreHours"] = float(fields.get("WallDuration") or 0.0) * processors / 3600.0
    doc_id = content_id(fields)  # of the fields as GRACC's collector sent them (see the module docstring)
    fields.update(numbers)
    if fields.get("ResourceType") == "Payload":
        fields["PayloadSiteName"] = fields.get("Host_description", "%{Host_description}")
    reason = too_big or _dated(fields, received) or _beyond(fields, received)
    if reason is not None:
        fields[QUARANTINE] = reason
        return fields
    sender = probe if probe is not None else fields.get("ProbeName")
    fields["id"] = owned_id(str(sender), doc_id)
    fields["kind"] = KIND
    fields["schema_version"] = SCHEMA_VERSION
    fields["probe"] = sender
    return fields


def _dated(fields: dict[str, Any], received: float | None) -> str | None:
    """Derive the missing ``EndTime``/``StartTime`` and set ``timestamp`` as GRACC's raw pipeline
    dates a record; the reason it is set aside, if it is."""
    quarantine = fields.get(QUARANTINE) or None  # a record's own, which the pipeline keeps
    end = fields.get("EndTime")
    start = fields.get("StartTime")
    wall = int(fields.get("WallDuration") or 0)  # Ruby's #to_i of the seconds: whole, towards 0
    try:
        if not end:
            if not start:
                return quarantine or "MissingEndTime"
            moment = datetime.fromisoformat(start) + timedelta(seconds=wall)
            if received is not None:
                arrival = datetime.fromtimestamp(math.floor(received * 1000) / 1000, UTC)
                if moment > arrival:
                    moment = arrival
                    start = fields["StartTime"] = _ruby_iso8601(moment - timedelta(seconds=wall))
            end = fields["EndTime"] = _ruby_iso8601(moment)
            timestamp = _utc_second(moment)
        else:
            timestamp = utc_iso(end)
            if not start:
                start = fields["StartTime"] = _ruby_iso8601(datetime.fromisoformat(end) - timedelta(seconds=wall))
    except (ValueError, OverflowError) as exc:  # beyond what Python's datetime holds, as GRACC's index would refuse
        return quarantine or f"a time outside the years 1 to 9999 ({exc})"
    if start[:4] <= "1970" and _epoch_seconds(start) <= _EPOCH_DAY:
        return "EpochStartTime"  # the pipeline sets it over any other reason
    if quarantine:
        return str(quarantine)
    fields["timestamp"] = timestamp
    return None


def _beyond(fields: dict[str, Any], received: float | None) -> str | None:
    """Why a record GRACC's pipeline would keep is set aside all the same, if it is: more
    fields than a record may have (:data:`collector.schema.MAX_FIELDS`), or a ``timestamp``
    outside the times a collector takes (:func:`collector.instants.timestamp_range`, when the
    arrival time is known). GRACC stores both; either would stand in the summaries for years
    to come, or grow an index's mapping, from one envelope."""
    if len(fields) + len(META_FIELDS) > MAX_FIELDS:
        return f"more than {MAX_FIELDS} fields ({len(fields)})"
    first, last = timestamp_range(received) if received is not None else (EARLIEST, "9999")
    if not first <= fields["timestamp"] <= last:
        return f"an EndTime ({fields['timestamp']}) outside the times this collector takes: {first} to {last}"
    return None


def _epoch_seconds(instant: str) -> float:
    """UNIX seconds of an instant (Ruby's ``Time#to_i``), very negative for Go's year 0."""
    try:
        return math.floor(datetime.fromisoformat(instant).timestamp())
    except ValueError:  # year 0, which Go's time takes and Python's does not: long before 1970
        return -math.inf


def _ruby_iso8601(moment: datetime) -> str:
    """``Time#iso8601(3)``: milliseconds, ``Z`` for UTC, the offset otherwise."""
    offset = moment.utcoffset()
    zone = "Z" if not offset else moment.isoformat()[-6:]
    return (
        f"{moment.year:04d}-{moment.month:02d}-{moment.day:02d}T{moment.hour:02d}:{moment.minute:02d}:"
        f"{moment.second:02d}.{moment.microsecond // 1000:03d}{zone}"
    )


def _utc_second(moment: datetime) -> str:
    moment = moment.astimezone(UTC)
    return (
        f"{moment.year:04d}-{moment.month:02d}-{moment.day:02d}T{moment.hour:02d}:{moment.minute:02d}:"
        f"{moment.second:02d}Z"
    )
