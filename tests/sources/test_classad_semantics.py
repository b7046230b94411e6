"""Every ad and expression fairacct evaluates is evaluated with HTCondor's ClassAd functions, from
the first one a process parses: what was parsed before changes nothing.

``stringListMember`` is HTCondor's, not the ClassAd library's: a call parsed before HTCondor's
functions are registered calls an unknown function, error, for the expression's life (classad2
alone registers them only after its first ``-long`` ad, never for an expression); with them, an
undefined item is false. So each case runs in a fresh process, where it is the first thing parsed:
in the test process, whatever an earlier test read would hide it (the differential test of the
demo's history failed or passed by what its pytest worker had run before).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "config" / "demo"

# false with HTCondor's functions (an undefined item); error without them (an unknown function)
UNLISTED = "stringListMember(TARGET.GLIDEIN_Site, DESIRED_Sites)"


def fresh(script: str, *args: str) -> object:
    """What ``script`` prints (one JSON document) run in a fresh interpreter; classad2's error
    value is written "error", so that it cannot pass for a number."""
    prelude = (
        "import json, sys\n"
        "import classad2\n"
        "def plain(v):\n"  # classad2's values are int enums: json would write error as 1
        "    if isinstance(v, list):\n"
        "        return [plain(x) for x in v]\n"
        "    return v.name.lower() if isinstance(v, classad2.Value) else v\n"
        "def out(v):\n"
        "    print(json.dumps(plain(v)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", prelude + script, *args],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        cwd=ROOT,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


def test_the_first_long_ad_of_a_process_is_evaluated_as_every_later_one() -> None:
    """The demo's 60 jobs each say ``(TARGET.Arch == "X86_64") && ... && stringListMember(
    TARGET.GLIDEIN_Site, DESIRED_Sites)``: without a target, undefined && ... && false is false,
    in the first read of the file as in the second (the first ad was error)."""
    history = DEMO / "history.ads"
    jobs = history.read_text().count("\nGlobalJobId = ")
    assert jobs == 60
    script = (
        "from probes.sources.classad import Attr, read_ads\n"
        "reads = [read_ads(sys.argv[1], [Attr('Requirements')])[0]['Requirements'].tolist() for _ in range(2)]\n"
        "out(reads)\n"
    )
    assert fresh(script, str(history)) == [[False] * jobs, [False] * jobs]


def test_a_json_dump_read_first_is_evaluated_with_htcondors_functions(tmp_path: Path) -> None:
    dump = tmp_path / "history.json"
    ad = {
        "GlobalJobId": "ap1#1.0#1700000000",
        "DESIRED_Sites": "T2_A,T2_B",
        "Requirements": f"/Expr({UNLISTED} && (TARGET.Memory >= 1))/",  # false && undefined
        "Listed": '/Expr(stringListMember("T2_B", DESIRED_Sites))/',  # a member: true (not error)
    }
    dump.write_text(json.dumps([ad]))
    script = (
        "from probes.sources.classad import Attr, read_ads\n"
        "columns, report = read_ads(sys.argv[1], [Attr('Requirements'), Attr('Listed')])\n"
        "out([columns['Requirements'].tolist(), columns['Listed'].tolist(), len(report.malformed)])\n"
    )
    assert fresh(script, str(dump)) == [[False], [True], 0]


def test_the_expression_workers_first_ad_is_evaluated_with_htcondors_functions(tmp_path: Path) -> None:
    """An ad that calls a regular expression is evaluated in the worker, a process of its own:
    its first ad too (true && false)."""
    path = tmp_path / "history.ads"
    path.write_text(
        'GlobalJobId = "ap1#1.0#1700000000"\n'
        'DESIRED_Sites = "T2_A,T2_B"\n'
        f'Requirements = regexp("^T2_", DESIRED_Sites) && {UNLISTED}\n\n'
    )
    script = (
        "from probes.sources.classad import Attr, read_ads\n"
        "columns, report = read_ads(sys.argv[1], [Attr('Requirements')])\n"
        "out([columns['Requirements'].tolist(), len(report.malformed)])\n"
    )
    assert fresh(script, str(path)) == [[False], 0]


def test_partitions_of_literal_slot_ads_match_with_htcondors_functions(tmp_path: Path) -> None:
    """Slot ads of literals only are read without classad2; the partitions' expressions are
    the first thing parsed. Not at T2_A: ``!false`` is true (``!error`` matched neither slot to
    it)."""
    path = tmp_path / "status.ads"
    path.write_text('Name = "slot1@a"\nGLIDEIN_Site = "T2_A"\n\nName = "slot1@b"\n\n')
    script = (
        "import numpy as np\n"
        "from probes.sources.classad import Attr, read_ads\n"
        "from probes.sources.status import assign_partitions\n"
        "ads, _ = read_ads(sys.argv[1], [Attr('Name')], keep_raw=True)\n"
        "parts = [('elsewhere', '!stringListMember(GLIDEIN_Site, \"T2_A\")'), ('rest', 'true')]\n"
        "out([ads['Name'].tolist(), assign_partitions(ads, np.arange(2), parts).tolist()])\n"
    )
    assert fresh(script, str(path)) == [["slot1@a", "slot1@b"], ["rest", "elsewhere"]]


def test_an_alea_machines_rule_is_evaluated_with_htcondors_functions(metacentrum: Path) -> None:
    """No machine has ``Tags``: the rule is 7 for every class (error kept each class's own
    speed)."""
    script = (
        "from probes.config import parse_config\n"
        "from probes.pipeline.usage import alea_machines\n"
        "rule = 'ifThenElse(stringListMember(\"gpu\", Tags), 3, 7)'\n"
        "machines, _ = alea_machines(sys.argv[1], parse_config({'machines': {'speed_expression': rule}}))\n"
        "out(sorted(set(machines['speed'].tolist())))\n"
    )
    assert fresh(script, str(metacentrum / "NGI_CZ.machines")) == [7.0]


def test_an_ad_made_for_matching_is_evaluated_with_htcondors_functions() -> None:
    """``to_classad``, the idle-job check's ads, as the first thing a process parses."""
    text = f'DESIRED_Sites = "T2_A,T2_B"\nRequirements = {UNLISTED}\n'
    script = "from probes.sources.classad import to_classad\nout(to_classad(sys.argv[1]).eval('Requirements'))\n"
    assert fresh(script, text) is False


@pytest.mark.parametrize("first", ["long", "json"])
def test_reading_ads_does_not_change_how_later_ads_evaluate(first: str, tmp_path: Path) -> None:
    """A read leaves the process as it found it, for the next read: the same ad, by ``-long``
    and by ``-json``, in either order, gives the same values."""
    long_ad = tmp_path / "one.ads"
    long_ad.write_text(f'GlobalJobId = "ap1#1.0#1700000000"\nDESIRED_Sites = "T2_A"\nRequirements = {UNLISTED}\n\n')
    json_ad = tmp_path / "one.json"
    ad = {"GlobalJobId": "ap1#1.0#1700000000", "DESIRED_Sites": "T2_A", "Requirements": f"/Expr({UNLISTED})/"}
    json_ad.write_text(json.dumps([ad]))
    order = [long_ad, json_ad] if first == "long" else [json_ad, long_ad]
    script = (
        "from probes.sources.classad import Attr, read_ads\n"
        "out([read_ads(p, [Attr('Requirements')])[0]['Requirements'].tolist() for p in sys.argv[1:]])\n"
    )
    assert fresh(script, *map(str, order)) == [[False], [False]]
