"""Who is billed: the four names every table gives the owner of a job or of a slot's claim.

HTCondor names the one who submitted a job in several ways. A job ad has ``Owner``, the Unix
account (``condorpool``), and ``User`` (``condorpool@uid_domain``); a job submitted with
``accounting_group`` and ``accounting_group_user`` also has ``AcctGroup``
(``group_physics.cms``), ``AcctGroupUser`` (``alice``) and ``AccountingGroup``
(``group_physics.cms.alice``), and the negotiator charges it as the submitter
``group_physics.cms.alice@uid_domain``. A claimed slot of HTCondor 25 has ``AccountingGroup``
with the domain already there (``group_physics.cms.alice@uid_domain``; absent for a job without
one), ``RemoteUser`` and ``RemoteOwner`` (both the owner, ``condorpool@uid_domain``), and the
job attributes that its startd copies (``STARTD_JOB_ATTRS``: ``AcctGroupUser``, ``AcctGroup``,
``ProjectName`` when the pool lists them). Where one Unix account submits for many users in
accounting groups (glideinWMS frontends, OSG access points), the account names nobody.

So every table (jobs, allocations, idle demand) has the same four columns, each from the first
of its configured attributes that is present (:class:`Identity`):

- ``submitter``: exactly as the negotiator names it (``condor_userprio -allusers``); a name
  without ``@`` (a job's ``AccountingGroup``) gets the uid domain of the ``domain`` attributes
  (a job's ``User``), as the schedd adds its ``UID_DOMAIN``;
- ``user``: who the work is for; a value of ``AccountingGroup`` gives its last component
  (``group_physics.cms.alice@pool`` -> ``alice``), any other loses ``@uid_domain``;
- ``group``: the accounting group; a value of ``AccountingGroup`` gives all but its last
  component (``group_physics.cms``; none for a name without a dot);
- ``project``: as the attribute gives it.

A user name with a dot (``john.smith``) survives only ``AcctGroupUser``: from
``AccountingGroup`` the group and the user cannot be told apart without the pool's
``GROUP_NAMES``, so the attribute that says it comes first. Names are worked out once per
distinct value (a history of 100,000 jobs has a few hundred), never per row.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from probes.sources.classad import Attr, Kind, fallbacks

__all__ = ["IDENTITY_COLUMNS", "JOB_IDENTITY", "SLOT_IDENTITY", "Identity", "identities", "identity_attrs"]

IDENTITY_COLUMNS = ("submitter", "user", "group", "project")
"""The columns :func:`identities` gives, in every table that names who is billed."""

_ACCOUNTING_GROUP = "accountinggroup"


@dataclass(frozen=True)
class Identity:
    """The attributes that name each of :data:`IDENTITY_COLUMNS` (the first present wins), and
    ``domain``: the attributes whose ``@uid_domain`` completes a submitter that has none."""

    submitter: tuple[str, ...]
    user: tuple[str, ...]
    group: tuple[str, ...]
    project: tuple[str, ...]
    domain: tuple[str, ...]


JOB_IDENTITY = Identity(
    submitter=("AccountingGroup", "User"),
    user=("AcctGroupUser", "Owner"),
    group=("AcctGroup", "AccountingGroup"),
    project=("ProjectName", "Project"),
    domain=("User",),
)
"""A job ad's (history, queue): the negotiator's submitter is ``AccountingGroup@uid_domain``,
else ``User``."""

SLOT_IDENTITY = Identity(
    submitter=("AccountingGroup", "RemoteUser"),
    user=("AcctGroupUser", "AccountingGroup", "RemoteOwner", "RemoteUser"),
    group=("AcctGroup", "AccountingGroup"),
    project=("ProjectName", "Project"),
    domain=("RemoteUser", "RemoteOwner"),
)
"""A claimed slot's: its ``AccountingGroup`` is the submitter with its domain (HTCondor 25;
``RemoteUser`` is the owner there, and was the submitter in older startds); ``AcctGroupUser``,
``AcctGroup`` and ``ProjectName`` are there when ``STARTD_JOB_ATTRS`` copies them."""


def identity_attrs(identity: Identity) -> list[Attr]:
    """The string attributes :func:`identities` reads: each list's fallbacks, and the domain
    attributes wherever a submitter may need them (always)."""
    lists = (identity.submitter, identity.user, identity.group, identity.project)
    return [
        *(a for names in lists for a in fallbacks(names, Kind.STRING)),
        *(Attr(name, Kind.STRING) for name in identity.domain),
    ]


def identities(values: Callable[[str], np.ndarray], n: int, identity: Identity) -> dict[str, np.ndarray]:
    """The :data:`IDENTITY_COLUMNS` of ``n`` rows (object arrays, None where nothing names it);
    ``values(attribute)`` gives an attribute's value per row (str, or None where missing)."""
    return {
        "submitter": _completed(_first_value(values, identity.submitter, n), _first_value(values, identity.domain, n)),
        "user": _first(values, identity.user, n, _user),
        "group": _first(values, identity.group, n, _group),
        "project": _first_value(values, identity.project, n),
    }


def _user(attr: str, value: str) -> str | None:
    name = value.partition("@")[0]
    if attr.lower() == _ACCOUNTING_GROUP:
        name = name.rpartition(".")[2]
    return name or None


def _group(attr: str, value: str) -> str | None:
    if attr.lower() == _ACCOUNTING_GROUP:
        return value.partition("@")[0].rpartition(".")[0] or None
    return value


def _first_value(values: Callable[[str], np.ndarray], names: Sequence[str], n: int) -> np.ndarray:
    """Per row, the value of the first of ``names`` that is present, as it is."""
    out = np.full(n, None, dtype=object)
    missing = np.arange(n)
    for attr in names:
        if not len(missing):
            break
        found = values(attr)[missing]
        out[missing] = found
        missing = missing[_none(found)]
    return out


def _first(
    values: Callable[[str], np.ndarray], names: Sequence[str], n: int, name: Callable[[str, str], str | None]
) -> np.ndarray:
    """Per row, ``name(attribute, value)`` of the first of ``names`` whose value gives one."""
    out = np.full(n, None, dtype=object)
    missing = np.arange(n)
    for attr in names:
        if not len(missing):
            break
        found, unnamed = _per_value(values(attr)[missing], functools.partial(name, attr))
        out[missing] = found
        missing = missing[unnamed]
    return out


def _per_value(column: np.ndarray, name: Callable[[str], str | None]) -> tuple[np.ndarray, np.ndarray]:
    """``name`` of each value of ``column``, worked out once per distinct value (None where a
    value is missing or not a string), and where it gave none."""
    codes, uniques = pd.factorize(column, use_na_sentinel=True)
    named = np.array([*(name(u) if isinstance(u, str) else None for u in uniques), None], dtype=object)
    # a missing value has code -1: the None at the end
    return named[codes], _none(named)[codes]


def _completed(submitter: np.ndarray, source: np.ndarray) -> np.ndarray:
    """``submitter`` with ``@domain`` added where it has none, the domain being that of the
    row's ``source`` name (``user@domain``) where it has one."""
    s_codes, s_names = pd.factorize(submitter, use_na_sentinel=True)
    bare = np.array([isinstance(s, str) and "@" not in s for s in s_names] + [False], dtype=bool)[s_codes]
    if not bare.any():
        return submitter
    bare_rows = np.flatnonzero(bare)
    d_codes, d_sources = pd.factorize(source[bare_rows], use_na_sentinel=True)
    domains = [v.partition("@")[2] if isinstance(v, str) else "" for v in d_sources]
    known = np.array([bool(d) for d in domains] + [False], dtype=bool)[d_codes]
    rows = bare_rows[known]
    # one string per distinct (submitter, domain) pair (hashed: in the order met, not sorted)
    width = len(d_sources) + 1
    inverse, pairs = pd.factorize(s_codes[rows].astype(np.int64) * width + d_codes[known])
    joined = np.array([f"{s_names[p // width]}@{domains[p % width]}" for p in pairs.tolist()], dtype=object)
    out = submitter.copy()
    out[rows] = joined[inverse]
    return out


def _none(values: np.ndarray) -> np.ndarray:
    """Where an object array holds None (a tenth of what pd.isna costs on one)."""
    out: np.ndarray = values == None  # noqa: E711 - elementwise on an object array, not an identity test
    return out
