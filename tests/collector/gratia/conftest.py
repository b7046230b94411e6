"""Gratia records for the tests: GRACC's own conformance pairs (../shared/fixtures/gracc) and
small records written here, wrapped as gratia-probe wraps them."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from collector.gratia.safexml import parse_xml
from collector.gratia.usagerecord import record_fields

URWG = "http://www.gridforum.org/2003/ur-wg"
XSI = "http://www.w3.org/2001/XMLSchema-instance"
PAIRS = [f"JobUsageRecord0{n}" for n in range(1, 7)]
_DECLARATION = re.compile(rb"<\?xml[^>]*\?>")


@pytest.fixture(scope="session")
def gracc(fixtures: Path) -> Path:
    """../shared/fixtures/gracc: GRACC's JobUsageRecord XML and the JSON GRACC makes of it."""
    return fixtures / "gracc"


def pair(gracc: Path, name: str) -> tuple[bytes, dict[str, Any]]:
    """The XML of one conformance pair, as sent, and GRACC's JSON of it."""
    return (gracc / f"{name}.xml").read_bytes(), json.loads((gracc / f"{name}.json").read_text())


def envelope(records: Iterable[bytes]) -> bytes:
    """Records in a ``<RecordEnvelope>`` exactly as gratia-probe's ProcessBundle builds it: each
    record's XML declaration removed, one record a line."""
    body = b"".join(_DECLARATION.sub(b"", r) + b"\n" for r in records)
    return b'<?xml version="1.0" encoding="UTF-8"?>\n<RecordEnvelope>\n' + body + b"</RecordEnvelope>"


def copies(record: bytes, n: int) -> list[bytes]:
    """``n`` distinct jobs made from one record: the LocalJobId, RecordId and WallDuration differ."""
    out = []
    for i in range(n):
        copy = re.sub(rb"(<(?:\w+:)?LocalJobId\s*>[^<]*)<", rb"\g<1>.%d<" % i, record)
        copy = re.sub(rb'(recordId="[^"]*)"', rb'\g<1>.%d"' % i, copy)
        out.append(re.sub(rb"(<(?:\w+:)?WallDuration[^>]*>)[^<]*<", rb"\g<1>PT%dS<" % (60 + i), copy))
    return out


def sent_by(record: bytes, probe: str) -> bytes:
    """``record`` as ``probe`` sends it: gratia-probe writes its ProbeName into each of its records
    and into the form's ``from``, and the collector takes a record only under its sender's name."""
    return re.sub(rb"(<(?:\w+:)?ProbeName\b[^>]*>)[^<]*<", lambda m: m.group(1) + probe.encode() + b"<", record)


def removed_before_it_started(record: bytes) -> bytes:
    """A job removed from the queue before it ran, as HTCondor's condor-ap probe reports one,
    made from a condor record (JobUsageRecord06): JobStatus 3, no host, no time used, and
    neither EndTime nor StartTime (the job has neither)."""
    removed = re.sub(rb"\s*<(?:\w+:)?(?:End|Start)Time\b[^>]*>[^<]*</(?:\w+:)?(?:End|Start)Time>", b"", record)
    removed = re.sub(rb"\s*<Host\b[^>]*>[^<]*</Host>", b"", removed)
    removed = re.sub(rb">P[0-9TDHMS.]+<", b">PT0S<", removed)
    removed = re.sub(rb'phaseUnit="[^"]*"', b'phaseUnit="PT0S"', removed)
    removed = removed.replace(b'"condor.JobStatus">4<', b'"condor.JobStatus">3<')
    return removed.replace(b"35741.2", b"35741.3").replace(b"185777", b"185778")


def jur(body: str, *, root: str = "JobUsageRecord", record_id: str = "r-1") -> bytes:
    """A small JobUsageRecord in the urwg namespace, with a RecordIdentity, around ``body``."""
    return (
        f'<{root} xmlns="{URWG}" xmlns:urwg="{URWG}" xmlns:xsi="{XSI}">'
        f'<RecordIdentity urwg:recordId="{record_id}" urwg:createTime="2016-05-27T22:46:49Z"/>'
        f"{body}</{root}>"
    ).encode()


def fields(xml: bytes) -> dict[str, Any]:
    """GRACC's JSON of a bare record (its RawXML left out)."""
    doc = record_fields(parse_xml(xml).root, raw_xml="")
    del doc["RawXML"]
    return doc
