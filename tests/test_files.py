from __future__ import annotations

import os
from pathlib import Path

import pytest

from probes.files import atomic_write


def test_atomic_write_replaces_whole_and_leaves_nothing_behind(tmp_path: Path) -> None:
    target = tmp_path / "deep" / "FS.1364601600"
    atomic_write(target, "old\n")
    atomic_write(target, "new\n")
    assert target.read_text() == "new\n" and os.listdir(target.parent) == ["FS.1364601600"]


def test_a_failed_write_keeps_the_old_file(tmp_path: Path) -> None:
    target = tmp_path / "f"
    atomic_write(target, "old\n")
    with pytest.raises(TypeError):
        atomic_write(target, 42)  # type: ignore[arg-type]
    assert target.read_text() == "old\n" and os.listdir(tmp_path) == ["f"]
