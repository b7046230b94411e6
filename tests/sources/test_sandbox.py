"""Hostile expressions in job ads (issue 12, item 9): a backtracking regular expression costs
its ad, quarantined past the budget, and never the read; a shadowed attribute is never
evaluated at all."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import classad2
import pytest

from probes.sources import sandbox
from probes.sources.classad import columns_from_classads
from probes.sources.history import job_attrs, read_history
from probes.sources.settings import JobReading

T = TypeVar("T")

# ^(a|a)*$ against 40 a's and a '!' backtracks until PCRE's match limit (about 0.2 s here);
# twenty of them in one expression take seconds, what a user's ad can cost unguarded
_ONE = 'regexp("^(a|a)*$", "' + "a" * 40 + '!")'
HOSTILE = " + ".join([f"({_ONE} ? 1 : 0)"] * 20) + " + 1024"


@pytest.fixture
def budget(monkeypatch: pytest.MonkeyPatch) -> str:
    """A budget of 1 s: a hostile expression (4 s or more) is past it all the same, and a
    regular expression that ends keeps it on a loaded machine. The quarantine's reason."""
    monkeypatch.setattr(sandbox, "BUDGET_S", 1.0)
    return "evaluation took longer than 1 s (a regular expression that backtracks?); the ad was skipped"


def _ad(i: int, request_memory: str, *, provisioned: bool = False) -> str:
    lines = [
        f'GlobalJobId = "submit#7.{i}#1795269000"',
        "ClusterId = 7",
        f"ProcId = {i}",
        f"RequestMemory = {request_memory}",
    ]
    if provisioned:
        lines.append("MemoryProvisioned = 128")
    return "\n".join([*lines, "JobStatus = 4", "CompletionDate = 1795269000", ""])


def test_a_backtracking_expression_costs_its_ad_not_the_read(tmp_path: Path, budget: str) -> None:
    path = tmp_path / "history.ads"
    ads = [_ad(0, HOSTILE), _ad(1, 'regexp("a+", "aaa") ? 512 : 2048'), _ad(2, HOSTILE), _ad(3, "4096")]
    path.write_text("\n".join(ads))
    jobs, report = read_history([path])
    assert sorted(jobs["proc"].tolist()) == [1, 3]
    assert jobs.set_index("proc")["memory"].to_dict() == {1: 512.0, 3: 4096.0}  # a regexp that ends is evaluated
    assert [(m.line, m.reason) for m in report.malformed] == [(1, budget), (15, budget)]


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


# -- every other path an ad comes by: -json dumps and classad2 objects (a live pool's answer) --


def _json_ad(i: int, request_memory: str | int, *, provisioned: bool = False, **more: object) -> dict[str, object]:
    ad: dict[str, object] = {"MyType": "Job", "GlobalJobId": f"submit#7.{i}#1795269000", "ClusterId": 7, "ProcId": i}
    ad["RequestMemory"] = request_memory if isinstance(request_memory, int) else f"/Expr({request_memory})/"
    if provisioned:
        ad["MemoryProvisioned"] = 128
    return {**ad, "JobStatus": 4, "CompletionDate": 1795269000, **more}


def _in_process_cpu_s(read: Callable[[], T]) -> tuple[T, float]:
    """``read()`` and the CPU seconds it cost this process: the guarded evaluation is spent in
    the worker, so a hostile expression evaluated here (4 s or more) shows, however loaded the
    machine is."""
    began = time.process_time()
    got = read()
    return got, time.process_time() - began


def test_a_hostile_expression_in_a_json_dump_costs_its_ad_not_the_read(tmp_path: Path, budget: str) -> None:
    path = tmp_path / "history.json"
    ads = [
        _json_ad(0, HOSTILE),
        _json_ad(1, 'regexp("a+", "aaa") ? 512 : 2048'),
        _json_ad(2, "Hidden + 1", Hidden=f"/Expr({HOSTILE})/"),  # through another attribute
        _json_ad(3, 4096),
    ]
    path.write_text(json.dumps(ads, indent=1))
    (jobs, report), cpu_s = _in_process_cpu_s(lambda: read_history([path]))
    assert jobs.set_index("proc")["memory"].to_dict() == {1: 512.0, 3: 4096.0}
    assert [(m.line, m.reason) for m in report.malformed] == [(2, budget), (20, budget)]  # where each ad begins
    assert cpu_s < 2.0


def test_a_shadowed_attribute_of_a_json_dump_is_never_evaluated(tmp_path: Path) -> None:
    path = tmp_path / "history.json"
    path.write_text(json.dumps([_json_ad(i, HOSTILE, provisioned=True) for i in range(3)]))
    (jobs, report), cpu_s = _in_process_cpu_s(lambda: read_history([path]))
    assert jobs["memory"].tolist() == [128.0] * 3 and not report.malformed
    assert cpu_s < 2.0


def _classad(i: int, request_memory: str, *, provisioned: bool = False, **more: str) -> classad2.ClassAd:
    return classad2.parseOne(
        _ad(i, request_memory, provisioned=provisioned) + "".join(f"{k} = {v}\n" for k, v in more.items()),
        classad2.ParserType.Old,
    )


def test_a_hostile_expression_from_a_live_pool_costs_its_ad_not_the_read(budget: str) -> None:
    """columns_from_classads: the path of every ad a live schedd or collector answers."""
    ads = [
        _classad(0, HOSTILE),
        _classad(1, 'regexp("a+", "aaa") ? 512 : 2048'),
        _classad(2, "Hidden + 1", Hidden=HOSTILE),
    ]
    ads.append(_classad(3, "4096", Unwanted=HOSTILE))  # a regexp no wanted attribute needs: read as usual
    ads.append(_classad(4, HOSTILE, provisioned=True))
    attrs = job_attrs(JobReading())
    (columns, report), cpu_s = _in_process_cpu_s(lambda: columns_from_classads(ads, attrs, origin="schedd submit"))
    assert columns["ProcId"].tolist() == [1.0, 3.0, 4.0] and columns.line.tolist() == [2, 4, 5] and report.ads == 3
    assert columns["RequestMemory"].tolist()[:2] == [512.0, 4096.0] and math.isnan(columns["RequestMemory"][2])
    assert [(m.path, m.line, m.reason) for m in report.malformed] == [
        ("schedd submit", 1, budget),
        ("schedd submit", 3, budget),
    ]
    assert cpu_s < 2.0


@pytest.mark.parametrize(
    ("text", "guarded"),
    [
        ('X = RegExp ("a+", Owner)', True),
        ('X = stringListRegexpMember("a", "b,c")', True),
        ("X = splitUserName(Owner)[0]", True),
        ('X = REPLACEALL("a", "b", "c")', True),
        ('X = "regexp" + strcat("a")', False),  # the word, but no call of it
        ("X = myregexp(1)", False),
        ("X = Cpus * (2 + 1)", False),
    ],
)
def test_which_text_may_call_a_regular_expression(text: str, guarded: bool) -> None:
    assert sandbox.needs_guard(text) is guarded
