"""The record schema: the contract between probes and collector.

Documents are flat JSON objects: the columns of a probe's table plus ``id``, ``kind``,
``schema_version``, ``probe`` and ``timestamp`` (the record's own time, ISO-8601 UTC, the
field sinks index by). Times in the tables are UNIX seconds; each such column ``x`` is also
rendered as ``x_iso``. The ``id`` is a stable hash of the fields that identify the fact, never
of a counter or of arrival time: the same fact always gets the same id, so re-sending is
harmless, and a corrected fact about the same thing replaces the old document.

| kind       | one document per                       | id from                                   |
|------------|----------------------------------------|-------------------------------------------|
| slot       | slot and snapshot                      | pool, slot name, observed_at              |
| allocation | dynamic slot and snapshot (the bill)   | pool, dynamic slot name, job id, observed_at |
| job        | completed job                          | GlobalJobId, completion time              |
| fairshare  | credential and window                  | policy, credential type and name, window start |
| fairness   | credential and time bucket             | pool, credential type and name, bucket start |
| gap        | node and stretch no snapshot billed it | pool, node name, start, end               |
| summary    | day, source kind and dimensions        | day, record_kind and SUMMARY_DIMENSIONS   |
| gratia     | Gratia JobUsageRecord (GRACC's fields) | its sender, and its content less RecordId, CreateTime and what GRACC leaves out |

Gratia records are not built from tables: collector/gratia/ makes them from the XML real Gratia
probes send, with GRACC's field names; their time field is ``EndTime`` (ISO-8601, as GRACC
indexes them) and their id a hash of their content within their sender (collector/gratia/rawdoc.py).

Every id holds the field that dates its record (a Gratia record's content holds its ``EndTime``),
so a fact made again gets the same ``timestamp`` with the same id: a moved time is another fact.
A store keeps one document per id all the same, whatever ``timestamp`` a copy names (a sender's
own ids are its to choose): Elasticsearch files records in monthly indices, and removes a copy
of the id from another month when it stores one (collector/sinks/elasticsearch/bulk.py).

Copies of one id are ordered by a *version* (:data:`VERSION`), a whole number carried beside the
record (:class:`~collector.encoded.Encoded`), never in its document: a collector gives each record
it takes the microsecond it took it (:func:`received_version`), and the daily summaries the token
of the run that made them (collector/summaries/run.py). A store never replaces a copy by one of a
lower version, so a record corrected through one collector is not undone by the older copy
another collector flushes later; a record without a version (a probe writing to its own store)
replaces whatever copy is stored, as before versions.

Fairness records measure the share as Sedighi et al. 2014, "Fairness of task scheduling in high
performance computing environments", do (the papers are cited in full in :mod:`probes.accounting`).
"""  # noqa: E501 - a table row wider than a line

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np
import orjson
import pandas as pd

from collector.encoded import Encoded
from mappings.fields import COLUMN, TEXT
from mappings.kinds import DECLARED

__all__ = [
    "ACCEPTED_SCHEMA_VERSIONS",
    "KINDS",
    "PROBE_KINDS",
    "SCHEMA_VERSION",
    "SUMMARY_DIMENSIONS",
    "VERSION",
    "RecordKind",
    "carried_fields",
    "encode_docs",
    "iso_utc",
    "owned_id",
    "received_version",
    "record_id",
    "table_docs",
    "table_records",
]

SCHEMA_VERSION = 1
"""The record schema this release's probes write (``schema_version`` of every record)."""

ACCEPTED_SCHEMA_VERSIONS = (SCHEMA_VERSION - 1, SCHEMA_VERSION)
"""The record schemas the collector takes: the previous release's and this one's, so that a
central collector is upgraded first and its probes one at a time after it (the upgrading guide, docs/upgrading.md).
The schema did not change since the previous release (909f578 wrote 1 too), so this is {0, 1}.
A record of a newer schema is refused whole (409 ``schema_too_new``) and its probe keeps it."""


VERSION = "version"
"""The name under which an encoded record carries its version (see the module docstring)."""


def received_version(now: float) -> int:
    """The version of the records a collector takes at ``now`` (UNIX seconds): its microsecond,
    so that a copy taken later, by this collector or another whose clock keeps step with it
    (NTP: milliseconds apart), is the newer one."""
    return int(now * 1_000_000)


@dataclass(frozen=True)
class RecordKind:
    """A kind of record: the fields that identify a fact, and the one that dates it."""

    name: str
    id_fields: tuple[str, ...]  # () when the id is a hash of the whole content (gratia)
    time_field: str  # what dates a record and becomes ``timestamp``: UNIX seconds (gratia: ISO-8601)
    time_fields: tuple[str, ...]  # every UNIX-seconds column, rendered as ``<name>_iso`` too
    labels: tuple[str, ...] = ()  # names reports group by: text columns in the embedded store
    # fields the embedded store also keeps as plain columns, so summaries group and sum
    # columns instead of parsing every document
    measured: tuple[str, ...] = ()

    @property
    def carried(self) -> tuple[str, ...]:
        """The fields an encoded record carries beside its JSON (:class:`~collector.encoded.Encoded`):
        ``timestamp`` and what the embedded store keeps as columns."""
        return tuple(dict.fromkeys(("timestamp", *self.labels, *self.measured)))


KINDS: dict[str, RecordKind] = {
    name: RecordKind(
        name, kind.id_fields, kind.time_field, kind.time_fields, kind.stored(TEXT),
        tuple(n for n in kind.stored(COLUMN) if n not in kind.stored(TEXT)),
    )
    for name, kind in DECLARED.items()
}  # fmt: skip
"""The kinds, as their declarations (``mappings/``: :data:`mappings.kinds.DECLARED`) say: the id
hashes a kind's ``ID`` fields, ``timestamp`` is its ``DATES`` field, the embedded store keeps its
``TEXT`` fields as text columns (``labels``) and its ``COLUMN`` fields as plain ones (``measured``)."""

SUMMARY_DIMENSIONS = KINDS["summary"].id_fields[2:]
"""What a ``summary`` record is a total over, besides its day and source kind (None where the
source kind has no such field: slots have no user, jobs no partition)."""


PROBE_KINDS = tuple(k for k in KINDS if k not in ("summary", "gratia"))
"""The kinds a fairacct probe makes. A collector takes these from probes; it makes ``summary``
records itself and takes ``gratia`` records only from Gratia probes, in their own protocol."""

_ID_JSON = json.JSONEncoder(separators=(",", ":"))  # json.dumps(..., separators=...) makes one per call


def record_id(kind: str, *fields: object) -> str:
    """A stable id from the kind and the fields that identify a fact."""
    # names are the usual fields: they need no conversion (a summary's id has ten of them)
    text = _ID_JSON.encode([kind, *(f if f is None or type(f) is str else _plain(f) for f in fields)])
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def owned_id(probe: str, id_: str) -> str:
    """The id a collector stores a probe's record under: its own ``id`` within the probe that
    sent it. Ids are predictable (a hash of the fact), so a store keyed by the probe's id alone
    would let any probe overwrite or shadow another's records; keyed by this, a probe reaches
    only its own, and re-sending stays harmless."""
    return hashlib.sha256(f"{probe}\0{id_}".encode()).hexdigest()[:32]


def _plain(value: object) -> object:
    if hasattr(value, "item"):  # numpy scalars
        value = value.item()
    if value is pd.NA or value is None:
        return None
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return None
        if value.is_integer():
            return int(value)  # 1795300000.0 and 1795300000 are the same fact
    return value


def table_records(kind: str, frame: pd.DataFrame, *, probe: str, drop: Sequence[str] = ("source", "line")) -> Encoded:
    """The records of the rows of a table (see the module docstring), encoded once, straight from
    the table: one JSON object per row, the table's columns first (as pandas writes them, floats
    to 15 significant digits), then the ``*_iso`` times, ``id``, ``kind``, ``schema_version``,
    ``probe`` and ``timestamp``; with the fields of :attr:`RecordKind.carried` beside them, as
    the documents hold them."""
    spec = KINDS[kind]
    if not spec.id_fields:
        raise ValueError(f"{kind} records are not made from tables (see collector/gratia/)")
    missing = [f for f in (*spec.id_fields, spec.time_field) if f not in frame.columns]
    if missing:
        raise ValueError(f"{kind} records need the columns {missing}")
    if not len(frame):
        return Encoded()
    ids = [record_id(kind, *key) for key in frame[list(spec.id_fields)].itertuples(index=False, name=None)]
    out = frame.drop(columns=[c for c in drop if c in frame.columns])
    iso = {f"{c}_iso": np.array(iso_utc(out[c]), dtype=object) for c in spec.time_fields if c in out.columns}
    stamps = iso[f"{spec.time_field}_iso"]
    out = out.assign(**iso).assign(
        id=np.array(ids, dtype=object), kind=kind, schema_version=SCHEMA_VERSION, probe=probe, timestamp=stamps
    )
    docs = _objects(out.to_json(orient="records", double_precision=15).encode(), len(out))
    if docs is None:  # a separator inside a record (a column of lists of objects): pandas splits them
        docs = tuple(out.to_json(orient="records", lines=True, double_precision=15).encode().split(b"\n")[: len(out)])
    return Encoded(tuple(ids), docs, {c: _as_json(out[c]) for c in spec.carried if c in out.columns})


def _objects(array: bytes, n: int) -> tuple[bytes, ...] | None:
    """The ``n`` objects of a JSON array of objects as pandas writes a table's records (every
    object's first key the same), split where one ends and the next begins; None when the
    separator is found more often (inside a record). Inside a JSON string every quote is
    escaped, so ``},{"<first key>":`` is never found there."""
    head = array[1 : array.index(b'":') + 2]  # '{"<first key>":'
    parts = array[len(head) + 1 : -2].split(b"}," + head)
    if len(parts) != n:
        return None
    return tuple(head + p + b"}" for p in parts)


_SAME_IN_JSON = frozenset({str, type(None)})  # what a JSON round trip gives back as it is


def _as_json(column: pd.Series) -> tuple[Any, ...]:
    """A column's values as its records' JSON holds them (see :func:`table_records`): as they
    are when JSON keeps them so (whole numbers, booleans, text), read back from pandas' JSON
    otherwise (floats to 15 significant digits, missing values)."""
    if isinstance(column.dtype, np.dtype) and column.dtype.kind in "iub":  # not pandas' nullable ones
        return tuple(column.tolist())
    if column.dtype == object:
        values = column.tolist()
        if _SAME_IN_JSON.issuperset(map(type, values)):
            return tuple(values)
    return tuple(orjson.loads(column.to_json(orient="records", double_precision=15)))


def table_docs(
    kind: str, frame: pd.DataFrame, *, probe: str, drop: Sequence[str] = ("source", "line")
) -> list[dict[str, Any]]:
    """The documents of :func:`table_records`, decoded (to read them, not to store them)."""
    return table_records(kind, frame, probe=probe, drop=drop).decoded()


def encode_docs(kind: str, docs: Sequence[Mapping[str, Any]]) -> Encoded:
    """Documents of ``kind`` made elsewhere (a request, the summaries, Gratia's) encoded once,
    carrying the fields of :attr:`RecordKind.carried`."""
    return Encoded.of(docs, carried_fields(kind))


def carried_fields(kind: str) -> tuple[str, ...]:
    """The fields a record of ``kind`` carries beside its JSON (:attr:`RecordKind.carried`;
    ``timestamp`` alone for a kind the schema does not know)."""
    return KINDS[kind].carried if kind in KINDS else ("timestamp",)


def iso_utc(seconds: Sequence[float] | pd.Series) -> list[str | None]:
    """UNIX seconds -> ISO-8601 UTC ('2026-11-21T14:00:00Z'); missing stays None."""
    values = pd.to_numeric(pd.Series(seconds), errors="coerce").to_numpy(dtype=np.float64)
    return [
        None if np.isnan(v) or v <= 0 else datetime.fromtimestamp(float(v), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        for v in values
    ]
