"""What a file of ads holds: each reader keeps the ads of its kind and says what a file of
another kind looks like, rather than reading a job history as slots.

HTCondor writes the kind of every ad in ``MyType`` (``Machine`` for startd ads, ``Job`` for
queue and history ads, ``Scheduler``, ``Collector``, ...). An ad of another kind, or without
the attribute a table cannot do without (a slot's ``Name``, a job's ``GlobalJobId``), is
skipped and counted; a file with no ad of the expected kind at all is refused, with what it
looks like instead.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from probes.errors import SourceError
from probes.sources.classad.model import AdColumns, Attr, Kind
from probes.sources.report import ReadTally

__all__ = ["MY_TYPE", "AdKind", "KindCheck"]

MY_TYPE = Attr("MyType", Kind.STRING)

_LOOKS_LIKE = {
    "machine": "startd ads (condor_status -long)",
    "job": "job ads (condor_q -long or condor_history -long)",
    "scheduler": "schedd ads (condor_status -schedd -long)",
    "collector": "collector ads",
    "negotiator": "negotiator ads",
    "submitter": "submitter ads (condor_status -submitters -long)",
    "accounting": "accounting ads (condor_userprio -long)",
}


@dataclass(frozen=True)
class AdKind:
    """The ads a reader wants: their ``MyType`` (an ad without one is given the benefit of the
    doubt), the attributes of which none of them lacks all, and what to call them in messages."""

    my_type: str
    needed: tuple[str, ...]
    what: str


@dataclass
class KindCheck:
    """The ads of one input checked against ``kind``, chunk by chunk (:meth:`keep`), and the
    verdict on the whole input (:meth:`verdict`)."""

    kind: AdKind
    kept: int = 0
    others: Counter[str] = field(default_factory=Counter)  # MyType (lower case) -> ads skipped
    unnamed: int = 0

    def keep(self, ads: AdColumns, tally: ReadTally) -> AdColumns:
        """The ads of the kind; the others are counted in ``tally``."""
        my_type = ads[MY_TYPE.name]  # str or None
        wanted = self.kind.my_type.lower()
        other = np.zeros(len(ads), dtype=bool)
        # This runs on every chunk of a history: each distinct spelling (one, usually) is folded
        # once, not each ad's (pandas' str.lower was a tenth of the reader's time).
        for spelling in dict.fromkeys(my_type.tolist()):  # in the order met, as messages name the first
            t = spelling.lower() if spelling is not None else wanted
            if t != wanted:
                is_t = my_type == spelling
                other |= is_t
                n = int(is_t.sum())
                self.others[t] += n
                tally.rejects[f"MyType: {t!r} ad among {self.kind.what}, skipped"] += n
        missing = ~other
        for name in self.kind.needed:
            missing &= pd.isna(ads[name])
        if missing.any():
            self.unnamed += int(missing.sum())
            tally.rejects[f"{' or '.join(self.kind.needed)}: missing, the ad was skipped"] += int(missing.sum())
        keep = ~(other | missing)
        self.kept += int(keep.sum())
        return ads if keep.all() else ads.take(keep)

    def verdict(self, path: str | os.PathLike[str], malformed: int = 0) -> None:
        """Raise :class:`SourceError` when ``path`` held ads but none of the kind, or when none
        of its ``malformed`` ads could be read at all (a file that is not ClassAds)."""
        if not self.kept and malformed and not (self.others or self.unnamed):
            raise SourceError(
                f"{os.fspath(path)}: none of its {malformed} ad(s) could be read, expected {self.kind.what}; "
                "is this the right file?"
            )
        if self.kept or not (self.others or self.unnamed):
            return
        if self.others:
            seen, _ = self.others.most_common(1)[0]
            looks = _LOOKS_LIKE.get(seen, f"ads of MyType {seen!r}")
            raise SourceError(f"{os.fspath(path)}: this looks like {looks}, expected {self.kind.what}")
        raise SourceError(
            f"{os.fspath(path)}: no ad has {' or '.join(self.kind.needed)}, expected {self.kind.what}; "
            "is this the right file?"
        )
