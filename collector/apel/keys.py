"""APEL's keys as APEL's tables compare them.

APEL's server stores each name (site, DN, VO, group, role, submit host) once, in a lookup table
whose ``name`` column is ``VARCHAR(255)`` under ``utf8mb4_general_ci`` (``schemas/server.sql``), and
keys its summaries by the ids. So two spellings that collation finds equal -- case, accents,
trailing spaces -- are one key in APEL, and a second record with that key *replaces* the first
(``REPLACE INTO``); a name longer than its column is refused with the whole message. Grouping on
what APEL will key on keeps every job: whitespace collapsed, then spellings that compare equal
merged into one (the one with most jobs, ties to the first in code-point order), and a record
with a field over its column's length left out, with the reason.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

__all__ = ["COLUMN_CHARS", "NAME_KEYS", "Merge", "clean", "collation_key", "merge_spellings", "too_long"]

NAME_KEYS = ("Site", "GlobalUserName", "VO", "VOGroup", "VORole", "SubmitHost")
"""The summary keys that are names in APEL's lookup tables (compared under its collation)."""

COLUMN_CHARS: Mapping[str, int] = {
    "Site": 255, "GlobalUserName": 255, "VO": 255, "VOGroup": 255, "VORole": 255, "SubmitHost": 255,
    "MachineName": 255, "Queue": 100, "LocalJobId": 255, "LocalUserId": 255, "FQAN": 255,
    "Infrastructure": 20, "InfrastructureType": 20, "InfrastructureDescription": 100, "ServiceLevelType": 50,
}  # fmt: skip
"""The length in characters of the column each text field lands in (APEL's ``schemas/server.sql``)."""


def clean(value: object) -> str | None:
    """A text field as a message can carry it: whitespace runs collapsed to one space, ends
    stripped; None for no value, an empty or blank text, or a float NaN."""
    if value is None or (isinstance(value, float) and value != value):
        return None
    text = " ".join(str(value).split())
    return text or None


def collation_key(text: str) -> str:
    """What ``utf8mb4_general_ci`` compares of ``text``: one weight per character, the upper
    case of its base letter (accents dropped), trailing spaces ignored."""
    base = "".join(c for c in unicodedata.normalize("NFD", text) if not unicodedata.combining(c))
    return base.upper().rstrip(" ")


def too_long(record: Mapping[Any, object]) -> str | None:
    """The reason ``record`` cannot be sent for a field longer than its APEL column, or None."""
    for name, limit in COLUMN_CHARS.items():
        value = record.get(name)
        if isinstance(value, str) and len(value) > limit:
            return f"{name} longer than APEL's {limit} characters"
    return None


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
        weight = pd.DataFrame({"v": texts, "k": texts.map(collation_key), "n": out.loc[texts.index, jobs]})
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
