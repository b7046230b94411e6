"""The reader's handling of bad input: each problem gets its own clear message."""

from __future__ import annotations

from pathlib import Path

import pytest

import probes.sources.classad.model as classad_module
from probes.errors import ClassAdError, SourceError
from probes.sources.classad import Attr, Kind, read_ad_files, read_ads

WANTED = [Attr("Name", Kind.STRING), Attr("Cpus", Kind.NUMBER), Attr("Args", Kind.STRING)]

GOOD = 'Name = "slot1@a"\nCpus = 4\nArgs = "x"\n'


def write(tmp_path: Path, text: str | bytes, name: str = "dump.ads") -> Path:
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("", "dump.ads: the file is empty, expected ClassAds"),
        ("\n\n  \n", "dump.ads: the file is empty, expected ClassAds"),
        (b"Name = 1\n\x00\x01\x02binary", "dump.ads: binary file (NUL bytes), expected ClassAds in text form"),
        ("[ 1, 2", "dump.ads line 1: expected a JSON array of ads (as condor_status -json writes), got '1, 2'"),
    ],
)
def test_unreadable_files(tmp_path: Path, content: str | bytes, message: str) -> None:
    path = write(tmp_path, content)
    with pytest.raises(SourceError) as info:
        read_ads(path, WANTED)
    assert str(info.value) == f"{tmp_path}/{message}"


def test_missing_file_and_directory(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match=r"nope\.ads: no such file$"):
        read_ads(tmp_path / "nope.ads", WANTED)
    with pytest.raises(SourceError, match="is a directory, expected a file of ClassAds"):
        read_ads(tmp_path, WANTED)


def test_a_nul_byte_far_in_a_big_file_is_located(tmp_path: Path) -> None:
    """The ad holding it is quarantined and the region said with its offsets; the 1000 good ads
    before it are read (before issue 12 the whole file was refused as binary)."""
    path = write(tmp_path, (GOOD + "\n") * 1000 + "Cpus = \x00\n")  # 38 bytes an ad, then 7
    columns, report = read_ads(path, WANTED)
    assert len(columns) == 1000 and len(report.malformed) == 1
    assert list(report.rejects) == [
        "binary data: NUL bytes from offset 38007 to 38007, the ads they are in are quarantined"
    ]


@pytest.mark.parametrize(
    ("bad_ad", "line", "reason"),
    [
        ('Name = "slot2@a"\nCpus = 4\nArgs = "unterminated\n', 7, "unterminated string in attribute 'Args'"),
        (
            'Name = "slot2@a"\nthis is not an attribute\nCpus = 4\n',
            6,
            "expected 'Name = value', got 'this is not an attribute'",
        ),
        ('Name = "slot2@a"\nCpus = \nArgs = "x"\n', 6, "attribute 'Cpus' has no value"),
        ('Name = "slot2@a"\nCpus = 4 +* 2\n', 6, "attribute 'Cpus': cannot parse the value '4 +* 2'"),
    ],
)
def test_a_malformed_ad_is_skipped_counted_and_located(tmp_path: Path, bad_ad: str, line: int, reason: str) -> None:
    path = write(tmp_path, GOOD + "\n" + bad_ad + "\n" + GOOD)
    columns, report = read_ads(path, WANTED)
    assert list(columns["Name"]) == ["slot1@a", "slot1@a"]
    assert list(columns.line) == [1, 5 + bad_ad.count("\n") + 1]
    assert report.ads == 2 and len(report.malformed) == 1
    bad = report.malformed[0]
    assert (bad.path, bad.line, bad.reason) == (str(path), line, reason)
    assert bad.text == bad_ad
    with pytest.raises(ClassAdError) as info:
        read_ads(path, WANTED, strict=True)
    assert str(info.value) == f"{path} line {line}: {reason}"


def test_a_truncated_last_ad(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD + '\nName = "slot2@a"\nCpus = 4\nArgs = "cut off in the mid')
    columns, report = read_ads(path, WANTED)
    assert len(columns) == 1
    assert [(m.line, m.reason) for m in report.malformed] == [(5, "truncated: the file ends in the middle of this ad")]


def test_case_insensitive_names_and_the_last_of_repeated_attributes(tmp_path: Path) -> None:
    path = write(tmp_path, 'NAME = "a"\ncpus = 1\nCPUS = 2\nargs = undefined\n')
    columns, _ = read_ads(path, WANTED)
    assert (columns["Name"][0], columns["Cpus"][0], columns["Args"][0]) == ("a", 2.0, None)


def test_history_file_banners_separate_ads(tmp_path: Path) -> None:
    """A schedd's history file has `*** ...` banners, not blank lines, between ads."""
    text = "".join(
        f'Name = "job{i}"\nCpus = {i}\n'
        f'*** Offset = {i * 30} ClusterId = {i} ProcId = 0 Owner = "u" CompletionDate = 1\n'
        for i in range(3)
    )
    columns, report = read_ads(write(tmp_path, text, "history"), WANTED)
    assert list(columns["Name"]) == ["job0", "job1", "job2"] and list(columns["Cpus"]) == [0.0, 1.0, 2.0]
    assert list(columns.line) == [1, 4, 7] and not report.malformed


def test_values_of_the_wrong_type_are_counted_not_guessed(tmp_path: Path) -> None:
    path = write(tmp_path, 'Name = 5\nCpus = "four"\n\nName = "b"\nCpus = true\n')
    columns, report = read_ads(path, WANTED)
    assert list(columns["Name"]) == [None, "b"]
    assert all(v != v for v in columns["Cpus"])  # NaN, not 0
    assert report.rejects == {
        "Name: expected a string, got number": 1,
        "Cpus: expected a number, got string": 1,
        "Cpus: expected a number, got bool": 1,
    }


def test_per_job_files_problems_name_the_file(tmp_path: Path) -> None:
    good = write(tmp_path, GOOD, "history.1.0")
    empty = write(tmp_path, "", "history.1.1")
    cut = write(tmp_path, 'Name = "x"\nCpus = 1', "history.1.2")
    bad = write(tmp_path, 'Name = "y"\nCpus = 4 +* 2\n', "history.1.3")
    columns, report = read_ad_files([good, empty, cut, bad], WANTED)
    assert [Path(p).name for p in columns.path] == ["history.1.0"]
    assert [(Path(m.path).name, m.line, m.reason) for m in report.malformed] == [
        ("history.1.1", 1, "the file is empty, expected one ClassAd"),
        ("history.1.2", 1, "truncated: the file ends in the middle of a line"),
        ("history.1.3", 2, "attribute 'Cpus': cannot parse the value '4 +* 2'"),
    ]


def test_windows_line_endings_read_as_unix_ones(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A dump copied through Windows (CRLF), read in small chunks: same values and lines."""
    monkeypatch.setattr(classad_module, "CHUNK_BYTES", 64)
    ads = [f'Name = "slot{i}@a"\nCpus = {i}\nArgs = "x"\n' for i in range(40)]
    path = write(tmp_path, "\n".join(ads).replace("\n", "\r\n").encode())
    columns, report = read_ads(path, WANTED)
    assert list(columns["Cpus"]) == [float(i) for i in range(40)] and not report.malformed
    assert list(columns.line) == [1 + 4 * i for i in range(40)]


def test_a_file_whose_first_ads_are_large_grows_its_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The table is sized from the first chunk's ads per byte; many small ads after large ones
    outgrow that estimate, and every ad is still read, in order."""
    monkeypatch.setattr(classad_module, "CHUNK_BYTES", 4096)
    large = [f'Name = "big{i}"\nCpus = {i}\nArgs = "{"y" * 3000}"\n' for i in range(3)]
    small = [f'Name = "s{i}"\nCpus = {i}\n' for i in range(3000)]
    path = write(tmp_path, "\n".join(large + small))
    columns, report = read_ads(path, WANTED)
    assert len(columns) == 3003 and not report.malformed
    assert list(columns["Name"][:4]) == ["big0", "big1", "big2", "s0"] and columns["Name"][-1] == "s2999"
    assert list(columns["Cpus"][3:]) == [float(i) for i in range(3000)]
    assert columns["Args"][2] == "y" * 3000 and columns["Args"][3] is None
