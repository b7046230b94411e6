"""A startd dump's ads checked as HTCondor writes them (issue 51), each ad that is not so set
aside with its reason, its node left ``incomplete`` (never billed to its neighbours).

- ``condor_status -long`` ends every ad with a blank line, the last one too (HTCondor 8.4's and
  25's dumps do): a file that ends with a line of an ad and no blank line after it was cut (a
  copy or a disk that stopped), and its last ad may have lost any of its lines. It is "cut by
  the end of its file" (:func:`cut_at_its_end`). A file that ends inside a line the reader finds.
- HTCondor writes an attribute once per ad: one written twice (two ads merged when the blank line
  between them was lost, or an ad edited by hand) leaves its value unknown (classad2 keeps the
  last). The ad is set aside, "attribute X twice" (:func:`repeated_attributes`).
- Every slot ad names itself and says its type and amounts (:data:`REQUIRED`), and a
  partitionable one its size (:data:`REQUIRED_PARTITIONABLE`): a d-slot without ``SlotType``
  would be read as a static slot, a p-slot without ``TotalSlotCpus`` bill its jobs nothing
  (:func:`missing_required`).

The ``-json`` form is read by the JSON parser: a cut document does not parse, and a repeated key
is its own matter; these checks are of the ``-long`` form's text.
"""

from __future__ import annotations

import os
import re

import numpy as np
import pandas as pd

from probes.errors import SourceError
from probes.sources.classad import AdColumns
from probes.sources.report import ReadTally
from probes.sources.slot_checks import quarantine
from probes.sources.slot_instants import first_number

__all__ = [
    "CUT",
    "REQUIRED",
    "REQUIRED_PARTITIONABLE",
    "cut_at_its_end",
    "differing_again",
    "missing_required",
    "nameless",
    "once_per_instant",
    "repeated_attributes",
    "set_aside_in_file",
]

#: What every slot ad of ``condor_status -long`` holds (HTCondor 8.2 to 25, real dumps): without
#: one, the ad cannot be placed, typed or measured.
REQUIRED = ("Name", "Machine", "SlotType", "Cpus", "Memory")
#: What a partitionable slot's ad holds besides: its size, of which its jobs are billed.
REQUIRED_PARTITIONABLE = ("TotalSlotCpus", "TotalSlotMemory")
#: The reason of a file's last ad when the file does not end with the blank line after it.
CUT = (
    "cut by the end of its file: condor_status -long ends every ad with a blank line, and the file "
    "ends with this ad's last line, not one (a copy cut short?): its lines after the cut are unknown"
)

_TAIL = 4096
_NAME = re.compile(r"(?m)^[ \t]*([A-Za-z_][A-Za-z0-9_.]*)[ \t]*=")


def cut_at_its_end(path: str | os.PathLike[str]) -> bool:
    """Whether the ``-long`` file ``path`` ends with a line of an ad and no blank line after it
    (its last ad cut short). A ``-json`` file, an empty one, one that ends inside a line (the
    reader quarantines its last ad) or that cannot be read: False."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(16).removeprefix(b"\xef\xbb\xbf").lstrip()
            size = fh.seek(0, os.SEEK_END)
            fh.seek(max(0, size - _TAIL))
            tail = fh.read().replace(b"\r\n", b"\n")
    except OSError:
        return False
    if head[:1] == b"[" or not tail.endswith(b"\n"):
        return False
    text = tail.rstrip(b"\n")
    last = text[text.rfind(b"\n") + 1 :]
    # the last line is of the ad: no newline, nor a line of white space only, after it
    return tail == text + b"\n" and bool(last.strip()) and not last.lstrip().startswith(b"#")


def repeated_attributes(text: str) -> list[str]:
    """The attribute names written more than once in one ad's ``-long`` text (case-folded, as
    ClassAds compare them), as first written; comment lines are not attributes."""
    names = [n.lower() for n in _NAME.findall(text)]
    if len(names) == len(set(names)):
        return []
    seen: set[str] = set()
    out: dict[str, str] = {}
    for original in _NAME.findall(text):
        folded = original.lower()
        if folded in seen:
            out.setdefault(folded, original)
        seen.add(folded)
    return list(out.values())


def set_aside_in_file(ads: AdColumns, path: str, tally: ReadTally) -> AdColumns:
    """``ads`` (one ``-long`` file's, with their text) without those set aside for an attribute
    written twice or as the last ad of a file cut short, each added to ``tally`` as malformed (its
    node left incomplete); a file read without its ads' text is returned as it is."""
    if ads.raw is None or not len(ads):
        return ads
    why = np.full(len(ads), "", dtype=object)
    for i, text in enumerate(ads.raw.tolist()):
        if isinstance(text, str) and (twice := repeated_attributes(text)):
            named = ", ".join(f"'{n}'" for n in twice[:5])
            why[i] = (
                f"attribute {named} twice in one ad (HTCondor writes each once: two ads merged, the blank line "
                "between them lost?): which value is true cannot be told"
            )
    if cut_at_its_end(path):
        last = int(np.argmax(ads.line))
        # the reader quarantined an ad after it (one cut inside a line): this one is whole
        later = any(m.path == path and m.line > int(ads.line[last]) for m in tally.malformed)
        if not later and not why[last]:
            why[last] = CUT
    bad = np.flatnonzero(why != "")
    if not len(bad):
        return ads
    for i in bad.tolist():
        tally.add_malformed(quarantine(ads, i, str(why[i])))
    return ads.take(why == "")


def missing_required(ads: AdColumns, partitionable: np.ndarray) -> np.ndarray:
    """Why each ad lacks what HTCondor always writes in a slot's ad ("" where it does not):
    :data:`REQUIRED`, and :data:`REQUIRED_PARTITIONABLE` where ``partitionable``."""
    out = np.full(len(ads), "", dtype=object)
    lacking: list[list[str]] = [[] for _ in range(len(ads))]
    for attr in (*REQUIRED, *REQUIRED_PARTITIONABLE):
        if attr not in ads.columns:
            continue
        values = ads[attr]
        absent = pd.isna(pd.Series(values, dtype=object)).to_numpy(dtype=bool, copy=True)
        if attr in REQUIRED_PARTITIONABLE:
            absent &= partitionable
        for i in np.flatnonzero(absent).tolist():
            lacking[i].append(attr)
    for i, names in enumerate(lacking):
        if names:
            out[i] = (
                f"no {', '.join(names)}: HTCondor writes {'them' if len(names) > 1 else 'it'} in every "
                f"{'partitionable ' if partitionable[i] else ''}slot ad (the ad cut, or edited?)"
            )
    return out


def nameless(ads: AdColumns, tally: ReadTally) -> AdColumns:
    """``ads`` without the slot ads that have neither ``Name`` nor ``Machine``, each added to
    ``tally`` as malformed: its node is unknown, so every node that lists a child without an ad
    is left incomplete (:func:`~probes.sources.slot_checks.quarantined_nodes`). An ad of another
    ``MyType`` is left to the kind check, which skips it."""
    my_type = pd.Series(ads["MyType"], dtype=object).fillna("machine").str.lower().to_numpy()
    lost = (my_type == "machine") & pd.isna(ads["Name"]) & pd.isna(ads["Machine"])
    if not lost.any():
        return ads
    for i in np.flatnonzero(lost).tolist():
        why = "no Name and no Machine: HTCondor writes both in every slot ad (the ad cut, or edited?)"
        tally.add_malformed(quarantine(ads, i, why))
    return ads.take(~lost)


def differing_again(ads: AdColumns, again: np.ndarray, first: np.ndarray) -> None:
    """Refuse (:class:`SourceError`) a slot ad of ``again`` that differs from the ad of the same
    slot and instant at ``first`` (rows of ``ads``): the same dump given twice is counted once, but
    two ads of one slot at one instant that disagree cannot both be true, nor either chosen."""
    for column in ads.columns:
        a, b = ads[column][again].tolist(), ads[column][first].tolist()
        same = np.array([x == y or (x != x and y != y) for x, y in zip(a, b, strict=True)], dtype=bool)  # NaN: both
        if same.all():
            continue
        k = int(np.flatnonzero(~same)[0])
        i, j = int(again[k]), int(first[k])
        raise SourceError(
            f"{ads.path[i]} line {int(ads.line[i])}: the slot {ads['Name'][i]!r} is also at {ads.path[j]} line "
            f"{int(ads.line[j])}, at the same instant (its MyCurrentTime), with another {column} ({a[k]!r}, there "
            f"{b[k]!r}): two ads of one slot at one instant that disagree cannot be accounted; give each "
            "condor_status dump once"
        )


def once_per_instant(ads: AdColumns, tally: ReadTally) -> AdColumns:
    """Each slot once per instant: the same dump given twice (or its ``-long`` and ``-json``
    forms) must not double the overhead. Slots of different instants are all kept; they are
    accounted instant by instant. The same slot at the same instant with other values is not
    the same dump twice: the input is refused (:func:`differing_again`)."""
    name = pd.Series(ads["Name"], dtype=object).str.lower()
    observed = pd.Series(first_number(ads, ("MyCurrentTime", "LastHeardFrom")))
    key = pd.DataFrame({"name": name, "at": observed})
    repeated = key.duplicated().to_numpy() & name.notna().to_numpy()
    if not repeated.any():
        return ads
    first = key.reset_index().groupby(["name", "at"], dropna=False)["index"].transform("first").to_numpy()
    differing_again(ads, np.flatnonzero(repeated), first[repeated])
    n = int(repeated.sum())
    tally.rejects["Name: a slot ad seen again at the same instant (the same dump given twice?), counted once"] += n
    return ads.take(~repeated)
