"""Write a large, realistic ``condor_history -long`` file for the reader benchmarks.

The ads are modelled on real completed job ads (``condor25/history.ads`` from an HTCondor 25
pool, and a CMS glidein job): the same attribute names and value shapes, sorted
case-insensitively as HTCondor prints them, one blank line between ads. The values the jobs
table reads vary from job to job (owners, accounting groups, provisioned resources, requests,
sites, times), and the shapes that make parsing expensive come in realistic proportions:
``RequestMemory`` as HTCondor's default expression (30%), ``RequestDisk = DiskUsage``,
``undefined``, reals, strings with escaped quotes, lists and nested ads, and jobs removed before
they ran (1%, no ``*Provisioned`` attributes).

Ads have 77-160 attributes (about 126 on average) and 2.1-5.2 KB (about 3.7 KB on average).
Real attribute lines average 27-30 bytes in the fixtures, so "about 150 attributes, about 3 KB"
cannot both hold; the ads follow the fixtures.

Generating must take seconds for 200,000 ads, so there is no Python work per attribute per ad:
the values are drawn with numpy a batch at a time, each *shape* of ad (which optional attributes
it has) is compiled once into a ``%`` format, and an ad is one ``format % values``.

Deterministic: the same ``seed`` gives the same bytes. Files are made of 10,000-ad batches, each
with its own random stream, so a file of 200,000 ads starts with the 50,000-ad file: files of
different sizes differ in size only.

With ``escaped_share`` (``--escaped-share``), that share of clusters name their project with
old ClassAd escapes (``ProjectName = "CMS-Tier2 \\"7\\""``, a backslash on its own), drawn
from a stream of their own: every other value is that of the file without them.

Usage: ``python benchmarks/generate_history.py OUT N [--seed S] [--escaped-share F]``
"""

from __future__ import annotations

import argparse
import operator
import os
import re
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = ["GENERATOR_VERSION", "generate"]

#: Bump when the output changes, so cached benchmark files (named after it) are regenerated.
GENERATOR_VERSION = 1

#: Ads drawn per batch; part of the output's definition (it fixes the random streams).
_BATCH = 10_000
#: 2025-01-01T00:00:00Z; jobs are spread over the following weeks.
_EPOCH = 1_735_689_600
#: Seconds of submit time each batch covers (about 3.5 days per 10,000 jobs).
_BATCH_SPAN = 300_000

# ---------------------------------------------------------------------------------------------
# vocabularies


_OWNERS = (
    "cmsprod", "amaltaro", "jdoe", "bkumar", "lchen", "mrossi", "osgtest", "ligoprod", "icecube",
    "sphenix", "agarcia", "bwilson", "ckim", "dpatel", "eschmidt", "fnguyen", "gbrown", "hsato",
    "imueller", "jlopez", "kwang", "lnovak", "mjohnson", "nahmed", "opetrov", "psilva", "qzhang",
    "rmartin", "stanaka", "tkowalski", "uali", "vdubois", "wsmith", "xli", "yyamamoto",
    "zhernandez", "atlasprd", "belleprod", "dunepro", "mu2epro", "gluex", "nova", "uboone",
    "minerva", "lsst", "des", "cta", "km3net", "xenon", "darkside",
)  # fmt: skip
_GROUPS = ("group_cms", "group_atlas", "group_osg", "group_ligo", "group_icecube", "group_fermilab")
_PROJECTS = (
    "CMS-Tier2",
    "ATLAS-Prod",
    "OSG-Staff",
    "OSG-ML",
    "LIGO-CBC",
    "IceCube-Sim",
    "DUNE-ND",
    "UChicago_Physics",
    "Purdue_BioInfo",
    "Wisc_Chem",
    "NOAA-Climate",
    "sPHENIX-Reco",
)
# (submit host, UID/FS domain)
_SCHEDDS = (
    ("ap20.uc.osg-htc.org", "osg-htc.org"),
    ("ap21.uc.osg-htc.org", "osg-htc.org"),
    ("login04.osgconnect.net", "osgconnect.net"),
    ("submit1.chtc.wisc.edu", "chtc.wisc.edu"),
    ("cmsgwms-submit1.fnal.gov", "cms"),
)
# (GLIDEIN_Site, GLIDEIN_ResourceName, factory entry, worker domain, HEPSPEC per core)
_SITES = (
    ("Purdue", "Purdue-Bell", "OSG_US_Purdue_Bell", "rcac.purdue.edu", 14.5),
    ("Nebraska", "Nebraska-Crane", "OSG_US_UNL_Crane", "unl.edu", 12.25),
    ("UCSD", "UCSDT2", "CMSHTPC_T2_US_UCSD_gw6", "t2.ucsd.edu", 11.8),
    ("Wisconsin", "GLOW", "OSG_US_GLOW", "chtc.wisc.edu", 15.0),
    ("MIT", "MIT_CMS", "CMSHTPC_T2_US_MIT_ce1", "cmsaf.mit.edu", 10.5),
    ("Caltech", "CIT_CMS_T2", "CMSHTPC_T2_US_Caltech_cit2", "ultralight.org", 13.1),
    ("FNAL", "GPGrid", "CMSHTPC_T1_US_FNAL_condce1", "fnal.gov", 16.4),
    ("INFN-LNL-2", "INFN-LNL-2", "CMSHTPC_T2_IT_Legnaro_ce06", "lnl.infn.it", 9.75),
    ("SU-ITS", "SU-ITS-CE2", "OSG_US_SU_ITS_CE2", "syr.edu", 10.0),
    ("Clemson", "Clemson-Palmetto", "OSG_US_Clemson_Palmetto", "palmetto.clemson.edu", 11.2),
    ("TACC", "TACC-Frontera", "OSG_US_TACC_Frontera", "frontera.tacc.utexas.edu", 17.6),
    ("SDSC", "SDSC-Expanse", "OSG_US_SDSC_Expanse", "expanse.sdsc.edu", 18.3),
    ("AGLT2", "AGLT2_CE_2", "ATLAS_US_AGLT2_gate02", "aglt2.org", 12.9),
    ("MWT2", "MWT2_UC", "ATLAS_US_MWT2_iut2", "mwt2.org", 13.7),
    ("IU", "IU-Jetstream2", "OSG_US_IU_Jetstream2", "jetstream-cloud.org", 14.1),
    ("UConn", "UConn-HPC", "OSG_US_UConn_HPC", "hpc.uconn.edu", 9.9),
)
_COMMANDS = (
    "run_analysis.sh",
    "wrapper.sh",
    "simulate.py",
    "bin/cmsRun.sh",
    "process_events",
    "train_model.sh",
    "blast_wrapper.sh",
    "gromacs_run.sh",
)
_ENVIRONMENTS = (
    "",
    "OMP_NUM_THREADS=1",
    "OMP_NUM_THREADS=4 PYTHONUNBUFFERED=1",
    "CUDA_VISIBLE_DEVICES=0 TF_CPP_MIN_LOG_LEVEL=2",
    "CONDOR_CLUSTER={cluster} CONDOR_PROC={proc} HOME=/home/{owner} LANG=C",
    "X509_USER_PROXY=/tmp/x509up_u{uid} XRD_REQUESTTIMEOUT=1800 CMS_PATH=/cvmfs/cms.cern.ch",
    "PATH=/usr/bin:/bin LD_LIBRARY_PATH=/cvmfs/sft.cern.ch/lcg/views/LCG_104/x86_64-el9-gcc13-opt/lib",
)
_ARGUMENTS = (
    "{proc}",
    "--seed {proc} --events 5000",
    "-c sleep' '{wall};' 'exit' '0",
    "--input root://xrootd.example.org//store/user/{owner}/file_{proc}.root",
    "--config config.yaml --job {cluster}.{proc} --output out_{proc}.h5",
)
_REQUIREMENTS = (
    (
        '(TARGET.Arch == "X86_64") && (TARGET.OpSys == "LINUX") && (TARGET.Disk >= RequestDisk) '
        "&& (TARGET.Memory >= RequestMemory) && (TARGET.HasFileTransfer)"
    ),
    (
        '(TARGET.Arch == "X86_64") && (TARGET.OpSys == "LINUX") && (TARGET.Disk >= RequestDisk) '
        "&& (TARGET.Memory >= RequestMemory) && (TARGET.FileSystemDomain == MY.FileSystemDomain)"
    ),
    (
        '(TARGET.Arch == "X86_64") && (TARGET.OpSys == "LINUX") && (TARGET.Disk >= RequestDisk) '
        "&& (TARGET.Memory >= RequestMemory) && (TARGET.Cpus >= RequestCpus) && (TARGET.HasFileTransfer)"
    ),
    (
        '( ( Memory >= 1 && OpSys == "LINUX" ) && ( Arch == "INTEL" || Arch == "X86_64" ) '
        "&& stringListMember(GLIDEIN_CMSSite,DESIRED_Sites) ) && ( TARGET.Disk >= RequestDisk ) "
        "&& ( TARGET.Memory >= RequestMemory ) && ( TARGET.HasFileTransfer )"
    ),
    (
        '(TARGET.Arch == "X86_64") && (TARGET.OpSys == "LINUX") && (TARGET.Disk >= RequestDisk) '
        "&& (TARGET.Memory >= RequestMemory) && (TARGET.Cpus >= RequestCpus) && (TARGET.GPUs >= RequestGPUs) "
        "&& ((TARGET.FileSystemDomain == MY.FileSystemDomain) || (TARGET.HasFileTransfer))"
    ),
)
# a string with escaped quotes, as the CMS frontend sets it
_CMS_SITE = '"$$([ifThenElse(GLIDEIN_CMSSite is undefined, \\"Unknown\\", GLIDEIN_CMSSite)])"'
_PERIODIC_REMOVE = "(JobStatus == 2) && (time() - EnteredCurrentStatus > 172800)"
_DEFAULT_REQUEST_MEMORY = "ifthenelse(MemoryUsage =!= undefined,MemoryUsage,(ImageSize + 1023) / 1024)"
# ProjectName spellings with old ClassAd escapes: \" is a quote, any other backslash itself
_ESCAPED_PROJECTS = ('{project} \\"{k}\\"', '\\"{project}\\" run {k}', "{project}\\{k}", "C:\\{project}\\{k}\\")
_HOLD_REASON = (
    "Error from slot1_{slot}@{node}: Failed to execute '{cmd}': "
    "Cannot access initial working directory \\\"/home/{owner}/jobs\\\" (errno=2: 'No such file or directory')"
)

# ---------------------------------------------------------------------------------------------
# the ad: (attribute, value template, condition)
#
# Values are ClassAd text with ``{column}`` placeholders (an identifier in braces, so ClassAd
# lists ``{ "a","b" }`` and empty ``{  }`` pass through). Conditions are space-separated flags
# (``!flag`` for its absence) that must all hold for the attribute to be in an ad.

_ATTRS: tuple[tuple[str, str, str], ...] = (
    ("AccountingGroup", '"{group}.{owner}"', "acct"),
    ("AcctGroup", '"{group}"', "acct"),
    ("AcctGroupUser", '"{owner}"', "acct"),
    ("ActivationDuration", "{act}", "ran stats"),
    ("ActivationExecutionDuration", "{act}", "ran stats"),
    ("ActivationSetupDuration", "0", "ran stats"),
    ("ActivationTeardownDuration", "0", "ran stats"),
    ("Args", '"{args}"', "oldargs"),
    ("Arguments", '"{args}"', "!oldargs"),
    ("AssignedGPUs", '"{assigned_gpus}"', "ran gpu"),
    ("BlockReadKbytes", "{blk_rkb}", "ran stats"),
    ("BlockReads", "{blk_r}", "ran stats"),
    ("BlockWriteKbytes", "{blk_wkb}", "ran stats"),
    ("BlockWrites", "{blk_w}", "ran stats"),
    ("BytesRecvd", "{bytes_recvd}", ""),
    ("BytesSent", "{bytes_sent}", ""),
    ("ClusterId", "{cluster}", ""),
    ("Cmd", '"/home/{owner}/{cmd}"', ""),
    ("CommittedSlotTime", "{wall_real}", ""),
    ("CommittedSuspensionTime", "0", ""),
    ("CommittedTime", "{wall}", ""),
    ("CompletionDate", "{completion}", "ran !removed"),
    ("CondorPlatform", '"$CondorPlatform: X86_64-AlmaLinux_9.4 $"', ""),
    ("CondorVersion", '"$CondorVersion: 24.0.4 2025-01-30 $"', ""),
    ("CpusProvisioned", "{cpus_prov}", "ran"),
    ("CpusUsage", "{cpus_usage}", "ran"),
    ("CumulativeRemoteSysCpu", "{sys_cpu}", ""),
    ("CumulativeRemoteUserCpu", "{user_cpu}", ""),
    ("CumulativeSlotTime", "{wall_real}", ""),
    ("CumulativeSuspensionTime", "0", ""),
    ("CurrentHosts", "0", ""),
    ("CurrentTime", "time()", "glidein"),
    ("DESIRED_Sites", '"{desired}"', "glidein"),
    ("DESIRED_SitesList", '{ "{site}","{site2}" }', "glidein"),
    ("DiskProvisioned", "{disk_prov}", "ran"),
    ("DiskUsage", "{disk_usage}", ""),
    ("DiskUsage_RAW", "{disk_raw}", ""),
    ("EnteredCurrentStatus", "{entered}", ""),
    ("Environment", '"{environment}"', ""),
    ("Err", '"_condor_stderr"', ""),
    ("ExecutableSize", "{exe_size}", ""),
    ("ExecutableSize_RAW", "{exe_raw}", ""),
    ("ExecuteDirWasEncrypted", "false", "ran stats"),
    ("ExitBySignal", "false", ""),
    ("ExitCode", "{exit_code}", "ran !removed"),
    ("ExitStatus", "0", ""),
    ("FileSystemDomain", '"{domain}"', ""),
    ("FirstJobMatchDate", "{match}", "ran"),
    ("GlobalJobId", '"{schedd}#{cluster}.{proc}#{qdate}"', ""),
    ("GPUsProvisioned", "{gpus_prov}", "ran"),
    ("ImageSize", "{image_size}", ""),
    ("ImageSize_RAW", "{image_raw}", ""),
    ("In", '"/dev/null"', ""),
    ("InitialWaitDuration", "{wait}", "ran"),
    ("Iwd", '"/home/{owner}/jobs/run{cluster}"', ""),
    ("JOB_GLIDEIN_Site", '"$$(GLIDEIN_Site:Unknown)"', "glidein"),
    ("JOBGLIDEIN_CMSSite", _CMS_SITE, "glidein"),
    ("JobCurrentReconnectAttempt", "undefined", "ran"),
    ("JobCurrentStartDate", "{start}", "ran"),
    ("JobCurrentStartExecutingDate", "{start_exec}", "ran"),
    ("JobFinishedHookDone", "{entered}", ""),
    ("JobLastStartDate", "{start}", "ran restarted"),
    ("JobLeaseDuration", "2400", ""),
    ("JobMachineAttrs", '"GLIDEIN_Site,GLIDEIN_ResourceName,HEPSPEC"', "machattrs"),
    ("JobNotification", "0", ""),
    ("JobPrio", "{prio}", ""),
    ("JobRunCount", "{starts}", "ran"),
    ("JobStartDate", "{first_start}", "ran"),
    ("JobStatus", "{status}", ""),
    ("JobSubmitFile", '"{sub}.sub"', ""),
    ("JobSubmitMethod", "0", ""),
    ("JobUniverse", "5", ""),
    ("LastHoldReason", '"{hold_reason}"', "held"),
    ("LastHoldReasonCode", "6", "held"),
    ("LastHoldReasonSubCode", "2", "held"),
    ("LastJobLeaseRenewal", "{completion}", "ran"),
    ("LastJobStatus", "{last_status}", ""),
    ("LastMatchTime", "{start}", "ran"),
    ("LastPublicClaimId", '"<{ip}:9618>#{claim_t}#{claim_n}#..."', "ran"),
    ("LastRemoteHost", '"{remote_host}"', "ran"),
    ("LastRemoteWallClockTime", "{wall_real}", "ran"),
    ("LastSuspensionTime", "0", ""),
    ("LastVacateTime", "{match}", "held"),
    ("LeaveJobInQueue", "false", ""),
    ("MachineAttrCpus0", "{cpus_prov}", "ran"),
    ("MachineAttrGLIDEIN_ResourceName0", "{m_resource}", "ran machattrs"),
    ("MachineAttrGLIDEIN_Site0", "{m_site}", "ran machattrs"),
    ("MachineAttrGPUs0", "{gpus_prov}", "ran"),
    ("MachineAttrHEPSPEC0", "{hepspec}", "ran machattrs"),
    ("MachineAttrMemory0", "{mem_prov}", "ran"),
    ("MachineAttrSlotWeight0", "{cpus_prov}", "ran"),
    ("MATCH_EXP_JOB_GLIDECLIENT_Name", '"{frontend}"', "ran glidein"),
    ("MATCH_EXP_JOB_GLIDEIN_Entry_Name", '"{entry}"', "ran glidein"),
    ("MATCH_EXP_JOB_GLIDEIN_Site", '"{site}"', "ran glidein"),
    ("MATCH_EXP_JOB_GLIDEIN_SiteWMS_JobId", '"{wms_job}"', "ran glidein"),
    ("MATCH_EXP_JOB_GLIDEIN_SiteWMS_Queue", '"{queue}"', "ran glidein"),
    ("MATCH_EXP_JOBGLIDEIN_ResourceName", '"{resource}"', "ran glidein"),
    ("MaxHosts", "1", ""),
    ("MemoryProvisioned", "{mem_prov}", "ran"),
    ("MemoryUsage", "((ResidentSetSize + 1023) / 1024)", ""),
    ("MinHosts", "1", ""),
    ("MyType", '"Job"', ""),
    ("NumCkpts", "0", ""),
    ("NumCkpts_RAW", "0", ""),
    ("NumHolds", "1", "held"),
    ("NumHoldsByReason", "[ FailedToCreateProcess = 1 ]", "held"),
    ("NumJobCompletions", "{completions}", ""),
    ("NumJobMatches", "{starts}", "ran"),
    ("NumJobStarts", "{starts}", ""),
    ("NumRestarts", "0", ""),
    ("NumShadowStarts", "{starts}", "ran"),
    ("NumSystemHolds", "0", ""),
    ("OnExitHold", "false", "policy"),
    ("OnExitRemove", "true", "policy"),
    ("OrigMaxHosts", "1", ""),
    ("Out", '"_condor_stdout"', ""),
    ("Owner", '"{owner}"', ""),
    ("PeriodicHold", "false", "policy"),
    ("PeriodicRelease", "false", "policy"),
    ("PeriodicRemove", "{periodic_remove}", "policy"),
    ("ProcId", "{proc}", ""),
    ("ProjectName", '"{project}"', "project"),
    ("QDate", "{qdate}", ""),
    ("Rank", "0.0", ""),
    ("RecentBlockReadKbytes", "0", "ran stats"),
    ("RecentBlockReads", "0", "ran stats"),
    ("RecentBlockWriteKbytes", "0", "ran stats"),
    ("RecentBlockWrites", "0", "ran stats"),
    ("RecentStatsLifetimeStarter", "{recent_life}", "ran stats"),
    ("RemoteSysCpu", "{sys_cpu}", ""),
    ("RemoteUserCpu", "{user_cpu}", ""),
    ("RemoteWallClockTime", "{wall_real}", ""),
    ("RemoveReason", '"via condor_rm (by user {owner})"', "removed"),
    ("RequestCpus", "{req_cpus}", ""),
    ("RequestDisk", "{req_disk}", ""),
    ("RequestGPUs", "{req_gpus}", "reqgpus"),
    ("RequestMemory", "{req_mem}", ""),
    ("Requirements", "{requirements}", ""),
    ("ResidentSetSize", "{rss}", ""),
    ("ResidentSetSize_RAW", "{rss_raw}", ""),
    ("ShouldTransferFiles", '"YES"', ""),
    ("StartdPrincipal", '"execute-side@matchsession/{ip}"', "ran"),
    ("StatsLifetimeStarter", "{life}", "ran stats"),
    ("StreamErr", "false", ""),
    ("StreamOut", "false", ""),
    ("TargetType", '"Machine"', ""),
    ("TerminationPending", "true", "ran !removed"),
    ("TotalSubmitProcs", "{procs}", ""),
    ("TotalSuspensions", "0", ""),
    ("TransferIn", "false", ""),
    ("TransferInput", '"inputs.tar.gz,/home/{owner}/bin/{cmd}"', "xfer"),
    ("TransferInputFileCounts", "[ CEDAR = {n_in} ]", "ran"),
    ("TransferInputSizeMB", "{in_mb}", ""),
    ("TransferInputStats", "[  ]", "ran"),
    ("TransferOutput", '"out_{proc}.h5,Report.{proc}.pkl"', "xfer"),
    ("TransferOutputStats", "[  ]", "ran"),
    ("User", '"{owner}@{domain}"', ""),
    ("UserLog", '"/home/{owner}/jobs/run{cluster}/{sub}.log"', ""),
    ("WhenToTransferOutput", '"ON_EXIT"', "xfer"),
    ("x509userproxy", '"/home/{owner}/.x509up_u{uid}"', "proxy"),
    ("x509UserProxyExpiration", "{proxy_exp}", "proxy"),
    ("x509userproxysubject", '"/DC=org/DC=cilogon/C=US/O=OSG/CN={owner} A{uid}"', "proxy"),
    ("x509UserProxyVOName", '"{vo}"', "proxy"),
)

#: Flags that decide which attributes an ad has; their bits form the ad's shape.
_FLAGS = (
    "ran",
    "removed",
    "glidein",
    "gpu",
    "held",
    "acct",
    "project",
    "proxy",
    "oldargs",
    "reqgpus",
    "xfer",
    "restarted",
    "stats",
    "policy",
    "machattrs",
)
_PLACEHOLDER = re.compile(r"\{([A-Za-z_]\w*)\}")


@dataclass(frozen=True)
class _Line:
    """One attribute's line as a ``%`` format, and when an ad has it (bit masks over ``_FLAGS``)."""

    text: str
    fields: tuple[str, ...]
    needs: int
    excludes: int


def _lines() -> list[_Line]:
    lower = [a[0].lower() for a in _ATTRS]
    if len(set(lower)) != len(lower):
        raise AssertionError("two attributes differ only in case")
    bit = {flag: 1 << i for i, flag in enumerate(_FLAGS)}
    lines = []
    for name, value, when in sorted(_ATTRS, key=lambda a: a[0].lower()):
        tokens = when.split()
        parts = _PLACEHOLDER.split(value)  # literal, field, literal, field, ..., literal
        lines.append(
            _Line(
                text=f"{name} = " + "%s".join(p.replace("%", "%%") for p in parts[0::2]),
                fields=tuple(parts[1::2]),
                needs=sum(bit[t] for t in tokens if not t.startswith("!")),
                excludes=sum(bit[t[1:]] for t in tokens if t.startswith("!")),
            )
        )
    return lines


class _Templates:
    """The ``%`` format of each shape of ad, compiled the first time the shape is drawn.

    A template's getter picks its values out of a job's row of all columns, so formatting an ad
    is two C calls however many attributes it has.
    """

    def __init__(self, columns: Sequence[str]) -> None:
        self.lines = _lines()
        self.index = {name: i for i, name in enumerate(columns)}
        self.cache: dict[int, tuple[str, Callable[[tuple[object, ...]], tuple[object, ...]]]] = {}

    def __getitem__(self, shape: int) -> tuple[str, Callable[[tuple[object, ...]], tuple[object, ...]]]:
        got = self.cache.get(shape)
        if got is None:
            chosen = [ln for ln in self.lines if ln.needs & shape == ln.needs and not ln.excludes & shape]
            fields = [self.index[f] for ln in chosen for f in ln.fields]
            text = "\n".join(ln.text for ln in chosen) + "\n"
            # itemgetter with one index returns the value itself; a format needs a tuple
            getter = operator.itemgetter(*fields) if len(fields) > 1 else (lambda row, i=fields[0]: (row[i],))
            got = self.cache[shape] = (text, getter)
        return got


# ---------------------------------------------------------------------------------------------
# values


def _pick(rng: np.random.Generator, choices: Sequence[object], n: int, p: Sequence[float] | None = None) -> np.ndarray:
    """``n`` draws from ``choices``: a numeric array for numbers (so arithmetic works), else objects."""
    if all(isinstance(x, int | float) for x in choices):
        table = np.asarray(choices)
    else:
        table = np.empty(len(choices), dtype=object)
        table[:] = list(choices)
    return table[rng.choice(len(choices), size=n, p=p)]


def _objects(values: list[str]) -> np.ndarray:
    # np.array(list of str) would make a fixed-width unicode array (4 bytes a character, as wide
    # as the longest string); an object array keeps the str objects as they are.
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out


def _fill(pattern: str, cols: dict[str, np.ndarray], rows: np.ndarray) -> list[str]:
    """Format ``pattern`` (with ``{column}`` placeholders) for each row; used for values that are
    themselves built from other columns (hold reasons, environments)."""
    names = _PLACEHOLDER.findall(pattern)
    if not names:
        return [pattern] * len(rows)
    fmt = _PLACEHOLDER.sub("%s", pattern.replace("%", "%%"))
    return [fmt % row for row in zip(*(cols[c][rows].tolist() for c in names), strict=True)]


def _batch(
    rng: np.random.Generator,
    first_cluster: int,
    t0: int,
    n: int,
    escapes: tuple[np.random.Generator, float] | None = None,
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Draw the columns of ``n`` jobs, and each job's shape (bits of ``_FLAGS``); with
    ``escapes`` (their own stream, a share of clusters), escaped project names."""
    # Jobs come in clusters (one submit file) that share owner, command and requests.
    sizes = np.where(rng.random(n) < 0.4, 1, rng.integers(2, 51, size=n))
    sizes = sizes[: np.searchsorted(np.cumsum(sizes), n) + 1]
    sizes[-1] -= sizes.sum() - n
    n_cl = len(sizes)
    cl = np.repeat(np.arange(n_cl), sizes)  # cluster of each job
    proc = np.arange(n) - np.repeat(np.cumsum(sizes) - sizes, sizes)

    def per_cluster(values: np.ndarray) -> np.ndarray:
        return values[cl]

    c: dict[str, np.ndarray] = {}
    c["cluster"] = first_cluster + cl
    c["proc"] = proc
    c["procs"] = per_cluster(sizes)
    owner_i = per_cluster(rng.integers(0, len(_OWNERS), size=n_cl))
    c["owner"] = np.array(_OWNERS, dtype=object)[owner_i]
    c["uid"] = 20000 + owner_i * 37
    c["group"] = np.array(_GROUPS, dtype=object)[owner_i % len(_GROUPS)]
    c["vo"] = np.array(("cms", "atlas", "osg", "ligo", "icecube", "fermilab"), dtype=object)[owner_i % len(_GROUPS)]
    c["project"] = per_cluster(_pick(rng, _PROJECTS, n_cl))
    schedd_i = per_cluster(rng.integers(0, len(_SCHEDDS), size=n_cl))
    c["schedd"] = np.array([s for s, _ in _SCHEDDS], dtype=object)[schedd_i]
    c["domain"] = np.array([d for _, d in _SCHEDDS], dtype=object)[schedd_i]
    c["cmd"] = per_cluster(_pick(rng, _COMMANDS, n_cl))
    c["sub"] = per_cluster(_pick(rng, ("submit", "job", "analysis", "sim", "train", "batch"), n_cl))
    c["prio"] = per_cluster(_pick(rng, (0, 0, 0, 0, 10, 50085000), n_cl))
    c["requirements"] = per_cluster(_pick(rng, _REQUIREMENTS, n_cl, p=(0.45, 0.3, 0.1, 0.05, 0.1)))
    c["periodic_remove"] = per_cluster(_pick(rng, ("false", "false", "false", _PERIODIC_REMOVE), n_cl))

    # who ran where, and the shape flags
    removed_early = rng.random(n) < 0.01  # removed while idle: never ran
    removed_late = ~removed_early & (rng.random(n) < 0.03)
    ran = ~removed_early
    glidein = per_cluster(rng.random(n_cl) < 0.35)
    gpu = per_cluster(rng.random(n_cl) < 0.08)
    flags = {
        "ran": ran,
        "removed": removed_early | removed_late,
        "glidein": glidein,
        "gpu": gpu,
        "held": ran & (rng.random(n) < 0.03),
        "acct": per_cluster(rng.random(n_cl) < 0.85),
        "project": per_cluster(rng.random(n_cl) < 0.7),
        "proxy": per_cluster(rng.random(n_cl) < 0.2),
        "oldargs": per_cluster(rng.random(n_cl) < 0.2),
        "reqgpus": gpu | per_cluster(rng.random(n_cl) < 0.4),
        "xfer": per_cluster(rng.random(n_cl) < 0.4),
        "stats": ran & per_cluster(rng.random(n_cl) < 0.45),  # starter statistics (not every EP reports them)
        "policy": per_cluster(rng.random(n_cl) < 0.3),
        # submitted with the glidein pool's JobMachineAttrs, whether or not it ran in a glidein
        "machattrs": glidein | per_cluster(rng.random(n_cl) < 0.5),
        "restarted": ran & (rng.random(n) < 0.1),
    }
    shape = np.zeros(n, dtype=np.int64)
    for i, flag in enumerate(_FLAGS):
        shape |= flags[flag].astype(np.int64) << i

    c["status"] = np.where(flags["removed"], 3, 4)
    c["last_status"] = np.where(removed_early, 1, 2)
    starts = np.where(flags["restarted"], 2, 1) * ran
    c["starts"] = starts
    c["completions"] = (ran & ~removed_late).astype(np.int64)

    # requests and what the slot provisioned
    cpu_weights = (0.55, 0.12, 0.02, 0.15, 0.015, 0.03, 0.015, 0.1)
    req_cpus = per_cluster(_pick(rng, (1, 2, 3, 4, 5, 6, 7, 8), n_cl, p=cpu_weights))
    c["req_cpus"] = req_cpus
    c["cpus_prov"] = req_cpus
    req_mem_mb = per_cluster(_pick(rng, (512, 1000, 1024, 2000, 2048, 2500, 4000, 4096, 8192, 16000), n_cl))
    default_mem = per_cluster(rng.random(n_cl) < 0.3) | removed_early
    c["req_mem"] = np.where(default_mem, _DEFAULT_REQUEST_MEMORY, req_mem_mb.astype(object)).astype(object)
    rss_kb = (rng.lognormal(13.5, 1.0, size=n) * ran).astype(np.int64)  # about 700 MB typical
    c["rss"] = rss_kb
    c["rss_raw"] = (rss_kb * 0.97).astype(np.int64)
    image_kb = np.maximum(rss_kb, rng.integers(100, 5000, size=n))
    c["image_size"] = image_kb
    c["image_raw"] = (image_kb * 0.97).astype(np.int64)
    used_mb = (image_kb + 1023) // 1024
    mem_prov = np.where(default_mem, np.maximum(used_mb, 128), req_mem_mb)
    c["mem_prov"] = (mem_prov + 127) // 128 * 128  # slots hand out memory in 128 MB quanta
    disk_kb = rng.lognormal(12.0, 2.0, size=n).astype(np.int64) + 20
    c["disk_usage"] = disk_kb
    c["disk_raw"] = (disk_kb * 0.98).astype(np.int64)
    literal_disk = per_cluster(rng.random(n_cl) < 0.2)
    c["req_disk"] = np.where(literal_disk, "2000000", "DiskUsage").astype(object)
    c["disk_prov"] = np.where(literal_disk, 2000000, np.maximum(disk_kb, 1024) * 5 // 4)
    req_gpus = np.where(gpu, per_cluster(rng.integers(1, 3, size=n_cl)), 0)
    c["req_gpus"] = req_gpus
    c["gpus_prov"] = req_gpus
    one_gpu = _pick(rng, ("CUDA0", "CUDA1", "CUDA2", "CUDA3"), n)
    c["assigned_gpus"] = np.where(req_gpus == 2, "CUDA0,CUDA1", one_gpu).astype(object)
    c["exe_size"] = per_cluster(rng.integers(1, 2000, size=n_cl))
    c["exe_raw"] = c["exe_size"]
    c["n_in"] = rng.integers(1, 4, size=n)
    c["in_mb"] = np.where(flags["xfer"], rng.integers(0, 500, size=n), 0)

    # times: queued, waited, ran; reals are written the way HTCondor does (3600.0)
    qdate = per_cluster(t0 + np.sort(rng.integers(0, _BATCH_SPAN, size=n_cl)))  # a cluster is queued at once
    c["qdate"] = qdate
    wait = rng.integers(5, 7200, size=n) * ran
    c["wait"] = wait
    wall = (np.clip(rng.lognormal(8.0, 1.2, size=n), 30, 172_800).astype(np.int64)) * ran
    wall = np.where(removed_late, wall // 3, wall)
    c["wall"] = wall
    c["wall_real"] = wall.astype(np.float64)
    eff = rng.beta(6, 2, size=n)
    c["user_cpu"] = np.round(wall * req_cpus * eff).astype(np.float64)
    c["sys_cpu"] = np.round(wall * 0.02 * rng.random(n)).astype(np.float64)
    c["cpus_usage"] = np.round(req_cpus * eff, 2)
    c["act"] = np.maximum(wall - 2, 0)
    c["life"] = wall
    c["recent_life"] = np.minimum(wall, 1200)
    c["match"] = qdate + wait
    c["first_start"] = qdate + wait
    c["start"] = qdate + wait + np.where(flags["restarted"], rng.integers(60, 3600, size=n), 0)
    c["start_exec"] = c["start"] + 2
    c["completion"] = c["start"] + wall
    c["entered"] = np.where(removed_early, qdate + rng.integers(60, 86_400, size=n), c["start"] + wall)
    c["claim_t"] = c["start"] - rng.integers(600, 86_400, size=n)
    c["claim_n"] = rng.integers(1, 500, size=n)
    c["exit_code"] = np.where(rng.random(n) < 0.93, 0, _pick(rng, (1, 2, 127, 137, 255), n)).astype(np.int64)
    c["bytes_recvd"] = np.round(rng.lognormal(14, 2, size=n)).astype(np.float64)
    c["bytes_sent"] = np.round(rng.lognormal(12, 2, size=n)).astype(np.float64)
    c["blk_r"] = rng.integers(0, 5000, size=n) * ran
    c["blk_rkb"] = c["blk_r"] * 4
    c["blk_w"] = rng.integers(0, 3000, size=n) * ran
    c["blk_wkb"] = c["blk_w"] * 4

    # where it ran
    site_i = rng.integers(0, len(_SITES), size=n)
    site = np.array([s[0] for s in _SITES], dtype=object)[site_i]
    resource = np.array([s[1] for s in _SITES], dtype=object)[site_i]
    c["site"] = site
    c["site2"] = np.array([s[0] for s in _SITES], dtype=object)[(site_i + 1 + owner_i % 5) % len(_SITES)]
    c["resource"] = resource
    c["entry"] = np.array([s[2] for s in _SITES], dtype=object)[site_i]
    desired = ("T2_US_Purdue,T2_US_Nebraska", "T2_IT_Legnaro", "T2_US_UCSD,T2_US_Caltech,T2_US_MIT")
    c["desired"] = per_cluster(_pick(rng, desired, n_cl))
    c["frontend"] = per_cluster(_pick(rng, ("OSG_OSPOOL.main", "CMSG-v1_0.main", "ATLAS-frontend.main"), n_cl))
    c["wms_job"] = rng.integers(10_000_000, 99_999_999, size=n)
    c["queue"] = _pick(rng, ("cms", "osg", "normal", "standby", "gpu"), n)
    node = rng.integers(1, 999, size=n)
    domain = np.array([s[3] for s in _SITES], dtype=object)[site_i]
    slot = rng.integers(1, 64, size=n)
    c["slot"] = slot
    c["node"] = _objects(_fill("wn{n}.{d}", {"n": node, "d": domain}, np.arange(n)))
    glidein_host = _fill(
        "slot1_{s}@glidein_{p}_{r}@{h}",
        {"s": slot, "p": rng.integers(1000, 99999, size=n), "r": rng.integers(10**7, 10**9, size=n), "h": c["node"]},
        np.arange(n),
    )
    local_host = _fill("slot1_{s}@{h}", {"s": slot, "h": c["node"]}, np.arange(n))
    c["remote_host"] = np.where(glidein, _objects(glidein_host), _objects(local_host))
    c["ip"] = _objects(_fill("10.{a}.{b}.{c}", {"a": site_i, "b": node % 250, "c": slot}, np.arange(n)))
    # Machines outside the glidein pool do not define the GLIDEIN_* attributes the job asks to
    # copy, so HTCondor writes them as undefined; some do not publish HEPSPEC either.
    quote = np.vectorize(lambda s: f'"{s}"', otypes=[object])
    c["m_site"] = np.where(glidein, quote(site), "undefined").astype(object)
    c["m_resource"] = np.where(glidein, quote(resource), "undefined").astype(object)
    hepspec = np.array([s[4] for s in _SITES])[site_i]
    c["hepspec"] = np.where(glidein | (rng.random(n) < 0.5), hepspec.astype(object), "undefined").astype(object)
    c["proxy_exp"] = qdate + 7 * 86_400

    # strings built from other columns
    c["hold_reason"] = _objects(_fill(_HOLD_REASON, c, np.arange(n)))
    env_i = per_cluster(rng.choice(len(_ENVIRONMENTS), size=n_cl, p=(0.3, 0.2, 0.2, 0.1, 0.1, 0.05, 0.05)))
    c["environment"] = np.empty(n, dtype=object)
    args_i = per_cluster(rng.integers(0, len(_ARGUMENTS), size=n_cl))
    c["args"] = np.empty(n, dtype=object)
    for i, pattern in enumerate(_ENVIRONMENTS):
        rows = np.flatnonzero(env_i == i)
        c["environment"][rows] = _objects(_fill(pattern, c, rows))
    for i, pattern in enumerate(_ARGUMENTS):
        rows = np.flatnonzero(args_i == i)
        c["args"][rows] = _objects(_fill(pattern, c, rows))
    if escapes is not None:
        escaped_rng, share = escapes
        chosen = per_cluster(escaped_rng.random(n_cl) < share)
        spelling = per_cluster(escaped_rng.integers(0, len(_ESCAPED_PROJECTS), size=n_cl))
        c["k"] = per_cluster(escaped_rng.integers(0, 10, size=n_cl))
        for i, pattern in enumerate(_ESCAPED_PROJECTS):
            rows = np.flatnonzero(chosen & (spelling == i))
            c["project"][rows] = _objects(_fill(pattern, c, rows))
        del c["k"]
        shape |= chosen.astype(np.int64) << _FLAGS.index("project")  # these clusters name a project
    return c, shape


# ---------------------------------------------------------------------------------------------
# writing


def _ads(n_ads: int, seed: int, escaped_share: float = 0.0) -> Iterator[str]:
    """Yield the file's text a batch of ads at a time (each piece ends with a newline)."""
    templates: _Templates | None = None
    for b, first in enumerate(range(0, n_ads, _BATCH)):
        n = min(_BATCH, n_ads - first)
        rng = np.random.default_rng([seed, b])
        escapes = (np.random.default_rng([seed, b, 1]), escaped_share) if escaped_share else None
        cols, shape = _batch(rng, 1_000_000 + b * _BATCH, _EPOCH + b * _BATCH_SPAN, n, escapes)
        if templates is None:
            templates = _Templates(list(cols))
        rows = zip(*(cols[name].tolist() for name in templates.index), strict=True)
        out = []
        for s, row in zip(shape.tolist(), rows, strict=True):
            text, values = templates[s]
            out.append(text % values(row))
        yield ("\n" if first else "") + "\n".join(out)


def generate(path: str | os.PathLike[str], n_ads: int, seed: int = 0, escaped_share: float = 0.0) -> None:
    """Write ``n_ads`` completed job ads to ``path`` in ``condor_history -long`` form; in
    ``escaped_share`` of the clusters (0 to 1), ``ProjectName`` has old ClassAd escapes.

    Written to a temporary name and renamed, so an interrupted run never leaves a short file
    that a later benchmark would take for a finished one.
    """
    if n_ads < 1:
        raise ValueError("n_ads must be at least 1")
    if not 0 <= escaped_share <= 1:
        raise ValueError(f"escaped_share must be between 0 and 1, got {escaped_share!r}")
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "w", encoding="ascii", newline="\n") as fh:
            fh.writelines(_ads(n_ads, seed, escaped_share))
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="file to write")
    parser.add_argument("n", type=int, help="number of job ads")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--escaped-share", type=float, default=0.0, help="share of clusters whose ProjectName has escapes (0 to 1)"
    )
    args = parser.parse_args(argv)
    if args.n < 1:
        parser.error("N must be at least 1")
    if not 0 <= args.escaped_share <= 1:
        parser.error("--escaped-share must be between 0 and 1")
    began = time.perf_counter()
    generate(args.out, args.n, args.seed, args.escaped_share)
    took = time.perf_counter() - began
    size = args.out.stat().st_size
    print(
        f"{args.out}: {args.n:,} ads, {size / 1e6:,.1f} MB ({size / args.n:,.0f} bytes/ad) "
        f"in {took:.1f} s ({args.n / took:,.0f} ads/s)",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
