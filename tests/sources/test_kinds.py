"""Wrong-kind input is refused with what it looks like, never read as something else (issue 12, item 6)."""

from __future__ import annotations

from pathlib import Path

import pytest

from probes.cli import main

from ..conftest import ROOT

HISTORY = "job ads (condor_q -long or condor_history -long)"
STARTD = "startd ads (condor_status -long)"


@pytest.mark.parametrize(
    ("command", "option", "given", "message"),
    [
        ("slots", "--status-file", "history.ads", f"history.ads: this looks like {HISTORY}, expected startd ads"),
        ("slots", "--status-file", "history.json", f"history.json: this looks like {HISTORY}, expected startd ads"),
        ("jobs", "--history", "status.ads", f"status.ads: this looks like {STARTD}, expected job ads"),
        (
            "idle",
            "--idle-file",
            "status.ads",
            f"status.ads: this looks like {STARTD}, expected job ads (condor_q -long)",
        ),
        ("bill", "--status-file", "queue.ads", f"queue.ads: this looks like {HISTORY}, expected startd ads"),
    ],
)
def test_a_dump_of_another_kind_is_refused(
    condor25: Path, capsys: pytest.CaptureFixture[str], command: str, option: str, given: str, message: str
) -> None:
    assert main([command, option, str(condor25 / given)]) == 1
    out, err = capsys.readouterr()
    assert out == "" and message in err


@pytest.mark.parametrize(
    ("command", "option", "needed"), [("slots", "--status-file", "Name"), ("jobs", "--history", "GlobalJobId")]
)
def test_a_file_that_is_not_ads_at_all_is_refused(
    capsys: pytest.CaptureFixture[str], command: str, option: str, needed: str
) -> None:
    assert main([command, option, str(ROOT / "README.md")]) == 1
    err = capsys.readouterr().err
    assert f"README.md: no ad has {needed}, expected " in err or "README.md: none of its " in err


def test_ads_of_another_kind_among_the_right_ones_are_skipped_and_counted(
    condor25: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mixed = tmp_path / "mixed.ads"
    schedd_ad = 'MyType = "Scheduler"\nName = "schedd@cm"\n'
    mixed.write_text((condor25 / "status.ads").read_text().rstrip("\n") + "\n\n" + schedd_ad.rstrip("\n") + "\n\n")
    assert main(["slots", "--status-file", str(mixed), "--json"]) == 0
    out, err = capsys.readouterr()
    assert "1 value(s) ignored: MyType: 'scheduler' ad among startd ads" in err
    assert '"slot1@cpu-node1@vm"' in out and "schedd@cm" not in out


def test_a_file_none_of_whose_ads_can_be_read_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("# my notes\nthe pool was busy today\n\nand yesterday\n")
    assert main(["slots", "--status-file", str(notes)]) == 1
    err = capsys.readouterr().err
    assert err.endswith(f"fairacct: {notes}: none of its 2 ad(s) could be read, "
                        "expected startd ads (condor_status -long or -json); is this the right file?\n")  # fmt: skip
