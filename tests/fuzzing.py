"""The input fuzzer of issue 29: seeded mutations of the real inputs (``../shared/fixtures/condor25``,
the MetaCentrum workload, ``config/example.toml``) run through the commands that read them, each
in a forked child so that a signal, a traceback or a hang is seen and counted, never fatal.

Every case ends in one of: ``ok`` (exit 0), ``data`` (exit 1 with one line ``fairacct: ...``),
``usage`` (exit 2 with one line), or a defect: ``signal``, ``traceback``, ``hang``, ``message``
(an exit 1 or 2 whose stderr is not one line naming the problem), ``exit`` (another code).

Used by ``tests/test_fuzz_inputs.py``, and run on its own to count (the issue's before/after)::

    python tests/fuzzing.py --cases 2000 [--seed N] [--show 20]

Semantic cases (issue 41: a job read twice, a job whose times or status are impossible) read
well and must not change a bill in silence: :func:`make_history_case` and the oracle
:func:`check_history_case` compare the fairshare usage of the mutated history with its baseline's.

The script imports ``probes`` from whatever environment runs it, so the same mutations can be
run against another checkout's virtualenv (``/work/main/.venv/bin/python tests/fuzzing.py``).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import random
import re
import signal
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"
CONDOR25 = SHARED / "fixtures" / "condor25"
METACENTRUM = SHARED / "data" / "metacentrum"

DEFECTS = ("signal", "traceback", "hang", "message", "exit")

#: Attributes the tables read; half the value mutations hit one of these.
KEY_ATTRS = (
    "Cpus", "Memory", "Disk", "GPUs", "TotalSlotCpus", "TotalSlotMemory", "TotalSlotDisk", "TotalCpus",
    "CpusProvisioned", "MemoryProvisioned", "DiskProvisioned", "RequestCpus", "RequestMemory",
    "RemoteWallClockTime", "ClusterId", "ProcId", "JobStatus", "EnteredCurrentStatus", "CompletionDate",
    "JobCurrentStartDate", "QDate", "SlotType", "State", "Activity", "Name", "Machine", "ChildCpus",
    "ChildMemory", "ChildName", "JobId", "GlobalJobId", "Owner", "AccountingGroup", "AutoClusterId",
    "JobPrio", "RemoteUserCpu", "MyType", "PartitionableSlot", "DynamicSlot", "LastHeardFrom",
)  # fmt: skip

#: Values a mutation puts in place of a -long value (text) or a -json value (Python, dumped).
LONG_VALUES = (
    "-1", "-0.5", "0", "1e308", "-1e308", "1e400", "9223372036854775807", "9223372036854775808",
    "18446744073709551616", "9" * 400, 'real("NaN")', 'real("INF")', '"\\ud800"', '"x"', "undefined",
    "error", "{ 1, 2 }", "{" * 3000 + "}" * 3000, "(" * 3000 + "1" + ")" * 3000, "true", '""',
    "[ a = 1 ]", "1/0", "strcat(", '"' + "a" * 100000 + '"',
)  # fmt: skip
JSON_VALUES: tuple[object, ...] = (
    "\ud800", "\udfff", "a\udc80b", -1, -0.5, 0, 1e308, -1e308, float("inf"), float("nan"),
    2**63 - 1, 2**63, 2**64, 10**400, None, [], {}, "", "/Expr(1/0)/", "/Expr(strcat()/", "/Expr(" + "(" * 3000 + ")/",
    True, "x", [1, "\ud800"], {"A": "\udfff"}, 1e-320,
)  # fmt: skip
CONFIG_VALUES = (
    "[1, 2]", "{ a = 1 }", "1979-05-27", "07:32:00", "1979-05-27T07:32:00Z", '"a\\u0000b"', "1e308",
    "inf", "-inf", "nan", "-1", "0", "1e-320", "99999999999999999999", '""', "true", '"2 gigs"',
    '"1e400 GiB"', "[]", "{}", '"\\ud800"', "1.5", "-0.0", '"NaN"', "[[1]]",
)  # fmt: skip

_NUMBER = re.compile(rb"(?<== )-?[0-9]+(\.[0-9]+)?\n")
_LONG_LINE = re.compile(rb"^([A-Za-z_][A-Za-z0-9_.]*) = (.*)$", re.M)
_CONFIG_LINE = re.compile(r"^([a-z_]+) = (.*)$", re.M)


@dataclass
class Case:
    """One mutated input and the command line that reads it (paths relative to its directory)."""

    number: int
    how: str
    argv: list[str]
    files: dict[str, bytes] = field(default_factory=dict)

    def label(self) -> str:
        return f"case {self.number}: {self.how}: fairacct {' '.join(self.argv)}"


@dataclass
class Outcome:
    kind: str  # ok, data, usage, or one of DEFECTS
    code: int | None
    stderr: str
    seconds: float


# -- mutations ------------------------------------------------------------------------------------


def bytes_mutation(data: bytes, rng: random.Random) -> tuple[str, bytes]:
    """Damage without regard to the format: byte flips, truncation, NUL runs, bad UTF-8, huge numbers."""
    how = rng.choice(["flips", "truncate", "nul-run", "nul-tail", "huge-number", "bad-utf8", "drop-byte"])
    if how == "flips":
        out = bytearray(data)
        for _ in range(rng.randint(1, 40)):
            out[rng.randrange(len(out))] = rng.randrange(256)
        return how, bytes(out)
    if how == "truncate":
        return how, data[: rng.randrange(1, len(data))]
    if how == "nul-run":
        at = rng.randrange(len(data))
        return how, data[:at] + b"\0" * rng.randint(1, 8192) + data[at:]
    if how == "nul-tail":
        return how, data + b"\0" * 4096
    if how == "huge-number":
        numbers = list(_NUMBER.finditer(data))
        if not numbers:
            return how, data
        m = rng.choice(numbers)
        huge = rng.choice([b"1e400", b"-1e309", b"99999999999999999999999", b'real("INF")', b"-1"])
        return how, data[: m.start()] + huge + b"\n" + data[m.end() :]
    if how == "drop-byte":  # a missing comma, brace, quote or newline
        places = [m.start() for m in re.finditer(rb'[,{}\[\]":\n=]', data)]
        at = rng.choice(places) if places else rng.randrange(len(data))
        return f"drop {data[at : at + 1]!r}", data[:at] + data[at + 1 :]
    at = rng.randrange(len(data))
    return how, data[:at] + rng.choice([b"\xff\xfe", b"\xc3\x28", b"\xe2\x82", b"\xed\xa0\x80"]) + data[at:]


def long_mutation(data: bytes, rng: random.Random) -> tuple[str, bytes]:
    """One attribute of a -long dump given a hostile value (or removed, or repeated)."""
    lines = list(_LONG_LINE.finditer(data))
    wanted = [m for m in lines if m.group(1).decode() in KEY_ATTRS]
    m = rng.choice(wanted if wanted and rng.random() < 0.7 else lines)
    name = m.group(1).decode()
    what = rng.random()
    if what < 0.1:
        return f"remove {name}", data[: m.start()] + data[m.end() + 1 :]
    value = rng.choice(LONG_VALUES)
    return f"{name} = {value[:40]}", data[: m.start(2)] + value.encode() + data[m.end(2) :]


def json_mutation(data: bytes, rng: random.Random) -> tuple[str, bytes]:
    """One attribute of a -json dump given a hostile value, or nested deep."""
    ads = json.loads(data)
    ad = rng.choice(ads)
    keys = list(ad)
    wanted = [k for k in keys if k in KEY_ATTRS]
    key = rng.choice(wanted if wanted and rng.random() < 0.7 else keys)
    if rng.random() < 0.1:  # json.dumps cannot write it: a placeholder replaced in the text
        ad[key] = "@deep@"
        deep = "[" * 5000 + "1" + "]" * 5000
        return f"{key} nested 5000 deep", json.dumps(ads, indent=2).replace('"@deep@"', deep).encode()
    if rng.random() < 0.05:
        ad["\ud800" + key] = 1
        return f"key {key!r} with a lone surrogate", json.dumps(ads, indent=2).encode()
    value = rng.choice(JSON_VALUES)
    ad[key] = value
    how = f"{key} = {str(value)[:40]!r}"
    return how, json.dumps(ads, indent=2).encode()


def swf_mutation(data: bytes, rng: random.Random) -> tuple[str, bytes]:
    """One field of one SWF job line given a hostile value, removed or doubled."""
    lines = data.split(b"\n")
    jobs = [i for i, line in enumerate(lines) if line.strip() and not line.startswith(b";")]
    i = rng.choice(jobs)
    fields = lines[i].split(b" ")
    j = rng.randrange(len(fields))
    value = rng.choice([b"-1", b"-2", b"0", b"1e308", b"nan", b"inf", b"9" * 400, b"x", b"", b"1.5", b"-0"])
    what = rng.random()
    if what < 0.1:
        del fields[j]
        how = f"line {i + 1} field {j + 1} removed"
    elif what < 0.15:
        fields.insert(j, b"7")
        how = f"line {i + 1} field added"
    else:
        fields[j] = value
        how = f"line {i + 1} field {j + 1} = {value[:20]!r}"
    lines[i] = b" ".join(fields)
    return how, b"\n".join(lines)


def config_mutation(text: str, rng: random.Random) -> tuple[str, str]:
    """One key of config/example.toml given a value of another type or out of range."""
    lines = list(_CONFIG_LINE.finditer(text))
    m = rng.choice(lines)
    value = rng.choice(CONFIG_VALUES)
    if m.group(1) == "standard_job" and rng.random() < 0.7:
        value = "{ cpus = 1, memory = " + value + " }"
    return f"{m.group(1)} = {value}", text[: m.start(2)] + value + text[m.end(2) :]


# -- cases ----------------------------------------------------------------------------------------

_STATUS_COMMANDS = (["slots"], ["bill"], ["overhead"])


def make_case(seed: int, number: int) -> Case:
    """Case ``number`` of the run seeded ``seed``: the same every time."""
    rng = random.Random(seed * 100_003 + number)
    kind = rng.choice(
        ["status.ads", "status.json", "history.ads", "history.json", "queue.ads", "per_job_history", "swf", "config"]
    )
    if kind == "config":
        how, text = config_mutation(_example().read_text(), rng)
        return Case(number, f"config: {how}", ["config", "check", "--config", "fairacct.toml"],
                    {"fairacct.toml": text.encode()})  # fmt: skip
    if kind == "swf":
        data = _swf_sample()
        how, damaged = swf_mutation(data, rng) if rng.random() < 0.7 else bytes_mutation(data, rng)
        command = rng.choice(["penalty", "fairshare"])
        machines = (METACENTRUM / "wagap-2013.machines").read_bytes()
        return Case(number, f"swf: {how}", [command, "--swf", "w.swf", "--machines", "w.machines", "--json"],
                    {"w.swf": damaged, "w.machines": machines})  # fmt: skip
    if kind == "per_job_history":
        folder = CONDOR25 / "per_job_history"
        files = {f"h/{p.name}": p.read_bytes() for p in sorted(folder.iterdir())}
        victim = rng.choice(sorted(files))
        how, files[victim] = _ad_mutation(files[victim], False, rng)
        command = rng.choice([["jobs"], ["penalty", "--status-file", "status.ads"]])
        files["status.ads"] = (CONDOR25 / "status.ads").read_bytes()
        return Case(number, f"{victim}: {how}", [*command, "--history", "h", "--json"], files)
    data = (CONDOR25 / kind).read_bytes()
    how, damaged = _ad_mutation(data, kind.endswith(".json"), rng)
    files = {kind: damaged}
    if kind.startswith("status"):
        argv = [*rng.choice(_STATUS_COMMANDS), "--status-file", kind]
    elif kind.startswith("history"):
        files["status.ads"] = (CONDOR25 / "status.ads").read_bytes()
        argv = [*rng.choice([["jobs"], ["penalty", "--status-file", "status.ads"]]), "--history", kind]
    else:
        argv = ["idle", "--idle-file", kind]
    return Case(number, f"{kind}: {how}", [*argv, "--json"], files)


def _ad_mutation(data: bytes, is_json: bool, rng: random.Random) -> tuple[str, bytes]:
    if rng.random() < 0.4:
        return bytes_mutation(data, rng)
    return json_mutation(data, rng) if is_json else long_mutation(data, rng)


def _example() -> Path:
    """config/example.toml of the checkout whose ``probes`` runs (its keys are that code's)."""
    import probes

    return Path(probes.__file__).resolve().parent.parent / "config" / "example.toml"


def _swf_sample() -> bytes:
    """The header and the first 300 jobs of wagap-2013 (the whole log takes seconds)."""
    with (METACENTRUM / "wagap-2013.swf").open("rb") as fh:
        out, jobs = [], 0
        for line in fh:
            out.append(line)
            jobs += not line.startswith(b";")
            if jobs >= 300:
                break
    return b"".join(out)


# -- semantic mutations: inputs that read well and must not bill wrong (issue 41) ---------------------

#: Far after every job of the fixtures: fairshare evaluated at one instant whatever the jobs read.
_AT = "1795300000"


@dataclass
class HistoryCase:
    """A history whose jobs are read twice (``duplicate``) or one of whose jobs is impossible
    (``impossible``), the fairshare command over it, and over the histories it must bill as:
    ``baseline`` (the job as it was: the bill unchanged) and, for an impossible job, ``without``
    (the job quarantined); ``expect``, what stderr must then say."""

    number: int
    how: str
    mutated: Case
    baseline: Case
    without: Case | None
    expect: str

    def label(self) -> str:
        return f"semantic case {self.number}: {self.how}"


def make_history_case(seed: int, number: int) -> HistoryCase:
    """Semantic case ``number`` of the run seeded ``seed``: the same every time."""
    rng = random.Random(seed * 100_003 + number + 7_000_000)
    history = (CONDOR25 / "history.ads").read_bytes()
    ads = history.rstrip(b"\n").split(b"\n\n")
    i = rng.randrange(len(ads))

    def fairshare(files: dict[str, bytes], *histories: str) -> Case:
        argv = ["fairshare", *(a for h in histories for a in ("--history", h)), "--at", _AT, "--json"]
        return Case(number, "", argv, files)

    baseline = fairshare({"h.ads": history}, "h.ads")
    if rng.random() < 0.5:
        how = rng.choice(["the same ad again in the file", "the file given twice", "a .bak copy in the folder"])
        if how == "the same ad again in the file":
            mutated = fairshare({"h.ads": b"\n\n".join([*ads, ads[i]]) + b"\n"}, "h.ads")
        elif how == "the file given twice":
            mutated = fairshare({"h.ads": history}, "h.ads", "h.ads")
        else:
            folder = {f"h/{p.name}": p.read_bytes() for p in sorted((CONDOR25 / "per_job_history").iterdir())}
            victim = rng.choice(sorted(folder))
            baseline = fairshare(dict(folder), "h")
            mutated = fairshare({**folder, f"{victim}.bak": folder[victim]}, "h")
        return HistoryCase(number, f"duplicate: {how}", mutated, baseline, None, "read more than once")
    ad = ads[i].decode()
    values = {m.group(1): m.group(2) for m in _LONG_LINE.finditer(ads[i])}
    start = float(values.get(b"JobCurrentStartDate", b"0") or 0)
    what = rng.choice(["CompletionDate", "JobStatus", "RemoteWallClockTime"])
    if what == "CompletionDate":
        value = str(int(start) - rng.randint(1, 10**6))
    elif what == "JobStatus":
        value = str(rng.choice([-1, 0, 8, 9, 100, -(2**31)]))
    else:
        value = str(rng.choice([10**6, 10**9, 2**40]))
    changed = re.sub(rf"(?m)^{what} = .*$", f"{what} = {value}", ad, count=1).encode()
    mutated = fairshare({"h.ads": b"\n\n".join([*ads[:i], changed, *ads[i + 1 :]]) + b"\n"}, "h.ads")
    without = fairshare({"h.ads": b"\n\n".join([*ads[:i], *ads[i + 1 :]]) + b"\n"}, "h.ads")
    how = f"impossible: ad {i + 1} {what} = {value}"
    return HistoryCase(number, how, mutated, baseline, without, "malformed history ad(s) skipped")


def check_history_case(case: HistoryCase, workdir: Path) -> str | None:
    """The oracle: the mutated history bills as its baseline, or (an impossible job) as if the
    job were not there and stderr says it was quarantined; a duplicate never counts twice and
    is named. None when it holds, else what went wrong."""
    runs = {"mutated": case.mutated, "baseline": case.baseline, **({"without": case.without} if case.without else {})}
    usage: dict[str, object] = {}
    for name, run in runs.items():
        outcome = run_case(run, workdir / name)
        if outcome.kind != "ok":
            return f"{name}: {outcome.kind} {outcome.code}: {outcome.stderr[-400:]}"
        document = json.loads((workdir / name / "stdout").read_text())
        usage[name] = {(c["type"], c["name"]): c["usage"] for c in document["credentials"]}
        if name == "mutated":
            said = outcome.stderr
    if case.without is None:  # a duplicate: billed once, and said
        if usage["mutated"] != usage["baseline"]:
            return f"a job read twice changed the usage: {usage['mutated']} != {usage['baseline']}"
        return None if case.expect in said else f"a job read twice, not said: {said!r}"
    if usage["mutated"] == usage["baseline"]:
        return None  # the change does not touch the bill (a job that never started)
    if usage["mutated"] != usage["without"]:
        return f"an impossible job was billed: {usage['mutated']} (quarantined: {usage['without']})"
    return None if case.expect in said else f"an impossible job left out in silence: {said!r}"


# -- running --------------------------------------------------------------------------------------


def run_case(case: Case, workdir: Path, timeout_s: float = 60.0) -> Outcome:
    """Run ``case`` in a forked child (in ``workdir``); what it ended in."""
    workdir.mkdir(parents=True, exist_ok=True)
    for name, data in case.files.items():
        (workdir / name).parent.mkdir(parents=True, exist_ok=True)
        (workdir / name).write_bytes(data)
    out, err = workdir / "stdout", workdir / "stderr"
    sys.stdout.flush()
    sys.stderr.flush()
    started = time.monotonic()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        code = 98
        try:
            os.chdir(workdir)
            for fd, path in ((1, out), (2, err)):
                f = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                os.dup2(f, fd)
                os.close(f)
            sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115 (a fresh stream on the new fd 1)
            sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115
            from probes.cli import main

            try:
                code = main(case.argv)
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 2
            except BaseException:  # noqa: BLE001 - whatever escapes the command is the defect counted
                traceback.print_exc()
                code = 97
        finally:
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            finally:
                os._exit(code)
    deadline = started + timeout_s
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return Outcome("hang", None, "", time.monotonic() - started)
        time.sleep(0.005)
    seconds = time.monotonic() - started
    stderr = err.read_text(errors="replace") if err.exists() else ""
    if os.WIFSIGNALED(status):
        return Outcome("signal", -os.WTERMSIG(status), stderr, seconds)
    code = os.WEXITSTATUS(status)
    if code == 97 or "Traceback (most recent call last)" in stderr:
        return Outcome("traceback", code, stderr, seconds)
    if code == 0:
        return Outcome("ok", 0, stderr, seconds)
    if code in (1, 2):
        last = [line for line in stderr.splitlines() if line.strip() and not line.startswith("fairacct: compiling")]
        good = len(last) == 1 and last[0].startswith("fairacct: ")
        return Outcome(("data", "usage")[code - 1] if good else "message", code, stderr, seconds)
    return Outcome("exit", code, stderr, seconds)


def run_cases(
    seed: int, numbers: range, root: Path, on_case: Callable[[Case, Outcome], None] | None = None
) -> dict[str, list[tuple[Case, Outcome]]]:
    """Run the cases ``numbers`` of ``seed``; the cases by outcome kind."""
    by_kind: dict[str, list[tuple[Case, Outcome]]] = collections.defaultdict(list)
    for number in numbers:
        case = make_case(seed, number)
        outcome = run_case(case, root / str(number))
        by_kind[outcome.kind].append((case, outcome))
        if on_case is not None:
            on_case(case, outcome)
    return by_kind


def warm_up() -> None:
    """Import what the commands import and load the compiled scanner, once, in this process:
    each forked child then starts warm (a cold child spends a second importing pandas)."""
    from probes.cli import main as run

    inputs = {
        "s.ads": (CONDOR25 / "status.ads").read_bytes(),
        "s.json": (CONDOR25 / "status.json").read_bytes(),
        "q.ads": (CONDOR25 / "queue.ads").read_bytes(),
        "h.json": (CONDOR25 / "history.json").read_bytes(),
        "w.swf": _swf_sample(),
        "w.machines": (METACENTRUM / "wagap-2013.machines").read_bytes(),
        "c.toml": _example().read_bytes(),
    }
    swf = ["--swf", "w.swf", "--machines", "w.machines"]
    cases = [
        ["slots", "--status-file", "s.ads"], ["bill", "--status-file", "s.json"],
        ["overhead", "--status-file", "s.ads"], ["idle", "--idle-file", "q.ads"],
        ["penalty", "--status-file", "s.ads", "--history", "h.json"], ["penalty", *swf], ["fairshare", *swf],
        ["config", "check", "--config", "c.toml"],
    ]  # fmt: skip
    here = os.getcwd()
    with tempfile.TemporaryDirectory() as tmp, open(os.devnull, "w") as null:
        for name, data in inputs.items():
            (Path(tmp) / name).write_bytes(data)
        os.chdir(tmp)
        stdout, stderr = sys.stdout, sys.stderr
        sys.stdout = sys.stderr = null
        try:
            for argv in cases:
                run([*argv, "--json"] if argv[0] != "config" else argv)
        finally:
            sys.stdout, sys.stderr = stdout, stderr
            os.chdir(here)


# -- issue 41: the pool checked against itself ------------------------------------------------------

#: Values of a slot's amount that are not finite numbers: (-long text, -json value); ``{a}`` is
#: the attribute's own name (``Cpus = Cpus``).
NOT_NUMBERS: tuple[tuple[str, object], ...] = (
    ("error", "/Expr(error)/"), ("undefined", None), ("{a}", "/Expr({a})/"), ("1/0", "/Expr(1/0)/"),
    ('"4"', "4"), ("1e309", float("inf")), ('real("INF")', '/Expr(real("INF"))/'), ("Infinity", "/Expr(Infinity)/"),
    ("9223372036854775808", 2**63), ("36893488147419103232", 2**65), ("2 * {a}", "/Expr(2 * {a})/"),
)  # fmt: skip
#: More of each resource than any node of the fixture has.
_OVERFULL = {"Cpus": 1000, "Memory": 10**7, "Disk": 10**12, "GPUs": 1000}
_PARENT = re.compile(r"^(slot\d+)_\d+@")


@dataclass
class NodeCase(Case):
    """A case whose mutation touches the ads of one node only (``node``: its p-slot's name)."""

    node: str = ""


def node_case(seed: int, number: int) -> NodeCase:
    """Case ``number``: one node of the HTCondor 25 dump (-long or -json) made to contradict
    itself (a dynamic slot bigger than its node, a node smaller than its dynamic slots), a job
    claimed twice (with its GlobalJobId, or a copy without it), an amount that is not a finite
    number, or a dynamic slot without a usable Name; read by ``bill --json``."""
    rng = random.Random(seed * 100_019 + number)
    name = rng.choice(["status.ads", "status.json"])
    data = (CONDOR25 / name).read_bytes()
    texts = [t.strip("\n") for t in data.decode().split("\n\n") if t.strip()] if name.endswith(".ads") else []
    ads: list[dict[str, object]] = [] if texts else json.loads(data)
    names = [str(a["Name"]) for a in ads] or [_long_name(t) for t in texts]
    dynamic = [i for i, n in enumerate(names) if _PARENT.match(n)]
    kind = rng.choice(["overfull", "smaller", "twice", "not-a-number", "no-name"])
    i = rng.choice(dynamic)
    if kind == "overfull":
        attr = rng.choice(sorted(_OVERFULL))
        changes: dict[str, object] = {attr: _OVERFULL[attr]}
    elif kind == "smaller":
        i = rng.choice([k for k in range(len(names)) if k not in dynamic])
        attr = rng.choice(["TotalSlotCpus", "TotalSlotMemory"])
        changes = {attr: rng.choice([0, 1])}
    elif kind == "not-a-number":
        i = rng.randrange(len(names))
        attr = rng.choice(["Cpus", "Memory", "TotalSlotCpus", "TotalSlotMemory"])
        text, value = rng.choice(NOT_NUMBERS)
        changes = {attr: (text if texts else value)}
    elif kind == "no-name":
        changes = {"Name": rng.choice(['"garbage"', "17", None])}
    else:
        changes = {}
    node = _PARENT.sub(r"\1@", names[i])
    how = f"{kind}: {names[i]} {changes}"
    if texts:
        ad = texts[i]
        for attr, value in changes.items():
            line = "" if value is None else f"{attr} = {str(value).replace('{a}', attr)}\n"
            ad = re.sub(rf"^{attr} = .*\n", line, ad + "\n", count=1, flags=re.M).rstrip("\n")
        if kind == "twice":
            copy = re.sub(r'^Name = "slot(\d+)_\d+@', r'Name = "slot\1_99@', ad, count=1, flags=re.M)
            if rng.random() < 0.5:
                copy = re.sub(r"^GlobalJobId = .*\n", "", copy + "\n", flags=re.M).rstrip("\n")
                how += " without its GlobalJobId"
            texts.append(copy)
        texts[i] = ad
        damaged = ("\n\n".join(texts) + "\n\n").encode()  # the blank line condor_status ends each ad with
    else:
        ad = dict(ads[i])
        for attr, value in changes.items():
            if attr == "Name" and value is None:
                del ad["Name"]
            else:
                ad[attr] = value.replace("{a}", attr) if isinstance(value, str) else value
                if attr == "Name" and isinstance(value, str):
                    ad[attr] = json.loads(value)
        if kind == "twice":
            copy = dict(ad, Name=_PARENT.sub(lambda m: f"{m[1]}_99@", str(ad["Name"])))
            if rng.random() < 0.5:
                del copy["GlobalJobId"]
                how += " without its GlobalJobId"
            ads.append(copy)
        ads[i] = ad
        damaged = json.dumps(ads, indent=2).encode()
    argv = ["bill", "--status-file", name, "--json"]
    return NodeCase(number, f"{name}: {how}", argv, {name: damaged}, node=node)


def _long_name(text: str) -> str:
    m = re.search(r'^Name = "(.*)"$', text, re.M)
    return m[1] if m else ""


def bills_oracle(before: dict[str, object], after: dict[str, object], stderr: str, node: str) -> list[str]:
    """What is wrong with the bills ``after`` a mutation of ``node`` (``bill --json`` documents):
    every allocation of another node is billed as ``before``, and ``node``'s are billed as
    before or not at all, the node then named ``incomplete`` with a message on stderr."""

    def by_name(doc: dict[str, object]) -> dict[str, tuple[str, dict[str, float | None]]]:
        return {str(a["name"]): (str(a["parent"]), a["billed"]) for a in doc["allocations"]}  # type: ignore[attr-defined, index]

    old, new = by_name(before), by_name(after)
    incomplete = set(after.get("incomplete_nodes", ()))  # type: ignore[call-overload]
    problems = []
    for name, (parent, billed) in old.items():
        if parent != node and new.get(name) != (parent, billed):
            problems.append(f"{name} of untouched node {parent}: billed {new.get(name)}, before {billed}")
    if incomplete - {node}:
        problems.append(f"untouched nodes left unbilled: {sorted(incomplete - {node})}")
    mine = {n: v for n, v in new.items() if v[0] == node}
    if node in incomplete:
        # a resource a job holds none of is billed 0 wherever it runs: no share of anyone's
        billed_anyway = {n: b for n, (_, b) in mine.items() if any(x not in (None, 0.0) for x in b.values())}
        if billed_anyway:
            problems.append(f"{node} is incomplete but billed {billed_anyway}")
        if not stderr.strip():
            problems.append(f"{node} left unbilled without a message")
    elif mine != {n: v for n, v in old.items() if v[0] == node}:
        problems.append(f"{node} billed differently and not incomplete: {mine}")
    return problems


def run_node_cases(seed: int, numbers: range, root: Path) -> list[str]:
    """Run the semantic cases ``numbers`` of ``seed``: each problem found, with its case."""
    baselines: dict[str, dict[str, object]] = {}
    problems = []
    for name in ("status.ads", "status.json"):
        case = Case(-1, "unchanged", ["bill", "--status-file", name, "--json"], {name: (CONDOR25 / name).read_bytes()})
        outcome = run_case(case, root / f"baseline-{name}")
        assert outcome.kind == "ok", outcome
        baselines[name] = json.loads((root / f"baseline-{name}" / "stdout").read_text())
    for number in numbers:
        case = node_case(seed, number)
        outcome = run_case(case, root / str(number))
        if outcome.kind != "ok":
            problems.append(f"{case.label()}: {outcome.kind} {outcome.code}: {outcome.stderr[-400:]}")
            continue
        after = json.loads((root / str(number) / "stdout").read_text())
        found = bills_oracle(baselines[case.argv[2]], after, outcome.stderr, case.node)
        problems += [f"{case.label()}: {p}" for p in found]
    return problems


def _signature(outcome: Outcome) -> str:
    """A defect's kind and its last line (the exception), to group the cases by cause."""
    lines = [line for line in outcome.stderr.splitlines() if line.strip()]
    return f"{outcome.kind} {outcome.code}: {lines[-1][:150] if lines else ''}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=2000)
    parser.add_argument("--first", type=int, default=0)
    parser.add_argument("--seed", type=int, default=29)
    parser.add_argument("--show", type=int, default=30, help="defect causes to print")
    parser.add_argument("--semantic", action="store_true", help="the bills' oracle over issue 41's mutations")
    args = parser.parse_args()
    warm_up()
    if args.semantic:
        with tempfile.TemporaryDirectory() as tmp:
            problems = run_node_cases(args.seed, range(args.first, args.first + args.cases), Path(tmp))
        print(f"{args.cases} semantic cases (seed {args.seed}): {len(problems)} problems")
        print("\n".join(problems[: args.show]))
        return 1 if problems else 0
    cpu = time.process_time()
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        by_kind = run_cases(args.seed, range(args.first, args.first + args.cases), Path(tmp))
    children = os.times()
    counts = {k: len(v) for k, v in sorted(by_kind.items())}
    cpu += -time.process_time() - children.children_user - children.children_system
    wall = time.monotonic() - started
    print(f"{args.cases} cases (seed {args.seed}) in {wall:.0f} s wall, {-cpu:.0f} CPU s: {counts}")
    defects = [(c, o) for k in DEFECTS for c, o in by_kind.get(k, [])]
    causes: dict[str, list[Case]] = collections.defaultdict(list)
    for case, outcome in defects:
        causes[_signature(outcome)].append(case)
    inputs = {c.number for c, _ in defects}
    print(f"defects: {len(defects)} cases ({len(inputs)} inputs), {len(causes)} distinct causes")
    for cause, cases in sorted(causes.items(), key=lambda kv: -len(kv[1]))[: args.show]:
        print(f"  {len(cases):4d} x {cause}\n         e.g. {cases[0].label()[:200]}")
    return 1 if defects else 0


if __name__ == "__main__":
    # run as a script, this file's folder (tests/) is first on the path, and its collector/ and
    # probes/ test packages would hide the real ones
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
    sys.exit(main())
