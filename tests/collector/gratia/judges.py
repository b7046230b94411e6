"""The judges of a Gratia sender, as test helpers: OSG's real condor-ap probe, a collector that
records what it posts, GRACC's own collector code (graccjson), and what GRACC's raw pipeline and
daily summary make of the records.

Why: a site that moves from condor-ap to another sender expects GRACC's numbers not to move, so
the parity tests compare against the real programs (../shared/gratia) rather than our reading of
them. ``make gratia-judges`` builds graccjson and the venv condor-ap runs in, once, so that tests
never download anything; without them (or without ../shared) the tests skip and say which part
is missing.

GRACC's raw pipeline (gracc-docker's ``gracc-stash-raw/logstash.conf``) and its daily summary
(gracc-request's ``src/graccreq/summary_replayer.py``) run on Logstash and Elasticsearch, which
these tests do not have: :func:`raw_documents` and :func:`daily_summary` redo, step by step, what
those two files say, and their docstrings cite the step each line follows.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, date, datetime, timedelta
from functools import cache
from pathlib import Path
from types import TracebackType
from typing import Any

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[3]
SHARED = ROOT.parent / "shared"
GRATIA = SHARED / "gratia"
CAPTURE = GRATIA / "capture.py"
RUN_CONDOR_AP = GRATIA / "run-condor-ap.sh"
PROBE_TARBALL = GRATIA / "gratia-probe-01a3a58.tar.xz"
JUDGES = ROOT / ".gratia"  # made by `make gratia-judges`
GRACCJSON = JUDGES / "graccjson-build" / "graccjson"
VENV = JUDGES / "venv"


# -- the judges, or a skip ------------------------------------------------------------------------


@cache
def judges_missing() -> str | None:
    """Why the condor-ap judges cannot run here, or None when they can."""
    for path in (CAPTURE, RUN_CONDOR_AP, PROBE_TARBALL):
        if not path.is_file():
            return f"needs {path} (../shared/gratia beside the project), which is absent"
    if not os.access(GRACCJSON, os.X_OK):
        return f"graccjson is not built at {GRACCJSON}: run `make gratia-judges`"
    python = VENV / "bin" / "python"
    imports = python.exists() and subprocess.run(
        [str(python), "-c", "import htcondor, classad, OpenSSL"],
        env={**os.environ, "CONDOR_CONFIG": "/dev/null"}, capture_output=True, timeout=60, check=False,
    ).returncode == 0  # fmt: skip
    if not imports:
        return f"condor-ap's venv (htcondor<25, pyOpenSSL) is not ready at {VENV}: run `make gratia-judges`"
    if shutil.which("bash") is None or shutil.which("python3") is None:
        return "run-condor-ap.sh needs bash and python3 on PATH"
    return None


def require_judges() -> None:
    """Skip the calling test unless graccjson, condor-ap's venv and ../shared/gratia are all here."""
    why = judges_missing()
    if why:
        pytest.skip(why)


def graccjson_binary() -> Path:
    """The built graccjson (skips when `make gratia-judges` was not run)."""
    if not os.access(GRACCJSON, os.X_OK):
        pytest.skip(f"graccjson is not built at {GRACCJSON}: run `make gratia-judges`")
    return GRACCJSON


def condor_ap_venv() -> Path:
    """The venv condor-ap runs in (skips when it is not ready)."""
    require_judges()
    return VENV


# -- a collector that records ---------------------------------------------------------------------


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now (it may be taken by the time it is used:
    :class:`CaptureCollector` then tries another)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class _PortTaken(Exception):
    """capture.py could not listen: another process took its port since free_port() asked."""


class CaptureCollector:
    """../shared/gratia/capture.py as a context manager: a stand-in Gratia collector on 127.0.0.1
    that writes every POST to ``out`` (NNNN.json, NNNN.body) and answers as ``mode`` says.

    An answer counts only once this process has said it listens on its port (its log), because
    another test's server may take a port between free_port() and the bind; then another port is tried.
    """

    def __init__(self, out: Path, *, mode: str = "ok", timeout_s: float = 20.0) -> None:
        if not CAPTURE.is_file():
            pytest.skip(f"needs {CAPTURE} (../shared/gratia beside the project), which is absent")
        self.out = out
        self.mode = mode
        self.timeout_s = timeout_s
        self.port = 0
        self.log = out / "capture.log"  # not a .json: capture.py numbers posts by its .json files
        self._process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> CaptureCollector:
        self.out.mkdir(parents=True, exist_ok=True)
        for tried in range(1, 4):
            self.port = free_port()
            try:
                self._start()
                return self
            except _PortTaken:
                if tried == 3:
                    raise
        raise AssertionError("unreachable")

    def _start(self) -> None:
        said_before = self.log.stat().st_size if self.log.exists() else 0
        with open(self.log, "ab") as log:
            self._process = subprocess.Popen(
                [sys.executable, str(CAPTURE), str(self.port), str(self.out), "--mode", self.mode],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            )  # fmt: skip
        deadline = time.monotonic() + self.timeout_s
        while True:
            said = self.log.read_bytes()[said_before:].decode(errors="replace")
            if self._process.poll() is not None:
                self._process = None
                if "Address already in use" in said:
                    raise _PortTaken(said)
                raise AssertionError(f"capture.py exited before it listened:\n{said}")
            if f"capture: listening on 127.0.0.1:{self.port}," in said and self._answers():
                return
            if time.monotonic() > deadline:
                self.stop()
                raise AssertionError(f"capture.py did not answer on 127.0.0.1:{self.port} within {self.timeout_s} s")
            time.sleep(0.05)

    def _answers(self) -> bool:
        """It answers HTTP (a GET: 405 by design, and never recorded as a post); asked directly,
        whatever *_proxy variables the environment holds."""
        direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        try:
            direct.open(f"http://127.0.0.1:{self.port}/", timeout=2).close()
        except urllib.error.HTTPError as exc:
            exc.close()
            return exc.code == 405
        except OSError:
            return False
        return True

    def posts(self) -> list[Path]:
        """The recorded POSTs (NNNN.json), in the order they came. Read them once the sender is done:
        capture.py reserves a post's file before it writes it."""
        return sorted(p for p in self.out.glob("[0-9][0-9][0-9][0-9].json"))

    def stop(self) -> None:
        if self._process is not None:
            self._process.send_signal(signal.SIGTERM)
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait(timeout=10)
            self._process = None

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()


# -- condor-ap --------------------------------------------------------------------------------------


def run_condor_ap(
    port: int,
    history_dir: Path,
    out_dir: Path,
    *,
    user_vo_map: Path | None = None,
    probe_name: str | None = None,
    site_name: str | None = None,
    keep_times: bool = True,
    bundle_size: int | None = None,
    gratia_home: Path | None = None,
    timeout_s: float = 300.0,
) -> dict[str, int]:
    """Run the real condor-ap once (../shared/gratia/run-condor-ap.sh) on ``history_dir``'s per-job
    history files, sending to 127.0.0.1:``port``; returns OUT_DIR/counts.txt (the probe's end-of-run
    summary) as a dict. Fails the test, with the script's stderr, when it exits non-zero.

    ``keep_times`` (GRATIA_KEEP_TIMES=1) is the default because the tests write times they then
    check; the probe still drops jobs that ended over 120 days ago. The probe's sources are unpacked
    into ``gratia_home`` (a temporary folder, removed afterwards, unless given); its venv is
    ``make gratia-judges``'s, so nothing is downloaded. Inherited GRATIA_* settings are dropped so
    that only these arguments apply.
    """
    require_judges()
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRATIA_")}
    env["GRATIA_VENV"] = str(VENV)
    env["GRATIA_KEEP_TIMES"] = "1" if keep_times else "0"
    for name, value in (
        ("GRATIA_USER_VO_MAP", user_vo_map), ("GRATIA_PROBE_NAME", probe_name),
        ("GRATIA_SITE_NAME", site_name), ("GRATIA_BUNDLE_SIZE", bundle_size),
    ):  # fmt: skip
        if value is not None:
            env[name] = str(value)
    with tempfile.TemporaryDirectory(prefix="gratia-ap-") as scratch:
        env["GRATIA_HOME"] = str(gratia_home or scratch)
        done = subprocess.run(
            ["bash", str(RUN_CONDOR_AP), str(port), str(history_dir), str(out_dir)],
            env=env, capture_output=True, text=True, timeout=timeout_s, check=False,
        )  # fmt: skip
    if done.returncode != 0:
        log = out_dir / "probe.log"
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-30:]) if log.exists() else "(no probe.log)"
        pytest.fail(
            f"run-condor-ap.sh exited {done.returncode}\n--- stderr:\n{done.stderr}\n--- stdout:\n{done.stdout}"
            f"\n--- probe.log (last lines):\n{tail}",
            pytrace=False,
        )
    counts: dict[str, int] = {}
    for line in (out_dir / "counts.txt").read_text().splitlines():
        key, sep, value = line.partition("=")
        if sep and re.fullmatch(r"-?\d+", value.strip()):
            counts[key.strip()] = int(value)
    return counts


# -- GRACC's collector ------------------------------------------------------------------------------


def gracc_docs(paths: Iterable[Path]) -> list[dict[str, Any]]:
    """The JSON documents GRACC's collector (gracc-collector's own package, as graccjson) makes of
    each envelope: capture.py's NNNN.json files or XML files, in order. Fails the test on any error
    graccjson reports (an envelope it cannot read, a record it cannot convert)."""
    names = [str(p) for p in paths]
    if not names:
        return []
    done = subprocess.run(
        [str(graccjson_binary()), *names], capture_output=True, text=True, timeout=120, check=False
    )  # fmt: skip
    if done.returncode != 0:
        pytest.fail(f"graccjson exited {done.returncode}:\n{done.stderr}", pytrace=False)
    docs: list[dict[str, Any]] = []
    for line in done.stdout.splitlines():
        item = json.loads(line)
        if "error" in item:
            pytest.fail(f"graccjson: {item['source']}: {item['error']}", pytrace=False)
        if "doc" in item:
            docs.append(item["doc"])
    return docs


# -- GRACC's raw pipeline ---------------------------------------------------------------------------

#: gracc-stash-raw/logstash.conf, its first ``mutate { convert }``: done before the checksum.
RAW_CONVERSIONS = {
    "Processors": "integer", "Memory": "float", "Swap": "float", "Network": "float", "Njobs": "integer",
    "NodeCount": "integer",
}  # fmt: skip
#: gracc-stash-raw/logstash.conf, the fingerprint's ``excl_keys``: the fields left out of the id.
CHECKSUM_EXCLUDED = frozenset(
    ("RecordId", "CreateTime", "GlobalUsername", "LocalUserId", "VOName", "ReportableVOName", "CommonName",
     "SiteName", "Grid", "RawXML", "type", "@timestamp", "@received", "@version")
)  # fmt: skip

_RUBY_INT = re.compile(r"^\s*([+-]?\d+(?:_\d+)*)")
_RUBY_FLOAT = re.compile(r"^\s*([+-]?(?:\d+(?:_\d+)*)?(?:\.\d+(?:_\d+)*)?(?:[eE][+-]?\d+)?)")


def _ruby_to_i(text: str) -> int:
    """Ruby's String#to_i: the leading integer, else 0."""
    m = _RUBY_INT.match(text)
    return int(m.group(1).replace("_", "")) if m else 0


def _ruby_to_f(text: str) -> float:
    """Ruby's String#to_f: the leading number, else 0.0."""
    m = _RUBY_FLOAT.match(text)
    try:
        return float(m.group(1).replace("_", "")) if m and m.group(1) else 0.0
    except ValueError:
        return 0.0


def _mutate_convert(value: Any, kind: str) -> Any:
    """logstash-filter-mutate's convert_integer / convert_float: booleans to 1/0, strings with
    their commas removed then Ruby's to_i / to_f, numbers truncated or widened; arrays element-wise."""
    if isinstance(value, list):
        return [_mutate_convert(v, kind) for v in value]
    if isinstance(value, dict):
        return value  # mutate logs and skips a hash
    if isinstance(value, bool):
        return (1 if value else 0) if kind == "integer" else (1.0 if value else 0.0)
    if isinstance(value, str):
        text = value.replace(",", "")
        return _ruby_to_i(text) if kind == "integer" else _ruby_to_f(text)
    return int(value) if kind == "integer" else float(value)


def _ruby_float(value: float) -> str:
    """Ruby's Float#to_s, which Float#to_json uses: Python's shortest repr, with '.0' on an
    exponent's whole mantissa (1.0e+16, 1.0e-05)."""
    if math.isnan(value) or math.isinf(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    text = repr(value)
    if "e" in text:
        mantissa, exponent = text.split("e")
        return f"{mantissa if '.' in mantissa else mantissa + '.0'}e{exponent}"
    return text


def ruby_json(value: Any) -> str:
    """``value.to_json`` as Ruby's json generator writes it (what the fingerprint hashes): compact,
    UTF-8 as is, Ruby's float text, hashes in their own order."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _ruby_float(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, Mapping):
        return "{" + ",".join(f"{ruby_json(str(k))}:{ruby_json(v)}" for k, v in value.items()) + "}"
    if isinstance(value, Sequence):
        return "[" + ",".join(ruby_json(v) for v in value) + "]"
    raise TypeError(f"no JSON for {value!r}")


def raw_checksum(doc: Mapping[str, Any]) -> str:
    """The raw document's id: the MD5 of the record (after the numeric conversions) without the
    fields of :data:`CHECKSUM_EXCLUDED`, its keys sorted, as Ruby's JSON."""
    event = dict(doc)
    for name, kind in RAW_CONVERSIONS.items():
        if event.get(name) is not None:
            event[name] = _mutate_convert(event[name], kind)
    kept = {k: v for k, v in sorted(event.items()) if k not in CHECKSUM_EXCLUDED}
    return hashlib.md5(ruby_json(kept).encode("utf-8")).hexdigest()


def _iso_ms(moment: datetime) -> str:
    """Ruby's Time#iso8601(3) of a UTC time, and Logstash's @timestamp text."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def _parse_time(text: Any) -> datetime | None:
    try:
        moment = datetime.fromisoformat(str(text))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def raw_documents(
    docs: Iterable[Mapping[str, Any]], *, received: datetime | None = None, stream: str = "osg"
) -> dict[str, dict[str, Any]]:
    """What GRACC's raw pipeline stores for the collector's ``docs``, by document id, as
    opensciencegrid/gracc-docker's ``gracc-stash-raw/logstash.conf`` does it, in its order:

    1. ``mutate { convert }``: Processors, Njobs, NodeCount to integers; Memory, Swap, Network to
       floats (:data:`RAW_CONVERSIONS`), before the checksum "for historical reasons".
    2. The fingerprint: MD5 of the record's JSON, keys sorted, without RecordId, CreateTime,
       GlobalUsername, LocalUserId, VOName, ReportableVOName, CommonName, SiteName, Grid, RawXML,
       type, @timestamp, @received, @version (:data:`CHECKSUM_EXCLUDED`). It is the Elasticsearch
       ``document_id``: a record whose other fields all match an earlier one's replaces it (the
       last one stays), so two records of one job that differ in any field not excluded are two
       documents and the job counts twice, while two that differ only in excluded fields (a
       different VOName, SiteName or user) are one document.
    3. ``@received``; for ResourceType "Payload", ``PayloadSiteName`` = ``%{Host_description}``
       (Logstash leaves the reference text when the field is missing).
    4. ``CoreHours`` = Float(WallDuration || 0.0) * Float(Processors || 1.0) / 3600 (Ruby: a
       Processors of 0 is kept, so CoreHours is 0).
    5. ``@timestamp`` from QueueTime, then from EndTime. A record without EndTime gets
       StartTime + WallDuration (capped at @received, StartTime moved back to match) as EndTime;
       without StartTime either, ``Quarantine = "MissingEndTime"``. A record without StartTime
       gets EndTime - WallDuration. A StartTime at or before 1970-01-02 sets
       ``Quarantine = "EpochStartTime"``.
    6. The index: ``gracc.<stream>.raw3-quarantine`` for a quarantined record, else
       ``gracc.<stream>.raw3-YYYY.MM`` of @timestamp; given here as ``_index``, beside ``checksum``.

    The id is the checksum alone: the index follows from fields the checksum covers (EndTime,
    StartTime, QueueTime), so one id never lands in two indices. Numbers read from the
    collector's JSON stay as Logstash's JSON codec reads them (integers, or floats).
    """
    received = (received or datetime.now(UTC)).astimezone(UTC)
    out: dict[str, dict[str, Any]] = {}
    for doc in docs:
        event: dict[str, Any] = dict(doc)
        for name, kind in RAW_CONVERSIONS.items():
            if event.get(name) is not None:
                event[name] = _mutate_convert(event[name], kind)
        checksum = raw_checksum(event)
        event["checksum"] = checksum
        event["@received"] = _iso_ms(received)
        timestamp = received
        if event.get("type") == "JobUsageRecord":
            if event.get("ResourceType") == "Payload":
                host = event.get("Host_description")
                event["PayloadSiteName"] = "%{Host_description}" if host is None else str(host)
            try:
                # Ruby's `x || d`: only nil and false take the default (a 0 or "" is kept)
                wall, procs = event.get("WallDuration"), event.get("Processors")
                wall = 0.0 if wall is None or wall is False else wall
                procs = 1.0 if procs is None or procs is False else procs
                event["CoreHours"] = float(wall) * float(procs) / 3600.0
            except (TypeError, ValueError):
                event.setdefault("tags", []).append("_rubyexception")
            for name in ("QueueTime", "EndTime"):
                moment = _parse_time(event[name]) if name in event else None
                if moment is not None:
                    timestamp = moment
            if "EndTime" not in event:
                start = _parse_time(event["StartTime"]) if "StartTime" in event else None
                if start is not None and "WallDuration" in event:
                    wall_s = int(float(event["WallDuration"]))
                    end = start + timedelta(seconds=wall_s)
                    if end > received:
                        end = received
                        event["StartTime"] = _iso_ms(end - timedelta(seconds=wall_s))
                    event["EndTime"] = _iso_ms(end)
                    timestamp = end
                elif not event.get("Quarantine"):
                    event["Quarantine"] = "MissingEndTime"
            if "StartTime" not in event:
                end_time = _parse_time(event["EndTime"]) if "EndTime" in event else None
                if end_time is not None and "WallDuration" in event:
                    event["StartTime"] = _iso_ms(end_time - timedelta(seconds=int(float(event["WallDuration"]))))
                elif not event.get("Quarantine"):
                    event["Quarantine"] = "MissingEndTime"
            start_time = _parse_time(event["StartTime"]) if "StartTime" in event else None
            if start_time is not None and start_time.timestamp() <= 86400:
                event["Quarantine"] = "EpochStartTime"
        event["@timestamp"] = _iso_ms(timestamp)
        event["_index"] = (
            f"gracc.{stream}.raw3-quarantine" if event.get("Quarantine") else f"gracc.{stream}.raw3-{timestamp:%Y.%m}"
        )
        out.pop(checksum, None)  # the later record replaces the earlier: keep the dict in arrival order
        out[checksum] = event
    return out


# -- GRACC's daily summary --------------------------------------------------------------------------

#: summary_replayer.py's ``unique_terms``, after EndTime: (field, the value a missing one gets).
#: VOName, ProjectName and DN are composite sources with ``missing_bucket`` (None, then "N/A" from
#: this table); the others nested ``terms`` aggregations with ``missing``.
SUMMARY_TERMS: tuple[tuple[str, Any], ...] = (
    ("VOName", "N/A"), ("ProjectName", "N/A"), ("DN", "N/A"), ("Processors", 1), ("GPUs", 0),
    ("ResourceType", "N/A"), ("CommonName", "N/A"), ("Host_description", "N/A"), ("Resource_ExitCode", 0),
    ("Grid", "N/A"), ("ReportableVOName", "N/A"), ("ProbeName", "N/A"), ("SiteName", "N/A"),
)  # fmt: skip
#: summary_replayer.py's ``metrics``: summed, with the value a record without the field counts as.
SUMMARY_METRICS: tuple[tuple[str, float], ...] = (
    ("WallDuration", 0), ("CpuDuration_user", 0), ("CpuDuration_system", 0), ("CoreHours", 0), ("Njobs", 1),
    ("CpuDuration", 0),
)  # fmt: skip
#: gracc-raw-template.json's types for those fields (GPUs has none: a string, dynamically keyword).
_INTEGER_FIELDS = frozenset(("Processors", "Resource_ExitCode", "WallDuration", "Njobs"))
_IGNORE_ABOVE = {"Host_description": 256, "GPUs": 256}


class _Rejected(Exception):
    """Elasticsearch would refuse the document: a value its mapping cannot take."""


def _indexed(name: str, value: Any) -> Any:
    """The value Elasticsearch aggregates for a field (its doc value), per gracc-raw-template.json:
    integer and long fields coerce numbers and numeric strings (truncating), keywords are text
    (and over ``ignore_above`` characters not indexed at all: missing); None is missing."""
    if value is None:
        return None
    if name in _INTEGER_FIELDS:
        try:
            return int(float(value))
        except (TypeError, ValueError) as exc:
            raise _Rejected(f"{name}={value!r}") from exc
    if name in ("CpuDuration_user", "CpuDuration_system", "CoreHours", "CpuDuration"):
        try:
            return float(value)
        except (TypeError, ValueError) as exc:
            raise _Rejected(f"{name}={value!r}") from exc
    text = value if isinstance(value, str) else ruby_json(value)
    if len(text) > _IGNORE_ABOVE.get(name, 1 << 30):
        return None
    return text


def daily_summary(
    docs: Iterable[Mapping[str, Any]] | Mapping[str, Mapping[str, Any]], *, day: date | None = None
) -> pd.DataFrame:
    """GRACC's daily job summary of ``docs``: one row per day and combination of dimensions, as
    opensciencegrid/gracc-request's ``src/graccreq/summary_replayer.py`` builds it
    (``SummaryReplayer._queryElasticsearch``, then ``addProperties``).

    ``docs`` are the collector's documents (as :func:`gracc_docs` returns them), which first go
    through :func:`raw_documents` (one document per checksum), or a mapping that
    :func:`raw_documents` returned. Quarantined records are left out: they are in the
    ``raw3-quarantine`` index, not the monthly raw indices the summary reads, and a
    "MissingEndTime" one has no EndTime for the summary's ``range`` filter on EndTime to match.

    - Day: a ``date_histogram`` on EndTime, ``calendar_interval`` 1d, no time zone, so the UTC day
      of EndTime; written back as ``EndTime`` = that midnight, ISO with milliseconds and "Z".
      With ``day``, the rows a replay of that day gives: EndTime from its midnight to the next
      midnight included (so a record ending exactly at the next midnight gives a row of the next day).
    - Group by (``unique_terms``): VOName, ProjectName, DN, Processors, GPUs, ResourceType,
      CommonName, Host_description, Resource_ExitCode, Grid, ReportableVOName, ProbeName,
      SiteName. A missing value is "N/A", except Processors 1, GPUs 0 ("0": GPUs is a keyword)
      and Resource_ExitCode 0. No local user field (LocalUserId, GlobalUsername) is a dimension:
      a day's jobs of one VO, project and DN are one row whoever ran them.
    - Sum (``metrics``): WallDuration, CpuDuration_user, CpuDuration_system, CoreHours, Njobs (a
      record without it counts 1) and CpuDuration; ``Count`` is the number of documents. Sums use
      Elasticsearch's doc values: WallDuration is a ``long`` there, so each record's is truncated.
    - Then ``addProperties``: a ProjectName missing, "N/A" or "unknown" becomes the VOName;
      GPUHours = WallDuration / 3600 * GPUs. The production config's corrections would add
      RawVOName and RawProjectName (the values before correcting); with no correction known here
      they are the values as grouped. Topology and project enrichment (OIM_*) need the network
      and are not done.
    """
    raw = docs if isinstance(docs, Mapping) else raw_documents(docs)
    first = datetime.combine(day, datetime.min.time(), UTC) if day else None
    rows: dict[tuple[Any, ...], dict[str, Any]] = {}
    for doc in raw.values():
        if doc.get("Quarantine"):
            continue
        end = _parse_time(doc["EndTime"]) if doc.get("EndTime") is not None else None
        if end is None or (first is not None and not first <= end <= first + timedelta(days=1)):
            continue
        try:
            key_values = [_indexed(name, doc.get(name)) for name, _ in SUMMARY_TERMS]
            metric_values = [_indexed(name, doc.get(name)) for name, _ in SUMMARY_METRICS]
        except _Rejected:
            continue  # never indexed, so never summed
        bucket = datetime.combine(end.astimezone(UTC).date(), datetime.min.time(), UTC)
        key = (
            _iso_ms(bucket),
            *(
                value if value is not None else (str(missing) if name == "GPUs" else missing)
                for (name, missing), value in zip(SUMMARY_TERMS, key_values, strict=True)
            ),
        )
        row = rows.get(key)
        if row is None:
            row = rows[key] = {"EndTime": key[0], **dict(zip((n for n, _ in SUMMARY_TERMS), key[1:], strict=True))}
            row.update({"Count": 0, **{name: 0 for name, _ in SUMMARY_METRICS}})
        row["Count"] += 1
        for (name, missing), value in zip(SUMMARY_METRICS, metric_values, strict=True):
            row[name] += missing if value is None else value
    records = []
    for row in sorted(rows.values(), key=lambda r: tuple(str(v) for v in r.values())):
        row["RawVOName"], row["RawProjectName"] = row["VOName"], row["ProjectName"]
        if str(row["ProjectName"]).lower() in ("n/a", "unknown"):
            row["ProjectName"] = row["VOName"]
        row["GPUHours"] = float(row["WallDuration"]) / 3600 * float(row["GPUs"])
        records.append(row)
    columns = ["EndTime", *(n for n, _ in SUMMARY_TERMS), "Count", *(n for n, _ in SUMMARY_METRICS)]
    return pd.DataFrame.from_records(records, columns=[*columns, "GPUHours", "RawVOName", "RawProjectName"])
