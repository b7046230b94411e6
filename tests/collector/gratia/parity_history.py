"""Per-job history files for the GRACC parity tests: real job ads, re-timed and edited into every
case OSG's condor-ap probe treats differently, with what condor-ap should make of each.

Why real ads: condor-ap's behaviour hangs on which attributes an ad carries (``CumulativeSlotTime``
or not, ``MachineAttrCpus0`` or ``MATCH_EXP_JOB_GLIDEIN_Cpus``, ``orig_AuthToken*`` or ``x509*``), so
invented ads would test our idea of an ad, not the schedd's. The templates are gratia-probe's own 30
test ads (HTCondor 7.4, read from ``../shared/gratia/gratia-probe-01a3a58.tar.xz``, never from an
unpacked copy), the ``PER_JOB_HISTORY_DIR`` files of a real HTCondor 25.0.13 pool
(``../shared/fixtures/condor25/per_job_history``) and one real glideinWMS payload ad
(``../shared/fixtures/classads/history-glidein-job-finished.ad``). Each is written the way a schedd
writes a per-job history file: one ad, one ``Attr = value`` line per attribute, ``history.<cluster>.<proc>``.

The expected values in :class:`Job` were worked out by hand from gratia-probe v2.8.4's
``common/gratia/common/condor.py`` (``classadToJUR``, ``get_num_procs``, ``process_history_file``),
``Gratia.py`` (``VerifyUserInfo``), ``xml_utils.py`` (``UsageCheckXmldoc``,
``CheckAndExtendUserIdentity``) and ``vo.py``, with the ProbeConfig its RPM builds
(``SuppressGridLocalRecords="1"``, ``MapUnknownToGroup="1"``); and, for ``quarantine``/``gracc_end``,
from gracc-docker's ``gracc-stash-raw/logstash.conf``.
"""

from __future__ import annotations

import grp
import io
import pwd
import re
import tarfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

SHARED = Path(__file__).resolve().parents[3].parent / "shared"
PROBE_TARBALL = SHARED / "gratia" / "gratia-probe-01a3a58.tar.xz"
CONDOR25 = SHARED / "fixtures" / "condor25" / "per_job_history"
GLIDEIN_AD = SHARED / "fixtures" / "classads" / "history-glidein-job-finished.ad"

#: The access point the jobs were submitted on (GlobalJobId's first part; condor-ap's SubmitHost).
SCHEDD = "ap1.fairacct.test"
#: The user-vo-map: account -> (voi, VOc). vdtuser03 is mapped although its jobs carry an FQAN,
#: which must win over the map; alice also submits a token job, whose issuer must win.
VO_MAP = {"alice": ("lsst", "LSST"), "bob": ("ligo", "LIGO"), "vdtuser03": ("osg", "OSG")}
TOKEN_ISSUERS = ("https://scitokens.org/osg-connect", "https://cilogon.org/icecube")
DAY = 86400

_LINE = re.compile(r"^(\w+) = (.*)$")
_EPOCH = re.compile(r'^"?(\d{10})"?$')


class Ad:
    """One job ad as ``Attr = value`` lines. Names are case-insensitive, as in ClassAds (condor-ap's
    ``classad.eval('RequestGpus')`` finds ``RequestGPUs``); a repeated attribute keeps its last value,
    as the ClassAd parser does with HTCondor 7's per-job files, which logged updates as repeats."""

    def __init__(self, text: str) -> None:
        self._attrs: dict[str, tuple[str, str]] = {}
        for line in text.splitlines():
            m = _LINE.match(line.strip())
            if m:
                self._attrs[m.group(1).lower()] = (m.group(1), m.group(2))

    def __contains__(self, name: str) -> bool:
        return name.lower() in self._attrs

    def raw(self, name: str) -> str | None:
        """The value's ClassAd text, or None."""
        got = self._attrs.get(name.lower())
        return got[1] if got else None

    def number(self, name: str, default: float = 0.0) -> float:
        """A literal number's value (``default`` when absent or an expression)."""
        raw = self.raw(name)
        try:
            return float(raw) if raw is not None else default
        except ValueError:
            return default

    def string(self, name: str) -> str | None:
        """A string literal's value, or None."""
        raw = self.raw(name)
        if raw is None or not (raw.startswith('"') and raw.endswith('"')):
            return None
        return raw[1:-1].replace('\\"', '"').replace("\\\\", "\\")

    def set(self, name: str, value: Any) -> None:
        """Set ``name`` to a Python value written as a ClassAd literal; None deletes it. A name
        already present keeps its spelling."""
        key = name.lower()
        if value is None:
            self._attrs.pop(key, None)
            return
        spelled = self._attrs.get(key, (name, ""))[0]
        self._attrs[key] = (spelled, literal(value))

    def set_raw(self, name: str, raw: str) -> None:
        """Set ``name`` to ClassAd text as is (an expression, or a literal already written)."""
        spelled = self._attrs.get(name.lower(), (name, ""))[0]
        self._attrs[name.lower()] = (spelled, raw)

    def delete_matching(self, pattern: str) -> None:
        """Remove every attribute whose name matches the regular expression (case-insensitive)."""
        rx = re.compile(pattern, re.IGNORECASE)
        for key in [k for k, (n, _) in self._attrs.items() if rx.match(n)]:
            del self._attrs[key]

    def items(self) -> Iterator[tuple[str, str]]:
        yield from self._attrs.values()

    def text(self) -> str:
        """The ad as the schedd writes a PER_JOB_HISTORY_DIR file: sorted ``Attr = value`` lines."""
        return "".join(f"{n} = {v}\n" for n, v in sorted(self._attrs.values()))


def literal(value: Any) -> str:
    """A ClassAd literal: booleans lower-case, reals always with a point or exponent, strings
    quoted with backslash escapes."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        text = repr(value)
        return text if any(c in text for c in ".en") else text + ".0"
    text = str(value).replace("\\", "\\\\").replace('"', '\\"')
    return f'"{text}"'


@dataclass(frozen=True)
class Job:
    """One written job and what condor-ap (and, after it, GRACC's raw pipeline) should make of it."""

    job_id: str  # "cluster.proc"
    case: str
    sent: bool  # condor-ap sends a JobUsageRecord for it
    why: str  # why it is sent or left out, in condor-ap's terms
    path: Path
    global_job_id: str  # the ad's GlobalJobId; the record's is "condor." + this
    template: str  # where the ad came from
    owner: str
    vo_name: str | None = None  # expected VOName / ReportableVOName of the record (sent jobs)
    reportable_vo_name: str | None = None
    processors: int = 1
    gpus: int | None = None  # the record's GPUs (condor-ap sends RequestGpus when the ad has it)
    project: str | None = None
    wall: float = 0.0  # RemoteWallClockTime, the record's WallDuration
    cpu_user: float = 0.0  # the record's CpuDuration user: RemoteUserCpu (unless insane) + LocalUserCpu
    cpu_system: float = 0.0  # RemoteSysCpu (unless insane) + LocalSysCpu
    end: int | None = None  # the record's EndTime (epoch); None: condor-ap sends none
    start: int | None = None  # the record's StartTime (JobStartDate)
    resource_type: str = "Batch"  # GRACC's ResourceType: condor-ap's BatchPilot becomes "Payload"
    host_description: str | None = None  # the Host's description (the glidein's resource name)
    gracc_end: int | None = None  # the EndTime GRACC's raw pipeline stores (derived when condor-ap sent none)
    quarantine: str | None = None  # the raw pipeline's Quarantine reason, if it quarantines the record

    @property
    def local_job_id(self) -> str:
        """condor-ap's LocalJobId: the cluster alone for proc 0."""
        cluster, proc = self.job_id.split(".")
        return cluster if proc == "0" else self.job_id


@dataclass
class HistoryCase:
    """What :func:`write_history` wrote and what condor-ap should do with each job."""

    folder: Path
    files: list[Path]
    user_vo_map: Path
    base_end: int
    jobs: dict[str, Job] = field(default_factory=dict)  # by "cluster.proc"

    def sent(self) -> dict[str, Job]:
        return {k: j for k, j in self.jobs.items() if j.sent}

    def left_out(self) -> dict[str, Job]:
        return {k: j for k, j in self.jobs.items() if not j.sent}

    def by_global_id(self) -> dict[str, Job]:
        """The jobs by the GlobalJobId their record carries (``condor.`` + the ad's)."""
        return {f"condor.{j.global_job_id}": j for j in self.jobs.values()}

    def cases(self) -> dict[str, list[Job]]:
        out: dict[str, list[Job]] = {}
        for job in self.jobs.values():
            out.setdefault(job.case, []).append(job)
        return out


# -- the templates ------------------------------------------------------------------------------


def templates() -> dict[str, str]:
    """The real ads by name: ``condor-ap/history.N.0`` (from the tarball), ``condor25/history.C.P``,
    ``classads/glidein``. Skips when ../shared is absent."""
    missing = [p for p in (PROBE_TARBALL, CONDOR25, GLIDEIN_AD) if not p.exists()]
    if missing:
        pytest.skip(f"needs the real job ads in {', '.join(map(str, missing))} (../shared beside the project)")
    out: dict[str, str] = {}
    with tarfile.open(PROBE_TARBALL, "r:xz") as tar:
        for member in tar.getmembers():
            parts = member.name.split("/")
            if member.isfile() and parts[1:3] == ["condor-ap", "test"] and parts[-1].startswith("history."):
                data = tar.extractfile(member)
                assert data is not None
                out[f"condor-ap/{parts[-1]}"] = io.TextIOWrapper(data, encoding="utf-8", errors="replace").read()
    for path in sorted(CONDOR25.glob("history.*")):
        out[f"condor25/{path.name}"] = path.read_text(encoding="utf-8")
    out["classads/glidein"] = GLIDEIN_AD.read_text(encoding="utf-8")
    return out


def unix_accounts() -> list[tuple[str, str]]:
    """Two accounts of this host that no user-vo-map line names, with their primary group as
    condor-ap's MapUnknownToGroup looks it up (pwd, then grp): those whose group is named otherwise
    first (nobody -> nogroup on Debian), so that the group, not the owner, is what the test sees."""
    found: list[tuple[int, str, str]] = []
    for entry in pwd.getpwall():
        if entry.pw_name in VO_MAP or not re.fullmatch(r"[a-z][a-z0-9_-]*", entry.pw_name):
            continue
        try:
            group = grp.getgrgid(entry.pw_gid).gr_name
        except KeyError:
            continue
        rank = 0 if entry.pw_name == "nobody" else 1 if group != entry.pw_name else 2
        found.append((rank, entry.pw_name, group))
    found.sort()
    if not found:
        pytest.skip("this host has no Unix account with a resolvable group for the MapUnknownToGroup case")
    picked = [(n, g) for _, n, g in found[:2]]
    return picked if len(picked) == 2 else picked * 2


def unknown_owners(n: int) -> list[str]:
    """``n`` account names that neither this host nor the user-vo-map knows."""
    names: list[str] = []
    i = 1
    while len(names) < n:
        name = f"nosuchuser{i}"
        try:
            pwd.getpwnam(name)
        except KeyError:
            if name not in VO_MAP:
                names.append(name)
        i += 1
    return names


# -- re-timing and editing ----------------------------------------------------------------------


def _end_of(ad: Ad) -> int:
    """When the template's job left the queue: CompletionDate, else EnteredCurrentStatus."""
    done = int(ad.number("CompletionDate"))
    return done if done > 0 else int(ad.number("EnteredCurrentStatus"))


def _retime(ad: Ad, end: int, wall: float | None) -> None:
    """Move the template's times so that it ends at ``end``; with ``wall``, it also ran ``wall``
    seconds. Times up to its old start move with the start (QDate and the matches keep their gaps
    before it), times after its old end with the end, and times in between are stretched onto the
    new run, so that their order holds. Epoch strings (a glidein's MATCH_EXP_*_ToRetire) move too."""
    old_end = _end_of(ad)
    old_start = int(ad.number("JobStartDate")) or None
    if wall is None or old_start is None:
        old_start, new_start = None, None
    else:
        new_start = end - int(wall)
    for name, raw in list(ad.items()):
        m = _EPOCH.match(raw)
        if not m or not 10**9 <= int(m.group(1)) <= 2_200_000_000:
            continue
        value = int(m.group(1))
        if old_start is None or new_start is None or value > old_end:
            moved = value + end - old_end
        elif value <= old_start:
            moved = value + new_start - old_start
        else:
            moved = new_start + round((value - old_start) * (end - new_start) / max(old_end - old_start, 1))
        ad.set_raw(name, f'"{moved}"' if raw.startswith('"') else str(moved))
    if wall is not None and old_start is not None:
        ad.set("RemoteWallClockTime", float(wall))
        for name in ("LastRemoteWallClockTime", "CumulativeSlotTime", "CommittedSlotTime"):
            if name in ad:  # HTCondor 7's ads have no CumulativeSlotTime: none is added
                ad.set(name, float(wall))
        if "CommittedTime" in ad:
            ad.set("CommittedTime", int(wall))


def _identify(ad: Ad, cluster: int, proc: int, owner: str) -> str:
    """Give the ad its new job id and owner everywhere they show (GlobalJobId with its QDate,
    User's uid domain kept, the owner in paths and AccountingGroup); returns the GlobalJobId."""
    old_owner = ad.string("Owner") or ""
    old_id = f"{int(ad.number('ClusterId'))}.{int(ad.number('ProcId'))}"
    for name, raw in list(ad.items()):
        if raw.startswith('"') and name not in ("GlobalJobId", "User", "Owner"):
            new = raw.replace(f".{old_id}.", f".{cluster}.{proc}.")
            if old_owner:
                new = new.replace(old_owner, owner)
            if new != raw:
                ad.set_raw(name, new)
    domain = (ad.string("User") or "@localpool").split("@", 1)[1]
    ad.set("Owner", owner)
    ad.set("User", f"{owner}@{domain}")
    ad.set("ClusterId", cluster)
    ad.set("ProcId", proc)
    global_id = f"{SCHEDD}#{cluster}.{proc}#{int(ad.number('QDate'))}"
    ad.set("GlobalJobId", global_id)
    return global_id


def _no_glidein(ad: Ad) -> None:
    """A job that ran in the AP's own pool: no glidein attributes the schedd copied from the slot."""
    ad.delete_matching(r"^(MachineAttrGLIDEIN_|MATCH_EXP_JOB_?GLIDEIN|MATCH_GLIDEIN|MATCH_EXP_JOB_Site)")


def _no_proxy(ad: Ad) -> None:
    ad.delete_matching(r"^x509")


def _never_ran(ad: Ad) -> None:
    """Removed before it started: no start, no host, no time, CompletionDate 0."""
    ad.delete_matching(
        r"^(JobStartDate|JobCurrentStartDate|JobCurrentStartExecutingDate|LastMatchTime|FirstJobMatchDate"
        r"|LastRemoteHost|LastPublicClaimId|MachineAttr|StartdPrincipal|NumJobMatches|JobRunCount"
        r"|LastJobLeaseRenewal|ExitCode|CpusProvisioned|MemoryProvisioned|DiskProvisioned|GPUsProvisioned)"
    )
    for name in ("RemoteWallClockTime", "CumulativeSlotTime", "RemoteUserCpu", "RemoteSysCpu", "CommittedTime"):
        ad.set(name, 0.0 if name != "CommittedTime" else 0)
    ad.set("NumJobStarts", 0)
    ad.set("JobStatus", 3)
    ad.set("LastJobStatus", 1)
    ad.set("CompletionDate", 0)


def _removed_running(ad: Ad) -> None:
    """Removed while it ran: JobStatus 3, no CompletionDate (condor-ap then sends no EndTime)."""
    ad.set("JobStatus", 3)
    ad.set("LastJobStatus", 2)
    ad.set("CompletionDate", None)
    ad.set("ExitCode", None)
    ad.set("RemoveReason", "via condor_rm (by user condor)")


def _cumulative_cpu(ad: Ad) -> None:
    """HTCondor 25's CumulativeRemote*Cpu sum a job's runs; with one run they equal Remote*Cpu."""
    for kind in ("User", "Sys"):
        if f"CumulativeRemote{kind}Cpu" in ad:
            ad.set(f"CumulativeRemote{kind}Cpu", ad.number(f"Remote{kind}Cpu"))


@dataclass(frozen=True)
class _Spec:
    """One job to write: its template, edits and the expectations that are not derived from the ad."""

    case: str
    template: str
    owner: str
    day: int  # whole days before base_end that it ends
    wall: float | None  # seconds it ran (RemoteWallClockTime); None: it never ran
    sent: bool
    why: str
    vo: tuple[str, str] | None  # (VOName, ReportableVOName) expected, for sent jobs
    edit: tuple[str, ...] = ()  # names of edits in _EDITS, applied in order
    attrs: Mapping[str, Any] = field(default_factory=dict)  # set last (None deletes)
    processors: int = 1
    cpu: tuple[float, float] = (0.0, 0.0)  # expected (user, system)
    glidein: str | None = None  # the glidein's resource name: BatchPilot (GRACC's "Payload"), the Host description


_EDITS = {
    "no_glidein": _no_glidein,
    "no_proxy": _no_proxy,
    "never_ran": _never_ran,
    "removed_running": _removed_running,
}


def _specs(unix: list[tuple[str, str]], unknown: list[str]) -> list[_Spec]:
    """The jobs, case by case (two or more each). Cluster = 1001 + the case's index, proc = its place."""
    (nobody, nobody_group), (other, other_group) = unix
    vo = VO_MAP
    local = "Grid=Local, suppressed by SuppressGridLocalRecords=1"
    fqan_vdt = ("/vdt/Role=NULL/Capability=NULL", "vdt")
    fqan_cms = ("/cms/Role=production/Capability=NULL", "cms")
    glidein = "Loopback-CE1"  # GLIDEIN_ResourceName of the condor25 pool's slots
    token = {
        name: {
            "orig_AuthTokenIssuer": issuer,
            "orig_AuthTokenSubject": subject,
            "orig_AuthTokenId": f"{i}f3e1c2a-7d3b-4c5e-9a1b-2c3d4e5f6a7b",
            "orig_AuthTokenScopes": "compute.create,compute.read",
            "AuthTokenIssuer": issuer,
            "AuthTokenSubject": subject,
        }
        for i, (name, issuer, subject) in enumerate(
            [
                ("osg", TOKEN_ISSUERS[0], "alice@osg-htc.org"),
                ("icecube", TOKEN_ISSUERS[1], "http://cilogon.org/serverE/users/4711"),
            ]
        )
    }
    return [
        # owner in the user-vo-map: VerifyUserInfo adds (voi, VOc)
        _Spec("vo_map", "condor25/history.12.0", "alice", 0, 3600.0, True, "sent; VO from the user-vo-map",
              vo["alice"], ("no_glidein",)),
        _Spec("vo_map", "condor25/history.12.1", "bob", 1, 5400.0, True, "sent; VO from the user-vo-map",
              vo["bob"], ("no_glidein",)),
        # not in the map but a Unix account here: MapUnknownToGroup -> its primary group
        _Spec("unix_group", "condor25/history.10.2", nobody, 1, 7200.0, True, "sent; VO = the owner's Unix group",
              (nobody_group, nobody_group), ("no_glidein",), processors=2),
        _Spec("unix_group", "condor25/history.10.3", other, 2, 1800.0, True, "sent; VO = the owner's Unix group",
              (other_group, other_group), ("no_glidein",), processors=4),
        # unknown everywhere: MapUnknownToGroup falls back to the owner itself
        _Spec("unknown_owner", "condor-ap/history.377262.0", unknown[0], 2, 900.0, True,
              "sent; VO = the owner (no map line, no account)", (unknown[0], unknown[0]), ("no_proxy",)),
        _Spec("unknown_owner", "condor-ap/history.377263.0", unknown[1], 3, 600.0, True,
              "sent; VO = the owner (no map line, no account)", (unknown[1], unknown[1]), ("no_proxy",)),
        # SciToken: the issuer is VOName and ReportableVOName, even for a mapped owner
        _Spec("scitoken", "condor25/history.10.4", "alice", 3, 2400.0, True, "sent; VO = the token's issuer",
              (TOKEN_ISSUERS[0], TOKEN_ISSUERS[0]), attrs=token["osg"], glidein=glidein),
        _Spec("scitoken", "condor25/history.10.7", unknown[2], 4, 1200.0, True, "sent; VO = the token's issuer",
              (TOKEN_ISSUERS[1], TOKEN_ISSUERS[1]), attrs=token["icecube"], glidein=glidein),
        # proxy: the FQAN is VOName, x509UserProxyVOName ReportableVOName, even for a mapped owner
        _Spec("proxy", "condor-ap/history.377280.0", "vdtuser03", 4, 910.0, True, "sent; VO = the proxy's FQAN",
              fqan_vdt),
        _Spec("proxy", "classads/glidein", "cmsdataops", 5, 3000.0, True, "sent; VO = the proxy's FQAN", fqan_cms),
        # scheduler and local universe: Grid Local
        _Spec("scheduler_universe", "condor25/history.12.0", "alice", 0, 600.0, False, f"JobUniverse 7: {local}",
              None, ("no_glidein",), {"JobUniverse": 7, "Cmd": "/home/alice/bin/watch.sh", "MachineAttrCpus0": None,
                                      "LastRemoteHost": None}),
        _Spec("scheduler_universe", "condor25/history.12.1", "bob", 2, 700.0, False, f"JobUniverse 7: {local}",
              None, ("no_glidein",), {"JobUniverse": 7, "Cmd": "/home/bob/bin/watch.sh", "MachineAttrCpus0": None,
                                      "LastRemoteHost": None}),
        _Spec("local_universe", "condor25/history.12.0", "alice", 1, 300.0, False, f"JobUniverse 12: {local}",
              None, ("no_glidein",), {"JobUniverse": 12, "MachineAttrCpus0": None, "LastRemoteHost": None}),
        _Spec("local_universe", "condor25/history.12.1", "bob", 3, 400.0, False, f"JobUniverse 12: {local}",
              None, ("no_glidein",), {"JobUniverse": 12, "MachineAttrCpus0": None, "LastRemoteHost": None}),
        # DAGMan: classadToJUR raises IgnoreClassadException (counted as submitted, never sent)
        _Spec("dagman", "condor25/history.12.0", "alice", 0, 4000.0, False,
              "Cmd ends in condor_dagman: IgnoreClassadException", None, ("no_glidein",),
              {"JobUniverse": 7, "Cmd": "/usr/bin/condor_dagman", "MachineAttrCpus0": None, "LastRemoteHost": None,
               "Args": "-p 0 -f -l . -Lockfile work.dag.lock -AutoRescue 1 -DoRescueFrom 0 -Dag work.dag"}),
        _Spec("dagman", "condor25/history.12.1", "bob", 2, 5000.0, False,
              "Cmd ends in condor_dagman: IgnoreClassadException", None, ("no_glidein",),
              {"JobUniverse": 7, "Cmd": "/usr/bin/condor_dagman", "MachineAttrCpus0": None, "LastRemoteHost": None,
               "Args": "-p 0 -f -l . -Lockfile run.dag.lock -AutoRescue 1 -DoRescueFrom 0 -Dag run.dag"}),
        # routed (the job the CE's router copied): Grid Local
        _Spec("routed", "condor-ap/history.377264.0", "vdtuser03", 1, 800.0, False, f"RoutedToJobId: {local}",
              None, attrs={"RoutedToJobId": "4001.0", "Managed": "External", "ManagedManager": "htcondor-ce"}),
        _Spec("routed", "condor-ap/history.377265.0", "vdtuser03", 3, 850.0, False, f"RoutedToJobId: {local}",
              None, attrs={"RoutedToJobId": "4001.1", "Managed": "External", "ManagedManager": "htcondor-ce"}),
        # removed before it started: sent without EndTime/StartTime -> GRACC quarantines it
        _Spec("removed_before_start", "condor25/history.11.8", "alice", 2, None, True,
              "sent without EndTime and StartTime (CompletionDate 0, never started)", vo["alice"],
              ("never_ran",)),
        _Spec("removed_before_start", "condor25/history.12.1", "bob", 4, None, True,
              "sent without EndTime and StartTime (CompletionDate 0, never started)", vo["bob"],
              ("no_glidein", "never_ran")),
        # removed while it ran: sent without EndTime; GRACC derives it from StartTime + WallDuration
        _Spec("removed_after_start", "condor25/history.11.0", "alice", 3, 1500.0, True,
              "sent without EndTime (no CompletionDate)", vo["alice"], ("removed_running",),
              processors=4, glidein=glidein),
        _Spec("removed_after_start", "condor25/history.10.1", "bob", 5, 2500.0, True,
              "sent without EndTime (no CompletionDate)", vo["bob"], ("removed_running",),
              glidein=glidein),
        # glidein: MachineAttrGLIDEIN_ResourceName0 -> BatchPilot (GRACC: Payload), Host description
        _Spec("glidein", "condor25/history.10.0", "alice", 0, 6000.0, True, "sent; a glidein payload",
              vo["alice"], glidein=glidein),
        _Spec("glidein", "condor25/history.10.1", "bob", 6, 6600.0, True, "sent; a glidein payload",
              vo["bob"], attrs={"MachineAttrGLIDEIN_ResourceName0": "Loopback-CE2"},
              glidein="Loopback-CE2"),
        # ran in the AP's own pool: the JOBGLIDEIN_ResourceName macro gave "Local Job" -> Grid Local
        _Spec("local_job", "condor25/history.12.0", "alice", 1, 1000.0, False,
              f'MATCH_EXP_JOBGLIDEIN_ResourceName "Local Job": {local}', None, ("no_glidein",),
              {"MATCH_EXP_JOBGLIDEIN_ResourceName": "Local Job"}),
        _Spec("local_job", "condor25/history.12.1", "bob", 4, 1100.0, False,
              f'MATCH_EXP_JOBGLIDEIN_ResourceName "Local Job": {local}', None, ("no_glidein",),
              {"MATCH_EXP_JOBGLIDEIN_ResourceName": "Local Job"}),
        # user and system CPU, remote and local: CpuDuration user = RemoteUserCpu + LocalUserCpu, ...
        _Spec("cpu_user_system", "condor-ap/history.377266.0", "bob", 0, 3700.0, True,
              "sent; user and system CPU, remote + local", vo["bob"], ("no_proxy",),
              {"RemoteUserCpu": 3400.5, "RemoteSysCpu": 120.25, "LocalUserCpu": 3.5, "LocalSysCpu": 1.25},
              cpu=(3404.0, 121.5)),
        _Spec("cpu_user_system", "condor-ap/history.377267.0", "alice", 5, 7300.0, True,
              "sent; user and system CPU, remote + local", vo["alice"], ("no_proxy",),
              {"RemoteUserCpu": 7000.0, "RemoteSysCpu": 250.0, "LocalUserCpu": 2.0, "LocalSysCpu": 0.5},
              cpu=(7002.0, 250.5)),
        # insane CPU (>= 2e9 and over 1000 x CumulativeSlotTime): condor-ap zeroes the remote part
        _Spec("insane_cpu", "condor25/history.12.0", "alice", 2, 600.0, True,
              "sent; RemoteUserCpu 2.5e9 over 600 s of slot time zeroed", vo["alice"],
              ("no_glidein",), {"RemoteUserCpu": 2.5e9, "RemoteSysCpu": 10.0, "LocalUserCpu": 2.0}, cpu=(2.0, 10.0)),
        _Spec("insane_cpu", "condor25/history.12.1", "bob", 6, 900.0, True,
              "sent; RemoteSysCpu 3e9 over 900 s of slot time zeroed", vo["bob"],
              ("no_glidein",), {"RemoteUserCpu": 300.0, "RemoteSysCpu": 3.0e9, "LocalSysCpu": 0.75}, cpu=(300.0, 0.75)),
        # MachineAttrCpus0 (the slot's) wins over RequestCpus and CpusProvisioned
        _Spec("machine_cpus", "condor25/history.10.6", "alice", 1, 3600.0, True,
              "sent; Processors = MachineAttrCpus0 8 (RequestCpus 1, CpusProvisioned 1)",
              vo["alice"], attrs={"RequestCpus": 1, "CpusProvisioned": 1}, processors=8, glidein=glidein),
        _Spec("machine_cpus", "condor25/history.10.3", "bob", 3, 1800.0, True,
              "sent; Processors = MachineAttrCpus0 8 (RequestCpus 1, CpusProvisioned 1)",
              vo["bob"], attrs={"MachineAttrCpus0": 8, "RequestCpus": 1, "CpusProvisioned": 1},
              processors=8, glidein=glidein),
        # no MachineAttrCpus0: the glidein's MATCH_EXP_JOB_GLIDEIN_Cpus comes next
        _Spec("glidein_cpus", "classads/glidein", "cmsdataops", 2, 5000.0, True,
              "sent; Processors = MATCH_EXP_JOB_GLIDEIN_Cpus 4 (no MachineAttrCpus0)", fqan_cms,
              attrs={"MachineAttrCpus0": None, "MATCH_EXP_JOB_GLIDEIN_Cpus": "4"}, processors=4),
        _Spec("glidein_cpus", "condor25/history.10.2", "bob", 4, 2000.0, True,
              "sent; Processors = MATCH_EXP_JOB_GLIDEIN_Cpus 8 (no MachineAttrCpus0; CpusProvisioned 2)",
              vo["bob"], attrs={"MachineAttrCpus0": None, "MATCH_EXP_JOB_GLIDEIN_Cpus": "8"},
              processors=8, glidein=glidein),
        # GPUs requested
        _Spec("request_gpus", "condor25/history.10.5", "alice", 5, 4200.0, True, "sent; GPUs = RequestGPUs 1",
              vo["alice"], processors=2, glidein=glidein),
        _Spec("request_gpus", "condor25/history.10.6", "bob", 6, 4800.0, True, "sent; GPUs = RequestGPUs 2",
              vo["bob"], processors=8, glidein=glidein),
    ]  # fmt: skip


def write_history(folder: Path, *, base_end: int) -> HistoryCase:
    """Write the per-job history files and the user-vo-map into ``folder`` (made if needed). Every
    job ends within the 120 days before ``base_end`` (condor-ap drops older ones), on seven UTC
    days (whole days back from ``base_end``, a few minutes apart within a day)."""
    folder.mkdir(parents=True, exist_ok=True)
    ads = templates()
    unix = unix_accounts()
    unknown = unknown_owners(3)
    specs = _specs(unix, unknown)
    case_index: dict[str, int] = {}
    # the map beside the history files: condor_meter reads only history.<cluster>.<proc> names
    case = HistoryCase(folder=folder, files=[], user_vo_map=folder / "user-vo-map", base_end=base_end)
    for spec in specs:
        cluster = 1001 + case_index.setdefault(spec.case, len(case_index))
        proc = sum(1 for j in case.jobs.values() if j.case == spec.case)
        ad = Ad(ads[spec.template])
        for name in spec.edit:
            _EDITS[name](ad)
        for name, value in spec.attrs.items():
            ad.set(name, value)
        _cumulative_cpu(ad)
        end = base_end - spec.day * DAY - 60 * (proc + 1) - 600 * case_index[spec.case]
        assert base_end - 120 * DAY < end <= base_end
        never_ran = "never_ran" in spec.edit
        _retime(ad, end, None if never_ran else spec.wall)
        if never_ran:
            ad.set("EnteredCurrentStatus", end)
            ad.set("CompletionDate", 0)
        global_id = _identify(ad, cluster, proc, spec.owner)
        path = folder / f"history.{cluster}.{proc}"
        path.write_text(ad.text(), encoding="utf-8")
        case.files.append(path)
        job_id = f"{cluster}.{proc}"
        wall = ad.number("RemoteWallClockTime")
        start = int(ad.number("JobStartDate")) or None
        completed = int(ad.number("CompletionDate")) or None
        gracc_end = completed or (start + int(wall) if start is not None else None)
        gpus = ad.raw("RequestGpus")
        case.jobs[job_id] = Job(
            job_id=job_id, case=spec.case, sent=spec.sent, why=spec.why, path=path, global_job_id=global_id,
            template=spec.template, owner=spec.owner,
            vo_name=spec.vo[0] if spec.vo else None, reportable_vo_name=spec.vo[1] if spec.vo else None,
            processors=spec.processors, gpus=int(gpus) if gpus is not None and gpus.isdigit() else None,
            project=ad.string("ProjectName"), wall=wall, cpu_user=spec.cpu[0], cpu_system=spec.cpu[1],
            end=completed, start=start, host_description=spec.glidein,
            resource_type="Payload" if spec.glidein else "Batch",
            gracc_end=gracc_end, quarantine=None if (completed or start) else "MissingEndTime",
        )  # fmt: skip
    lines = [
        "# User-VO map (the format of /var/lib/osg/user-vo-map), written for the GRACC parity tests",
        "#voi " + " ".join(dict.fromkeys(v for v, _ in VO_MAP.values())),
        "#VOc " + " ".join(dict.fromkeys(c for _, c in VO_MAP.values())),
        *(f"{user} {voi}" for user, (voi, _) in VO_MAP.items()),
    ]
    case.user_vo_map.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return case
