"""The exact idle-job cross-check: would HTCondor have matched an idle job to a slot's leftovers?

:func:`probes.accounting.fit.fitting_pairs` finds the (slot, autocluster) pairs whose requests
fit in a slot's unallocated resources, cheaply, as arrays. Here each such pair is checked the
way the negotiator would: the job's ``Requirements`` evaluated with the slot as ``TARGET`` and
the slot's ``Requirements`` with the job as ``TARGET``, by classad2. A partitionable slot's
``Cpus``/``Memory``/``GPUs`` are its unallocated amounts, so the job sees the leftovers.

This module knows HTCondor; the accounting package does not.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import classad2
import numpy as np
import pandas as pd

from probes.accounting.fit import fitting_pairs
from probes.sources.classad import to_classad

__all__ = ["fits_idle_exact"]


def fits_idle_exact(
    slots: pd.DataFrame,
    slot_ads: Sequence[Any],
    idle: pd.DataFrame,
) -> pd.Series:
    """Per slot, whether some idle autocluster both fits its leftovers and matches it.

    ``slot_ads`` holds each slot row's ad (text or JSON object, as ``Snapshot.ads``); the idle
    table's ``example_job`` column holds one job ad of each autocluster.
    """
    result = np.zeros(len(slots), dtype=bool)
    if not len(idle) or not len(slots):
        return pd.Series(result, index=slots.index, name="fits_idle")
    pairs = fitting_pairs(slots, idle)
    slot_cache: dict[int, classad2.ClassAd] = {}
    job_cache: dict[int, classad2.ClassAd | None] = {}
    for s, j in zip(pairs["slot"].tolist(), pairs["idle"].tolist(), strict=True):
        if result[s]:
            continue
        if j not in job_cache:
            raw = idle["example_job"].iloc[j]
            job_cache[j] = to_classad(raw) if isinstance(raw, (str, dict)) else None
        job = job_cache[j]
        if job is None:  # no ad to evaluate (an autocluster without a job): the resources decide
            result[s] = True
            continue
        if s not in slot_cache:
            slot_cache[s] = to_classad(slot_ads[s])
        result[s] = _matches(job, slot_cache[s])
    return pd.Series(result, index=slots.index, name="fits_idle")


def _matches(job: classad2.ClassAd, slot: classad2.ClassAd) -> bool:
    def requirements(my: classad2.ClassAd, target: classad2.ClassAd) -> bool:
        if "Requirements" not in my:
            return True
        return my["Requirements"].eval(my, target) is True

    return requirements(job, slot) and requirements(slot, job)
