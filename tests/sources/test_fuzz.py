"""Mutated copies of the real inputs: byte flips, truncation, NUL runs, huge numbers, invalid
UTF-8 (issue 12, item 8), and hostile values of single attributes, SWF fields and configuration
keys (issue 29, :mod:`tests.fuzzing`). Whatever the damage, a command ends with an exit code as
documented (0: read, bad ads quarantined and counted; 1: the file cannot be read as what was
asked; 2: the configuration is refused), with one line naming the problem, never with a signal,
a traceback or a hang. The mutations are drawn from a seeded generator, so a failure is
reproduced by its case number (``python tests/fuzzing.py --first N --cases 1``).

Then each class of issue 29 as its smallest input."""

from __future__ import annotations

import json
import random
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from probes.cli import main
from tests.fuzzing import bytes_mutation

SEED = 20261123
CASES = 30
READERS = {"status.ads": ("slots", "--status-file"), "status.json": ("slots", "--status-file"),
           "history.ads": ("jobs", "--history"), "history.json": ("jobs", "--history"),
           "queue.ads": ("idle", "--idle-file")}  # fmt: skip


@contextmanager
def _deadline(seconds: int) -> Iterator[None]:
    def hung(signum: int, frame: object) -> None:
        raise TimeoutError(f"no answer within {seconds} s")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@pytest.mark.parametrize("case", range(CASES))
def test_a_damaged_dump_ends_with_a_documented_exit_code(
    condor25: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], case: int
) -> None:
    rng = random.Random(SEED * 1000 + case)
    name = rng.choice(sorted(READERS))
    how, damaged = bytes_mutation((condor25 / name).read_bytes(), rng)
    path = tmp_path / name
    path.write_bytes(damaged)
    monkeypatch.chdir(tmp_path)  # the quarantine goes to ./state
    command, option = READERS[name]
    with _deadline(60):
        code = main([command, option, str(path), "--json"])
    out, err = capsys.readouterr()
    assert code in (0, 1), f"case {case} ({how} of {name}): exit {code}\n{err}"
    if code == 1:
        assert err.startswith(f"fairacct: {path}") and err.count("\n") == 1, f"case {case} ({how} of {name}): {err}"
    else:
        assert out.startswith("{"), f"case {case} ({how} of {name})"


def test_a_number_out_of_range_is_a_malformed_value(condor25: Path, tmp_path: Path) -> None:
    from probes.sources.history import read_history
    from probes.sources.slot_checks import ORPHAN
    from probes.sources.status import read_status

    history = tmp_path / "history.ads"
    history.write_text(
        re.sub(
            r"^ClusterId = \d+", 'ClusterId = real("INF")', (condor25 / "history.ads").read_text(), count=1, flags=re.M
        )
    )
    jobs, report = read_history([history])
    assert len(jobs) == 42 and jobs["cluster"].isna().sum() == 1
    assert report.rejects == {"ClusterId: not a finite number, ignored": 1}
    status = tmp_path / "status.ads"
    status.write_text(
        re.sub(r"^Memory = \d+", "Memory = 1e400", (condor25 / "status.ads").read_text(), count=1, flags=re.M)
    )
    # a slot's amount is added up: not a number, its ad is quarantined (issue 41) and its node unbilled
    snapshot, report = read_status([status])
    # its dynamic slots are without their p-slot: counted as such (issue 51), not billed
    assert snapshot.slots["name"].tolist() == ["slot1@gpu-node1@vm"] and report.rejects == {ORPHAN: 2}
    (bad,) = report.malformed
    assert bad.line == 1 and bad.reason.startswith("attribute 'Memory' = 1e400: expected a finite number from 0")


def test_a_power_cut_tail_costs_nothing_but_itself(condor25: Path, tmp_path: Path) -> None:
    """10,080 good ads and the 4 KiB of NUL bytes a power cut leaves: every ad is read, the
    tail is quarantined (not the whole file refused as binary)."""
    from probes.sources.history import read_history

    ads = (condor25 / "history.ads").read_bytes()
    path = tmp_path / "history.ads"
    path.write_bytes(ads * 240 + b"\0" * 4096)
    jobs, report = read_history([path])
    assert report.ads == 42 * 240  # every ad read; the same 42 jobs, each counted once
    assert len(jobs) == 42 and report.duplicates == 42 * 239
    assert len(report.malformed) == 1 and report.malformed[0].reason.startswith("truncated")
    assert [r for r in report.rejects if r.startswith("binary data: NUL bytes from offset")]


# -- issue 29: every reader and input kind, in forked children (a signal is seen, not fatal) ------------

FUZZ_SEED = 2029
FUZZ_BATCHES, FUZZ_BATCH = 8, 25  # 200 cases a run, about 30 s


@pytest.fixture(scope="module")
def warm(condor25: Path, metacentrum: Path) -> None:
    """The commands' modules imported and the scanner loaded before the first fork."""
    from tests.fuzzing import warm_up

    warm_up()


@pytest.mark.parametrize("batch", range(FUZZ_BATCHES))
def test_no_input_crashes_or_blocks_a_command(warm: None, tmp_path: Path, batch: int) -> None:
    """-long, -json, history files and folders, queue dumps, SWF, configuration: each case ends
    in exit 0, or 1 (data) or 2 (configuration) with one line naming the problem."""
    from tests.fuzzing import DEFECTS, run_cases

    cases = range(batch * FUZZ_BATCH, (batch + 1) * FUZZ_BATCH)
    by_kind = run_cases(FUZZ_SEED, cases, tmp_path)
    defects = [f"{c.label()[:300]}\n  -> {o.kind} {o.code}: {o.stderr[-600:]}" for k in DEFECTS for c, o in by_kind[k]]
    assert not defects, "\n".join(defects)
    assert sum(len(v) for v in by_kind.values()) == FUZZ_BATCH


# -- issue 41: semantic mutations (duplicate jobs, impossible times), with an oracle on the bills --------

SEMANTIC_SEED = 2041  # the histories and the nodes mutated below
SEMANTIC_CASES = 12  # three runs each, about 5 s


@pytest.mark.parametrize("case", range(SEMANTIC_CASES))
def test_a_semantic_mutation_never_changes_a_bill_in_silence(warm: None, tmp_path: Path, case: int) -> None:
    """A job read twice (in one file, the file twice, a .bak copy in the folder) is billed once
    and named; a job whose times or status are impossible is billed as before or quarantined
    with a message, and every other job's fairshare usage never changes."""
    from tests.fuzzing import check_history_case, make_history_case

    semantic = make_history_case(SEMANTIC_SEED, case)
    problem = check_history_case(semantic, tmp_path)
    assert problem is None, f"{semantic.label()}: {problem}"


# -- issue 29, class by class ----------------------------------------------------------------------------


def _fairacct(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The installed command in a process of its own: a crash in the bindings is a signal here."""
    command = Path(sys.executable).parent / "fairacct"
    return subprocess.run([str(command), *args], cwd=cwd, capture_output=True, text=True, timeout=120, check=False)


def test_class1_a_lone_surrogate_never_reaches_the_bindings(tmp_path: Path) -> None:
    """The issue's smallest input killed slots and bill with SIGSEGV inside classad2: now the
    value is read as U+FFFD (as an invalid UTF-8 byte of a -long dump is), and counted."""
    path = tmp_path / "status.json"
    path.write_text('[{"MyType": "Machine", "Name": "slot1@a", "Foo": "\\ud800"}]')
    for command in ("slots", "bill"):
        done = _fairacct(command, "--status-file", str(path), "--json", cwd=tmp_path)
        assert done.returncode == 0, f"{command}: exit {done.returncode}\n{done.stderr}"
        assert json.loads(done.stdout) and "Foo: a lone UTF-16 surrogate, replaced by U+FFFD" in done.stderr


def test_class1_surrogates_anywhere_in_an_ad_are_read_as_replacement_characters(tmp_path: Path) -> None:
    from probes.sources.status import read_status

    path = tmp_path / "status.json"
    ads = [
        {"MyType": "Machine", "Name": "slot1@\ud800a", "Machine": "n1", "SlotType": "Partitionable", "Cpus": 4,
         "TotalSlotCpus": 4, "Memory": 0, "TotalSlotMemory": 1024,
         "\udfffKey": 1, "List": ["a", "\udc80"], "Nested": {"A": "\ud800"}, "Start": "/Expr(Name == \"\ud800\")/"},
    ]  # fmt: skip
    path.write_text(json.dumps(ads))
    snapshot, report = read_status([path])
    assert snapshot.slots["name"].tolist() == ["slot1@\ufffda"]
    assert snapshot.slots["total_cpus"].tolist() == [4.0]
    replaced = ": a lone UTF-16 surrogate, replaced by U+FFFD"
    assert report.malformed == ()
    assert report.rejects == {f"{k}{replaced}": 1 for k in ("Name", "(a key)", "List", "Nested", "Start")}


def _replace(text: str, pattern: str, value: str, count: int = 1) -> str:
    out, n = re.subn(pattern, value, text, count=count, flags=re.M)
    assert n == count, pattern
    return out


def test_class2_a_negative_resource_quarantines_the_job_and_the_history_goes_on(
    condor25: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """CpusProvisioned = -1 made penalty and probe once raise ValueError, nothing committed and
    the checkpoint stuck on it: now that ad is quarantined (file, line, key), the other 41 are
    read, and a second cycle finds nothing new."""
    from probes.sources.history import read_history

    history = tmp_path / "history.ads"
    history.write_text(
        _replace((condor25 / "history.ads").read_text(), r"^CpusProvisioned = \d+", "CpusProvisioned = -1")
    )
    jobs, report = read_history([history])
    assert len(jobs) == 41 and len(report.malformed) == 1
    bad = report.malformed[0]
    assert bad.path == str(history) and bad.line >= 1 and "'CpusProvisioned' = -1" in bad.reason
    assert "CpusProvisioned = -1" in bad.text  # the ad itself, for the quarantine
    monkeypatch.chdir(tmp_path)
    (tmp_path / "status.ads").write_bytes((condor25 / "status.ads").read_bytes())
    assert main(["penalty", "--history", str(history), "--status-file", "status.ads", "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["jobs"]) == 41
    config = tmp_path / "probe.toml"
    config.write_text(
        '[sources]\nstatus_files = ["status.ads"]\nhistory = ["history.ads"]\n[probe]\nstate_dir = "state"\n'
    )
    assert main(["probe", "once", "--config", str(config)]) == 0
    assert "job: 41 records" in capsys.readouterr().out
    assert main(["probe", "once", "--config", str(config)]) == 0
    out = capsys.readouterr().out
    assert "0 jobs from the history" in out and "job:" not in out


def test_class2_a_negative_dynamic_slot_leaves_its_node_unbilled(
    condor25: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    status = tmp_path / "status.ads"
    text = (condor25 / "status.ads").read_text()
    at = text.index('Name = "slot1_1@cpu-node1@vm"')
    start = text.rfind("\n\n", 0, at) + 2
    status.write_text(text[:start] + _replace(text[start:], r"^Cpus = \d+", "Cpus = -1"))
    monkeypatch.chdir(tmp_path)
    for command in ("bill", "overhead"):
        assert main([command, "--status-file", str(status), "--json"]) == 0, command
        out, err = capsys.readouterr()
        assert "'Cpus' = -1" in err and json.loads(out)
    from probes.sources.status import read_status

    snapshot, report = read_status([status])
    assert len(report.malformed) == 1 and len(snapshot.allocations) == 5
    assert snapshot.slots.set_index("name")["incomplete"].to_dict() == {
        "slot1@cpu-node1@vm": True,
        "slot1@gpu-node1@vm": False,
    }


@pytest.mark.parametrize("value", ["1e308", "9223372036854775807", "18446744073709551616"])
def test_class3_a_huge_amount_in_a_dynamic_slot_is_a_malformed_value(
    condor25: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], value: str
) -> None:
    ads = json.loads((condor25 / "status.json").read_text())
    ads[2]["Cpus"] = "@huge@"
    path = tmp_path / "status.json"
    path.write_text(json.dumps(ads, indent=2).replace('"@huge@"', value))
    monkeypatch.chdir(tmp_path)
    assert main(["bill", "--status-file", str(path), "--json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out) and "'Cpus' =" in err and "slot1_1@cpu-node1@vm" not in out


def test_class3_integers_beyond_64_bits_in_json(
    condor25: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """2^64 in a status attribute (SystemError in classad2, which reads the ad to match the
    partitions) and a 400-digit ClusterId in history.json (OverflowError after the output had
    begun): read as reals, counted where they are read."""
    from probes.sources.slot_checks import ORPHAN

    ads = json.loads((condor25 / "status.json").read_text())
    ads[0]["Foo"] = 2**64
    ads[1]["TotalSlotGPUs"] = 2**64
    status = tmp_path / "status.json"
    status.write_text(json.dumps(ads))
    monkeypatch.chdir(tmp_path)
    assert main(["bill", "--status-file", str(status), "--json"]) == 0
    assert "'TotalSlotGPUs' = 1.8446744073709552e+19" in capsys.readouterr().err
    assert main(["slots", "--status-file", str(status), "--json"]) == 0
    read = json.loads(capsys.readouterr().out)["read"]["status"]
    # the p-slot set aside leaves its 4 dynamic slots without it: counted, not billed (issue 51)
    assert read["ads"] == 7 and read["rejects"] == {
        "TotalSlotGPUs: an integer beyond 64 bits, read as a real": 1,
        ORPHAN: 4,
    }
    jobs = json.loads((condor25 / "history.json").read_text())
    jobs[0]["ClusterId"] = 10**400
    history = tmp_path / "history.json"
    history.write_text(json.dumps(jobs))
    assert main(["jobs", "--history", str(history), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert len(doc["jobs"]) == 42 and doc["jobs"][0]["cluster"] is None
    assert doc["read"]["history"]["rejects"] == {
        "ClusterId: an integer beyond 64 bits, read as a real": 1,
        "ClusterId: not a finite number, ignored": 1,
    }


def test_class3_a_wall_clock_of_2_63_is_quarantined_not_an_int64_overflow(
    condor25: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    history = tmp_path / "history.ads"
    history.write_text(
        _replace(
            (condor25 / "history.ads").read_text(),
            r"^RemoteWallClockTime = .*$",
            "RemoteWallClockTime = 9223372036854775807",
        )
    )
    (tmp_path / "status.ads").write_bytes((condor25 / "status.ads").read_bytes())
    monkeypatch.chdir(tmp_path)
    assert main(["penalty", "--history", str(history), "--status-file", "status.ads", "--json"]) == 0
    out, err = capsys.readouterr()
    assert len(json.loads(out)["jobs"]) == 41 and "'RemoteWallClockTime' = 9.2233720368547758e+18" in err


@pytest.mark.parametrize("name", ["status.json", "history.json"])
def test_class4_nesting_5000_deep_costs_its_ad_only(condor25: Path, tmp_path: Path, name: str) -> None:
    from probes.sources.history import read_history
    from probes.sources.status import read_status

    ads = json.loads((condor25 / name).read_text())
    ads[1]["Deep"] = "@deep@"
    path = tmp_path / name
    path.write_text(json.dumps(ads, indent=2).replace('"@deep@"', "[" * 5000 + "]" * 5000))
    if name == "status.json":
        snapshot, report = read_status([path])
        read = len(snapshot.slots) + len(snapshot.allocations)
    else:
        jobs, report = read_history([path])
        read = len(jobs)
    assert read == len(ads) - 1 and len(report.malformed) == 1
    assert "ad 2 " in report.malformed[0].reason and "nested deeper than can be read" in report.malformed[0].reason


def test_class5_a_missing_comma_costs_one_ad_of_a_json_dump(
    condor25: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A -json dump is read ad by ad as far as its structure allows, as a -long one is; what
    was lost is said with the file, the ad, its lines and the key before the damage."""
    text = (condor25 / "status.json").read_text()
    third = text.index('"Name": "slot1_1@cpu-node1@vm"')
    comma = text.index(',\n  "State"', third)
    path = tmp_path / "status.json"
    path.write_text(text[:comma] + text[comma + 1 :])
    from probes.sources.status import read_status

    snapshot, report = read_status([path])
    assert len(snapshot.slots) == 2 and len(snapshot.allocations) == 5
    (bad,) = report.malformed
    first = text.count("\n", 0, text.rfind("\n{", 0, third)) + 2
    assert bad.path == str(path) and bad.line == first
    state = text.count("\n", 0, comma) + 2  # the line of "State", where the comma is missed
    assert re.fullmatch(
        rf"ad 3 \(lines {first}-\d+\): invalid JSON \(Expecting ',' delimiter at line {state}, after key "
        r"'StarterPid'\); the ad was skipped",
        bad.reason,
    ), bad.reason
    monkeypatch.chdir(tmp_path)
    assert main(["slots", "--status-file", str(path), "--json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["read"]["status"]["malformed"] == 1 and f"{path} line {first}: ad 3" in err


def test_class5_a_truncated_json_history_keeps_its_whole_ads(condor25: Path, tmp_path: Path) -> None:
    from probes.sources.history import read_history

    text = (condor25 / "history.json").read_text()
    path = tmp_path / "history.json"
    path.write_text(text[: len(text) * 2 // 3])
    jobs, report = read_history([path])
    whole = text[: len(text) * 2 // 3].count("\n}")
    assert len(jobs) == whole and len(report.malformed) == 1
    assert f"ad {whole + 1} " in report.malformed[0].reason


# -- issue 41: the semantic mutations, and the oracle on the bills ------------------------------------

SEMANTIC_BATCHES, SEMANTIC_BATCH = 2, 15


@pytest.mark.parametrize("batch", range(SEMANTIC_BATCHES))
def test_a_node_that_contradicts_itself_is_billed_as_before_or_not_at_all(
    warm: None, tmp_path: Path, batch: int
) -> None:
    """One node of the HTCondor 25 dump (-long or -json) made bigger in a dynamic slot, smaller in
    its p-slot, claimed twice by a job, given an amount that is not a number, or a dynamic slot
    without a usable Name (:func:`tests.fuzzing.node_case`): the other node's bills never
    change, and the node's own are as before or the node is ``incomplete``, with a message
    (:func:`tests.fuzzing.bills_oracle`). On the code before issue 41, 26 of these 30 cases
    changed the bills (``python tests/fuzzing.py --semantic --seed 2041 --cases 30``)."""
    from tests.fuzzing import run_node_cases

    cases = range(batch * SEMANTIC_BATCH, (batch + 1) * SEMANTIC_BATCH)
    problems = run_node_cases(SEMANTIC_SEED, cases, tmp_path)
    assert not problems, "\n".join(p[:600] for p in problems)
