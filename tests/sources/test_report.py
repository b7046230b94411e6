"""What reading found besides values: one line per problem, malformed ads quarantined whole."""

from __future__ import annotations

import copy
import dataclasses
import pickle
import shutil
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from types import MappingProxyType

import orjson
import pytest

from probes.sources.duplicate_jobs import JobsSeen
from probes.sources.history import iter_history, read_history
from probes.sources.report import (
    DUPLICATES_NAMED,
    Malformed,
    ReadReport,
    ReadTally,
    problem_lines,
    write_quarantine,
)
from probes.sources.settings import JobReading

NOW = datetime(2026, 11, 21, 14, 0, tzinfo=UTC)


def test_problem_lines_say_each_problem_once_and_quarantine_the_ads(tmp_path: Path) -> None:
    bad = Malformed(
        "status.ads", 17, "attribute 'Cpus': cannot parse the value '4 +* 2'", 'Name = "x"\nCpus = 4 +* 2\n'
    )
    reports = {
        "status": ReadReport(ads=3, malformed=[bad]),
        "history": ReadReport(ads=2, rejects=Counter({"Memory: expected a number, got str": 2})),
    }
    lines = problem_lines(reports, {"schedd:s1": "schedd s1: idle jobs\n  timed out"}, tmp_path / "q", NOW)
    (quarantined,) = (tmp_path / "q").iterdir()
    assert quarantined.name == "malformed-20261121T140000.000000Z.ads"
    assert lines == [
        "schedd:s1 skipped: schedd s1: idle jobs timed out",
        "1 malformed status ad(s) skipped, the first: status.ads line 17: attribute 'Cpus': cannot parse the "
        f"value '4 +* 2'; quarantined in {quarantined}",
        "history: 2 value(s) ignored: Memory: expected a number, got str",
    ]
    assert quarantined.read_text() == (
        "# from status.ads line 17\n# reason: attribute 'Cpus': cannot parse the value '4 +* 2'\n"
        'Name = "x"\nCpus = 4 +* 2\n\n'
    )


def test_nothing_to_say_writes_nothing(tmp_path: Path) -> None:
    assert problem_lines({"status": ReadReport(ads=5)}, {}, tmp_path / "q", NOW) == []
    assert not (tmp_path / "q").exists()


def test_write_quarantine_leaves_no_temporary_file(tmp_path: Path) -> None:
    path = write_quarantine([Malformed("h", 1, "r", "A = 1")], tmp_path, NOW)
    assert [p.name for p in tmp_path.iterdir()] == [path.name]


def test_the_quarantine_keeps_an_excerpt_not_a_copy(tmp_path: Path) -> None:
    huge = Malformed("dump.ads", 3, "truncated: the file ends in the middle of this ad", "\x01" * 10_000_000)
    path = write_quarantine([huge], tmp_path, NOW)
    assert path.stat().st_size < 70_000
    assert path.read_text().endswith(f"# ... {10_000_000 - 64 * 1024} more characters not kept\n\n")


def _report(n: int) -> ReadReport:
    bad = Malformed(f"f{n}.ads", n, "why", "text")
    return ReadReport(ads=n, evaluated=1, malformed=(bad,), rejects={"Memory: odd": n}, skipped=(f"f{n}: x",))


def test_a_report_cannot_be_changed() -> None:
    report = _report(1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        report.ads = 2  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        report.malformed = ()  # type: ignore[misc]
    with pytest.raises(AttributeError):
        report.malformed.append(Malformed("f", 1, "why", "text"))  # type: ignore[attr-defined]
    with pytest.raises(AttributeError):
        report.skipped.append("f: x")  # type: ignore[attr-defined]
    with pytest.raises(TypeError):
        report.rejects["Memory: odd"] = 5  # type: ignore[index]
    with pytest.raises(TypeError):
        report.rejects["Memory: other"] += 1  # type: ignore[index]
    with pytest.raises(AttributeError):
        report.rejects.clear()  # type: ignore[attr-defined]
    assert report == _report(1)
    assert report.rejects["never counted"] == 0  # read as a Counter


def test_a_report_keeps_its_own_copy_of_what_it_was_given() -> None:
    malformed = [Malformed("f", 1, "why", "text")]
    rejects = Counter({"Memory: odd": 1})
    skipped = ["f: x"]
    report = ReadReport(ads=1, malformed=malformed, rejects=rejects, skipped=skipped)  # type: ignore[arg-type]
    assert isinstance(report.malformed, tuple) and isinstance(report.skipped, tuple)
    malformed.clear()
    rejects["Memory: odd"] += 1
    skipped.clear()
    assert (len(report.malformed), dict(report.rejects), report.skipped) == (1, {"Memory: odd": 1}, ("f: x",))


def test_a_report_is_a_value_hashed_pickled_and_copied() -> None:
    a = _report(1)
    assert hash(a) == hash(_report(1)) and len({a, _report(1), _report(2)}) == 2
    for same in (pickle.loads(pickle.dumps(a)), copy.copy(a), copy.deepcopy(a)):
        assert same == a and isinstance(same.rejects, MappingProxyType)
    assert ReadReport(rejects={"x": 0}) == ReadReport() and hash(ReadReport(rejects={"x": 0})) == hash(ReadReport())
    assert orjson.loads(orjson.dumps(dict(a.rejects))) == {"Memory: odd": 1}


def test_reports_combined_with_or_are_new_and_leave_both_as_they_were() -> None:
    a, b = _report(1), _report(2)
    a_was, b_was = pickle.dumps(a), pickle.dumps(b)
    both = a | b
    assert (both.ads, both.evaluated, [m.line for m in both.malformed]) == (3, 2, [1, 2])
    assert both.rejects == {"Memory: odd": 3} and both.skipped == ("f1: x", "f2: x")
    assert a == _report(1) and b == _report(2)  # neither operand changed
    assert ReadReport.combine([a, b]) == a | b and ReadReport.combine([a, b, a]) == a | b | a
    assert ReadReport.combine([]) == ReadReport()
    assert (pickle.dumps(a), pickle.dumps(b)) == (a_was, b_was)  # nor anything inside them
    assert ReadReport(rejects={"x": -1}) | ReadReport(rejects={"x": 1}) == ReadReport(rejects={"x": 0})


def test_a_shifted_report_is_a_new_one() -> None:
    a = _report(3)
    moved = a.shifted(100)
    assert [m.line for m in moved.malformed] == [103] and a == _report(3)
    assert (moved.ads, moved.rejects, moved.skipped) == (a.ads, a.rejects, a.skipped)


def test_a_tally_filled_as_it_goes_gives_frozen_reports() -> None:
    tally = ReadTally()
    tally.merge(_report(1))
    tally.add_malformed(Malformed("g.ads", 7, "why", "text"))
    tally.reject("Memory: odd", 2)
    tally.reject("Cpus: odd")
    tally.skip(["d/notes.txt: not ClassAds"])
    tally.ads += 4
    first = tally.report()
    expected = _report(1) | ReadReport(
        ads=4,
        malformed=(Malformed("g.ads", 7, "why", "text"),),
        rejects={"Memory: odd": 2, "Cpus: odd": 1},
        skipped=("d/notes.txt: not ClassAds",),
    )
    assert first == expected
    tally.merge(_report(2))  # the tally goes on; the report it gave does not
    assert first == expected and tally.report() == expected | _report(2)
    empty = ReadTally()
    assert empty.report() == ReadReport() and empty == ReadTally()


def _merged_in_place(reports: list[ReadReport]) -> tuple[int, int, list[Malformed], dict[str, int], list[str]]:
    """What the former in-place ``ReadReport.merge`` made of ``reports``: sums, lists extended,
    counts updated (in the order met)."""
    ads, evaluated, malformed, rejects, skipped = 0, 0, [], Counter[str](), []
    for r in reports:
        ads += r.ads
        evaluated += r.evaluated
        malformed.extend(r.malformed)
        rejects.update(r.rejects)
        skipped.extend(r.skipped)
    return ads, evaluated, malformed, dict(rejects), skipped


def _values(report: ReadReport) -> tuple[int, int, list[Malformed], dict[str, int], list[str]]:
    return report.ads, report.evaluated, list(report.malformed), dict(report.rejects), list(report.skipped)


def test_a_tally_gives_what_merging_in_place_gave_on_real_reads(
    condor25: Path, generated_history: Callable[..., Path], tmp_path: Path
) -> None:
    """The readers' tallies hand on the values the in-place merge of their reports gave: each
    input read on its own, then the reports merged, is the read of all of them at once (a
    history with a malformed ad, odd values and a folder with a file skipped among them). The
    inputs hold the same jobs more than once: read alone, they share what was seen before."""
    folder = tmp_path / "folder"
    shutil.copytree(condor25 / "per_job_history", folder)
    (folder / "notes.txt").write_text("rotated on Mondays\n")
    odd = tmp_path / "odd.ads"
    # an odd value of an attribute that bills nothing (a JobStatus would set its job aside: issue 51)
    odd.write_text((condor25 / "history.ads").read_text().replace("\nExitCode = 0\n", '\nExitCode = "done"\n', 3))
    inputs = [generated_history(3000, malformed=1500), condor25 / "history.ads", condor25 / "history.json", folder, odd]
    reading = JobReading()
    seen = JobsSeen()
    alone = [read_history([path], reading, seen=seen)[1] for path in inputs]
    whole = read_history(inputs, reading)[1]
    assert whole.duplicates == 42 + 12 + 42 and len(whole.duplicate_jobs) == DUPLICATES_NAMED
    assert _values(whole) == _merged_in_place(alone)
    assert whole.malformed and whole.skipped and whole.rejects  # each kind of finding met
    tally = ReadTally()
    for report in alone:
        tally.merge(report)
    assert tally.report() == whole == ReadReport.combine(alone)
    streamed = ReadTally()
    for _ in iter_history(inputs, reading, streamed):
        pass
    assert streamed.report() == whole
