"""Records encoded once: the same documents as the tables made before, the carried fields as the
documents hold them, and a value object nobody can change."""

from __future__ import annotations

import json
from dataclasses import FrozenInstanceError
from typing import Any

import numpy as np
import orjson
import pandas as pd
import pytest

from collector.encoded import Encoded
from collector.outbox import FlushResult
from collector.records import KINDS, SCHEMA_VERSION, iso_utc, record_id, table_records
from probes.config import load_config
from probes.pipeline.overhead import overhead_report
from probes.sources.history import read_history
from probes.sources.status import read_status

from ..conftest import ROOT


def _docs_as_before(kind: str, frame: pd.DataFrame, probe: str) -> list[dict[str, Any]]:
    """The documents as ``table_docs`` made them before records were encoded once: pandas' JSON
    decoded, then the times, the id and the schema's fields set on each dict."""
    spec = KINDS[kind]
    ids = [record_id(kind, *key) for key in frame[list(spec.id_fields)].itertuples(index=False, name=None)]
    out = frame.drop(columns=[c for c in ("source", "line") if c in frame.columns])
    iso = {f"{c}_iso": iso_utc(out[c]) for c in spec.time_fields if c in out.columns}
    docs: list[dict[str, Any]] = json.loads(out.to_json(orient="records", double_precision=15))
    stamps = iso[f"{spec.time_field}_iso"]
    for i, (doc, id_) in enumerate(zip(docs, ids, strict=True)):
        for name, values in iso.items():
            doc[name] = values[i]
        doc.update(id=id_, kind=kind, schema_version=SCHEMA_VERSION, probe=probe, timestamp=stamps[i])
    return docs


def _demo_tables() -> dict[str, pd.DataFrame]:
    config = load_config(ROOT / "config/demo.toml")
    snapshot, _ = read_status(config.sources.status_files, config.slot_reading())
    report = overhead_report(snapshot, config)
    jobs, _ = read_history(config.sources.history, config.job_reading())
    return {"slot": report.slots, "allocation": report.bills, "job": jobs}


@pytest.mark.parametrize("kind", ["slot", "allocation", "job"])
def test_a_table_encoded_once_gives_the_documents_it_gave_before(kind: str) -> None:
    frame = _demo_tables()[kind]
    records = table_records(kind, frame, probe="test")
    before = _docs_as_before(kind, frame, "test")
    decoded = records.decoded()
    assert decoded == before
    assert [list(d) for d in decoded] == [list(d) for d in before]  # the keys in the same order too
    assert records.ids == tuple(d["id"] for d in before)
    assert all(b"\n" not in d for d in records.docs)
    for name, values in records.columns.items():  # what is carried is what the documents hold
        assert name in KINDS[kind].carried
        assert list(values) == [d.get(name) for d in before], name
        assert [type(v) for v in values] == [type(d.get(name)) for d in before], name


def test_values_json_changes_are_carried_as_json_has_them() -> None:
    """Floats to 15 digits, missing values as None, text with a quote, a brace and a newline,
    a column of objects (whose records pandas must split itself)."""
    frame = pd.DataFrame(
        {
            "job_id": ["1.0", "2.0", "3.0"],
            "end": [1795300000.0, 1795300060.5, np.nan],
            "user": ['a"},{"job_id":"x', "b\nc", None],
            "cpus": [1, 2, 3],
            "walltime_s": [0.1 + 0.2, np.nan, 3.0],
            "extra": [[{"job_id": 1}, {"job_id": 2}], [], None],
        }
    )
    records = table_records("job", frame, probe="p")
    assert records.decoded() == _docs_as_before("job", frame, "p")
    assert records.column("walltime_s") == (0.3, None, 3.0) and records.column("user")[1] == "b\nc"
    assert records.column("timestamp") == ("2026-11-21T22:26:40Z", "2026-11-21T22:27:40Z", None)
    assert records.column("not carried") == (None, None, None)


def test_encoded_records_are_joined_picked_and_kept_newest() -> None:
    a = Encoded.of([{"id": "x", "timestamp": "t1"}, {"id": "y", "timestamp": "t2"}], ["timestamp"])
    b = Encoded.of([{"id": "x", "timestamp": "t3", "n": 1}], ["timestamp"])
    both = a + b
    assert both.ids == ("x", "y", "x") and both.column("timestamp") == ("t1", "t2", "t3")
    newest = both.newest()
    assert newest.ids == ("y", "x") and newest.decoded()[1] == {"id": "x", "timestamp": "t3", "n": 1}
    assert a.newest() is a and both.pick(range(3)) is both
    assert both.pick([2, 0]).ids == ("x", "x") and both.pick(range(1, 3)).column("timestamp") == ("t2", "t3")
    assert both.json_array() == b"[" + b",".join(both.docs) + b"]"
    assert Encoded.join([]) == Encoded() and not Encoded() and len(both) == 3


@pytest.mark.parametrize(
    ("make", "error", "match"),
    [
        (lambda: Encoded.of([{"timestamp": "t"}]), ValueError, "no string id, got None"),
        (lambda: Encoded.of([{"id": 7}]), ValueError, "no string id, got 7"),
        (lambda: Encoded(("a",), ()), ValueError, "1 ids, 0 documents"),
        (lambda: Encoded(("a",), (b"{}",), {"t": (1, 2)}), ValueError, r"columns of \[2\] values"),
        (lambda: Encoded.of([{"id": "a", "v": 2**64}]), TypeError, "64-bit"),
    ],
)
def test_what_cannot_be_encoded_says_why(make: Any, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        make()


def test_records_and_flush_results_cannot_be_changed() -> None:
    records = Encoded.of([{"id": "a", "timestamp": "t"}], ["timestamp"])
    with pytest.raises(FrozenInstanceError):
        records.ids = ()  # type: ignore[misc]
    with pytest.raises(TypeError):
        records.columns["timestamp"] = ("u",)  # type: ignore[index]
    result = FlushResult()
    assert result.sent["slot"] == 0 and result.errors == ()
    with pytest.raises(TypeError):
        result.sent["slot"] = 1  # type: ignore[index]
    assert orjson.loads(records.docs[0]) == {"id": "a", "timestamp": "t"}
