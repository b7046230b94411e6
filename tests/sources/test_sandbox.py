"""Hostile expressions in job ads (issue 12, item 9): a backtracking regular expression costs
its ad, quarantined past the budget, and never the read; a shadowed attribute is never
evaluated at all."""

from __future__ import annotations

from pathlib import Path

import pytest

from probes.sources import sandbox
from probes.sources.history import read_history

# ^(a|a)*$ against 40 a's and a '!' backtracks until PCRE's match limit (about 0.2 s here);
# twenty of them in one expression take seconds, what a user's ad can cost unguarded
_ONE = 'regexp("^(a|a)*$", "' + "a" * 40 + '!")'
HOSTILE = " + ".join([f"({_ONE} ? 1 : 0)"] * 20) + " + 1024"


def _ad(i: int, request_memory: str, *, provisioned: bool = False) -> str:
    lines = [f'GlobalJobId = "submit#7.{i}#1795269000"', "ClusterId = 7", f"ProcId = {i}", f"RequestMemory = {request_memory}"]
    if provisioned:
        lines.append("MemoryProvisioned = 128")
    return "\n".join([*lines, "JobStatus = 4", "CompletionDate = 1795269000", ""])


def test_a_backtracking_expression_costs_its_ad_not_the_read(tmp_path: Path) -> None:
    path = tmp_path / "history.ads"
    ads = [_ad(0, HOSTILE), _ad(1, 'regexp("a+", "aaa") ? 512 : 2048'), _ad(2, HOSTILE), _ad(3, "4096")]
    path.write_text("\n".join(ads))
    jobs, report = read_history([path])
    assert sorted(jobs["proc"].tolist()) == [1, 3]
    assert jobs.set_index("proc")["memory"].to_dict() == {1: 512.0, 3: 4096.0}  # a regexp that ends is evaluated
    assert [(m.line, m.reason) for m in report.malformed] == [
        (1, "evaluation took longer than 0.25 s (a regular expression that backtracks?); the ad was skipped"),
        (15, "evaluation took longer than 0.25 s (a regular expression that backtracks?); the ad was skipped"),
    ]


def test_a_shadowed_attribute_is_never_evaluated(tmp_path: Path) -> None:
    """MemoryProvisioned is what the job got; RequestMemory behind it is not read, however
    hostile."""
    path = tmp_path / "history.ads"
    path.write_text("\n".join(_ad(i, HOSTILE, provisioned=True) for i in range(3)))
    jobs, report = read_history([path])
    assert jobs["memory"].tolist() == [128.0] * 3 and not report.malformed


def test_the_budget_is_a_setting(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="budget must be a number of seconds > 0"):
        sandbox.configure(0)
    assert sandbox.needs_guard('X = replaceAll("a", "b", "c")') and not sandbox.needs_guard("X = Cpus * 2")
