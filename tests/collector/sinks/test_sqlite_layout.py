"""The embedded store's layout (issue 39, point 1): ``PRAGMA user_version`` is its layout
version; a store an earlier release wrote is brought up in place when opened, and said so in
one log line; a store of a later release's layout is refused with one line naming both. Layout 2
(issue 54, point 11): a version column in every table, and a lease table."""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path
from typing import Any

import orjson
import pytest

from collector.errors import StoreError
from collector.records import VERSION, encode_docs
from collector.sinks.sqlite import EmbeddedStore
from collector.sinks.sqlite_layout import LAYOUT_VERSION


def job(i: int, cpus: float, walltime_s: float) -> dict[str, Any]:
    return {
        "id": f"job-{i}", "kind": "job", "schema_version": 1, "probe": "p", "timestamp": f"2026-11-2{i}T10:00:00Z",
        "user": "alice", "group": None, "project": "atlas", "site": "FNAL", "pool": "demo", "cpus": cpus,
        "walltime_s": walltime_s, "memory": 2048.0,
    }  # fmt: skip


def layout_0(path: Path, docs: list[dict[str, Any]]) -> None:
    """A store as releases before layouts had numbers left it: the job table with its labels as
    columns and an index on each, its measured fields in the documents only, user_version 0."""
    with sqlite3.connect(path) as db:
        db.execute(
            'CREATE TABLE job (id TEXT PRIMARY KEY, timestamp TEXT, "user" TEXT, "group" TEXT, "project" TEXT, '
            '"site" TEXT, doc TEXT NOT NULL)'
        )
        for c in ("user", "group", "project", "site"):
            db.execute(f'CREATE INDEX "job_{c}" ON job("{c}")')
        db.executemany(
            "INSERT INTO job VALUES (?, ?, ?, ?, ?, ?, ?)",
            [(d["id"], d["timestamp"], d["user"], d["group"], d["project"], d["site"], orjson.dumps(d).decode())
             for d in docs],
        )  # fmt: skip
    db.close()


def test_a_store_of_the_earlier_layout_is_migrated_in_place_when_opened(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "store.sqlite"
    docs = [job(1, 4.0, 3600.0), job(2, 8.0, 1800.0), job(3, 1.0, 60.0)]
    layout_0(path, docs)
    with caplog.at_level(logging.WARNING, logger="fairacct.store"), EmbeddedStore(path) as store:
        assert store._db.execute("PRAGMA user_version").fetchone() == (LAYOUT_VERSION,) == (2,)
        # the measured fields are columns now, filled from the documents: 4*3600 + 8*1800 + 1*60 core-seconds
        assert store._db.execute("SELECT sum(cpus * walltime_s), count(memory) FROM job").fetchone() == (28860.0, 3)
        indexes = {r[1] for r in store._db.execute("PRAGMA index_list(job)")}
        assert indexes == {"sqlite_autoindex_job_1", "job_timestamp"}  # the label indexes went
        assert store.count("job") == 3 and [d["cpus"] for d in store.query("job")] == [4.0, 8.0, 1.0]
    (line,) = [r.getMessage() for r in caplog.records]
    assert line == (
        f"{path}: embedded store migrated from layout 0 to 2: job: 10 column(s) added from the documents (submitter, "
        "cpus, memory, gpus, walltime_s, cpu_time_s, resource_name, pool, penalty_usage, cpu_only_usage), "
        "job: 4 unused index(es) dropped; a version column in job"
    )
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="fairacct.store"), EmbeddedStore(path) as store:
        store.send("job", [job(4, 2.0, 10.0)])
        assert store.count("job") == 4
    assert caplog.records == []  # migrated once


def test_a_new_store_has_the_layout_and_says_nothing(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="fairacct.store"), EmbeddedStore(tmp_path / "s.sqlite") as store:
        assert store._db.execute("PRAGMA user_version").fetchone() == (2,)
        store.send("job", [job(1, 4.0, 3600.0)])
        assert store._db.execute("SELECT cpus, walltime_s FROM job").fetchall() == [(4.0, 3600.0)]
    assert caplog.records == []


def test_a_store_of_a_later_layout_is_refused_and_left_as_it_is(tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite"
    layout_0(path, [job(1, 4.0, 3600.0)])
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA user_version = 7")
    db.close()
    with pytest.raises(StoreError) as refused:
        EmbeddedStore(path)
    assert str(refused.value) == (
        f"{path}: the embedded store has layout 7, newer than this fairacct's 2 (a later release wrote it): upgrade "
        "fairacct, or point store.url at another file; nothing was read or written"
    )
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone() == (7,)
        assert {r[1] for r in db.execute("PRAGMA table_info(job)")} == {
            "id", "timestamp", "user", "group", "project", "site", "doc"
        }  # fmt: skip
    db.close()


def test_a_store_of_layout_1_gets_its_version_column_and_lease_table(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A store a build of layout 1 wrote: its records keep their documents and are replaced by any
    copy (no version), and versions guard what is written after."""
    path = tmp_path / "store.sqlite"
    with EmbeddedStore(path) as store:
        store.send("job", [job(1, 4.0, 3600.0), job(2, 8.0, 1800.0)])
        store._db.execute("DROP TABLE lease")
        store._db.execute("ALTER TABLE job DROP COLUMN version")
        store._db.execute("PRAGMA user_version = 1")
    with caplog.at_level(logging.WARNING, logger="fairacct.store"), EmbeddedStore(path) as store:
        assert store._db.execute("PRAGMA user_version").fetchone() == (2,)
        assert store._db.execute("SELECT id, version FROM job ORDER BY id").fetchall() == [
            ("job-1", None), ("job-2", None)
        ]  # fmt: skip
        assert store._db.execute("SELECT count(*) FROM lease").fetchone() == (0,)
        newer = store.send_encoded("job", encode_docs("job", [job(1, 16.0, 3600.0)]).carrying(VERSION, 20))
        older = store.send_encoded("job", encode_docs("job", [job(1, 2.0, 3600.0)]).carrying(VERSION, 10))
        assert (newer.superseded, older.superseded, older.acked) == ([], ["job-1"], ["job-1"])
        assert [d["cpus"] for d in store.query("job")] == [16.0, 8.0]
    (line,) = [r.getMessage() for r in caplog.records]
    assert line == f"{path}: embedded store migrated from layout 1 to 2: a version column in job"


def test_a_store_of_this_layout_gets_a_column_declared_since_it_was_written(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 52 point 1: which fields are columns is the kinds' declarations' (mappings/), not a
    layout: a store of layout 2 whose job table lacks a column its declaration names (as if the
    field were declared a column after the file was written) gets it when opened, filled from the
    documents, in one log line; the next open says nothing."""
    path = tmp_path / "store.sqlite"
    with EmbeddedStore(path) as store:
        store.send("job", [job(1, 4.0, 3600.0), job(2, 8.0, 1800.0)])
        store._db.execute("ALTER TABLE job DROP COLUMN walltime_s")
    with caplog.at_level(logging.WARNING, logger="fairacct.store"), EmbeddedStore(path) as store:
        assert store._db.execute("PRAGMA user_version").fetchone() == (2,)
        # 4 x 3600 + 8 x 1800 core-seconds, from the column made from the documents
        assert store._db.execute("SELECT sum(cpus * walltime_s) FROM job").fetchone() == (28800.0,)
        store.send("job", [job(3, 1.0, 60.0)])
        assert store._db.execute("SELECT walltime_s FROM job WHERE id = 'job-3'").fetchone() == (60.0,)
    (line,) = [r.getMessage() for r in caplog.records]
    assert line == (
        f"{path}: embedded store brought up to the declared columns: job: 1 column(s) added from the documents "
        "(walltime_s)"
    )
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="fairacct.store"), EmbeddedStore(path):
        pass
    assert caplog.records == []
