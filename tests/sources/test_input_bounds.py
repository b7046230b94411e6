"""No evaluation, file or setting without a bound (issue 41, points 6 and 7): each class as its
smallest input, through the command a user runs. What used to hang or crash the process runs in
a process of its own under a timeout, so that the old behaviour fails the test rather than the
suite."""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from probes.cli import main

# the documented limits (README, bad input), as numbers: the tests say what a user is told
MAX_OPERATORS = 16_384  # probes.sources.classad.limits
MAX_AD_BYTES = 16 << 20  # probes.sources.inputs
MAX_INFLATED_BYTES = 256 << 20

JOB = "vm#12.1#1795269388"


def _fairacct(
    *args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    command = Path(sys.executable).parent / "fairacct"
    return subprocess.run(
        [str(command), *args], cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False, env=env
    )


def _ads(path: Path) -> list[str]:
    return path.read_text().rstrip("\n").split("\n\n")


def _terms(n: int) -> str:
    return "4" + " + 0" * n


# -- expressions of any length ------------------------------------------------------------------------


def test_a_job_of_450_terms_is_quarantined_and_the_history_read_on(
    condor25: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`CpusProvisioned = 4 + 0 + ...` (450 terms) fails classad2's evaluation: main raised
    ClassAdException and read no job of the history; now the one ad is quarantined."""
    ads = _ads(condor25 / "history.ads")
    assert "\nCpusProvisioned = 1\n" in ads[0]
    ads[0] = ads[0].replace("\nCpusProvisioned = 1\n", f"\nCpusProvisioned = {_terms(450)}\n")
    history = tmp_path / "history.ads"
    history.write_text("\n\n".join(ads) + "\n")
    assert main(["jobs", "--history", str(history), "--json"]) == 0
    captured = capsys.readouterr()
    document = json.loads(captured.out)
    assert len(document["jobs"]) == 41 and JOB not in {j["job_id"] for j in document["jobs"]}
    assert (
        f"1 malformed history ad(s) skipped, the first: {history} line 1: classad2 cannot evaluate this ad"
        in captured.err
    )


def test_a_dynamic_slot_or_a_queue_ad_of_450_terms_is_quarantined(
    condor25: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same expression as a d-slot's `Cpus` (its node left unbilled) and as a queue ad's
    `RequestMemory` (the other idle jobs counted): main raised ClassAdException in both."""
    ads = _ads(condor25 / "status.ads")
    k = next(i for i, a in enumerate(ads) if "\nDynamicSlot = true" in a)
    ads[k] = re.sub(r"\nCpus = \d+\n", f"\nCpus = {_terms(450)}\n", ads[k], count=1)
    status = tmp_path / "status.ads"
    status.write_text("\n\n".join(ads) + "\n\n")
    assert main(["bill", "--status-file", str(status), "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["unbilled_nodes"] == 1
    assert "1 malformed status ad(s) skipped" in captured.err and "classad2 cannot evaluate this ad" in captured.err

    queue = tmp_path / "queue.ads"
    text = (condor25 / "queue.ads").read_text()
    queue.write_text(re.sub(r"\nRequestMemory = [^\n]*\n", f"\nRequestMemory = {_terms(450)}\n", text, count=1))
    assert main(["idle", "--idle-file", str(queue), "--json"]) == 0
    assert "1 malformed idle ad(s) skipped" in capsys.readouterr().err


@pytest.mark.parametrize("form", ["history.ads", "history.json"])
def test_an_expression_beyond_what_classad2_can_hold_never_reaches_it(
    condor25: Path, tmp_path: Path, form: str
) -> None:
    """200,000 terms overflowed classad2's stack while it parsed (SIGSEGV): refused before it."""
    n = 200_000
    if form == "history.json":
        jobs = json.loads((condor25 / form).read_text())
        jobs[0]["CpusProvisioned"] = f"/Expr({_terms(n)})/"
        (tmp_path / form).write_text(json.dumps(jobs))
    else:
        ads = _ads(condor25 / form)
        ads[0] = ads[0].replace("\nCpusProvisioned = 1\n", f"\nCpusProvisioned = {_terms(n)}\n")
        (tmp_path / form).write_text("\n\n".join(ads) + "\n")
    done = _fairacct("jobs", "--history", form, "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert len(json.loads(done.stdout)["jobs"]) == 41
    assert (
        f"attribute 'CpusProvisioned' holds an expression of {n} operators, more than the {MAX_OPERATORS}"
        in done.stderr
    )


# -- several instants in one file ---------------------------------------------------------------------


def test_a_file_of_two_snapshots_is_billed_snapshot_by_snapshot(
    condor25: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`condor_status -long` twice into one file, 300 s apart: main stopped with 'slots table
    has 2 repeated slot keys'; now each snapshot is billed, the same bills twice."""
    text = (condor25 / "status.ads").read_text()
    later = re.sub(r"(?m)^(MyCurrentTime|LastHeardFrom) = (\d+)$", lambda m: f"{m[1]} = {int(m[2]) + 300}", text)
    both = tmp_path / "status.ads"
    both.write_text(text.rstrip("\n") + "\n\n" + later)
    assert main(["bill", "--status-file", str(condor25 / "status.ads"), "--json"]) == 0
    once = json.loads(capsys.readouterr().out)
    assert main(["bill", "--status-file", str(both), "--json"]) == 0
    twice = json.loads(capsys.readouterr().out)
    assert len(twice["allocations"]) == 2 * len(once["allocations"]) == 12
    billed = sorted(b["billed"]["cpus"] for b in once["allocations"])
    assert sorted(b["billed"]["cpus"] for b in twice["allocations"]) == sorted(billed * 2)


def test_two_snapshots_of_one_instant_are_refused_with_the_slot_and_both_places(
    condor25: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same dump twice, but one slot heard from two seconds later in the copy (so it is not
    the same ad), at the dump's latest time: both snapshots stand for one instant, and which one
    holds the slot cannot be told. main stopped with 'slots table has 1 repeated slot keys'."""
    text = (condor25 / "status.ads").read_text()
    ads = text.rstrip("\n").split("\n\n")
    latest = max(int(t) for t in re.findall(r"(?m)^MyCurrentTime = (\d+)$", text))
    own = re.search(r"(?m)^MyCurrentTime = (\d+)$", ads[-1])
    name = re.search(r'(?m)^Name = "([^"]+)"$', ads[-1])
    assert own is not None and name is not None and int(own[1]) == latest - 2
    ads[-1] = ads[-1].replace(own[0], f"MyCurrentTime = {latest}")
    other = tmp_path / "again.ads"
    other.write_text("\n\n".join(ads) + "\n\n")
    assert main(["bill", "--status-file", str(condor25 / "status.ads"), "--status-file", str(other)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"fairacct: {other} line ") and f"the slot '{name[1]}' is also at " in err, err
    assert f"in a snapshot of the same instant ({latest}" in err and "cannot be accounted" in err


# -- folders and files that cannot be read, or never end ------------------------------------------------


def test_a_looping_link_in_a_history_folder_is_skipped_by_name(
    condor25: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "spool"
    shutil.copytree(condor25 / "per_job_history", folder)
    (folder / "a").symlink_to("b")
    (folder / "b").symlink_to("a")
    assert main(["jobs", "--history", str(folder), "--json"]) == 0
    captured = capsys.readouterr()
    assert len(json.loads(captured.out)["jobs"]) == 12
    assert f"history: skipped {folder / 'a'}: cannot be read (Too many levels of symbolic links)" in captured.err


def _as_nobody(*args: str) -> list[str]:
    """The fairacct command as a user who may not list a folder closed to others (nobody, when
    the tests run as root)."""
    command = [str(Path(sys.executable).parent / "fairacct"), *args]
    if os.geteuid() != 0:
        return command
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv: no user to be refused")
    return [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", *command]


@pytest.fixture
def closed_spool(condor25: Path) -> Iterator[Path]:
    """A history folder that is searchable, not listable, by other users; in a folder of the
    system's temporary directory, as the tests' own are closed to other users."""
    with tempfile.TemporaryDirectory(prefix="fairacct-test-") as top:
        Path(top).chmod(0o755)
        folder = Path(top) / "spool"
        shutil.copytree(condor25 / "per_job_history", folder)
        folder.chmod(0o311)
        state = Path(top) / "state"
        state.mkdir()
        if os.geteuid() == 0:
            os.chown(state, 65534, 65534)
        config = Path(top) / "fairacct.toml"
        config.write_text(
            f'[sources]\nhistory = ["{folder}"]\n[probe]\nstate_dir = "{state}"\nhistory_every_s = 1\nhealth_port = 0\n'
        )
        config.chmod(0o644)
        yield folder
        folder.chmod(0o755)


def test_a_history_folder_that_cannot_be_listed_is_named(closed_spool: Path) -> None:
    done = subprocess.run(
        _as_nobody("jobs", "--history", str(closed_spool)), cwd="/", capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 1, done.stderr
    assert done.stderr.endswith(f"fairacct: {closed_spool}: this history folder cannot be listed (Permission denied)\n")


def test_config_check_and_probe_once_name_a_history_folder_that_cannot_be_listed(closed_spool: Path) -> None:
    """Issue 39, point 2: `config check` passed it (exit 0) and `probe once` failed on it; now
    the check refuses it naming the key (exit 2), and `probe once` says it in one line (exit 1)."""
    config = str(closed_spool.parent / "fairacct.toml")
    said = f"{closed_spool}: this history folder cannot be listed (Permission denied)"
    check = subprocess.run(
        _as_nobody("config", "check", "--config", config), cwd="/", capture_output=True, text=True, timeout=120
    )
    assert check.returncode == 2 and check.stderr == f"fairacct: configuration error: sources.history[0]: {said}\n", (
        check.stderr
    )
    once = subprocess.run(
        _as_nobody("probe", "once", "--config", config), cwd="/", capture_output=True, text=True, timeout=120
    )
    assert once.returncode == 1 and once.stderr.endswith(f"fairacct: {said}\n"), once.stderr
    assert "Traceback" not in once.stderr


def test_probe_run_logs_a_history_folder_that_cannot_be_listed_in_one_line(closed_spool: Path) -> None:
    """The history job fails each second; its failure is one ERROR line (said once while it fails
    the same way), never a traceback of the scheduler's, and the service goes on to a clean stop."""
    config = str(closed_spool.parent / "fairacct.toml")
    lines = []
    with subprocess.Popen(
        _as_nobody("probe", "run", "--config", config), cwd="/", stderr=subprocess.PIPE, text=True
    ) as service:
        assert service.stderr is not None
        try:
            for line in service.stderr:
                lines.append(line)
                if " ERROR " in line:
                    break
            service.send_signal(signal.SIGTERM)
            lines += service.stderr.readlines()
            assert service.wait(timeout=60) == 0, "".join(lines)
        finally:
            service.kill() if service.poll() is None else None
    errors = [line for line in lines if " ERROR " in line]
    assert len(errors) == 1 and errors[0].endswith(
        f"fairacct.service ERROR history failed: {closed_spool}: this history folder cannot be listed "
        "(Permission denied) (said once while it fails the same way)\n"
    ), "".join(lines)
    assert "Traceback" not in "".join(lines) and lines[-1].endswith("INFO stopped\n"), "".join(lines)


def test_a_read_error_after_open_is_named(capsys: pytest.CaptureFixture[str]) -> None:
    """/proc/self/mem opens as a regular file and answers EIO at offset 0, as a failing disk does."""
    assert main(["jobs", "--history", "/proc/self/mem"]) == 1
    assert capsys.readouterr().err == (
        "fairacct: /proc/self/mem: read error after opening it (Input/output error): is the disk failing?\n"
    )


FIFO_REFUSED = "is a FIFO (named pipe), expected a file of ClassAds in a regular file"


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["jobs", "--history", "fifo"], f"fifo: {FIFO_REFUSED}"),
        (["bill", "--status-file", "fifo"], f"fifo: {FIFO_REFUSED}"),
        (["penalty", "--swf", "/dev/zero", "--machines", "fifo"],
         "/dev/zero: is a character device, expected an SWF workload log in a regular file"),
    ],
    ids=["history-fifo", "status-fifo", "swf-dev-zero"],
)  # fmt: skip
def test_a_fifo_or_a_device_is_refused_before_it_blocks(tmp_path: Path, argv: list[str], expected: str) -> None:
    """main blocked in open() on a FIFO for ever, and read /dev/zero without end."""
    os.mkfifo(tmp_path / "fifo")
    done = _fairacct(*argv, cwd=tmp_path, timeout=60)
    assert done.returncode == 1 and done.stderr.endswith(f"{expected}\n"), done.stderr


def test_an_ad_longer_than_the_limit_is_refused_as_it_is_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One line of 16 MiB and a byte: main held it some ten times over (a 2 GiB line: MemoryError)."""
    path = tmp_path / "history.ads"
    path.write_bytes(b'Args = "' + b"a" * MAX_AD_BYTES + b'"\n')
    assert main(["jobs", "--history", str(path)]) == 1
    assert capsys.readouterr().err == (
        f"fairacct: {path}: an ad (or a line) of more than 16 MiB from byte 0: HTCondor writes none so long "
        "(is this a ClassAd dump?); the file was not read further\n"
    )


def test_a_json_array_of_brackets_is_refused_at_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """8 MiB of `[`: main skipped them one by one in Python and said '0 jobs'."""
    path = tmp_path / "history.json"
    path.write_bytes(b"[" * (8 << 20))
    assert main(["jobs", "--history", str(path)]) == 1
    assert capsys.readouterr().err == (
        f"fairacct: {path} line 1: expected a JSON array of ads (as condor_status -json writes), got '{'[' * 20}'\n"
    )


def _bomb(path: Path, size: int) -> None:
    """A gzip file of ``size`` bytes of ``[`` (some 300 KB for 256 MiB), written a MiB at a time."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    with path.open("wb") as out:
        for _ in range(size >> 20):
            out.write(packer.compress(b"[" * (1 << 20)))
        out.write(packer.flush())


def test_a_gzip_bomb_stops_at_the_limit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "history.json.gz"
    _bomb(path, MAX_INFLATED_BYTES + (1 << 20))
    assert main(["jobs", "--history", str(path)]) == 1
    assert capsys.readouterr().err == (
        f"fairacct: {path}: decompresses to more than 256 MiB (100 times its size, or 256 MiB): not a history "
        "(a gzip bomb?); not read further\n"
    )


def test_a_killed_run_leaves_no_decompressed_copy(condor25: Path, tmp_path: Path) -> None:
    """Killed while it decompresses: main left its copy in $TMPDIR/fairacct-history-*."""
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    path = tmp_path / "history.json.gz"
    _bomb(path, MAX_INFLATED_BYTES)
    command = [str(Path(sys.executable).parent / "fairacct"), "jobs", "--history", str(path)]
    env = {**os.environ, "TMPDIR": str(scratch)}
    with subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) as process:
        try:
            deadline = time.monotonic() + 60  # not a speed bound: a guard against waiting for ever
            while not _writes_under(process.pid, scratch):
                assert process.poll() is None and time.monotonic() < deadline, "never wrote its copy"
                time.sleep(0.01)
        finally:
            process.send_signal(signal.SIGKILL)
    assert list(scratch.iterdir()) == []
    # and one that ends well reads the same jobs as the plain file
    packed = tmp_path / "h.json.gz"
    packed.write_bytes(gzip.compress((condor25 / "history.json").read_bytes(), mtime=0))
    done = _fairacct("jobs", "--history", str(packed), "--json", cwd=tmp_path, env=env)
    assert done.returncode == 0 and len(json.loads(done.stdout)["jobs"]) == 42
    assert list(scratch.iterdir()) == []


def _writes_under(pid: int, folder: Path) -> bool:
    """Whether process ``pid`` has a file under ``folder`` open."""
    try:
        links = [os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")]
    except OSError:
        return False
    return any(link.startswith(f"{folder}/") for link in links)
