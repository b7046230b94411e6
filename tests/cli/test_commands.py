"""The command line: outputs, exit codes, and messages without tracebacks."""

from __future__ import annotations

import importlib
import io
import json
import os
import sqlite3
import sys
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest

from probes.cli import main, views
from probes.cli.compiling import announce_compiling
from probes.config import SourceSettings, load_config
from probes.errors import ClassAdError
from probes.pipeline.reading import Reading, read_sources
from probes.sources.history import iter_history, read_history
from probes.sources.report import ReadTally
from probes.sources.settings import JobReading

from ..conftest import ROOT


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out.startswith("fairacct ")


def test_slots_json(capsys: pytest.CaptureFixture[str], condor25: Path) -> None:
    code, out, err = run(capsys, "slots", "--status-file", str(condor25 / "status.json"), "--json")
    assert code == 0, err
    doc = json.loads(out)
    slots = {s["name"]: s for s in doc["slots"]}
    assert slots["slot1@gpu-node1@vm"]["unallocated_gpus"] == 3
    assert slots["slot1@cpu-node1@vm"]["unallocated_memory"] == 22528
    assert len(doc["allocations"]) == 6 and doc["read"]["status"]["ads"] == 8


def test_slots_table(capsys: pytest.CaptureFixture[str], eight_core: Path) -> None:
    code, out, err = run(capsys, "slots", "--status-file", str(eight_core))
    assert code == 0, err
    assert "== 1 slots (partitionable and static)" in out
    row = next(line for line in out.splitlines() if line.startswith("slot1@ingwe"))
    assert row.split() == [
        "slot1@ingwe.cs.wisc.edu",
        "Partitionable",
        "unknown",
        "cpu",
        "8",
        "15940",
        "0",
        "4",
        "15428",
        "0",
        "4",
    ]


def test_jobs_from_a_per_job_directory(capsys: pytest.CaptureFixture[str], condor25: Path) -> None:
    code, out, err = run(capsys, "jobs", "--history", str(condor25 / "per_job_history"), "--json")
    assert code == 0, err
    jobs = json.loads(out)["jobs"]
    assert len(jobs) == 12 and {j["site"] for j in jobs if j["status"] == 4} == {"LoopbackSite"}


def test_idle_from_an_autocluster_dump_and_the_status(capsys: pytest.CaptureFixture[str], condor25: Path) -> None:
    code, out, err = run(
        capsys,
        "idle",
        "--idle-file",
        str(condor25 / "queue-autocluster.ads"),
        "--status-file",
        str(condor25 / "status.ads"),
        "--json",
    )
    assert code == 0, err
    doc = json.loads(out)
    assert sorted(i["request_memory"] for i in doc["idle"]) == [4096, 16384, 40000]
    assert "slots" not in doc


def test_malformed_ads_are_quarantined(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    dump = tmp_path / "status.ads"
    dump.write_text(  # slot1@a with what HTCondor writes in every slot ad (issue 51)
        'Name = "slot1@a"\nMachine = "a"\nSlotType = "Static"\nCpus = 1\nMemory = 1024\n\n'
        'Name = "slot2@a"\nCpus = "two\n'
    )
    config = tmp_path / "probe.toml"
    config.write_text('[probe]\nstate_dir = "state"\n')
    code, out, err = run(
        capsys,
        "slots",
        "--config",
        str(config),
        "--status-file",
        str(dump),
        "--quarantine",
        str(tmp_path / "state/quarantine"),
    )
    assert code == 0
    assert f"1 malformed status ad(s) skipped, the first: {dump} line 8: unterminated string in attribute 'Cpus'" in err
    quarantined = Path(err.rsplit("quarantined in ", 1)[1].strip())
    assert quarantined.parent == tmp_path / "state/quarantine"
    assert quarantined.read_text() == (
        f'# from {dump} line 8\n# reason: unterminated string in attribute \'Cpus\'\nName = "slot2@a"\nCpus = "two\n\n'
    )
    assert "== 1 slots" in out
    code, out, err = run(capsys, "slots", "--config", str(config), "--status-file", str(dump), "--strict")
    assert code == 1 and err == f"fairacct: {dump} line 8: unterminated string in attribute 'Cpus'\n"
    # a quarantine that cannot be written (here under a file: root may write anywhere else) is
    # said on the problem's line, not a traceback; the slots are read all the same
    code, out, err = run(
        capsys, "slots", "--config", str(config), "--status-file", str(dump), "--quarantine", str(dump / "q")
    )
    assert code == 0 and "== 1 slots" in out
    assert err.strip().endswith(f"'Cpus'; NOT quarantined: cannot write in {dump / 'q'} (Not a directory)"), err


@pytest.mark.parametrize(
    ("argv", "code", "message"),
    [
        (["jobs"], 2,
         "fairacct: configuration error: no input: set sources.history in the configuration or give --history\n"),
        (["slots", "--status-file", "/nonexistent.ads"], 1, "fairacct: /nonexistent.ads: no such file\n"),
        (["slots", "--config", "/nonexistent.toml"], 2,
         "fairacct: configuration error: /nonexistent.toml: no such configuration file\n"),
        (["records", "slot", "--store", "ftp://localhost/x"], 2,
         "fairacct: configuration error: store.url: expected sqlite:///PATH, http(s)://HOST:PORT, "
         "opensearch+http(s)://HOST:PORT, collector+http(s)://HOST[:PORT] or "
         "gratia+http(s)://HOST[:PORT]/gratia-servlets/rmi, got 'ftp://localhost/x'\n"),
        (["records", "slot", "--since", "yesterday", "--store", "sqlite:///:memory:"], 2,
         "fairacct: configuration error: --since: expected UNIX seconds or an ISO-8601 time like 2013-03-30T00:00:00Z, "
         "got 'yesterday'\n"),
    ],
)  # fmt: skip
def test_errors_are_one_line_and_an_exit_code(
    capsys: pytest.CaptureFixture[str], argv: list[str], code: int, message: str
) -> None:
    got, out, err = run(capsys, *argv)
    assert (got, err) == (code, message), out


def test_a_bad_config_key(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    config = tmp_path / "probe.toml"
    config.write_text('[[partitions]]\nname = "cpu"\nmemory = "2 gigs"\n')
    code, _, err = run(capsys, "config", "check", "--config", str(config))
    assert code == 2
    assert err == (
        f"fairacct: configuration error: {config}: partitions[0].memory: "
        'expected a size like "2 GiB", "512 MiB" or "4 GB", got \'2 gigs\'\n'
    )


def test_probe_once_on_the_demo_pool_stores_it_once(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    config = tmp_path / "probe.toml"
    config.write_text(
        (ROOT / "config/demo.toml")
        .read_text()
        .replace('"demo/', f'"{ROOT}/config/demo/')
        .replace('"../.demo"', '"state"')
    )
    outs, errs = [], []
    for _ in range(2):  # the same dump twice is stored once: ids come from the facts
        code, out, err = run(capsys, "probe", "once", "--config", str(config))
        assert code == 0, err
        outs.append(out)
        errs.append(err)
    assert (
        f"slot: 36 records, 36 sent to sqlite:///{tmp_path}/state/fairacct.sqlite (36 new, 0 already stored)" in outs[0]
        and "\njob: 60 records, 60 sent to sqlite:///" in outs[0]
    )
    # the second time the snapshot is a replay (reported, skipped) and the history is read once
    assert "== records\nno records" in out and "accounted already, skipped" in errs[1]
    assert "0 jobs from the history" in out
    assert "15 idle jobs in 6 autoclusters" in out
    assert "== slots by true overhead (columns: CU of overhead)" in out
    store = tmp_path / "state/fairacct.sqlite"
    with sqlite3.connect(store) as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert [db.execute(f"SELECT count(*) FROM {k}").fetchone()[0] for k in ("slot", "allocation", "job")] == [
            36,
            72,
            60,
        ]
    code, out, err = run(capsys, "records", "job", "--config", str(config), "--since", "2026-11-21T14:00:00Z", "--json")
    jobs = json.loads(out)
    assert code == 0 and jobs and all(j["timestamp"] >= "2026-11-21T14:00:00Z" for j in jobs)
    job = next(j for j in jobs if "#4143.3#" in j["job_id"])
    assert (job["kind"], job["user"], job["gpus"], job["site"]) == ("job", "dave", 1, "CIT_CMS_T2")
    assert job["end_iso"].endswith("Z") and "source" not in job
    code, out, err = run(capsys, "records", "slot", "--config", str(config), "--limit", "2")
    assert out.startswith("2 slot records\n")
    code, out, err = run(capsys, "outbox", "--config", str(config), "--json")
    assert json.loads(out) == {"depth": {}, "oldest": None, "dead_letters": {}, "recent_dead_letters": []}


def test_probe_once_computes_true_overhead_once_per_snapshot(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The records and the printed tables read one accounting of the snapshot."""
    import probes.pipeline.overhead as overhead

    calls: list[int] = []
    real = overhead.true_overhead
    monkeypatch.setattr(overhead, "true_overhead", lambda *a, **k: calls.append(1) or real(*a, **k))
    config = tmp_path / "probe.toml"
    config.write_text(
        (ROOT / "config/demo.toml")
        .read_text()
        .replace('"demo/', f'"{ROOT}/config/demo/')
        .replace('"../.demo"', '"state"')
    )
    code, out, err = run(capsys, "probe", "once", "--config", str(config))
    assert code == 0, err
    assert "slot: 36 records" in out and len(calls) == 1
    calls.clear()
    code, out, err = run(capsys, "bill", "--config", str(config))
    assert code == 0 and len(calls) == 1


@pytest.mark.parametrize(
    ("argv", "refused"),
    [(["overhead", "--history", "h.ads"], "--history"), (["slots", "--idle-file", "q.ads"], "--idle-file"),
     (["jobs", "--status-file", "s.ads"], "--status-file"), (["records", "slot", "--history", "h.ads"], "--history")],
)  # fmt: skip
def test_an_option_a_command_does_not_use_is_refused(
    capsys: pytest.CaptureFixture[str], argv: list[str], refused: str
) -> None:
    """Issue 12, item 10: before, these were accepted and silently ignored."""
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2 and f"unrecognized arguments: {refused}" in capsys.readouterr().err


def test_read_only_commands_write_nothing_unless_asked(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 12, item 2: `slots` and friends used to create ./state/quarantine/."""
    dump = tmp_path / "status.ads"
    dump.write_text(  # slot1@a with what HTCondor writes in every slot ad (issue 51)
        'Name = "slot1@a"\nMachine = "a"\nSlotType = "Static"\nCpus = 1\nMemory = 1024\n\n'
        'Name = "slot2@a"\nCpus = "two\n'
    )
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    for command in ("slots", "bill", "overhead"):
        code, _out, err = run(capsys, command, "--status-file", str(dump))
        assert code == 0 and "unterminated string in attribute 'Cpus' (--quarantine DIR keeps them)" in err
    assert list(work.iterdir()) == []


def test_reading_a_store_that_does_not_exist_is_an_error(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    missing = tmp_path / "no/such/dir/x.sqlite"
    code, _out, err = run(capsys, "records", "slot", "--store", f"sqlite:///{missing}")
    assert (
        code == 1
        and err
        == f"fairacct: {missing}: no embedded store here (nothing stored yet, or another store.url or state_dir?)\n"
    )
    assert not (tmp_path / "no").exists()


def test_tables_people_read(capsys: pytest.CaptureFixture[str], condor25: Path) -> None:
    """Issue 12, item 11: one spelling of a missing value, JobStatus as a word, the canonical
    units above the overhead tables."""
    code, out, _ = run(capsys, "jobs", "--history", str(condor25 / "history.ads"))
    assert code == 0 and "completed" in out and "removed" in out
    assert "None" not in out and "<NA>" not in out and "nan" not in out.lower().replace("nanosecond", "")
    code, out, _ = run(capsys, "overhead", "--status-file", str(condor25 / "status.ads"))
    assert out.startswith("== canonical units (true overhead is counted in whole units idle in every resource "
                          "at once)\ngpu: 1 GPU(s)\ncpu: 1 core(s) and 2048 MiB\n")  # fmt: skip
    code, out, _ = run(capsys, "bill", "--status-file", str(condor25 / "status.ads"))
    assert "<NA>" not in out and "None" not in out


def test_a_long_table_shows_its_first_rows_and_says_how_many_more(
    capsys: pytest.CaptureFixture[str], condor25: Path
) -> None:
    """Issue 12, item 12: `jobs` printed every row of a 40,000-job history (seconds of pandas
    formatting); a table shows --limit rows (default 50) and says what it left out."""
    history = str(condor25 / "history.ads")  # 42 jobs
    code, out, _ = run(capsys, "jobs", "--history", history, "--limit", "5")
    lines = out.splitlines()
    assert code == 0 and lines[0] == "== 42 jobs" and len(lines) == 2 + 5 + 1
    assert lines[2].split()[0] == "vm#12.1#1795269388" and lines[-1] == "... 37 more jobs (use --json or --limit)"
    for limit in ((), ("--limit", "0")):  # 42 rows fit the default 50; 0 is every row
        code, out, _ = run(capsys, "jobs", "--history", history, *limit)
        assert len(out.splitlines()) == 2 + 42 and "more jobs" not in out
    code, out, _ = run(capsys, "jobs", "--history", history, "--json", "--limit", "3")
    doc = json.loads(out)
    assert [j["job_id"] for j in doc["jobs"]] == ["vm#12.1#1795269388", "vm#12.0#1795269388", "vm#11.0#1795269336"]
    assert doc["read"]["history"]["ads"] == 42
    with pytest.raises(SystemExit) as exit_:
        main(["jobs", "--history", history, "--limit", "-2"])
    assert (
        exit_.value.code == 2 and "--limit: expected a number of rows, 0 or more, got '-2'" in capsys.readouterr().err
    )


def test_jobs_json_is_streamed_with_the_values_it_had(capsys: pytest.CaptureFixture[str], condor25: Path) -> None:
    """Issue 12, item 12: the JSON was one `json.dumps(indent=1)` of every row (10 s and 1.7 GB
    at 200,000 jobs); it is written a slice of rows at a time, one row per line, with the
    values :func:`views.read_json` gives (pandas' encoding: null for missing, 15 digits)."""
    history = condor25 / "history.ads"
    code, out, err = run(capsys, "jobs", "--history", str(history), "--json")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == '{"jobs": [' and lines[43] == "]," and lines[44].startswith('"read": {"history":{"ads":42,')
    assert all(line.startswith('{"job_id":"vm#') for line in lines[1:43])
    doc = json.loads(out)
    config = load_config(None).model_copy(update={"sources": SourceSettings(history=[history])})
    assert doc == views.read_json(read_sources(config, only=("history",)), slots=False)
    first = doc["jobs"][0]
    assert first["source"] == str(history) and "\\/" not in out  # pandas writes "\/"; undone
    assert first["project"] is None and first["cpus"] == 1.0 and first["status"] == 4


@pytest.mark.parametrize("limit", [None, "0", "3", "2500"])
def test_jobs_streamed_is_what_the_whole_table_gave(
    capsys: pytest.CaptureFixture[str], condor25: Path, generated_history: Callable[..., Path], limit: str | None
) -> None:
    """Issue 12, item 12: `jobs --json` writes each chunk of the history as soon as it is read
    (memory no longer grows with the history). Its output is, byte for byte, what writing the
    whole table gave: on real histories (-long, -json, per-job files) and on a generated one
    of several chunks with a malformed ad in the middle (skipped, counted in "read", said on
    stderr), followed by a second file; with --limit too (2500 rows end inside a part). So is
    the table's, which keeps only the rows it shows."""
    histories = {
        "long": [condor25 / "history.ads"],
        "json": [condor25 / "history.json"],
        "per-job": [condor25 / "per_job_history"],
        "generated": [generated_history(3000, malformed=1500), condor25 / "history.ads"],
    }
    for name, paths in histories.items():
        options = [o for p in paths for o in ("--history", str(p))] + (["--limit", limit] if limit else [])
        code, out, err = run(capsys, "jobs", *options, "--json")
        config = load_config(None).model_copy(update={"sources": SourceSettings(history=paths)})
        result = read_sources(config, only=("history",))
        whole = io.StringIO()
        views.write_read_json(whole, result, slots=False, limit=int(limit) or None if limit else None)
        assert code == 0 and out == whole.getvalue(), name
        # the table keeps its first rows and counts the others
        code, table, _ = run(capsys, "jobs", *options)
        assert result.jobs is not None
        shown = views.table(result.jobs, views.JOB_VIEW, limit=50 if limit is None else int(limit) or None, what="jobs")
        assert code == 0 and table == f"== {len(result.jobs)} jobs\n{shown}\n", name
        if name == "generated":
            read = json.loads(out)["read"]["history"]
            assert (read["ads"], read["malformed"]) == (2999 + 42, 1)
            assert (
                err.startswith("fairacct: 1 malformed history ad(s) skipped, the first: ")
                and "unterminated string in attribute 'User'" in err
            )
        else:
            assert err == "", name


def test_jobs_json_quarantines_or_stops_at_a_malformed_ad(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, generated_history: Callable[..., Path]
) -> None:
    """A malformed ad met in the stream is quarantined where --quarantine says once the document
    is written; with --strict it is an error, as when the whole table was read first: exit 1
    and the same one line on stderr. The rows of the parts read before it were written
    already: the output is the start of the document, not a whole one."""
    history = generated_history(3000, malformed=2500)
    code, full, err = run(capsys, "jobs", "--history", str(history), "--json", "--quarantine", str(tmp_path))
    (quarantined,) = tmp_path.iterdir()
    assert (
        code == 0
        and err.endswith(f"; quarantined in {quarantined}\n")
        and json.loads(full)["read"]["history"]["malformed"] == 1
    )
    assert quarantined.read_text().startswith(f"# from {history} line ")
    code, out, err = run(capsys, "jobs", "--history", str(history), "--json", "--strict")
    with pytest.raises(ClassAdError) as raised:
        read_history([history], strict=True)
    assert (code, err) == (1, f"fairacct: {raised.value}\n")
    assert full.startswith(out) and out.count("\n") >= 2000 and out.endswith("}")  # whole rows, then nothing


def test_jobs_json_memory_does_not_grow_with_the_history(generated_history: Callable[..., Path]) -> None:
    """What `jobs --json` allocates at its peak (tracemalloc: Python objects and numpy arrays)
    is a few chunks' worth, whatever the length of the history: four times the jobs grow it
    by less than a quarter of what their table grows (about 8 MB here)."""

    def streamed_peak(path: Path) -> int:
        tally = ReadTally()
        with open(os.devnull, "w") as null:
            tracemalloc.start()
            try:
                parts = iter_history([path], JobReading(), tally)
                views.write_tables_json(null, {"jobs": parts}, lambda: {"history": tally.report()})
                return tracemalloc.get_traced_memory()[1]
            finally:
                tracemalloc.stop()

    small, large = generated_history(3000), generated_history(12000)
    tables = [
        int(read_history([p])[0].memory_usage(deep=True).sum()) for p in (small, large)
    ]  # and the scanner is loaded
    peaks = [streamed_peak(p) for p in (small, large)]
    assert peaks[1] - peaks[0] < (tables[1] - tables[0]) / 4, f"peaks {peaks}, tables {tables} (bytes)"


def test_json_rows_keep_every_character() -> None:
    """The one rewrite of pandas' output (its "\\/" escapes) leaves a value's own backslashes,
    slashes, quotes, newlines and non-ASCII letters as they were."""
    values = ["a\\/b", "\\", "/", "x\\\\/y", 'say "hi"/\n', "Müller/ß", None, "\\\\"]
    frame = pd.DataFrame({"user": values, "cpus": [1.5, float("nan"), 2.0, 3.0, 4.0, 5.0, 6.0, 1e-7]})
    out = io.StringIO()
    views.write_read_json(out, Reading(jobs=frame))
    assert json.loads(out.getvalue()) == {"jobs": views.records(frame), "read": {}}
    assert [j["user"] for j in json.loads(out.getvalue())["jobs"]] == values


def test_compiling_the_scanner_is_said_once_and_only_when_its_cache_is_cold(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 12, item 12: the first run after an install compiles the ClassAd scanner for
    20-60 s with nothing printed. A stand-in scanner, a numba function cached like it (in the
    __pycache__ beside it): compiled, it is announced once for two compilations; loaded again
    (a new process would do the same) it comes from the cache and nothing is said; a function
    outside the scanner's modules compiles silently."""
    import numba

    (tmp_path / "fairacct_test_scanner.py").write_text(
        "import numba\n\n@numba.njit(cache=True)\ndef twice(x):\n    return 2 * x\n", encoding="utf-8"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "fairacct_test_scanner", raising=False)
    scanner = importlib.import_module("fairacct_test_scanner")
    said = []
    for _ in range(2):
        stream = io.StringIO()
        with announce_compiling(stream, modules=["fairacct_test_scanner"]):
            numba.njit(lambda x: x + 1)(1)  # not the scanner's
            assert (scanner.twice(2), scanner.twice(2.5)) == (4, 5.0)
        said.append(stream.getvalue())
        scanner = importlib.reload(scanner)  # a new dispatcher: what it compiled is only on disk
    assert said[0] == (
        "fairacct: compiling the ClassAd scanner once (about a minute; later runs load it from numba's cache in "
        f"{tmp_path / '__pycache__'}) ...\n"
    )
    assert said[1] == ""
