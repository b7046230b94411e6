"""A JobUsageRecord (or UsageRecord) as GRACC's collector makes it into JSON, field by field.

This is GRACC's ``JobUsageRecord.ToJSON`` (opensciencegrid/gracc-collector, ``gracc/``) on the
tree of :mod:`collector.gratia.safexml`. Elements are matched by local name, whatever their
namespace prefix (``urwg:``, ``urf:`` or none), as Go's ``encoding/xml`` matches them, and
attributes too, the first one of a name winning. Text is kept verbatim (white space included),
except durations and times, which are converted. The fields, in the order GRACC sets them (a
later one replaces an earlier one of the same name):

========================  ================================================================
``type``                  always ``"JobUsageRecord"`` (a UsageRecord too)
``RecordId``              ``RecordIdentity``'s ``recordId`` attribute
``CreateTime``            its ``createTime``, RFC 3339 (a bad one refuses the record)
``GlobalJobId`` ...       ``JobIdentity``'s ``GlobalJobId``, ``LocalJobId``; ``ProcessId`` (or
                          ``ProcessId0``, ``ProcessId1``, ... when there are several)
``GlobalUsername`` ...    ``UserIdentity``'s ``GlobalUsername``, ``LocalUserId``, ``VOName``,
                          ``ReportableVOName``, ``CommonName``, ``DN``
``StartTime`` ...         ``StartTime``, ``EndTime``, ``QueueTime``, RFC 3339 (attributes dropped)
``CpuDuration_<type>``    seconds of each ``CpuDuration`` with a ``usageType``, and
                          ``CpuDuration_<type>_description``
``CpuDuration``           the sum of all the ``CpuDuration``\\ s, in seconds (0 when none)
``WallDuration``          seconds (0 when none), and ``WallDuration_description``
``Resource_<d>``          each ``Resource`` (``ConsumableResource``, ``PhaseResource`` and
                          ``VolumeResource`` too, but only when there is at least one
                          ``Resource``): ``<d>`` is its description with '.' and ' ' made '-'
                          ('unknown' without one), plus ``_unit``, ``_phaseUnit`` (seconds),
                          ``_storageUnit``
``ResourceType``          ``Resource_ResourceType`` renamed: missing or ``Batch`` -> ``Batch``,
                          ``BatchPilot`` -> ``Payload``, anything else kept
``TimeDuration_<type>``   seconds (and ``_description``); ``<type>`` mapped as ``<d>`` above
``TimeInstant_<type>``    RFC 3339 (and ``_description``)
``<Element>``             any other element's text, when not empty, and its attributes as
                          ``<Element>_<attribute>``: ``description``, ``unit``, ``phaseUnit``
                          (seconds), ``storageUnit``, ``formula``, ``metric`` whatever their
                          namespace, and any other attribute in a namespace (see below)
``Origin_hop`` ...        ``Origin``'s ``hop`` (when > 0), ``OriginServerDate``,
                          ``OriginSenderHost``, ``OriginSender``, ``OriginCollector``
``RawXML``                ``<Tag>`` + the record's inner XML verbatim + ``</Tag>`` (the root
                          tag's own attributes, namespace declarations included, are not kept)
========================  ================================================================

One deliberate difference from GRACC's Go code, for the reference documents GRACC publishes with
it (``gracc/test_data`` in opensciencegrid/gracc-collector, which the tests read): on an element
that is not one of the above, GRACC's ``field`` type reads only the six attribute names listed,
so its code drops ``urf:type="QOS"`` on ``ServiceLevel`` and ``urf:primary="true"`` on ``Host``,
yet its reference documents hold ``ServiceLevel_type``, ``Memory_type`` and ``Host_primary``
(GRACC's own test compares only the fields its code makes, so the two never had to agree). The
reference documents are what GRACC's users were shown: we keep every other attribute in a
namespace (schema attributes are written ``urwg:``/``urf:``), except XML Schema instance and
``xml:`` attributes, which describe the document and not the usage. An attribute without a
namespace (``<Host primary="true">``) is not part of the schema and is dropped, as the
reference does.
"""

from __future__ import annotations

import re
from typing import Any
from xml.etree.ElementTree import Element

from collector.errors import RecordError
from collector.gratia.isotime import Instant, duration_seconds, parse_instant
from collector.gratia.safexml import chardata, local_name, split_name

__all__ = ["RECORD_TAGS", "record_fields"]

RECORD_TAGS = frozenset({"JobUsageRecord", "UsageRecord"})

# The attributes GRACC's ``field`` type reads, in the order it sets them.
_FIELD_ATTRIBUTES = ("description", "unit", "phaseUnit", "storageUnit", "formula", "metric")
_FIELD_ATTRIBUTE_SET = frozenset(_FIELD_ATTRIBUTES)
_NOT_USAGE = frozenset({"http://www.w3.org/2001/XMLSchema-instance", "http://www.w3.org/XML/1998/namespace"})
_USER_IDENTITY = ("GlobalUsername", "LocalUserId", "VOName", "ReportableVOName", "CommonName", "DN")
_RESOURCES = ("Resource", "ConsumableResource", "PhaseResource", "VolumeResource")
# The elements GRACC's JobUsageRecord type reads itself; any other is a field.
_SPECIAL = frozenset(
    {
        "RecordIdentity", "JobIdentity", "UserIdentity", "StartTime", "EndTime", "QueueTime", "CpuDuration",
        "WallDuration", *_RESOURCES, "TimeDuration", "TimeInstant", "Origin",
    }
)  # fmt: skip
_INTEGER = re.compile(r"[+-]?[0-9]+", re.ASCII)  # Go's strconv.ParseInt(s, 10, 64)


def record_fields(record: Element, raw_xml: str) -> dict[str, Any]:
    """GRACC's JSON document of one ``JobUsageRecord``/``UsageRecord`` element (see the module
    docstring), with ``raw_xml`` as ``RawXML``. RecordError when GRACC would refuse it: a time
    that is not RFC 3339, an ``Origin`` ``hop`` that is not an integer."""
    record_id = ""
    create_time: Instant | None = None
    jobs: dict[str, str] = {}
    process_ids: list[str] = []
    users: dict[str, str] = {}
    times: dict[str, Instant] = {}
    cpu: list[Element] = []
    wall_value = ""
    wall_description = ""
    resources: dict[str, list[Element]] = {}
    durations: list[Element] = []
    instants: list[tuple[Element, Instant]] = []
    fields: dict[str, Any] = {}  # the other elements, flattened now and set after the rest, as GRACC does
    origin: dict[str, Any] = {}

    for child in record:
        tag = child.tag
        if tag not in _SPECIAL:
            _flatten_field(tag, child, fields)
        elif tag == "RecordIdentity":
            attrs = _first_attributes(child)
            record_id = attrs.get("recordId", record_id)
            if "createTime" in attrs:
                create_time = _instant(attrs["createTime"], "RecordIdentity createTime")
        elif tag == "JobIdentity":
            for part in child:
                name = part.tag
                if name in ("GlobalJobId", "LocalJobId"):
                    jobs[name] = chardata(part)
                elif name == "ProcessId":
                    process_ids.append(chardata(part))
        elif tag == "UserIdentity":
            for part in child:
                name = part.tag
                if name in _USER_IDENTITY:
                    users[name] = chardata(part)
        elif tag in ("StartTime", "EndTime", "QueueTime"):
            times[tag] = _instant(chardata(child), tag)
        elif tag == "CpuDuration":
            cpu.append(child)
        elif tag == "WallDuration":
            wall_value = chardata(child)
            wall_description = _first_attributes(child).get("description", wall_description)
        elif tag in _RESOURCES:
            resources.setdefault(tag, []).append(child)
        elif tag == "TimeDuration":
            durations.append(child)
        elif tag == "TimeInstant":
            instants.append((child, _instant(chardata(child), "TimeInstant")))
        else:  # Origin
            _read_origin(child, origin)

    doc: dict[str, Any] = {"type": "JobUsageRecord"}
    if record_id:
        doc["RecordId"] = record_id
    if create_time is not None and not create_time.is_zero:
        doc["CreateTime"] = create_time.text
    for name in ("GlobalJobId", "LocalJobId"):
        if jobs.get(name):
            doc[name] = jobs[name]
    if len(process_ids) == 1:
        doc["ProcessId"] = process_ids[0]
    elif process_ids:
        doc.update((f"ProcessId{n}", value) for n, value in enumerate(process_ids))
    for name in _USER_IDENTITY:
        if users.get(name):
            doc[name] = users[name]
    for name in ("StartTime", "EndTime", "QueueTime"):
        instant = times.get(name)
        if instant is not None and not instant.is_zero:
            doc[name] = instant.text

    _durations(doc, cpu, wall_value, wall_description)
    _resources(doc, resources)
    _typed(doc, durations, instants)

    doc.update(fields)
    doc.update(origin)
    doc["RawXML"] = raw_xml
    return doc


def _durations(doc: dict[str, Any], cpu: list[Element], wall_value: str, wall_description: str) -> None:
    """Into ``doc``: ``CpuDuration`` (the sum of the positive ``cpu`` elements, in seconds, each
    also by its ``usageType``) and ``WallDuration`` (seconds), with their descriptions."""
    total_cpu = 0.0
    for element in cpu:
        attrs = _first_attributes(element)
        seconds = duration_seconds(chardata(element))
        if seconds > 0:
            total_cpu += seconds
        usage = attrs.get("usageType", "")
        if usage:
            doc[f"CpuDuration_{usage}"] = seconds
        if attrs.get("description"):
            doc[f"CpuDuration_{usage}_description"] = attrs["description"]
    doc["CpuDuration"] = total_cpu
    doc["WallDuration"] = duration_seconds(wall_value)
    if wall_description:
        doc["WallDuration_description"] = wall_description


def _resources(doc: dict[str, Any], resources: dict[str, list[Element]]) -> None:
    """Into ``doc``: the record's resources, flattened (only when it has a ``Resource``, as GRACC
    does), and its ``ResourceType`` (a pilot's payload is ``Payload``)."""
    if resources.get("Resource"):
        for kind in _RESOURCES:
            for element in resources.get(kind, ()):
                _flatten_resource(element, doc)
    resource_type = doc.pop("Resource_ResourceType", None)
    if resource_type in (None, "", "Batch"):
        doc["ResourceType"] = "Batch"
    elif resource_type == "BatchPilot":
        doc["ResourceType"] = "Payload"
    else:
        doc["ResourceType"] = resource_type


def _typed(doc: dict[str, Any], durations: list[Element], instants: list[tuple[Element, Instant]]) -> None:
    """Into ``doc``: each ``TimeDuration`` (seconds) and ``TimeInstant`` under its type's key."""
    for element in durations:
        key, description = _typed_key("TimeDuration_", element)
        doc[key] = duration_seconds(chardata(element))
        if description:
            doc[key + "_description"] = description
    for element, instant in instants:
        key, description = _typed_key("TimeInstant_", element)
        doc[key] = instant.text
        if description:
            doc[key + "_description"] = description


def _first_attributes(element: Element) -> dict[str, str]:
    """Local name -> value of the first attribute of each name, whatever its namespace (Go's
    ``xml:"name,attr"`` takes the first match)."""
    keys = element.keys()  # not .attrib, which makes a dict for an element without attributes
    if not keys:
        return {}
    names = tuple(keys)
    first = _FIRST.get(names)
    if first is None:
        found: dict[str, str] = {}
        for name in names:
            found.setdefault(local_name(name), name)
        first = (tuple(found), tuple(found.values()))
        if len(_FIRST) < _CACHED:
            _FIRST[names] = first
    return dict(zip(first[0], map(element.attrib.__getitem__, first[1]), strict=True))


def _key(text: str) -> str:
    """GRACC's ``mapForKey``: '.' and ' ' made '-' (``str.replace``; ``str.translate`` with a
    table looks each character up in a dict, several times slower)."""
    return text.replace(".", "-").replace(" ", "-")


def _instant(text: str, what: str) -> Instant:
    try:
        return parse_instant(text)
    except ValueError as exc:
        raise RecordError(f"{what}: {exc}") from None


def _typed_key(prefix: str, element: Element) -> tuple[str, str]:
    """``TimeDuration_<type>``/``TimeInstant_<type>`` and the description, as GRACC names them."""
    attrs = _first_attributes(element)
    return prefix + _key(attrs.get("type") or "unknown"), attrs.get("description", "")


def _flatten_resource(element: Element, doc: dict[str, Any]) -> None:
    attrs = _first_attributes(element)
    key = "Resource_" + _key(attrs.get("description") or "unknown")
    doc[key] = chardata(element)
    if attrs.get("unit"):
        doc[key + "_unit"] = attrs["unit"]
    if attrs.get("phaseUnit"):
        doc[key + "_phaseUnit"] = duration_seconds(attrs["phaseUnit"])
    if attrs.get("storageUnit"):
        doc[key + "_storageUnit"] = attrs["storageUnit"]


def _flatten_field(name: str, element: Element, doc: dict[str, Any]) -> None:
    """Any other element: its text and attributes (the module docstring says which)."""
    text = chardata(element) if len(element) else element.text
    if text:
        doc[name] = text
    keys = element.keys()  # not .attrib, which makes a dict for an element without attributes
    if keys:
        attrib = element.attrib
        for key, qualified, duration in _field_plan(name, tuple(keys)):
            value = attrib[qualified]
            if value:
                doc[key] = duration_seconds(value) if duration else value


_KNOWN, _EXTRA, _DROPPED = "known", "extra", "dropped"
# Records repeat a few dozen elements and lists of attribute names, and what becomes of them
# costs more to work out (local names, rules, keys) than to apply: each is worked out once. A
# hostile document may invent any number of names: each cache keeps at most _CACHED.
_CACHED = 10_000
_RULES: dict[str, tuple[str, str]] = {}
_PLANS: dict[tuple[str, tuple[str, ...]], tuple[tuple[str, str, bool], ...]] = {}
_FIRST: dict[tuple[str, ...], tuple[tuple[str, ...], tuple[str, ...]]] = {}


def _field_plan(name: str, qualified_names: tuple[str, ...]) -> tuple[tuple[str, str, bool], ...]:
    """The fields that the attributes of a field element ``name`` make: ``(key, the attribute's
    qualified name, whether its value is a duration)``, in the order GRACC sets them: its six
    names first (the first attribute of each local name winning), then the others kept."""
    plan = _PLANS.get((name, qualified_names))
    if plan is None:
        known: dict[str, str] = {}
        extra: dict[str, str] = {}
        for qualified in qualified_names:
            local, rule = _attribute_rule(qualified)
            if rule is _KNOWN:
                known.setdefault(local, qualified)
            elif rule is _EXTRA:
                extra.setdefault(local, qualified)
        plan = tuple(
            [(f"{name}_{local}", known[local], local == "phaseUnit") for local in _FIELD_ATTRIBUTES if local in known]
            + [(f"{name}_{local}", qualified, False) for local, qualified in extra.items()]
        )
        if len(_PLANS) < _CACHED:
            _PLANS[(name, qualified_names)] = plan
    return plan


def _attribute_rule(qualified: str) -> tuple[str, str]:
    """The local name of an attribute of a field element, and what becomes of it: one of
    GRACC's six names, another name in a namespace (kept), or dropped. Cached by name."""
    rule = _RULES.get(qualified)
    if rule is None:
        ns, local = split_name(qualified)
        if local in _FIELD_ATTRIBUTE_SET:
            rule = (local, _KNOWN)
        elif ns and ns not in _NOT_USAGE:
            rule = (local, _EXTRA)
        else:
            rule = (local, _DROPPED)
        if len(_RULES) < _CACHED:
            _RULES[qualified] = rule
    return rule


def _read_origin(element: Element, origin: dict[str, Any]) -> None:
    """GRACC's ``origin``: the ``hop`` attribute and the ``ServerDate`` and
    ``Connection/{SenderHost,Sender,Collector}`` children; several Origins merge, the last
    value of each winning."""
    hop = _first_attributes(element).get("hop")
    if hop is not None:
        digits = hop.strip()
        if hop and (_INTEGER.fullmatch(digits) is None or not -(2**63) <= int(digits) < 2**63):
            raise RecordError(f"Origin hop: expected a 64-bit integer, got {hop!r}")
        number = int(digits) if hop else 0
        origin.pop("Origin_hop", None)
        if number > 0:
            origin["Origin_hop"] = number
    for part in element:
        name = part.tag
        if name == "ServerDate":
            instant = _instant(chardata(part), "Origin ServerDate")
            origin.pop("OriginServerDate", None)
            if not instant.is_zero:
                origin["OriginServerDate"] = instant.text
        elif name == "Connection":
            for item in part:
                item_name = item.tag
                if item_name in ("SenderHost", "Sender", "Collector"):
                    key = "Origin" + item_name
                    origin.pop(key, None)
                    text = chardata(item)
                    if text:
                        origin[key] = text
