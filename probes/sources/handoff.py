"""The switch from condor-ap: which jobs it sent to GRACC, read from what it left at the site.

condor-ap (gratia-probe's HTCondor access-point probe, a cron job) reads the schedd's per-job
history files in its ``DataFolder`` (the schedd's ``PER_JOB_HISTORY_DIR``) and deletes each once
its record is made; a record it could not send waits in its outbox under ``WorkingFolder``
(``gratiafiles/subdir.*/outbox/r.*``, tarred under ``staged/`` when many), and a file it could not
read goes to ``quarantine``. So, once its cron is stopped, its exact cutoff is in those folders:

* ``cutoff``: the end of its last run, the time its log (``LogFolder``, one file a day) was last
  written. A job whose history file existed when that run listed the folder ended before then.
* ``unsent``: the jobs it has not sent: the history files still in the data folder (written
  after its last listing, or failed), those in its quarantines, and the records in its outbox.

A job condor-ap sent is one that ended (``CompletionDate``) at or before ``cutoff`` and is not
``unsent``: its history file was there at its last run and is gone, and no record of it waits.
A job that ended after ``cutoff`` was never seen by condor-ap. :func:`mark_sent` marks the first
kind left out of fairacct's Gratia records, so that after the switch no job condor-ap sent is
sent again and none it did not send is skipped. The handoff is written once, in the probe's
state directory (``condor-ap-handoff.json``), and read by every pass after.
"""

from __future__ import annotations

import json
import os
import re
import tarfile
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import pandas as pd

from collector.errors import ConfigError

__all__ = [
    "HANDOFF_FILE", "SENT_BY_CONDOR_AP", "Handoff", "load_handoff", "mark_sent", "read_handoff", "save_handoff",
]  # fmt: skip

HANDOFF_FILE = "condor-ap-handoff.json"
SENT_BY_CONDOR_AP = "sent by condor-ap before the switch (fairacct probe from-condor-ap)"
"""The reason a job record is not sent to GRACC once the handoff is taken."""

DATA_FOLDER = "/var/lib/condor/gratia/data"  # the paths gratia-probe's RPM configures
WORKING_FOLDER = "/var/lib/condor/gratia/tmp"
LOG_FOLDER = "/var/log/condor/gratia"

# condor_meter's own patterns: the history files it reads, the GlobalJobId it reports
_HISTORY_FILE = re.compile(r"^history\.(?:.*?#)?\d+\.\d+")
_AD_JOB_ID = re.compile(rb'^GlobalJobId\s*=\s*"((?:[^"\\]|\\.)*)"', re.MULTILINE)
_AD_ENDS = [  # a job's end as fairacct reads it: CompletionDate, else EnteredCurrentStatus (removed)
    re.compile(rb"^%s\s*=\s*(\d+)\s*$" % name, re.MULTILINE) for name in (b"CompletionDate", b"EnteredCurrentStatus")
]
_RECORD_END = re.compile(rb"<(?:\w+:)?EndTime\b[^>]*>([^<]*)<")
_RECORD_JOB_ID = re.compile(rb"<(?:\w+:)?GlobalJobId>\s*condor\.([^<]*?)\s*</(?:\w+:)?GlobalJobId>")
_MAX_FILE_BYTES = 64 << 20  # a history file or an outbox record; larger is not condor-ap's


@dataclass(frozen=True)
class Handoff:
    """condor-ap's cutoff (UTC seconds), the GlobalJobIds of the jobs it has not sent, where
    they were found (``found``: what -> how many jobs), and ``since``: the earliest end of a job
    fairacct must send (the cutoff, or an unsent job's end before it), where a probe that read
    the history already reads it again from."""

    cutoff: float
    unsent: frozenset[str]
    found: dict[str, int] = field(default_factory=dict)
    since: float | None = None

    def to_json(self) -> str:
        doc = {"cutoff": self.cutoff, "since": self.since, "unsent": sorted(self.unsent), "found": self.found,
               "written_at": time.time()}  # fmt: skip
        return json.dumps(doc, indent=1)


def read_handoff(
    data: Path = Path(DATA_FOLDER),
    working: Path = Path(WORKING_FOLDER),
    logs: Path = Path(LOG_FOLDER),
    *,
    at: float | None = None,
) -> Handoff:
    """What condor-ap left: its cutoff (``at``, else the last write of its log) and the jobs it
    has not sent. A :class:`ConfigError` naming the folder when one is missing, or when the logs
    say nothing of a run and no ``at`` is given."""
    for name, folder in (("--data", data), ("--working", working)):
        if not folder.is_dir():
            raise ConfigError(f"{name}: {folder} is not a folder (condor-ap's {_ROLE[name]})")
    if at is None:
        at = _last_run(logs)
    found: dict[str, int] = {}
    unsent: dict[str, float | None] = {}
    for what, jobs in (
        ("history files in the data folder", _history_jobs(p for p in _files(data, 1) if _HISTORY_FILE.match(p.name))),
        ("history files in quarantine", _history_jobs(_files(data / "quarantine", 2))),
        ("records in the outbox", _record_jobs(_files(working, 8))),
    ):
        ids = dict(jobs)
        found[what] = len(ids)
        unsent |= ids
    ends = [end for end in unsent.values() if end is not None]
    return Handoff(cutoff=at, unsent=frozenset(unsent), found=found, since=min([at, *ends]))


_ROLE = {"--data": "DataFolder, the schedd's PER_JOB_HISTORY_DIR", "--working": "WorkingFolder, its outbox"}


def _last_run(logs: Path) -> float:
    if not logs.is_dir():
        raise ConfigError(f"--logs: {logs} is not a folder (condor-ap's LogFolder); or give its last run with --at")
    times = [p.stat().st_mtime for p in _files(logs, 1)]
    if not times:
        raise ConfigError(f"--logs: {logs} holds no log of condor-ap's runs; give its last run with --at")
    return max(times)


def _files(folder: Path, depth: int) -> Iterator[Path]:
    if not folder.is_dir():
        return
    for entry in sorted(folder.iterdir()):
        if entry.is_file() and not entry.is_symlink():
            yield entry
        elif entry.is_dir() and not entry.is_symlink() and depth > 1:
            yield from _files(entry, depth - 1)


def _read(path: Path) -> bytes:
    if path.stat().st_size > _MAX_FILE_BYTES:
        raise ConfigError(f"{path}: over {_MAX_FILE_BYTES >> 20} MiB, not one of condor-ap's files")
    return path.read_bytes()


def _history_jobs(paths: Iterable[Path]) -> Iterator[tuple[str, float | None]]:
    """(GlobalJobId, end) of each ad of ``paths``: its CompletionDate, else EnteredCurrentStatus."""
    for path in paths:
        text = _read(path)
        for ad in re.split(rb"\n\s*\n", text):
            if match := _AD_JOB_ID.search(ad):
                ends = [float(m.group(1)) for pattern in _AD_ENDS if (m := pattern.search(ad)) and int(m.group(1)) > 0]
                yield match.group(1).decode("utf-8", "replace"), (ends[0] if ends else None)


def _record_jobs(paths: Iterable[Path]) -> Iterator[tuple[str, float | None]]:
    """(GlobalJobId, EndTime) of each JobUsageRecord of ``paths`` (tarred bundles too)."""
    for path in paths:
        if tarfile.is_tarfile(path):  # a bundle staged by GratiaCore when its outbox was full
            with tarfile.open(path) as tar:
                for member in tar:
                    if member.isfile() and member.size <= _MAX_FILE_BYTES and (f := tar.extractfile(member)):
                        yield from _jobs_in_records(f.read())
        else:
            yield from _jobs_in_records(_read(path))


def _jobs_in_records(xml: bytes) -> Iterator[tuple[str, float | None]]:
    for record in re.split(rb"</(?:\w+:)?JobUsageRecord>", xml):
        if match := _RECORD_JOB_ID.search(record):
            end = _RECORD_END.search(record)
            yield match.group(1).decode("utf-8", "replace"), (_utc(end.group(1)) if end else None)


def _utc(text: bytes) -> float | None:
    try:
        return datetime.fromisoformat(text.decode().strip().replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def save_handoff(handoff: Handoff, state_dir: Path) -> Path:
    """Write the handoff into the probe's state directory, atomically; its path."""
    path = state_dir / HANDOFF_FILE
    tmp = path.with_suffix(".tmp")
    tmp.write_text(handoff.to_json())
    os.replace(tmp, path)
    return path


def load_handoff(state_dir: Path) -> Handoff | None:
    """The handoff the probe took (:func:`save_handoff`), None if it took none."""
    path = state_dir / HANDOFF_FILE
    try:
        doc = json.loads(path.read_text())
        since = doc.get("since")
        return Handoff(float(doc["cutoff"]), frozenset(map(str, doc["unsent"])), dict(doc.get("found", {})),
                       None if since is None else float(since))  # fmt: skip
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"{path}: not a handoff from condor-ap ({exc}); take it again") from exc


def mark_sent(jobs: pd.DataFrame, handoff: Handoff | None) -> pd.DataFrame:
    """``jobs`` with the jobs condor-ap sent marked left out of the Gratia records
    (``gratia_left_out``): those that ended at or before its cutoff and are not among its
    unsent; a new table where any is marked."""
    if handoff is None or not len(jobs) or "gratia_left_out" not in jobs:
        return jobs
    end = pd.to_numeric(jobs["end"], errors="coerce")
    sent = (end <= handoff.cutoff) & ~jobs["job_id"].isin(handoff.unsent) & jobs["gratia_left_out"].isna()
    if not sent.any():
        return jobs
    out = jobs.copy()
    out.loc[sent, "gratia_left_out"] = SENT_BY_CONDOR_AP
    return out
