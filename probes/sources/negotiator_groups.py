"""A submitter's group as the negotiator names it, not as its job declared it.

A job's ``AcctGroup`` (or the part of its ``AccountingGroup`` before the user) is what was
submitted; the negotiator charges the submitter to one of *its* groups (``GROUP_NAMES``) and
``condor_userprio`` lists it there. Measured on HTCondor 25.0.13 with ``GROUP_NAMES =
group_phys, group_phys.cms``: ``group_phys.cms.alice.smith@pool`` is in ``group_phys.cms``,
``group_phys.dan@pool`` in ``group_phys``, ``group_other.bob@pool`` (a group the negotiator does
not know) and ``condorpool@pool`` (no group) in the root group ``<none>``. The negotiator's rule
(its accountant's ``GetAssignedGroup``): the name before ``@``, less its last ``.``-component
(the user), is a path of group names walked down from the root, case-insensitively, as far as
each next component names a known group; a name without a ``.`` is in ``<none>``.

The negotiator publishes its groups to the collector as ``Accounting`` ads with
``IsAccountingGroup = true`` (``condor_status -any -const 'MyType == "Accounting"'``), one per
configured group and ``<none>``, every negotiation cycle; :func:`accounting_groups` reads their
names. A pool whose collector holds no such ad (no negotiator has run a cycle, or its ads
expired after ``CLASSAD_LIFETIME``) and a probe that reads files have no such names:
:func:`with_negotiator_groups` then leaves the declared groups as they are.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["NO_GROUP", "accounting_groups", "negotiator_group", "with_negotiator_groups"]

NO_GROUP = "<none>"
"""The negotiator's root group: a submitter in no group it knows (``condor_userprio``'s name)."""


def accounting_groups(ads: Iterable[Mapping[str, Any]]) -> frozenset[str]:
    """The group names of the negotiator's ``Accounting`` ads (those with ``IsAccountingGroup``
    true), the root ``<none>`` left out; an ad without a string ``Name`` is skipped."""
    return frozenset(
        name
        for ad in ads
        if ad.get("IsAccountingGroup") is True and isinstance(name := ad.get("Name"), str) and name != NO_GROUP
    )


def negotiator_group(submitter: str, groups: Mapping[str, str]) -> str:
    """The group the negotiator charges ``submitter`` (``name@domain``) to; ``groups``: its
    group names by their lower-case spelling (the negotiator compares them case-insensitively)."""
    name, at, _ = submitter.rpartition("@")
    if not at:
        return NO_GROUP  # not a submitter's name: the negotiator puts it in the root group too
    path, dot, _ = name.rpartition(".")
    if not dot:
        return NO_GROUP
    found, prefix = NO_GROUP, ""
    for part in path.split("."):
        prefix = f"{prefix}.{part}" if prefix else part
        known = groups.get(prefix.lower())
        if known is None:
            break
        found = known
    return found


def with_negotiator_groups(table: pd.DataFrame, groups: frozenset[str] | None) -> pd.DataFrame:
    """``table`` (columns ``submitter`` and ``group``) with each row's ``group`` the one the
    negotiator charges its submitter to; a row without a submitter keeps its group, and so does
    every row when ``groups`` is None (the negotiator's groups are unknown). A new table."""
    if groups is None or not len(table) or "submitter" not in table:
        return table
    by_lower = {g.lower(): g for g in groups}
    codes, uniques = pd.factorize(table["submitter"].to_numpy(dtype=object), use_na_sentinel=True)
    # worked out once per distinct submitter; a missing one (code -1) keeps the row's group
    named = np.array([negotiator_group(s, by_lower) if isinstance(s, str) else None for s in uniques], dtype=object)
    out = table.copy()
    have = codes >= 0
    group = out["group"].to_numpy(dtype=object).copy() if "group" in out else np.full(len(out), None, dtype=object)
    group[have] = named[codes[have]]
    out["group"] = group
    return out
