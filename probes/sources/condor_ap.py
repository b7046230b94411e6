"""What OSG's Gratia probe for an access point, gratia-probe's condor-ap, reports of a job ad.

A site that switches from condor-ap to fairacct must see GRACC's numbers unchanged on the same
jobs, so the job record carries, beside fairacct's own reading of the ad, condor-ap's: the
``gratia_*`` columns of the jobs table, fixed when the job is read (a record sent again is the
same bytes, whatever the pool or the site's files became since). The rules are gratia-probe
v2.8.4's (``common/gratia/common/condor.py`` ``classadToJUR``; ``xml_utils.py``
``UsageCheckXmldoc`` and ``CheckAndExtendUserIdentity``; ``Gratia.py`` ``VerifyUserInfo``), with
the settings its RPM's ProbeConfig gives (``SuppressGridLocalRecords="1"``,
``MapUnknownToGroup="1"``, ``QuarantineUnknownVORecords="1"``):

=========================  =================================================================
column                     condor-ap's rule
=========================  =================================================================
``gratia_user``            ``Owner`` (LocalUserId)
``gratia_global_user``     ``User`` (GlobalUsername)
``gratia_dn``              ``x509userproxysubject``, else ``orig_AuthTokenSubject``
``gratia_vo``              ``x509UserProxyFirstFQAN``, else ``orig_AuthTokenIssuer`` (a
                           SciToken's issuer); then, where that is not an FQAN, the
                           user-vo-map's VO of the owner, else the owner's Unix group on the
                           probe's host, else the owner (:func:`resolve_vos`)
``gratia_reportable_vo``   ``x509UserProxyVOName``, else ``orig_AuthTokenIssuer``; resolved
                           with ``gratia_vo`` (the user-vo-map's ``#VOc`` spelling)
``gratia_project``         ``ProjectName`` as the ad has it (not the user-vo-map's VO)
``gratia_processors``      the first of ``MachineAttrCpus0``, ``MATCH_EXP_JOB_GLIDEIN_Cpus``,
                           ``CpusProvisioned``, ``RequestCpus`` that is a whole number (0: none)
``gratia_gpus``            ``RequestGpus`` as a whole number, where it is one
``gratia_cpu_user_s``      ``RemoteUserCpu`` + ``LocalUserCpu``; ``gratia_cpu_system_s`` the
                           same of the ``Sys`` times. A remote time of 2e9 s or more that is
                           over 1000 times ``CumulativeSlotTime`` + 1 is condor-ap's "INVALID
                           DATA": it counts 0 (and the reader counts it)
``gratia_end``             ``CompletionDate`` where it is set: condor-ap's ``EndTime``. A
                           removed job has none, and GRACC's raw pipeline ends it at
                           ``StartTime`` + ``WallDuration``
``gratia_resource_name``   ``MachineAttrGLIDEIN_ResourceName0``, else
                           ``MATCH_EXP_JOBGLIDEIN_ResourceName`` (the glidein's resource; the
                           Host's description and ``ResourceType`` ``BatchPilot``)
``gratia_grid``            ``Local`` or ``Campus`` where condor-ap says so, else empty (the
                           probe's ``Grid``, OSG)
``gratia_left_out``        why condor-ap (or GRACC) leaves the job out, else empty: see
                           :data:`LEFT_OUT`
=========================  =================================================================

condor-ap leaves a job out of GRACC when it is a DAGMan job, when its Grid is ``Local`` (the
scheduler and local universes, a ``Local Job`` resource, a job routed to another, a
``GratiaJobOrigin`` other than ``GRAM``: ``SuppressGridLocalRecords``), or when no VO can be
found for it (``QuarantineUnknownVORecords``); it sends a removed job (no ``CompletionDate``)
without an ``EndTime``, which GRACC's raw pipeline makes ``StartTime`` + ``WallDuration``, or,
for a job removed before it started (no ``JobStartDate`` either), quarantines
(``MissingEndTime``): such a job counts nowhere. fairacct's Gratia sender leaves all of them out,
counted by reason; fairacct's own store keeps them.
"""

from __future__ import annotations

import grp
import os
import pwd
from collections.abc import Callable, Mapping
from functools import cache

import numpy as np
import pandas as pd

from probes.sources.classad.model import AdColumns, Attr, Kind, fallbacks
from probes.sources.report import ReadTally

__all__ = [
    "GRATIA_COLUMNS", "LEFT_OUT", "condor_ap_attrs", "condor_ap_columns", "count_invalid_cpu", "invalid_cpu",
    "resolve_vos", "unix_group",
]  # fmt: skip

GRATIA_COLUMNS = (
    "gratia_user", "gratia_global_user", "gratia_dn", "gratia_vo", "gratia_reportable_vo", "gratia_project",
    "gratia_processors", "gratia_gpus", "gratia_cpu_user_s", "gratia_cpu_system_s", "gratia_resource_name",
    "gratia_end", "gratia_grid", "gratia_left_out",
)  # fmt: skip

LEFT_OUT = {
    "dagman": "a DAGMan job (condor-ap reports no condor_dagman)",
    "scheduler": "Grid = Local: scheduler universe (condor-ap's SuppressGridLocalRecords)",
    "local": "Grid = Local: local universe (condor-ap's SuppressGridLocalRecords)",
    "routed": "Grid = Local: routed to another job, RoutedToJobId (condor-ap's SuppressGridLocalRecords)",
    "local_job": "Grid = Local: resource 'Local Job' (condor-ap's SuppressGridLocalRecords)",
    "origin": "Grid = Local: GratiaJobOrigin is not GRAM (condor-ap's SuppressGridLocalRecords)",
    "no_vo": "no VO: no Owner, or none mapped (condor-ap's QuarantineUnknownVORecords)",
    "no_end": "removed before it started: no EndTime nor StartTime, GRACC's raw pipeline quarantines it",
}
"""Why a job is not reported to GRACC, as the Gratia sender counts and says it."""

_PROCESSORS = ("MachineAttrCpus0", "MATCH_EXP_JOB_GLIDEIN_Cpus", "CpusProvisioned", "RequestCpus")
_RESOURCE_NAMES = ("MachineAttrGLIDEIN_ResourceName0", "MATCH_EXP_JOBGLIDEIN_ResourceName")
_CPU = ("RemoteUserCpu", "LocalUserCpu", "RemoteSysCpu", "LocalSysCpu", "CumulativeSlotTime")
_INVALID_CPU_S = 2_000_000_000  # SOFTWARE-1132: a CPU time from this on is checked against the slot time
_UNIVERSES = {7: "scheduler", 12: "local"}
_NONE = "\0none"  # a missing value in a lookup key (no ClassAd string holds a NUL)


def condor_ap_attrs() -> list[Attr]:
    """The job attributes :func:`condor_ap_columns` reads."""
    n, s = Kind.NUMBER, Kind.STRING
    return [
        Attr("Owner", s), Attr("User", s), *fallbacks(("x509userproxysubject", "orig_AuthTokenSubject"), s),
        Attr("x509UserProxyFirstFQAN", s), Attr("x509UserProxyVOName", s), Attr("orig_AuthTokenIssuer", s),
        Attr("ProjectName", s), Attr("MATCH_EXP_JOB_GLIDEIN_Cpus", Kind.ANY), Attr("RequestGPUs", Kind.ANY),
        Attr("MachineAttrCpus0", n),  # the slot's Cpus, a number; the glidein's MATCH_EXP_ a string
        *(Attr(a, n) for a in _CPU), *fallbacks(_RESOURCE_NAMES, s), Attr("JobUniverse", n), Attr("Cmd", s),
        Attr("RoutedToJobId", Kind.ANY), Attr("GratiaJobOrigin", Kind.ANY), Attr("CompletionDate", n),
        Attr("JobStartDate", n),
    ]  # fmt: skip


def _whole(value: object) -> float:
    """condor-ap's ``int(ad.eval(attr))``: the whole number of a value, NaN where int() fails."""
    if value is None or (isinstance(value, float) and not np.isfinite(value)):
        return np.nan
    try:
        return float(int(value))  # type: ignore[call-overload]  # int("8"), int(8.5) and int(True), as condor-ap
    except (TypeError, ValueError, OverflowError):
        return np.nan


def _first_whole(ads: AdColumns, names: tuple[str, ...]) -> np.ndarray:
    """Per ad, the whole number of the first of ``names`` that has one (NaN: none has)."""
    out = np.full(len(ads), np.nan)
    for name in names:
        missing = np.flatnonzero(np.isnan(out))
        if not len(missing):
            break
        values = ads[name][missing]
        if values.dtype.kind == "f":  # a number column: whole where finite (int() of 8.5 is 8)
            with np.errstate(invalid="ignore"):
                out[missing] = np.where(np.isfinite(values), np.trunc(values), np.nan)
        else:  # any value: int() of what is there ("8", True), as condor-ap, where anything is
            present = np.flatnonzero(~pd.isna(values))
            out[missing[present]] = [_whole(v) for v in values[present]]
    return out


def invalid_cpu(cpu_s: np.ndarray, slot_s: np.ndarray) -> np.ndarray:
    """condor-ap's "INVALID DATA" CPU times (``invalidDuration``): 2e9 s or more, and over 1000
    times the slot time + 1 (a missing slot time counts 0)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        invalid: np.ndarray = (cpu_s >= _INVALID_CPU_S) & (cpu_s / (np.nan_to_num(slot_s) + 1.0) > 1000.0)
    return invalid


def _present(values: np.ndarray) -> np.ndarray:
    """Where an ANY column has a value: condor-ap's ``attr in ad``."""
    present: np.ndarray = ~pd.isna(values)
    return present


def count_invalid_cpu(ads: AdColumns, tally: ReadTally) -> None:
    """Count in ``tally`` the CPU times condor-ap calls "INVALID DATA" and reports as 0 (so
    does the Gratia record; fairacct's own ``cpu_time_s`` keeps the value read)."""
    for name in ("RemoteUserCpu", "RemoteSysCpu"):
        if bad := int(invalid_cpu(np.nan_to_num(ads[name]), ads["CumulativeSlotTime"]).sum()):
            tally.rejects[f"{name}: 2e9 s or more and over 1000x CumulativeSlotTime, 0 to GRACC as condor-ap"] += bad


def condor_ap_columns(ads: AdColumns) -> dict[str, np.ndarray]:
    """The :data:`GRATIA_COLUMNS` of ``ads`` before the VOs are resolved (:func:`resolve_vos`)."""
    n = len(ads)
    cpu = {
        name: np.where(invalid_cpu(values := np.nan_to_num(ads[name]), ads["CumulativeSlotTime"]), 0.0, values)
        for name in ("RemoteUserCpu", "RemoteSysCpu")
    }
    issuer = ads["orig_AuthTokenIssuer"]
    fqan, vo = ads["x509UserProxyFirstFQAN"], ads["x509UserProxyVOName"]
    resource = ads.first(_RESOURCE_NAMES)
    columns = {
        "gratia_user": ads["Owner"],
        "gratia_global_user": ads["User"],
        "gratia_dn": ads.first(("x509userproxysubject", "orig_AuthTokenSubject")),
        "gratia_vo": np.where(pd.isna(fqan), issuer, fqan),
        "gratia_reportable_vo": np.where(pd.isna(vo), issuer, vo),
        "gratia_project": ads["ProjectName"],
        "gratia_processors": np.nan_to_num(_first_whole(ads, _PROCESSORS)),  # condor-ap: 0 when none is
        "gratia_gpus": _first_whole(ads, ("RequestGPUs",)),
        "gratia_cpu_user_s": cpu["RemoteUserCpu"] + np.nan_to_num(ads["LocalUserCpu"]),
        "gratia_cpu_system_s": cpu["RemoteSysCpu"] + np.nan_to_num(ads["LocalSysCpu"]),
        "gratia_resource_name": resource,
        "gratia_end": np.where(ads["CompletionDate"] > 0, ads["CompletionDate"], np.nan),
    }
    grid, left_out = _grid(ads, resource)
    columns["gratia_grid"] = grid
    columns["gratia_left_out"] = left_out
    assert all(len(v) == n for v in columns.values())
    return columns


def _grid(ads: AdColumns, resource: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """condor-ap's ``Grid`` of each job (None: the probe's own, OSG) and why it is left out."""
    n = len(ads)
    grid = np.full(n, None, dtype=object)
    why = np.full(n, None, dtype=object)
    # in classadToJUR's order: a later rule sets Grid over an earlier one
    origin = ads["GratiaJobOrigin"]
    for i in np.flatnonzero(_present(origin)):
        grid[i], why[i] = ("OSG", None) if origin[i] == "GRAM" else ("Local", LEFT_OUT["origin"])
    campus = _by_value(resource, lambda name: name.endswith(("-CF", "-Flock")))
    grid[campus], why[campus] = "Campus", None
    local_job = _by_value(resource, lambda name: name == "Local Job")
    grid[local_job], why[local_job] = "Local", LEFT_OUT["local_job"]
    universe = ads["JobUniverse"]
    for number, key in _UNIVERSES.items():
        rows = universe == number
        grid[rows], why[rows] = "Local", LEFT_OUT[key]
    routed = _present(ads["RoutedToJobId"])
    grid[routed], why[routed] = "Local", LEFT_OUT["routed"]
    # classadToJUR ignores a DAGMan job before anything else; a job with neither CompletionDate
    # nor JobStartDate is sent, and GRACC quarantines it: both told apart from Grid's suppression
    dagman = _by_value(ads["Cmd"], lambda cmd: os.path.basename(cmd) == "condor_dagman")
    timeless = ~(ads["CompletionDate"] > 0) & ~(ads["JobStartDate"] > 0)
    why[timeless & pd.isna(why)] = LEFT_OUT["no_end"]
    why[dagman] = LEFT_OUT["dagman"]
    return grid, why


def _by_value(values: np.ndarray, test: Callable[[str], bool]) -> np.ndarray:
    """Where a string column's value passes ``test``, each distinct value tested once (a history
    holds a few executables and resource names among many jobs)."""
    codes, uniques = pd.factorize(values)  # missing values: code -1
    passed = np.array([test(str(u)) for u in uniques] + [False], dtype=bool)
    result: np.ndarray = passed[codes]  # code -1 reads the last entry, False
    return result


@cache
def unix_group(account: str) -> str | None:
    """The name of ``account``'s primary Unix group on this host (condor-ap's MapUnknownToGroup),
    None where the host has no such account or group."""
    try:
        return grp.getgrgid(pwd.getpwnam(account).pw_gid).gr_name
    except (KeyError, OverflowError):
        return None


def resolve_vos(
    table: pd.DataFrame,
    user_vos: Mapping[str, tuple[str, str]],
    *,
    unix_groups: bool = True,
    group_of: Callable[[str], str | None] = unix_group,
) -> pd.DataFrame:
    """``table`` with ``gratia_vo`` and ``gratia_reportable_vo`` as condor-ap sends them, and
    the jobs without a VO marked left out; a new table where anything changes.

    ``user_vos``: account -> (VOName, ReportableVOName) of the site's user-vo-map (``#voi`` and
    ``#VOc`` spellings). ``unix_groups``: condor-ap's MapUnknownToGroup, the owner's Unix group
    (``group_of``) for an owner the map does not name, the owner itself where the host has no
    such account. A VO that is an FQAN (``/cms/Role=...``) is kept; a token issuer is kept
    unless the map names the owner with an FQAN."""
    if not len(table) or "gratia_user" not in table:
        return table
    keys = ["gratia_user", "gratia_vo", "gratia_reportable_vo"]
    # a few owners and VOs among many jobs: each combination is resolved once, then looked up
    rows = pd.MultiIndex.from_frame(table[keys].astype(object).fillna(_NONE))
    combos = rows.unique()
    pairs = []
    for combo in combos:
        owner, vo, reportable = (None if v == _NONE else str(v) for v in combo)
        pairs.append(_resolve(owner, vo, reportable, user_vos, unix_groups, group_of))
    resolved = pd.DataFrame(pairs, index=combos, columns=["gratia_vo", "gratia_reportable_vo"], dtype=object)
    resolved = resolved.reindex(rows)
    out = table.copy()
    for column in ("gratia_vo", "gratia_reportable_vo"):
        out[column] = resolved[column].to_numpy()
    no_vo = out["gratia_vo"].isna() & out["gratia_left_out"].isna()
    if no_vo.any():
        out.loc[no_vo, "gratia_left_out"] = LEFT_OUT["no_vo"]
    return out


def _resolve(
    owner: str | None,
    vo: str | None,
    reportable: str | None,
    user_vos: Mapping[str, tuple[str, str]],
    unix_groups: bool,
    group_of: Callable[[str], str | None],
) -> tuple[str | None, str | None]:
    if not owner:  # CheckAndExtendUserIdentity stops at a record without LocalUserId
        return vo, reportable
    if not (vo and reportable) and (mapped := user_vos.get(owner)):  # VerifyUserInfo, at XmlCreate
        vo, reportable = mapped
    if (vo or "").startswith("/"):  # an FQAN: kept
        return vo, reportable
    found = user_vos.get(owner)
    if found is None and unix_groups:
        found = (group := group_of(owner) or owner, group)
    if found is not None and (not (vo and reportable) or vo == "Unknown" or found[0].startswith("/")):
        vo, reportable = found
    return vo or None, reportable or None
