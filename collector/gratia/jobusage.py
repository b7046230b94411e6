"""fairacct ``job`` records -> Gratia JobUsageRecord XML, with the fields and values that
gratia-probe's ``condor-ap`` (``classadToJUR`` in ``common/gratia/common/condor.py``) makes of
the same job ad, as far as a job record holds them; the deliberate differences are in the
README's table ("Reporting to OSG's GRACC, replacing condor-ap").

The XML is built with :mod:`xml.etree.ElementTree`, which escapes every text and attribute, so
a user name or project with ``<``, ``&`` or quotes cannot change the record's structure.

A record is a pure function of the job record and the :class:`GratiaIdentity`: the same job
sent again is the same bytes (``createTime`` is the job's end, not the moment of sending), so a
collector that keys records on their content (GRACC, fairacct's own) stores it once.

fairacct's own numbers ride along as ``Resource`` elements, which GRACC flattens into
``Resource_<description>`` fields:

==============================  ===========  ====================================================
description                     unit         value
==============================  ===========  ====================================================
``fairacct-core-hours``         core-hours   cores x wall time / 3600: the canonical-unit (core)
                                             bill of the job
``fairacct-penalty-hours``      PE-hours     the multi-resource penalty usage (``penalty_usage``
                                             / 3600), when the probe priced the job
``fairacct-cpu-only-hours``     PE-hours     what the same job would cost by its cores alone
                                             (``cpu_only_usage`` / 3600), when priced
==============================  ===========  ====================================================
"""

from __future__ import annotations

import math
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from xml.etree.ElementTree import Element, SubElement, tostring

from collector.errors import RecordError

__all__ = ["GratiaIdentity", "default_probe_name", "envelope_xml", "job_usage_record", "record_xml"]

UR_NS = "http://www.gridforum.org/2003/ur-wg"
_U = "urwg:"  # attributes in the urwg namespace, declared on the record, as GratiaCore writes them
_SECONDS = "Was entered in seconds"  # condor-ap's description of every time it reports


def default_probe_name() -> str:
    """``condor:<this host's fully qualified name>``, the name condor-ap reports under."""
    return f"condor:{socket.getfqdn()}"


@dataclass(frozen=True)
class GratiaIdentity:
    """Who reports: ``probe_name`` (``condor:<host>``), ``site`` (GratiaCore's ``SiteName``
    setting, the access point's site as OSG Topology names it; empty: each job's own site from
    the ``[site]`` mapping) and ``grid`` (GratiaCore's ``Grid``, ``OSG``)."""

    probe_name: str
    site: str = ""
    grid: str = "OSG"


def _number(doc: Mapping[str, Any], key: str) -> float | None:
    value = doc.get(key)
    if value is None or isinstance(value, bool):
        return None
    if not isinstance(value, int | float) or math.isnan(value):
        raise RecordError(f"job record {doc.get('id')!r}: {key}: expected a number, got {value!r}")
    return float(value)


def _text(doc: Mapping[str, Any], key: str) -> str | None:
    value = doc.get(key)
    return None if value is None or value == "" else str(value)


def _instant(seconds: float) -> str:
    """UTC seconds -> RFC 3339 as GratiaCore writes times ('2026-11-21T14:00:00Z')."""
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _duration(seconds: float) -> str:
    """Seconds -> an ISO 8601 duration ('PT3600S', 'PT1.5S')."""
    return f"PT{int(seconds)}S" if seconds == int(seconds) else f"PT{seconds!r}S"


def _count(value: float) -> str:
    return str(int(value)) if value == int(value) else repr(value)


def _hours(value: float) -> str:
    return f"{value:.6f}".rstrip("0").rstrip(".") or "0"


def job_usage_record(doc: Mapping[str, Any], who: GratiaIdentity) -> Element:
    """The JobUsageRecord of one fairacct ``job`` record (a decoded document); RecordError
    naming the record and key when a field it needs is missing or not what it should be."""
    record_id = _text(doc, "id")
    job_id = _text(doc, "job_id")
    cluster = _number(doc, "cluster")
    end = _number(doc, "end")
    if record_id is None or job_id is None or cluster is None or end is None:
        raise RecordError(f"job record {record_id!r}: expected id, job_id, cluster and end, got {dict(doc)!r}")
    proc = _number(doc, "proc") or 0.0
    root = Element("JobUsageRecord", {"xmlns": UR_NS, "xmlns:urwg": UR_NS})
    ident = SubElement(root, "RecordIdentity")
    ident.set("urwg:recordId", f"{who.probe_name}:{record_id}")
    ident.set("urwg:createTime", _instant(end))  # the job's, so that a record sent again is the same bytes

    job = SubElement(root, "JobIdentity")
    SubElement(job, "GlobalJobId").text = job_id
    # condor-ap: "cluster.proc" for proc > 0, the cluster alone for proc 0
    SubElement(job, "LocalJobId").text = f"{int(cluster)}.{int(proc)}" if proc > 0 else str(int(cluster))

    user = SubElement(root, "UserIdentity")
    owner, submitter = _text(doc, "user"), _text(doc, "submitter")
    group, _, domain = (submitter or "").rpartition("@")  # 'group_cms.alice@pool.example'
    if owner is not None:
        SubElement(user, "LocalUserId").text = owner  # condor-ap: Owner
        if domain:  # condor-ap: User, which is Owner@UID_DOMAIN
            SubElement(user, "GlobalUsername").text = f"{owner}@{domain}"
    for tag, key in (("DN", "dn"), ("VOName", "fqan")):
        if (value := _text(doc, key)) is not None:
            SubElement(user, tag).text = value
    if (vo := _text(doc, "vo")) is not None:
        SubElement(user, "ReportableVOName").text = vo

    SubElement(root, "JobName").text = job_id
    submit_host = job_id.split("#", 1)[0] if "#" in job_id else None
    if submit_host:
        SubElement(root, "MachineName").text = submit_host
        SubElement(root, "SubmitHost").text = submit_host
    exit_code = _number(doc, "exit_code")
    if exit_code is not None:
        SubElement(root, "Status", {f"{_U}description": "Condor Exit Status"}).text = _count(exit_code)
    wall = _number(doc, "walltime_s") or 0.0
    SubElement(root, "WallDuration", {f"{_U}description": _SECONDS}).text = _duration(wall)
    cpu = _number(doc, "cpu_time_s") or 0.0
    # a job record keeps user + system CPU as one sum: all of it is reported as user time
    SubElement(root, "CpuDuration", {f"{_U}usageType": "system", f"{_U}description": _SECONDS}).text = "PT0S"
    SubElement(root, "CpuDuration", {f"{_U}usageType": "user", f"{_U}description": _SECONDS}).text = _duration(cpu)
    SubElement(root, "EndTime", {f"{_U}description": _SECONDS}).text = _instant(end)
    start = _number(doc, "first_start") or _number(doc, "start")
    if start is not None and start > 0:
        SubElement(root, "StartTime", {f"{_U}description": _SECONDS}).text = _instant(start)
    qdate = _number(doc, "qdate")
    if qdate is not None and qdate > 0:
        SubElement(root, "QueueTime", {f"{_U}description": _SECONDS}).text = _instant(qdate)
    resource_name = _text(doc, "resource_name")
    if (host := _text(doc, "host")) is not None:
        attrs = {f"{_U}primary": "true"} | ({f"{_U}description": resource_name} if resource_name else {})
        SubElement(root, "Host", attrs).text = host.rsplit("@", 1)[-1]
    nodes = _number(doc, "n_hosts")
    if nodes is not None:
        SubElement(root, "NodeCount", {f"{_U}metric": "max"}).text = _count(nodes)
    cpus = _number(doc, "cpus") or 0.0
    SubElement(root, "Processors", {f"{_U}metric": "max"}).text = _count(cpus)
    gpus = _number(doc, "gpus")
    if gpus:
        SubElement(root, "GPUs", {f"{_U}metric": "max"}).text = _count(gpus)
    memory = _number(doc, "memory")
    if memory is not None:
        SubElement(root, "Memory", {f"{_U}storageUnit": "MB", f"{_U}metric": "max"}).text = _count(memory)

    def resource(description: str, value: str, unit: str | None = None) -> None:
        attrs = {f"{_U}description": description} | ({f"{_U}unit": unit} if unit else {})
        SubElement(root, "Resource", attrs).text = value

    if exit_code is not None:
        resource("ExitCode", _count(exit_code))
    if (status := _number(doc, "status")) is not None:
        resource("condor.JobStatus", _count(status))
    if group and "." in group:  # an accounting group with the user: condor-ap's AccountingGroup
        resource("AccountingGroup", group)
    resource("fairacct-core-hours", _hours(cpus * wall / 3600.0), "core-hours")
    for key, description in (
        ("penalty_usage", "fairacct-penalty-hours"),
        ("cpu_only_usage", "fairacct-cpu-only-hours"),
    ):
        if (usage := _number(doc, key)) is not None:
            resource(description, _hours(usage / 3600.0), "PE-hours")
    if (project := _text(doc, "project")) is not None:
        SubElement(root, "ProjectName", {f"{_U}description": "As specified in Condor submit file"}).text = project
    SubElement(root, "ProbeName").text = who.probe_name
    if site := who.site or _text(doc, "site"):  # condor-ap: the probe's SiteName
        SubElement(root, "SiteName").text = site
    SubElement(root, "Grid").text = "Local" if resource_name == "Local Job" else who.grid
    # condor-ap: a job that ran on a glidein (it names a resource) is a pilot's payload
    resource("ResourceType", "BatchPilot" if resource_name else "Batch")
    return root


def record_xml(doc: Mapping[str, Any], who: GratiaIdentity) -> str:
    """:func:`job_usage_record` as XML text."""
    return tostring(job_usage_record(doc, who), encoding="unicode")


def envelope_xml(records: Sequence[str]) -> str:
    """A ``<RecordEnvelope>`` of JobUsageRecords (:func:`record_xml`), as GratiaCore bundles
    them for ``multiupdate``."""
    return "<RecordEnvelope>" + "".join(records) + "</RecordEnvelope>"
