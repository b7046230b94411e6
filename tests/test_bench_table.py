"""`make bench`'s table (benchmarks/run.py): ratios against targets and their verdicts, as
printed and pasted into benchmarks/README.md. Nothing is measured here: benchmarks are never
part of the tests."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent


def _run_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_run", ROOT / "benchmarks" / "run.py")
    assert spec is not None and spec.loader is not None
    module = sys.modules.setdefault(spec.name, importlib.util.module_from_spec(spec))  # its dataclasses look it up
    spec.loader.exec_module(module)
    return module


def test_each_row_is_its_cost_over_its_anchor_against_its_target() -> None:
    run = _run_module()
    rows = [
        # 0.9 / 0.6 = 1.5: at the target, which passes
        run.Row("jobs --json", 0.9, "the reader", 0.6, "CPU-s", 1.5),
        # 22 / 20 = 1.1 > 1
        run.Row("ingest", 22.0, "one core", 20.0, "us", 1.0, "44,500 records/s"),
        # shown, no target
        run.Row("reader, an ad", 8.6, "parseAds", 60.0, "CPU-us", None),
        # no anchor in this run (no --old): no ratio, no verdict
        run.Row("cycle", 0.66, "the old revision (--old REV)", None, "CPU-s", 1.0),
    ]
    assert [r.verdict for r in rows] == ["PASS", "FAIL", "-", "-"]
    assert rows[3].ratio is None
    lines = run.table(rows).splitlines()
    assert lines[0] == "| row | measured | anchor | anchor's | ratio | target | verdict | note |"
    assert lines[2] == "| jobs --json | 0.9 CPU-s | the reader | 0.6 CPU-s | 1.50 | <= 1.5 | PASS |  |"
    assert lines[3] == "| ingest | 22 us | one core | 20 us | 1.10 | <= 1 | FAIL | 44,500 records/s |"
    assert lines[4] == "| reader, an ad | 8.6 CPU-us | parseAds | 60 CPU-us | 0.14 | - | - |  |"
    assert lines[5] == "| cycle | 0.66 CPU-s | the old revision (--old REV) | - | - | <= 1 | - |  |"
