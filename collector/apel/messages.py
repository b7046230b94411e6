"""APEL's message kinds, as data, and their text.

A message is its header line, then records of ``Field: value`` lines, each record ended by a
line ``%%``. The kinds, their field order, the fields a record must have and those that are
integers follow APEL's record definitions (the public ``apel/apel`` repository,
``apel/db/records/``: ``normalised_summary.py``, ``sync.py``, ``job.py``):

==============  =======================================  =================================
kind            header                                   one record per
==============  =======================================  =================================
``summary``     ``APEL-summary-job-message: v0.3``       site, month, user, VO, group,
                                                         role, submit host, nodes, cores
``normalised``  ``APEL-normalised-summary-message:       the same; its normalised times
                v0.4``                                   name their benchmark:
                                                         ``{HEPscore23: 1234}``
``sync``        ``APEL-sync-message: v0.1``              site, month and submit host: jobs
``jobs``        ``APEL-individual-job-message: v0.3``    job
==============  =======================================  =================================

Times (``EarliestEndTime``, ``StartTime``, ...) are UNIX seconds, cut to the second towards the
past (as the store dates a job: an end of 23:59:59.6 is in its month); durations whole seconds.
A field without a value is left out (APEL takes it as absent); a value never holds a line
break (it would end the field).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["INSTANTS", "KINDS", "MessageKind", "render"]

INSTANTS = ("EarliestEndTime", "LatestEndTime", "StartTime", "EndTime")
"""The fields that are instants (UNIX seconds), written as whole seconds towards the past."""


@dataclass(frozen=True)
class MessageKind:
    """One of APEL's messages: ``header``, the ``fields`` of a record in the order written, those
    a record must have (``mandatory``), those that are integers, and ``per_benchmark``: those
    written as ``{<benchmark type>: value}`` (v0.4)."""

    name: str
    header: str
    fields: tuple[str, ...]
    mandatory: tuple[str, ...]
    integers: tuple[str, ...]
    per_benchmark: tuple[str, ...] = ()


_SUMMARY_FIELDS = (
    "Site", "Month", "Year", "GlobalUserName", "VO", "VOGroup", "VORole", "SubmitHost", "Infrastructure",
    "NodeCount", "Processors", "EarliestEndTime", "LatestEndTime", "WallDuration", "CpuDuration",
    "NormalisedWallDuration", "NormalisedCpuDuration", "NumberOfJobs",
)  # fmt: skip
_SUMMARY_MANDATORY = (
    "Site", "Month", "Year", "WallDuration", "CpuDuration", "NormalisedWallDuration", "NormalisedCpuDuration",
    "NumberOfJobs",
)  # fmt: skip
_SUMMARY_INTEGERS = (
    "Month", "Year", "NodeCount", "Processors", "EarliestEndTime", "LatestEndTime", "WallDuration", "CpuDuration",
    "NormalisedWallDuration", "NormalisedCpuDuration", "NumberOfJobs",
)  # fmt: skip

KINDS: dict[str, MessageKind] = {
    k.name: k
    for k in (
        MessageKind(
            "summary", "APEL-summary-job-message: v0.3", _SUMMARY_FIELDS, _SUMMARY_MANDATORY, _SUMMARY_INTEGERS
        ),
        MessageKind(
            "normalised",
            "APEL-normalised-summary-message: v0.4",
            _SUMMARY_FIELDS,
            _SUMMARY_MANDATORY,
            _SUMMARY_INTEGERS,
            per_benchmark=("NormalisedWallDuration", "NormalisedCpuDuration"),
        ),
        MessageKind(
            "sync",
            "APEL-sync-message: v0.1",
            ("Site", "SubmitHost", "NumberOfJobs", "Month", "Year"),
            ("Site", "NumberOfJobs", "Month", "Year"),
            ("NumberOfJobs", "Month", "Year"),
        ),
        MessageKind(
            "jobs",
            "APEL-individual-job-message: v0.3",
            (
                "Site",
                "SubmitHost",
                "MachineName",
                "Queue",
                "LocalJobId",
                "LocalUserId",
                "GlobalUserName",
                "FQAN",
                "VO",
                "VOGroup",
                "VORole",
                "WallDuration",
                "CpuDuration",
                "Processors",
                "NodeCount",
                "StartTime",
                "EndTime",
                "InfrastructureDescription",
                "InfrastructureType",
                "ServiceLevelType",
                "ServiceLevel",
            ),
            ("Site", "LocalJobId", "WallDuration", "CpuDuration", "StartTime", "EndTime"),
            ("WallDuration", "CpuDuration", "Processors", "NodeCount", "StartTime", "EndTime"),
        ),
    )
}
"""APEL's messages by the name ``fairacct apel --kind`` gives them."""


def render(kind: MessageKind, records: Sequence[Mapping[str, Any]], *, benchmark_type: str) -> str:
    """The text of one message of ``kind`` holding ``records`` (APEL's field names as keys;
    integers rounded to whole numbers here, after every sum). Raises ValueError naming the
    record and field when a mandatory field has no value."""
    lines = [kind.header]
    for n, record in enumerate(records):
        for name in kind.fields:
            value = record.get(name)
            if value is None or (isinstance(value, float) and value != value):  # NaN: no value
                if name in kind.mandatory:
                    raise ValueError(f"{kind.header} record {n}: mandatory field {name} has no value")
                continue
            if name in INSTANTS:  # cut towards the past, as the store dates a job: 23:59:59.6 stays in its month
                text = str(math.floor(float(value)))
            elif name in kind.integers:
                text = str(round(float(value)))
            elif name == "ServiceLevel":  # APEL keeps DECIMAL(10,3)
                text = f"{round(float(value), 3):.3f}".rstrip("0").rstrip(".")
            elif isinstance(value, float):
                text = f"{value:.6g}"
            else:
                text = " ".join(str(value).split())  # one line, whatever the value held
            if name in kind.per_benchmark:
                text = f"{{{benchmark_type}: {text}}}"
            lines.append(f"{name}: {text}")
        lines.append("%%")
    return "\n".join(lines) + "\n"
