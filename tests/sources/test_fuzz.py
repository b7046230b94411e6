"""Mutated copies of the real condor25 dumps: byte flips, truncation, NUL runs, huge numbers,
invalid UTF-8. Whatever the damage, a reader ends with an exit code as documented (0: read,
bad ads quarantined and counted; 1: the file cannot be read as what was asked), never with a
traceback or a hang (issue 12, item 8). The mutations are drawn from a seeded generator, so a
failure is reproduced by its case number."""

from __future__ import annotations

import random
import re
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from probes.cli import main

SEED = 20261123
CASES = 30
READERS = {"status.ads": ("slots", "--status-file"), "status.json": ("slots", "--status-file"),
           "history.ads": ("jobs", "--history"), "history.json": ("jobs", "--history"),
           "queue.ads": ("idle", "--idle-file")}  # fmt: skip
_NUMBER = re.compile(rb"(?<== )-?[0-9]+(\.[0-9]+)?\n")


def _mutate(data: bytes, rng: random.Random) -> tuple[str, bytes]:
    how = rng.choice(["flips", "truncate", "nul-run", "nul-tail", "huge-number", "bad-utf8"])
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
        m = rng.choice(numbers) if numbers else None
        if m is None:
            return how, data
        huge = rng.choice([b"1e400", b"-1e309", b"99999999999999999999999", b'real("INF")', b"1.7976931348623157e309"])
        return how, data[: m.start()] + huge + b"\n" + data[m.end() :]
    at = rng.randrange(len(data))
    return how, data[:at] + rng.choice([b"\xff\xfe", b"\xc3\x28", b"\xe2\x82", b"\xed\xa0\x80"]) + data[at:]


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
    how, damaged = _mutate((condor25 / name).read_bytes(), rng)
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
    snapshot, report = read_status([status])
    assert len(snapshot.slots) == 2 and report.rejects == {"Memory: not a finite number, ignored": 1}


def test_a_power_cut_tail_costs_nothing_but_itself(condor25: Path, tmp_path: Path) -> None:
    """10,080 good ads and the 4 KiB of NUL bytes a power cut leaves: every ad is read, the
    tail is quarantined (not the whole file refused as binary)."""
    from probes.sources.history import read_history

    ads = (condor25 / "history.ads").read_bytes()
    path = tmp_path / "history.ads"
    path.write_bytes(ads * 240 + b"\0" * 4096)
    jobs, report = read_history([path])
    assert len(jobs) == 42 * 240
    assert len(report.malformed) == 1 and report.malformed[0].reason.startswith("truncated")
    assert [r for r in report.rejects if r.startswith("binary data: NUL bytes from offset")]
