"""What reading found besides values: one line per problem, malformed ads quarantined whole."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

from probes.sources.report import Malformed, ReadReport, problem_lines, write_quarantine

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
    return ReadReport(ads=n, evaluated=1, malformed=[bad], rejects=Counter({"Memory: odd": n}), skipped=[f"f{n}: x"])


def test_reports_combined_with_or_are_new_and_leave_both_as_they_were() -> None:
    a, b = _report(1), _report(2)
    both = a | b
    assert (both.ads, both.evaluated, [m.line for m in both.malformed]) == (3, 2, [1, 2])
    assert both.rejects == {"Memory: odd": 3} and both.skipped == ["f1: x", "f2: x"]
    assert a == _report(1) and b == _report(2)  # neither operand changed
    both.malformed.clear()
    both.rejects.clear()
    assert a == _report(1) and b == _report(2)  # and nothing of theirs is shared
    assert ReadReport.combine([a, b]) == a | b and a == _report(1)
    assert ReadReport.combine([]) == ReadReport()


def test_a_shifted_report_is_a_new_one() -> None:
    a = _report(3)
    moved = a.shifted(100)
    assert [m.line for m in moved.malformed] == [103] and a == _report(3)
    moved.rejects["Memory: odd"] += 1
    assert a.rejects == {"Memory: odd": 3}


def test_merge_still_adds_in_place_for_a_reader_filling_its_own_report() -> None:
    a, b = _report(1), _report(2)
    a.merge(b)
    assert a == _report(1) | _report(2) and b == _report(2)
