"""Credentials as HTCondor writes them, and the one name fairacct gives a user.

HTCondor names a user three ways: ``Owner`` in the job ad (``alice``), ``User`` in the job
ad and ``RemoteOwner`` on a slot (``alice@uid_domain``), and ``RemoteUser`` on a slot (the
submitter the negotiator charges: ``group_cms.alice@uid_domain`` when the job runs in an
accounting group). Every table fairacct builds (jobs, allocations, idle demand) names the
user by the account alone, ``alice``, as ``Owner`` does and as fairshare targets and site
accounting name it; the priority bridge maps it back to the negotiator's submitter names.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["account_name", "account_names", "group_of"]


def group_of(accounting_group: object) -> str | None:
    """The group of an AccountingGroup: 'group_cms.alice@pool' -> 'group_cms';
    an ungrouped 'alice@pool' (or nothing) -> None."""
    if not isinstance(accounting_group, str):
        return None
    group, dot, _ = accounting_group.partition("@")[0].rpartition(".")
    return group if dot else None


def account_name(name: object, accounting_group: object = None) -> str | None:
    """The account of one user name (see :func:`account_names`)."""
    if not isinstance(name, str):
        return None
    account = name.partition("@")[0]
    group = group_of(accounting_group)
    # Only the accounting group's own prefix is dropped: user names may contain dots.
    if group is not None and account.startswith(group + "."):
        account = account[len(group) + 1 :]
    return account or None


def account_names(names: np.ndarray, accounting_groups: np.ndarray | None = None) -> np.ndarray:
    """The account of each of ``names`` (``Owner``, ``User``, ``RemoteOwner`` or ``RemoteUser``
    values): the part before ``@``, without the accounting group's prefix where the matching
    ``accounting_groups`` value names one; None where a name is missing."""
    if accounting_groups is None:  # a job history: one name a job, a few hundred users
        codes, uniques = pd.factorize(names)
        accounts = np.array([*(account_name(u) for u in uniques), None], dtype=object)
        out: np.ndarray = accounts[codes]  # a missing name has code -1: the None at the end
        return out
    pairs = list(zip(names.tolist(), accounting_groups.tolist(), strict=True))
    seen = {p: account_name(*p) for p in set(pairs)}
    found = np.empty(len(pairs), dtype=object)
    found[:] = [seen[p] for p in pairs]
    return found
