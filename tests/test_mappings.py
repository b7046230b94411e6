"""Every record kind is declared once, in mappings/ (issue 52, point 1): the index templates, the
records' guide, the collector's schema and check, the embedded store's columns and the summaries
are made from the declarations, and adding a field to a kind is one line of its declaration."""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from collector.records import KINDS, SUMMARY_DIMENSIONS, table_records
from collector.schema import record_fault
from collector.sinks.elasticsearch.templates import load_templates
from collector.sinks.sqlite import EmbeddedStore
from collector.summaries.spec import SOURCES
from mappings import DIRECTORY
from mappings.fields import DATES, ID, KEYWORD, MEASURE, TIME, Field, Kind
from mappings.kinds import DECLARED
from mappings.tables import guide_text
from mappings.templates import template_text

ROOT = Path(__file__).resolve().parent.parent

# kind: (the template's version, its digest as load_templates makes it) when this was last changed
TEMPLATES = {
    "slot": (2, "29ef5284ae2397df"),
    "allocation": (3, "35db33fc47a9e3a3"),
    "job": (6, "f4fe98f402540a6e"),
    "fairshare": (2, "8ef682ffa919e3fa"),
    "fairness": (3, "e42f33e2c40787b9"),
    "gap": (2, "5fb7db71d2265421"),
    "priority": (2, "11c8c6cb3ece75ba"),
    "summary": (5, "5a1c195fe75e8570"),
    "gratia": (4, "51d34821b022a25f"),
}


def test_the_templates_and_the_guide_are_what_the_declarations_make() -> None:
    stale = [k for k, kind in DECLARED.items() if (DIRECTORY / f"{k}.json").read_text("utf-8") != template_text(kind)]
    assert stale == [], f"mappings/{{{','.join(stale)}}}.json differ from their declarations: run python -m mappings"
    guide = ROOT / "docs" / "records.md"
    assert guide.read_text("utf-8") == guide_text(DECLARED.values()), "run python -m mappings"
    assert list(DECLARED) == list(KINDS)


def test_a_template_whose_content_changed_has_a_new_version() -> None:
    """The versions drive the indices' migration (collector.sinks.elasticsearch.migration): a
    template whose content changes without one leaves the indices made from it as they were."""
    for kind, template in load_templates().items():
        version, digest = TEMPLATES[kind]
        if template["_meta"]["fairacct_digest"] != digest:
            assert template["version"] > version, (
                f"the {kind} template changed: raise its version in its declaration (mappings/), "
                "then note the new version and digest in TEMPLATES"
            )


def test_the_collector_reads_the_kinds_from_their_declarations() -> None:
    """Hand-checked against the positional tuples collector/records.py held before."""
    assert (KINDS["slot"].id_fields, KINDS["slot"].time_field) == (("pool", "name", "observed_at"), "observed_at")
    assert KINDS["slot"].time_fields == ("observed_at", "glidein_to_retire", "glidein_to_die")
    assert KINDS["gap"].time_fields == ("start", "end", "since", "observed_at")
    assert (KINDS["job"].id_fields, KINDS["job"].labels) == (("job_id", "end"), ("user", "group", "project", "site"))
    assert set(KINDS["job"].measured) == {
        "pool", "resource_name", "walltime_s", "cpus", "memory", "gpus", "cpu_time_s", "penalty_usage",
        "cpu_only_usage", "submitter",
    }  # fmt: skip
    assert KINDS["priority"].labels == ("submitter", "action")
    assert (KINDS["gratia"].id_fields, KINDS["gratia"].time_field) == ((), "EndTime")
    assert SUMMARY_DIMENSIONS == ("pool", "site", "resource_name", "partition", "user", "group", "project", "phase")
    assert SOURCES["job"].dimensions == ("pool", "site", "resource_name", "user", "group", "project", "submitter")
    assert [t.name for t in SOURCES["slot"].totals] == [
        "n_slot_snapshots", "slot_core_hours", "overhead_cu_hours", "overhead_cu_hours_fitting_idle"
    ]  # fmt: skip
    assert SOURCES["slot"].totals[1].fields == ("total_cpus", "interval_s")
    assert SOURCES["slot"].totals[3].where == "fits_idle"


def test_what_the_summaries_group_by_and_sum_is_declared() -> None:
    """A sum names measures of the kind it sums; a summary holds every dimension it groups by."""
    summary = {f.name for f in DECLARED["summary"].fields}
    for kind, source in SOURCES.items():
        measures = DECLARED[kind].named(MEASURE)
        summed = {f for t in source.totals for f in (*t.fields, *((t.where,) if t.where else ()))}
        assert summed <= set(measures), (kind, summed - set(measures))
        assert set(source.dimensions) <= summary, (kind, set(source.dimensions) - summary)


@pytest.mark.parametrize(
    ("fields", "dimensions", "message"),
    [
        ((Field("a", KEYWORD, role=ID), Field("a", KEYWORD)), (), "fields declared twice: ['a']"),
        ((Field("a", KEYWORD, role=ID),), (), "expected one field of role DATES, got []"),
        (
            (Field("t", TIME, role=DATES), Field("a", KEYWORD)),
            ("a",),
            "dimensions ['a'] are not fields of role DIMENSION",
        ),
    ],
)
def test_a_declaration_that_cannot_be_is_refused(
    fields: tuple[Field, ...], dimensions: tuple[str, ...], message: str
) -> None:
    with pytest.raises(ValueError, match=re.escape(f"record kind 'k': {message}")):
        Kind("k", 1, "", fields, dimensions)


ADDED = '        Field("cpu_efficiency", DOUBLE, "ratio", MEASURE, COLUMN, "CPU time over cores x wall time."),\n'

PICKED_UP = """
import json, logging, sys
logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(message)s")
import mappings
from collector.records import KINDS
from collector.schema import record_fault
from collector.sinks.elasticsearch.templates import load_templates
from collector.sinks.sqlite import EmbeddedStore
with EmbeddedStore(sys.argv[1]) as store:
    columns = [r[1] for r in store._db.execute("PRAGMA table_info(job)")]
    total = store._db.execute("SELECT sum(cpu_efficiency) FROM job").fetchone()[0]
print(json.dumps({
    "mappings": mappings.__file__,
    "property": load_templates(directory=mappings.DIRECTORY)["job"]["template"]["mappings"]["properties"].get(
        "cpu_efficiency"
    ),
    "measured": "cpu_efficiency" in KINDS["job"].measured,
    "fault": record_fault("job", {"cpu_efficiency": "high"}),
    "column": "cpu_efficiency" in columns,
    "total": total,
}))
"""


def test_a_field_added_to_a_kind_reaches_the_template_the_check_the_store_and_the_guide(tmp_path: Path) -> None:
    """The proof of "one line": a copy of mappings/ whose job declaration has one more line (a
    measure the embedded store keeps as a column), first on the path of a new interpreter."""
    store = tmp_path / "store.sqlite"
    docs = [
        {"id": f"j{i}", "kind": "job", "timestamp": "2026-11-21T10:00:00Z", "cpus": 1.0, "cpu_efficiency": e}
        for i, e in enumerate((0.5, 0.25))
    ]
    with EmbeddedStore(store) as written:  # as this release writes it: the field in the documents only
        written.send("job", docs)
    assert record_fault("job", {"cpu_efficiency": "high"}) is None  # a field not declared takes any scalar
    copy = tmp_path / "tree"
    shutil.copytree(DIRECTORY, copy / "mappings", ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "docs").mkdir()
    shutil.copy(ROOT / "docs" / "records.md", copy / "docs")
    declaration = copy / "mappings" / "job_kinds.py"
    lines = declaration.read_text("utf-8").splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if line.lstrip().startswith('Field("cpu_time_s"')) + 1
    declaration.write_text("".join([*lines[:at], ADDED, *lines[at:]]), "utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(copy), str(ROOT)])}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env, cwd=tmp_path)

    checked = run("-m", "mappings", "--check")
    assert checked.returncode == 1 and sorted(checked.stderr.splitlines()) == [
        f"{copy / 'docs' / 'records.md'}: differs from what the declarations make (run `python -m mappings`)",
        f"{copy / 'mappings' / 'job.json'}: differs from what the declarations make (run `python -m mappings`)",
    ], checked.stderr
    assert run("-m", "mappings").returncode == 0
    job = json.loads((copy / "mappings" / "job.json").read_text("utf-8"))
    assert job["template"]["mappings"]["properties"]["cpu_efficiency"] == {"type": "double"}
    row = "| `cpu_efficiency` | double | ratio | measure | column | CPU time over cores x wall time. |"
    assert row in (copy / "docs" / "records.md").read_text("utf-8").splitlines()
    done = run("-c", PICKED_UP, str(store))
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen == {
        "mappings": str(copy / "mappings" / "__init__.py"),
        "property": {"type": "double"},
        "measured": True,
        "fault": "field 'cpu_efficiency': expected a double, got 'high'",
        "column": True,
        "total": 0.75,  # 0.5 + 0.25, filled from the documents when the store was opened
    }
    assert done.stderr.splitlines() == [
        f"{store}: embedded store brought up to the declared columns: job: 1 column(s) added from the documents "
        "(cpu_efficiency)"
    ]
    with sqlite3.connect(store) as db:  # the column stays, and this release's interpreter ignores it
        assert "cpu_efficiency" in {r[1] for r in db.execute("PRAGMA table_info(job)")}
    db.close()


def test_a_records_bytes_are_as_before() -> None:
    """A record's JSON, its fields' names and order, as the tuples of collector/records.py made it
    (the bytes and the id the code before the declarations wrote); 1795300000 is 22:26:40 UTC."""
    frame = pd.DataFrame(
        {"pool": ["p"], "name": ["slot1@n1"], "observed_at": [1795300000], "glidein_to_retire": [1795303600],
         "glidein_to_die": [1795307200], "site": ["S"]}
    )  # fmt: skip
    records = table_records("slot", frame, probe="probe")
    assert records.docs == (
        b'{"pool":"p","name":"slot1@n1","observed_at":1795300000,"glidein_to_retire":1795303600,'
        b'"glidein_to_die":1795307200,"site":"S","observed_at_iso":"2026-11-21T22:26:40Z",'
        b'"glidein_to_retire_iso":"2026-11-21T23:26:40Z","glidein_to_die_iso":"2026-11-22T00:26:40Z",'
        b'"id":"ce7b3cfdd0f4754db3930a8cb08ccc41","kind":"slot","schema_version":1,"probe":"probe",'
        b'"timestamp":"2026-11-21T22:26:40Z"}',
    )
    assert dict(records.columns) == {"timestamp": ("2026-11-21T22:26:40Z",), "site": ("S",), "pool": ("p",)}
