"""fairacct ``job`` records -> Gratia JobUsageRecord XML, with the fields and values that
gratia-probe's ``condor-ap`` (``classadToJUR`` in ``common/gratia/common/condor.py``) makes of
the same job ad, as far as a job record holds them; the deliberate differences are in the
table of docs/gracc.md ("Reporting to OSG's GRACC, replacing condor-ap").

The XML is built with :mod:`xml.etree.ElementTree`, which escapes every text and attribute, so
a user name or project with ``<``, ``&`` or quotes cannot change the record's structure.

A record is a pure function of the job record and the :class:`GratiaIdentity`: the same job
sent again is the same bytes (``createTime`` is the job's end, not the moment of sending), so a
collector that keys records on their content (GRACC, fairacct's own) stores it once.

fairacct's own number rides along as a ``Resource`` element, which GRACC flattens into a
``Resource_<description>`` field: ``fairacct-core-hours`` (unit ``core-hours``), cores x wall
time / 3600, the job's bill in canonical units. The multi-resource penalty is not sent: it
depends on the pool's machines when the job was priced, and a record must be the same bytes
every time it is sent (GRACC keys a record on its content).

A job that condor-ap would leave out of GRACC (:func:`left_out`) is not made a record: the
Gratia sender counts it by reason instead.
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

__all__ = ["GratiaIdentity", "default_probe_name", "envelope_xml", "job_usage_record", "left_out", "record_xml"]

UR_NS = "http://www.gridforum.org/2003/ur-wg"
_U = "urwg:"  # attributes in the urwg namespace, declared on the record, as GratiaCore writes them
_SECONDS = "Was entered in seconds"  # condor-ap's description of every time it reports


def default_probe_name() -> str:
    """``condor-ap:<this host's fully qualified name>``, the name gratia-probe's RPM gives
    condor-ap (its ProbeConfig's ``@PROBE_NAME@:@PROBE_HOST@``, the package's folder name)."""
    return f"condor-ap:{socket.getfqdn()}"


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


def left_out(doc: Mapping[str, Any]) -> str | None:
    """Why condor-ap (or GRACC's raw pipeline) would leave this job out of GRACC, None if it
    counts there (:data:`probes.sources.condor_ap.LEFT_OUT`, fixed when the job was read)."""
    return _text(doc, "gratia_left_out")


def job_usage_record(doc: Mapping[str, Any], who: GratiaIdentity) -> Element:
    """The JobUsageRecord of one fairacct ``job`` record (a decoded document); RecordError
    naming the record and key when a field it needs is missing or not what it should be.

    Where the record holds condor-ap's reading of the job (the ``gratia_*`` fields of
    :mod:`probes.sources.condor_ap`), those are sent, so that GRACC's summaries of the job are
    condor-ap's; a record read before they existed is sent from fairacct's own fields."""
    record_id = _text(doc, "id")
    job_id = _text(doc, "job_id")
    cluster = _number(doc, "cluster")
    end = _number(doc, "end")
    if record_id is None or job_id is None or cluster is None or end is None:
        raise RecordError(f"job record {record_id!r}: expected id, job_id, cluster and end, got {dict(doc)!r}")
    as_ap = _number(doc, "gratia_processors") is not None  # condor-ap's reading is in the record
    proc = _number(doc, "proc") or 0.0
    root = Element("JobUsageRecord", {"xmlns": UR_NS, "xmlns:urwg": UR_NS})
    ident = SubElement(root, "RecordIdentity")
    ident.set("urwg:recordId", f"{who.probe_name}:{record_id}")
    ident.set("urwg:createTime", _instant(end))  # the job's, so that a record sent again is the same bytes

    job = SubElement(root, "JobIdentity")
    SubElement(job, "GlobalJobId").text = f"condor.{job_id}"  # condor-ap's UniqGlobalJobId
    # condor-ap: "cluster.proc" for proc > 0, the cluster alone for proc 0
    SubElement(job, "LocalJobId").text = f"{int(cluster)}.{int(proc)}" if proc > 0 else str(int(cluster))

    _user_identity(SubElement(root, "UserIdentity"), doc, as_ap)

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
    if as_ap:
        user_s, system_s = _number(doc, "gratia_cpu_user_s") or 0.0, _number(doc, "gratia_cpu_system_s") or 0.0
    else:  # a record of before: user + system CPU as one sum, all of it reported as user time
        user_s, system_s = _number(doc, "cpu_time_s") or 0.0, 0.0
    SubElement(root, "CpuDuration", {f"{_U}usageType": "system", f"{_U}description": _SECONDS}).text = _duration(
        system_s
    )
    SubElement(root, "CpuDuration", {f"{_U}usageType": "user", f"{_U}description": _SECONDS}).text = _duration(user_s)
    # condor-ap: CompletionDate, none for a removed job (GRACC ends it at StartTime + WallDuration)
    end_time = _number(doc, "gratia_end") if as_ap else end
    if end_time is not None:
        SubElement(root, "EndTime", {f"{_U}description": _SECONDS}).text = _instant(end_time)
    start = _number(doc, "first_start") or _number(doc, "start")
    if start is not None and start > 0:
        SubElement(root, "StartTime", {f"{_U}description": _SECONDS}).text = _instant(start)
    qdate = _number(doc, "qdate")
    if qdate is not None and qdate > 0:
        SubElement(root, "QueueTime", {f"{_U}description": _SECONDS}).text = _instant(qdate)
    resource_name = _text(doc, "gratia_resource_name" if as_ap else "resource_name")
    if (host := _text(doc, "host")) is not None:
        attrs = {f"{_U}primary": "true"} | ({f"{_U}description": resource_name} if resource_name else {})
        SubElement(root, "Host", attrs).text = host.rsplit("@", 1)[-1]
    nodes = _number(doc, "n_hosts")
    if nodes is not None:
        SubElement(root, "NodeCount", {f"{_U}metric": "max"}).text = _count(nodes)
    cpus = _number(doc, "cpus") or 0.0
    processors = _number(doc, "gratia_processors") if as_ap else cpus
    SubElement(root, "Processors", {f"{_U}metric": "max"}).text = _count(processors or 0.0)
    gpus = _number(doc, "gratia_gpus" if as_ap else "gpus")
    if (gpus is not None) if as_ap else bool(gpus):  # condor-ap: RequestGpus wherever the job has one
        SubElement(root, "GPUs", {f"{_U}metric": "max"}).text = _count(gpus or 0.0)
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
    group = (_text(doc, "submitter") or "").rpartition("@")[0]  # 'group_cms.alice@pool.example'
    if group and "." in group:  # an accounting group with the user: condor-ap's AccountingGroup
        resource("AccountingGroup", group)
    # the job's bill in canonical units: cores x wall time, of the job alone. Its penalty depends on
    # the pool's machines when it was priced and is not sent: a record sent again is the same bytes
    resource("fairacct-core-hours", _hours(cpus * wall / 3600.0), "core-hours")
    if (project := _text(doc, "gratia_project" if as_ap else "project")) is not None:
        SubElement(root, "ProjectName", {f"{_U}description": "As specified in Condor submit file"}).text = project
    SubElement(root, "ProbeName").text = who.probe_name
    if site := who.site or _text(doc, "site"):  # condor-ap: the probe's SiteName
        SubElement(root, "SiteName").text = site
    grid = _text(doc, "gratia_grid") if as_ap else ("Local" if resource_name == "Local Job" else None)
    SubElement(root, "Grid").text = grid or who.grid
    # condor-ap: a job that ran on a glidein (it names a resource) is a pilot's payload
    resource("ResourceType", "BatchPilot" if resource_name else "Batch")
    return root


def _user_identity(user: Element, doc: Mapping[str, Any], as_ap: bool) -> None:
    """condor-ap's UserIdentity: LocalUserId (``Owner``), GlobalUsername (``User``), DN, VOName
    and ReportableVOName, as the job record has them."""
    if as_ap:
        fields = [("LocalUserId", "gratia_user"), ("GlobalUsername", "gratia_global_user"), ("DN", "gratia_dn"),
                  ("VOName", "gratia_vo"), ("ReportableVOName", "gratia_reportable_vo")]  # fmt: skip
        for tag, key in fields:
            if (value := _text(doc, key)) is not None:
                SubElement(user, tag).text = value
        return
    owner, domain = _text(doc, "user"), (_text(doc, "submitter") or "").rpartition("@")[2]
    if owner is not None:
        SubElement(user, "LocalUserId").text = owner
        if domain:  # condor-ap: User, which is Owner@UID_DOMAIN
            SubElement(user, "GlobalUsername").text = f"{owner}@{domain}"
    for tag, key in (("DN", "dn"), ("VOName", "fqan"), ("ReportableVOName", "vo")):
        if (value := _text(doc, key)) is not None:
            SubElement(user, tag).text = value


def record_xml(doc: Mapping[str, Any], who: GratiaIdentity) -> str:
    """:func:`job_usage_record` as XML text."""
    return tostring(job_usage_record(doc, who), encoding="unicode")


def envelope_xml(records: Sequence[str]) -> str:
    """A ``<RecordEnvelope>`` of JobUsageRecords (:func:`record_xml`), as GratiaCore bundles
    them for ``multiupdate``."""
    return "<RecordEnvelope>" + "".join(records) + "</RecordEnvelope>"
