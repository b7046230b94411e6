"""Records encoded once: what a record is between the tables and the store.

A record is serialised to JSON once, where it is made (a probe's table,
:func:`collector.records.table_records`; a collector's request, :meth:`Encoded.of`), and from
there to the store it stays those bytes: the outbox keeps them, the embedded store stores them,
an Elasticsearch bulk body and a collector request are built from them. The few fields a sink
needs without reading the document travel beside it, never parsed out of it again: its ``id``,
and ``columns``, values of named fields of every record (its ``timestamp``, and the labels and
measured fields the embedded store keeps as columns), as the document holds them; and, when it
has one, its version (:data:`collector.records.VERSION`), which is beside the document only.

An :class:`Encoded` is immutable (tuples, a read-only mapping), so it can be shared between
threads, batches and retries without a copy.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain
from types import MappingProxyType
from typing import Any

import orjson

__all__ = ["Encoded"]

_NO_COLUMNS: Mapping[str, tuple[Any, ...]] = MappingProxyType({})


@dataclass(frozen=True)
class Encoded:
    """Records of one kind: ``docs[i]``, record i as one JSON object (UTF-8, no newline), with its
    ``ids[i]``; ``columns[name][i]``, record i's value of field ``name`` (None when it has none; a
    field not in ``columns`` is not carried). Build with :meth:`of` or
    :func:`collector.records.table_records`, rather than by hand."""

    ids: tuple[str, ...] = ()
    docs: tuple[bytes, ...] = ()
    columns: Mapping[str, tuple[Any, ...]] = field(default_factory=lambda: _NO_COLUMNS)

    def __post_init__(self) -> None:
        n = len(self.ids)
        if len(self.docs) != n or any(len(v) != n for v in self.columns.values()):
            raise ValueError(
                f"encoded records: {n} ids, {len(self.docs)} documents and columns of "
                f"{sorted({len(v) for v in self.columns.values()})} values; expected as many of each"
            )
        if not isinstance(self.columns, MappingProxyType):
            object.__setattr__(self, "columns", MappingProxyType(dict(self.columns)))

    @classmethod
    def of(cls, docs: Sequence[Mapping[str, Any]], columns: Iterable[str] = ()) -> Encoded:
        """``docs`` encoded now (orjson), carrying the fields ``columns``. Each needs a string
        ``id`` (ValueError); a document orjson cannot encode is its ``JSONEncodeError`` (a
        ``TypeError``)."""
        ids = tuple(d.get("id") for d in docs)
        if not all(type(i) is str for i in ids):
            bad = next(i for i in ids if type(i) is not str)
            raise ValueError(f"a record to encode has no string id, got {bad!r}")
        return cls(
            ids,  # type: ignore[arg-type]  # checked above
            tuple(orjson.dumps(d) for d in docs),
            {c: tuple(d.get(c) for d in docs) for c in dict.fromkeys(columns)},
        )

    @classmethod
    def join(cls, parts: Iterable[Encoded]) -> Encoded:
        """The records of ``parts``, in order (a column not carried by every part is not carried)."""
        parts = [p for p in parts if p.ids]
        if len(parts) == 1:
            return parts[0]
        if not parts:
            return cls()
        names = [c for c in parts[0].columns if all(c in p.columns for p in parts)]
        return cls(
            tuple(chain.from_iterable(p.ids for p in parts)),
            tuple(chain.from_iterable(p.docs for p in parts)),
            {c: tuple(chain.from_iterable(p.columns[c] for p in parts)) for c in names},
        )

    def __len__(self) -> int:
        return len(self.ids)

    def __bool__(self) -> bool:
        return bool(self.ids)

    def __add__(self, other: Encoded) -> Encoded:
        return Encoded.join([self, other])

    def pick(self, positions: Sequence[int] | range) -> Encoded:
        """The records at ``positions``, in that order."""
        if isinstance(positions, range) and positions.step == 1:
            if positions == range(len(self)):
                return self
            part = slice(positions.start, positions.stop)
            return Encoded(self.ids[part], self.docs[part], {c: v[part] for c, v in self.columns.items()})
        ids, docs = self.ids, self.docs
        return Encoded(
            tuple(ids[i] for i in positions),
            tuple(docs[i] for i in positions),
            {c: tuple(v[i] for i in positions) for c, v in self.columns.items()},
        )

    def newest(self) -> Encoded:
        """Each id once, its last copy (a later copy of a record replaces an earlier one), in
        the order of the last copies; ``self`` when no id is repeated."""
        last = {id_: i for i, id_ in enumerate(self.ids)}
        if len(last) == len(self.ids):
            return self
        return self.pick(sorted(last.values()))

    def carrying(self, name: str, value: Any) -> Encoded:
        """These records, each carrying ``value`` as ``name`` too (beside its document, which is
        left as it is: a version, :data:`collector.records.VERSION`)."""
        return Encoded(self.ids, self.docs, {**self.columns, name: (value,) * len(self)})

    def column(self, name: str) -> tuple[Any, ...]:
        """Every record's value of ``name``: all None when it is not carried."""
        return self.columns.get(name) or (None,) * len(self)

    def json_array(self) -> bytes:
        """The records as one JSON array."""
        return b"[" + b",".join(self.docs) + b"]"

    def decoded(self) -> list[dict[str, Any]]:
        """The records decoded (for reading them back: tests, ``outbox waiting``), never on the
        way to a store."""
        return [orjson.loads(d) for d in self.docs]
