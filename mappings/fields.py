"""How a record kind is declared: its fields, each once, and what every consumer reads from them.

A :class:`Kind` names its fields (:class:`Field`) and the few facts of its index template that
are not fields (its ``version`` and description). Everything else is derived from it:

- the Elasticsearch index template (``mappings/<kind>.json``, :mod:`mappings.templates`);
- the collector's record schema (``collector.records.KINDS``: the id, the time, the embedded
  store's columns) and its check of every field (``collector.schema``);
- the embedded store's columns and their migration (``collector.sinks.sqlite_layout``);
- the summaries' dimensions and sums (``collector.summaries.spec``);
- the field tables of the records' guide (docs/records.md, :mod:`mappings.tables`).

A field's ``type`` is its Elasticsearch type, or :data:`TIME`: UNIX seconds (UTC), a ``long``
with a ``<name>_iso`` twin (ISO-8601, a ``date``) that the record carries beside it.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = [
    "BOOLEAN",
    "COLUMN",
    "DATE",
    "DATES",
    "DIMENSION",
    "DOC",
    "DOUBLE",
    "ENVELOPE",
    "GIB_HOUR",
    "HOUR",
    "ID",
    "INTEGER",
    "KEYWORD",
    "LONG",
    "MEASURE",
    "NONE",
    "TEXT",
    "TIME",
    "Field",
    "Kind",
    "Role",
    "Store",
    "Sum",
    "Type",
]  # fmt: skip

Type = Literal["keyword", "long", "integer", "double", "boolean", "date", "time"]
KEYWORD: Type = "keyword"
LONG: Type = "long"
INTEGER: Type = "integer"
DOUBLE: Type = "double"
BOOLEAN: Type = "boolean"
DATE: Type = "date"
TIME: Type = "time"
"""UNIX seconds (UTC): a ``long`` in the template, with a ``<name>_iso`` twin (a ``date``)."""


class Role(enum.Flag):
    """What a field is to its kind (several at once: a slot's ``observed_at`` is ``ID | DATES``)."""

    NONE = 0
    ID = enum.auto()  # the id hashes it (in the kind's id order: the declaration's)
    DATES = enum.auto()  # it dates the record: its ``timestamp`` (one field per kind)
    DIMENSION = enum.auto()  # the summaries group the kind's records by it
    MEASURE = enum.auto()  # the summaries sum it (or count where it is true)


NONE, ID, DIMENSION, MEASURE, DATES = Role.NONE, Role.ID, Role.DIMENSION, Role.MEASURE, Role.DATES

HOUR = 1.0 / 3600.0
"""Seconds -> hours (a :class:`Sum`'s scale)."""
GIB_HOUR = 1.0 / (1024.0 * 3600.0)
"""MiB-seconds -> GiB-hours (a :class:`Sum`'s scale)."""

Store = Literal["text", "column", "doc"]
TEXT: Store = "text"
"""The embedded store keeps the field as a text column too (a label: what reports group by)."""
COLUMN: Store = "column"
"""The embedded store keeps the field as a plain (untyped) column too: numbers stay numbers."""
DOC: Store = "doc"
"""The embedded store keeps the field in the document only."""


@dataclass(frozen=True)
class Sum:
    """What a summary's field sums, over the records of the ``kind`` summarized: the product of
    ``fields`` (none: the number of records) times ``scale``, over the records whose ``where``
    is true; a record without the field counts ``missing``; ``whole``: whole units each (see
    ``collector.sinks.base.Total``)."""

    kind: str
    fields: tuple[str, ...] = ()
    scale: float = 1.0
    where: str | None = None
    missing: float = 0.0
    whole: bool = False


@dataclass(frozen=True)
class Field:
    """A field of a record kind: its name, type, unit (``""``: none, a name), role, where the
    embedded store keeps it, and what it means.

    ``mapped``: whether the index template names it (False: its dynamic templates map it, as
    keyword or double; naming it changes the template, and so its version). ``mapping``: more
    of its template's mapping than its type (``{"index": False}``). ``sums``: what it sums, a
    summary's field. ``table``: the probe's table that makes it as a column (``"history"``: the
    jobs table of probes.sources.history), in the table's order."""

    name: str
    type: Type
    unit: str = ""
    role: Role = Role.NONE
    store: Store = DOC
    doc: str = ""
    mapped: bool = True
    mapping: Mapping[str, Any] = field(default_factory=dict)
    sums: Sum | None = None
    table: str = ""


@dataclass(frozen=True)
class Kind:
    """A kind of record, declared once: its fields (:class:`Field`) in order, the template's
    ``version`` (bump it when the template's content changes) and ``description``.

    The id hashes the :data:`ID` fields in the order of ``fields``; the summaries group by the
    :data:`DIMENSION` fields in that order too, those named in ``dimensions`` first, in its
    order (the job's: its declaration is in the order of the jobs table). ``dynamic_templates``:
    the template's own, before the ones every template has."""

    name: str
    version: int
    description: str
    fields: tuple[Field, ...]
    dimensions: tuple[str, ...] = ()
    dynamic_templates: tuple[Mapping[str, Any], ...] = ()

    def __post_init__(self) -> None:
        names = [f.name for f in self.fields]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"record kind {self.name!r}: fields declared twice: {twice}")
        dated = [f.name for f in self.fields if DATES in f.role]
        if len(dated) != 1:
            raise ValueError(f"record kind {self.name!r}: expected one field of role DATES, got {dated}")
        unknown = [d for d in self.dimensions if d not in self.named(DIMENSION)]
        if unknown:
            raise ValueError(f"record kind {self.name!r}: dimensions {unknown} are not fields of role DIMENSION")

    def named(self, role: Role) -> tuple[str, ...]:
        """The names of the fields of ``role``, in declaration order."""
        return tuple(f.name for f in self.fields if role in f.role)

    @property
    def id_fields(self) -> tuple[str, ...]:
        return self.named(ID)

    @property
    def time_field(self) -> str:
        return self.named(DATES)[0]

    @property
    def time_fields(self) -> tuple[str, ...]:
        """The :data:`TIME` fields: UNIX seconds, each with its ``<name>_iso`` twin."""
        return tuple(f.name for f in self.fields if f.type == TIME)

    @property
    def group_by(self) -> tuple[str, ...]:
        """What the summaries group this kind's records by, in their order."""
        return tuple(dict.fromkeys((*self.dimensions, *self.named(DIMENSION))))

    def stored(self, store: Store) -> tuple[str, ...]:
        """The names of the fields the embedded store keeps as ``store``, in declaration order."""
        return tuple(f.name for f in self.fields if f.store == store)

    def columns(self, table: str) -> tuple[str, ...]:
        """The fields ``table`` (a probe's table) makes, in its order."""
        return tuple(f.name for f in self.fields if f.table == table)

    def types(self) -> dict[str, str]:
        """The type of each field the index template names (its ``properties``), by name:
        a :data:`TIME` field is a ``long`` and its ``_iso`` twin a ``date``."""
        out: dict[str, str] = {}
        for f in self.fields:
            if f.mapped:
                out[f.name] = LONG if f.type == TIME else f.type
                if f.type == TIME:
                    out[f"{f.name}_iso"] = DATE
        return out


ENVELOPE = (
    Field("id", KEYWORD, "", doc="The record's id: a hash of its kind and its ID fields (or of its content)."),
    Field("kind", KEYWORD, "", doc="The record's kind."),
    Field("probe", KEYWORD, "", doc="The probe that made the record (a Gratia record: its sender)."),
    Field("schema_version", INTEGER, "", doc="The record schema the probe wrote."),
    Field("timestamp", DATE, "UTC", doc="The record's own time (ISO-8601): its time field's; its index's month."),
)
"""The fields every record has besides its kind's (``collector.records``)."""
