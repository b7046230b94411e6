"""Columns from classad2.ClassAd objects (a live query's answer, or a test's ads), evaluated by
classad2 itself, so that files and a live pool give the same tables."""

from __future__ import annotations

from collections.abc import Sequence

import classad2
import numpy as np

from probes.sources.classad.limits import out_of_range
from probes.sources.classad.literals import drop_infinities, store_value
from probes.sources.classad.model import AdColumns, Attr, Kind, repeat
from probes.sources.report import Malformed, ReadReport, ReadTally
from probes.sources.sandbox import EvaluationTimeout, evaluate_ad

__all__ = ["columns_from_classads"]


def columns_from_classads(
    ads: Sequence[classad2.ClassAd], attrs: Sequence[Attr], origin: str = "<classads>"
) -> tuple[AdColumns, ReadReport]:
    """The same columns from classad2.ClassAd objects (a live query's answer, or a test's ads).

    Values are classad2's own evaluations, so both kinds of source give the same tables. As for
    files, an attribute behind a present one (:attr:`Attr.unless`) is never evaluated, and an
    ad whose wanted attributes call a regular expression is evaluated under the sandbox's budget
    (:mod:`probes.sources.sandbox`): past it, the ad is skipped and reported as malformed, its
    line being its place in ``ads`` (1-based).
    """
    tally = ReadTally()
    numeric = np.full((len(ads), len(attrs)), np.nan)
    objects = np.full((len(ads), len(attrs)), None, dtype=object)
    raw = np.array([ad.printOld() for ad in ads] + [None], dtype=object)[:-1]
    wanted = [(a.name, a.shadows) for a in attrs]
    keep = np.ones(len(ads), dtype=bool)
    for i, ad in enumerate(ads):
        try:
            values = evaluate_ad(ad, wanted, raw[i])
        except (EvaluationTimeout, ValueError) as exc:
            why = f"{exc} (a regular expression that backtracks?)" if isinstance(exc, EvaluationTimeout) else str(exc)
            tally.add_malformed(Malformed(origin, i + 1, f"{why}; the ad was skipped", raw[i]))
            keep[i] = False
            continue
        for j, (a, value) in enumerate(zip(attrs, values, strict=True)):
            store_value(numeric, objects, a, i, j, value, tally)
    present = np.zeros((len(ads), len(attrs)), dtype=bool)
    for j, a in enumerate(attrs):
        if a.finite:  # where a value that is no number makes the ad malformed
            present[:, j] = [a.name in ad and not any(u in ad for u in a.shadows) for ad in ads]

    def shown(i: int, j: int) -> str:
        return str(ads[i].lookup(attrs[j].name))

    for i, reason in out_of_range(numeric, attrs, present, shown).items():
        if keep[i]:
            tally.add_malformed(Malformed(origin, i + 1, reason, raw[i]))
            keep[i] = False
    drop_infinities(numeric, attrs, tally, keep)
    tally.ads = int(keep.sum())
    rows = slice(None) if keep.all() else keep
    return (
        AdColumns(
            {a.name: (numeric if a.kind is Kind.NUMBER else objects)[rows, j] for j, a in enumerate(attrs)},
            repeat(origin, tally.ads),
            np.arange(1, len(ads) + 1, dtype=np.int64)[rows],
            raw[rows],
        ),
        tally.report(),
    )
