"""Columns from classad2.ClassAd objects (a live query's answer, or a test's ads), evaluated by
classad2 itself, so that files and a live pool give the same tables."""

from __future__ import annotations

from collections.abc import Sequence

import classad2
import numpy as np

from probes.sources.classad.literals import drop_infinities, evaluate, store_value
from probes.sources.classad.model import AdColumns, Attr, Kind, repeat
from probes.sources.report import ReadReport

__all__ = ["columns_from_classads"]


def columns_from_classads(
    ads: Sequence[classad2.ClassAd], attrs: Sequence[Attr], origin: str = "<classads>"
) -> tuple[AdColumns, ReadReport]:
    """The same columns from classad2.ClassAd objects (a live query's answer, or a test's ads).

    Values are classad2's own evaluations, so both kinds of source give the same tables.
    """
    report = ReadReport(ads=len(ads))
    numeric = np.full((len(ads), len(attrs)), np.nan)
    objects = np.full((len(ads), len(attrs)), None, dtype=object)
    for i, ad in enumerate(ads):
        for j, a in enumerate(attrs):
            if not any(u in ad for u in a.shadows):
                store_value(numeric, objects, a, i, j, evaluate(ad, a.name), report)
    drop_infinities(numeric, attrs, report)
    raw = np.array([ad.printOld() for ad in ads] + [None], dtype=object)[:-1]
    return (
        AdColumns(
            {a.name: (numeric if a.kind is Kind.NUMBER else objects)[:, j] for j, a in enumerate(attrs)},
            repeat(origin, len(ads)),
            np.arange(1, len(ads) + 1, dtype=np.int64),
            raw,
        ),
        report,
    )
