"""Opening inputs: one set of checks and messages for every reader."""

from __future__ import annotations

from pathlib import Path

import pytest

from probes.errors import SourceError
from probes.sources.inputs import content_problem, open_input, read_input


@pytest.mark.parametrize(
    ("data", "complete", "problem"),
    [
        (b"", False, "the file is empty, expected ClassAds"),
        (b" \n\t\n", True, "the file is empty, expected ClassAds"),
        (b"Name = 1\n\0\0", False, "binary file (NUL bytes), expected ClassAds in text form"),
        (b"Name = 1\nCpus = ", True, "truncated: the file ends in the middle of a line"),
        (b"Name = 1\nCpus = ", False, None),
        (b"Name = 1\n", True, None),
    ],
)
def test_content_problem(data: bytes, complete: bool, problem: str | None) -> None:
    assert content_problem(data, "ClassAds", complete=complete) == problem


def test_read_input(tmp_path: Path) -> None:
    (tmp_path / "a").write_bytes(b"x\n")
    assert read_input(tmp_path / "a", "a file") == b"x\n"
    assert read_input(tmp_path / "gone", "a file", missing_ok=True) is None
    with pytest.raises(SourceError, match=r"gone: no such file"):
        read_input(tmp_path / "gone", "a file")
    with pytest.raises(SourceError, match=r": is a directory, expected a history file"):
        open_input(tmp_path, "a history file")
