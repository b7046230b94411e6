"""Gratia's user-vo-map: the VO (or project) of each local account, for jobs that carry none.

Gratia's condor probes read a ``user-vo-map`` file (OSG's ``/var/lib/osg/user-vo-map``, written
by edg-mkgridmap or by hand) to give a job the VO of its account when the job names none. Its
format, as Gratia reads it::

    # comment lines start with #, but for the two lines naming the VOs
    #voi cms atlas           (the VO names as the lines below give them)
    #VOc CMS ATLAS           (the same VOs, in the case to report them with, same order)
    uscms01 cms
    usatlas1 atlas

Each other line is ``account vo``. With ``[credentials] user_vo_map`` set, a job or bill
without a ``project`` gets its account's VO (as ``#VOc`` spells it, else as written): the
account is the job's ``user``, else the local part of its ``submitter`` (the Unix account of a
job outside accounting groups). Jobs that name a project keep it.
"""

from __future__ import annotations

import os

import pandas as pd

from collector.errors import ConfigError
from probes.errors import SourceError
from probes.sources.inputs import read_input

__all__ = ["fill_projects", "read_user_vo_map", "read_user_vos"]


def read_user_vo_map(path: str | os.PathLike[str]) -> dict[str, str]:
    """Account -> VO of a user-vo-map file, as ``#VOc`` spells it; a :class:`ConfigError`
    naming the file, the line and what was expected for a line that is not ``account vo``."""
    return {account: spelled for account, (_, spelled) in read_user_vos(path).items()}


def read_user_vos(path: str | os.PathLike[str]) -> dict[str, tuple[str, str]]:
    """Account -> (VO as its line gives it, VO as ``#VOc`` spells it) of a user-vo-map file: the
    ``VOName`` and ``ReportableVOName`` Gratia's probes report. ``#voi`` and ``#VOc`` are paired
    as far as both go (as gratia-probe's ``vo.py`` pairs them); a VO ``#voi`` does not name is
    reported as written."""
    name = os.fspath(path)
    try:
        lines = read_input(name, "a user-vo-map (lines of 'account vo')").decode("utf-8").splitlines()
    except SourceError as exc:  # missing, a FIFO or a device, too large, a read error: named with its key
        raise ConfigError(f"credentials.user_vo_map: {exc}") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"credentials.user_vo_map: {name}: cannot be read ({exc})") from exc
    voi: list[str] = []
    voc: list[str] = []
    accounts: dict[str, str] = {}
    for number, line in enumerate(lines, 1):
        words = line.split()
        if not words:
            continue
        if words[0].lower() == "#voi":
            voi = words[1:]
        elif words[0] == "#VOc":
            voc = words[1:]
        elif words[0].startswith("#"):
            continue
        elif len(words) != 2:
            raise ConfigError(
                f"credentials.user_vo_map: {name} line {number}: expected 'account vo', got {line.strip()!r}"
            )
        else:
            accounts[words[0]] = words[1]
    spelled = dict(zip(voi, voc, strict=False))
    return {account: (vo, spelled.get(vo, vo)) for account, vo in accounts.items()}


def fill_projects(table: pd.DataFrame, vos: dict[str, str]) -> pd.DataFrame:
    """``table`` (columns ``project``, ``user``, ``submitter``) with each missing project taken
    from ``vos`` by the row's user, else by its submitter's local part; a new table."""
    if not vos or not len(table) or "project" not in table:
        return table
    missing = table["project"].isna().to_numpy()
    if not missing.any():
        return table
    by_user = table["user"].map(vos) if "user" in table else pd.Series(None, index=table.index, dtype=object)
    if "submitter" in table:
        local = table["submitter"].astype(object).where(table["submitter"].notna())
        by_account = local.str.partition("@")[0].map(vos)
        by_user = by_user.where(by_user.notna(), by_account)
    out = table.copy()
    out["project"] = out["project"].mask(missing & by_user.notna().to_numpy(), by_user)  # its dtype kept
    return out
