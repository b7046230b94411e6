"""The records' guide (docs/records.md): a table of the fields of every record kind, made from
the declarations (:mod:`mappings.kinds`) by ``python -m mappings`` and checked by a test, so
that the guide names what the records hold."""

from __future__ import annotations

import textwrap
from collections.abc import Iterable

from mappings.fields import ENVELOPE, TIME, Field, Kind, Role

__all__ = ["guide_text", "kind_table"]

_INTRO = """\
# Records: the fields of every kind

This guide is made from the declarations of the record kinds (`python -m mappings` writes it and
the index templates of `mappings/`; a test checks both): do not edit it by hand. Each kind is
declared once, field by field: its name, type (Elasticsearch's; `time` is UNIX seconds, UTC, a
`long` with a `<name>_iso` twin, an ISO-8601 `date`), unit, role and where the embedded store
keeps it. Roles: **id**, the record's id hashes it (in this order); **time**, it dates the
record (its `timestamp`); **dimension**, the daily summaries group by it; **measure**, they sum
it. The embedded store keeps every record as its JSON document, and some fields as columns
too: **text** (labels reports group by) or **column** (numbers stay numbers). A field marked
*dynamic* is not named by the index template: its dynamic templates map it.

Every record has these fields besides its kind's:
"""

_HEAD = "| field | type | unit | role | embedded store | meaning |\n|---|---|---|---|---|---|\n"


def _roles(role: Role) -> str:
    return ", ".join(r.name.lower() if r.name != "DATES" else "time" for r in Role if r and r in role and r.name)


def _row(f: Field) -> str:
    type_ = f"{f.type} (+ `{f.name}_iso`)" if f.type == TIME else f.type + ("" if f.mapped else ", dynamic")
    store = "document" if f.store == "doc" else f.store
    return f"| `{f.name}` | {type_} | {f.unit} | {_roles(f.role)} | {store} | {f.doc} |\n"


def kind_table(kind: Kind) -> str:
    """The table of the fields of ``kind`` (those of :data:`~mappings.fields.ENVELOPE` aside)."""
    return _HEAD + "".join(_row(f) for f in kind.fields if f not in ENVELOPE)


def guide_text(kinds: Iterable[Kind]) -> str:
    """docs/records.md: the fields every record has, then a section per kind."""
    parts = [_INTRO, "\n", _HEAD, *(_row(f) for f in ENVELOPE)]
    for kind in kinds:
        about = textwrap.fill(f"The template's description: {kind.description}.", 120)
        parts += [f"\n## {kind.name}\n\n", about, f"\n\nIndex template version {kind.version}.\n\n"]
        parts.append(kind_table(kind))
    return "".join(parts)
