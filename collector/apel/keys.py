"""APEL's keys as APEL's tables compare them.

APEL's server stores each name (site, DN, VO, group, role, submit host) once, in a lookup table
whose ``name`` column is ``VARCHAR(255)`` under ``utf8mb4_general_ci`` (``schemas/server.sql``), and
keys its summaries by the ids. So two spellings that collation finds equal -- case, most
accents, ``ß`` and ``s``, trailing spaces, any two characters outside the Basic Multilingual
Plane -- are one key in APEL, and a second record with that key *replaces* the first (``REPLACE
INTO``); a name longer than its column is refused with the whole message. Grouping on what APEL
will key on keeps every job: whitespace collapsed, then spellings that compare equal merged into
one (the one with most jobs, ties to the first in code-point order), and a record with a field
over its column's length, or holding APEL's record separator ``%%``, left out with the reason.

Equal is the server's equal (:func:`general_ci_key`, the weights read from MariaDB itself), never
a Unicode folding of fairacct's own: ``Weiß`` and ``Weiss`` are two keys there, ``i̇`` and ``I``
too, and a decomposed accent is not its composed letter.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from collector.apel.general_ci_weights import WEIGHTS

__all__ = [
    "COLUMN_CHARS",
    "NAME_KEYS",
    "NULL_WORDS",
    "SEPARATOR",
    "Merge",
    "clean",
    "collation_key",
    "general_ci_key",
    "merge_spellings",
    "too_long",
    "unsendable",
]

NAME_KEYS = ("Site", "GlobalUserName", "VO", "VOGroup", "VORole", "SubmitHost")
"""The summary keys that are names in APEL's lookup tables (compared under its collation)."""

COLUMN_CHARS: Mapping[str, int] = {
    "Site": 255, "GlobalUserName": 255, "VO": 255, "VOGroup": 255, "VORole": 255, "SubmitHost": 255,
    "MachineName": 255, "Queue": 100, "LocalJobId": 255, "LocalUserId": 255, "FQAN": 255,
    "Infrastructure": 20, "InfrastructureType": 20, "InfrastructureDescription": 100, "ServiceLevelType": 50,
}  # fmt: skip
"""The length in characters of the column each text field lands in (APEL's ``schemas/server.sql``)."""


NULL_WORDS = frozenset({"none", "null"})
"""The values APEL's records read as no value (``check_for_null``: case aside, and the empty text)."""

SEPARATOR = "%%"
"""What ends a record in APEL's messages: the loader splits the whole text at it, wherever it is."""

_WEIGHTS = {int(c, 16): int(w, 16) for c, _, w in (p.partition(":") for p in WEIGHTS.split())}
_FOLD = str.maketrans({c: chr(w) for c, w in _WEIGHTS.items()})
_SUPPLEMENTARY = 0xFFFD  # the weight general_ci gives every character above U+FFFF
_SPACE = " "


def clean(value: object) -> str | None:
    """A text field as a message can carry it: whitespace runs collapsed to one space, ends
    stripped; None for no value, an empty or blank text, a float NaN, or a word APEL reads as
    no value (:data:`NULL_WORDS`: an accounting group ``none`` is no VO to APEL)."""
    if value is None or (isinstance(value, float) and value != value):
        return None
    text = " ".join(str(value).split())
    return text if text and text.lower() not in NULL_WORDS else None


def general_ci_key(text: str) -> str:
    """What MariaDB's ``utf8mb4_general_ci`` compares of ``text``, as a text of one weight per
    character: equal keys are equal names to APEL's server. A BMP character weighs what the
    server says (:mod:`collector.apel.general_ci_weights`), one outside the BMP weighs U+FFFD,
    and trailing characters weighing a space are ignored (the collation pads with spaces)."""
    folded = text.translate(_FOLD)
    if any(ord(c) > 0xFFFF for c in folded):
        folded = "".join(chr(_SUPPLEMENTARY) if ord(c) > 0xFFFF else c for c in folded)
    return folded.rstrip(_SPACE)


collation_key = general_ci_key
"""The former name of :func:`general_ci_key`."""


def too_long(record: Mapping[Any, object]) -> str | None:
    """The reason ``record`` cannot be sent for a field longer than its APEL column, or None."""
    for name, limit in COLUMN_CHARS.items():
        value = record.get(name)
        if isinstance(value, str) and len(value) > limit:
            return f"{name} longer than APEL's {limit} characters"
    return None


def unsendable(record: Mapping[Any, object]) -> str | None:
    """Why APEL's loader cannot take ``record`` alone, or None: a text field holding its record
    separator ``%%`` (the loader would cut the message there and refuse all of it), or one
    longer than its column (:func:`too_long`)."""
    for name, value in record.items():
        if isinstance(value, str) and SEPARATOR in value:
            return f"{name} holds {SEPARATOR!r}, APEL's record separator"
    return too_long(record)


@dataclass(frozen=True)
class Merge:
    """Spellings of one name that APEL takes for one: ``kept`` is sent for all of them."""

    field: str
    kept: str
    merged: tuple[str, ...]
    jobs: int

    def __str__(self) -> str:
        others = ", ".join(repr(m) for m in self.merged)
        return f"{self.field} {others} sent as {self.kept!r} (APEL compares them equal; {self.jobs} jobs)"


def merge_spellings(keys: pd.DataFrame, jobs: str = "NumberOfJobs") -> tuple[pd.DataFrame, list[Merge]]:
    """``keys`` (a row per group; the :data:`NAME_KEYS` columns, cleaned, and ``jobs``) with the
    spellings of each name column that APEL's collation finds equal replaced by one of them: the
    one with most jobs, ties to the least in code-point order. Returns a new frame and the merges."""
    out = keys.copy()
    merges: list[Merge] = []
    for name in NAME_KEYS:
        values = out[name]
        texts = values[values.map(lambda v: isinstance(v, str))]
        if texts.empty:
            continue
        weight = pd.DataFrame({"v": texts, "k": texts.map(general_ci_key), "n": out.loc[texts.index, jobs]})
        per = weight.groupby(["k", "v"], sort=True)["n"].sum().reset_index()
        spellings = per.groupby("k")["v"].nunique()
        folded = set(spellings[spellings > 1].index)
        if not folded:
            continue
        chosen: dict[str, str] = {}
        for _, part in per[per["k"].isin(folded)].groupby("k", sort=True):
            part = part.sort_values(["n", "v"], ascending=[False, True], kind="stable")
            kept = str(part["v"].iloc[0])
            for v in part["v"]:
                chosen[str(v)] = kept
            merges.append(Merge(name, kept, tuple(str(v) for v in part["v"].iloc[1:]), int(part["n"].sum())))
        out[name] = [chosen.get(v, v) if isinstance(v, str) else v for v in values]
    return out, merges
