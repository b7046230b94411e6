"""The outbox: records wait durably until a sink acknowledges them."""

from __future__ import annotations

import gzip
import sqlite3
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson
import pandas as pd

from collector.encoded import Encoded
from collector.errors import SinkError
from collector.outbox import Outbox, Parcel
from collector.records import KINDS, record_id, table_docs
from collector.sinks.base import SendResult
from collector.sinks.sqlite import EmbeddedStore
from probes.config import load_config
from probes.pipeline.overhead import overhead_report
from probes.sources.status import read_status

from ..conftest import ROOT
from .conftest import opened_at_once


def slot_docs() -> list[dict]:  # type: ignore[type-arg]
    config = load_config(ROOT / "config/demo.toml")
    snapshot, _ = read_status(config.sources.status_files, config.slot_reading())
    return table_docs("slot", overhead_report(snapshot, config).slots, probe="test")


def test_an_outage_only_grows_the_outbox(tmp_path: Path) -> None:
    """While the store cannot be written (another process holds its write lock), the records
    wait; once it can, every one is delivered, once."""
    docs = slot_docs()
    store_path = tmp_path / "store.sqlite"
    with Outbox(tmp_path / "outbox.sqlite", clock=lambda: 1795300000.0) as outbox:
        outbox.commit({"slot": docs}, {"history:x": {"end": 5, "ids": []}})
        with EmbeddedStore(store_path, timeout=0.05) as store:
            store.count("slot")  # create the table
            blocker = sqlite3.connect(store_path, isolation_level=None)
            blocker.execute("BEGIN EXCLUSIVE")
            result = outbox.flush(store)
            assert (result.sent["slot"], result.retried["slot"]) == (0, 36)
            assert "database is locked" in result.errors[0]
            status = outbox.status()
            assert status.depth == {"slot": 36} and status.oldest == 1795300000.0
            blocker.execute("ROLLBACK")
            blocker.close()
            result = outbox.flush(store)
            assert result.sent["slot"] == 36 and outbox.status().depth == {}
            assert store.count("slot") == 36
        assert outbox.checkpoint("history:x") == {"end": 5, "ids": []}


def test_a_record_waiting_twice_is_stored_once_as_its_newest_copy(tmp_path: Path) -> None:
    """Both copies wait; batches go oldest first, so the newer copy is stored last, and a batch
    holding both sends only the newer."""
    docs = slot_docs()
    newer = [dict(d, interval_s=12.5) for d in docs[:10]]
    with Outbox(tmp_path / "outbox.sqlite") as outbox, EmbeddedStore(tmp_path / "store.sqlite") as store:
        outbox.commit({"slot": docs}, {})
        outbox.commit({"slot": newer}, {})
        assert outbox._db.execute("PRAGMA page_size").fetchone() == (65536,)  # a new file: parcels in 64 KiB pages
        assert outbox.status().depth == {"slot": 46}
        assert outbox.flush(store, batch_size=7).sent["slot"] == 46  # 36 then the 10 again, in batches of 7
        assert store.count("slot") == 36
        assert sorted(d["interval_s"] for d in store.query("slot")) == [12.5] * 10 + [300.0] * 26
        outbox.commit({"slot": docs}, {})
        outbox.commit({"slot": newer[:3]}, {})
        sent: list[list[dict]] = []  # type: ignore[type-arg]

        class Recording:
            def send_encoded(self, kind: str, records: Encoded) -> SendResult:
                return self.send(kind, records.decoded())

            def send(self, kind: str, batch: list[dict]) -> SendResult:  # type: ignore[type-arg]
                sent.append(batch)
                return store.send(kind, batch)

        assert outbox.flush(Recording()).sent["slot"] == 36  # type: ignore[arg-type]
        assert [len(b) for b in sent] == [36] and outbox.status().depth == {}
        assert sorted(d["interval_s"] for d in store.query("slot")) == [12.5] * 3 + [300.0] * 33


def test_a_flush_says_which_records_the_store_held_already(tmp_path: Path, empty_store: Any) -> None:
    """Issue 39, point 5: the same 36 slot records sent again (a backfill) are stored once, and
    the store says so: the embedded store by the ids it finds in its write transaction,
    Elasticsearch (osmem) by each bulk item's ``result`` (created, or updated)."""
    docs = slot_docs()
    with Outbox(tmp_path / "outbox.sqlite") as outbox:
        outbox.commit({"slot": docs[:30]}, {})
        first = outbox.flush(empty_store)
        outbox.commit({"slot": docs}, {})  # 30 read again, 6 not stored yet
        second = outbox.flush(empty_store)
    assert (first.sent["slot"], first.new["slot"], first.already_stored["slot"], first.untold("slot")) == (30, 30, 0, 0)
    assert (second.sent["slot"], second.new["slot"], second.already_stored["slot"], second.untold("slot")) == (
        36,
        6,
        30,
        0,
    )
    assert empty_store.count("slot") == 36
    again = empty_store.send("slot", docs[28:32])
    assert again.created == [] and sorted(again.existed) == sorted(d["id"] for d in docs[28:32])


def test_ids_come_from_the_facts() -> None:
    assert record_id("slot", "demo", "slot1@a", 1795300000) == record_id("slot", "demo", "slot1@a", 1795300000.0)
    assert record_id("slot", "demo", "slot1@a", 1795300000) != record_id("slot", "demo", "slot1@a", 1795300300)
    assert record_id("slot", "demo", "x") != record_id("allocation", "demo", "x")
    docs = slot_docs()
    assert len({d["id"] for d in docs}) == len(docs)
    assert {d["kind"] for d in docs} == {"slot"} and all(d["schema_version"] == 1 for d in docs)
    assert set(KINDS) == {"slot", "allocation", "job", "fairshare", "fairness", "gap", "priority", "summary", "gratia"}


def test_every_id_holds_the_time_of_its_record() -> None:
    """A fact made again names the same month with the same id (issue 54, point 7): every kind
    made from tables has its time field among its id fields (a gap's end was not)."""
    made = {k: spec for k, spec in KINDS.items() if spec.id_fields}
    assert set(made) == set(KINDS) - {"gratia"}  # Gratia's id is a hash of the content, EndTime with it
    assert {k: s.time_field for k, s in made.items() if s.time_field not in s.id_fields} == {}
    assert KINDS["gap"].id_fields == ("pool", "name", "start", "end")
    gap = {"pool": "demo", "name": "slot1@node1", "start": 1795300000, "end": 1795300300}
    frame = pd.DataFrame([gap, dict(gap, end=1795300600)])  # one stretch, its end moved: two facts
    ids = [d["id"] for d in table_docs("gap", frame, probe="p")]
    assert ids == [record_id("gap", "demo", "slot1@node1", 1795300000, e) for e in (1795300300, 1795300600)]
    assert len(set(ids)) == 2


def test_the_store_answers_queries_by_time(tmp_path: Path) -> None:
    docs = slot_docs()
    early = [dict(d, id=d["id"] + "e", timestamp="2026-10-01T00:00:00Z") for d in docs[:5]]
    with EmbeddedStore(tmp_path / "store.sqlite") as store:
        store.send("slot", docs + early)
        assert len(store.query("slot")) == 41
        assert len(store.query("slot", since="2026-11-01T00:00:00Z")) == 36
        assert len(store.query("slot", until="2026-11-01T00:00:00Z")) == 5
        assert [d["id"] for d in store.query("slot", limit=2)] == sorted(d["id"] for d in early)[:2]
        # a reader in another connection sees the data while the writer is open (WAL)
        with sqlite3.connect(tmp_path / "store.sqlite") as reader:
            assert reader.execute("SELECT count(*) FROM slot WHERE site = 'UCSD'").fetchone()[0] > 0


def test_a_record_replaced_while_its_older_copy_is_sent_is_not_lost(tmp_path: Path) -> None:
    """The flush holds no transaction while the sink works: a cycle may replace a waiting record
    meanwhile. The acknowledgement of the older copy must not delete the newer one."""
    path = tmp_path / "outbox.sqlite"
    sent: list[list[dict]] = []  # type: ignore[type-arg]

    class ReplacingSink:
        def send_encoded(self, kind: str, records: Encoded) -> SendResult:
            return self.send(kind, records.decoded())

        def send(self, kind: str, docs: list[dict]) -> SendResult:  # type: ignore[type-arg]
            sent.append(docs)
            if len(sent) == 1:  # a cycle commits a newer copy of the first record meanwhile
                with Outbox(path) as other:
                    other.commit({"slot": [{**docs[0], "interval_s": 12.5}]}, {})
            return SendResult(acked=[d["id"] for d in docs])

    docs = slot_docs()
    with Outbox(path) as outbox:
        outbox.commit({"slot": docs}, {})
        outbox.flush(ReplacingSink())  # type: ignore[arg-type]
        assert outbox.status().depth == {}
        assert [len(b) for b in sent] == [36, 1] and sent[1][0]["interval_s"] == 12.5  # the newer copy, sent too


class _HalfSink:
    """Acknowledges the first half of a batch, refuses one record, asks to retry the rest."""

    def __init__(self) -> None:
        self.calls = 0

    def send_encoded(self, kind: str, records: Encoded) -> SendResult:
        return self.send(kind, records.decoded())

    def send(self, kind: str, docs: Any) -> SendResult:
        self.calls += 1
        ids = [d["id"] for d in docs]
        if self.calls > 1:
            return SendResult(acked=ids)
        half = len(ids) // 2
        return SendResult(
            acked=ids[:half], rejected={ids[half]: "mapping conflict"}, retry=dict.fromkeys(ids[half + 1 :], "429")
        )

    def close(self) -> None: ...


def test_parcels_are_sent_and_rewritten_with_what_is_left(tmp_path: Path) -> None:
    docs = [{"id": f"r{i}", "timestamp": "2026-11-21T14:00:00Z"} for i in range(10)]
    with Outbox(tmp_path / "outbox.sqlite") as outbox:
        assert outbox.commit_parcels([Parcel.encoded("job", docs[:6])]) == 6
        outbox._db.execute(  # as an earlier collector kept a request's gzip-compressed array: read too
            "INSERT INTO parcel(kind, count, docs, encoding, enqueued_at) VALUES ('job', 4, ?, 'gzip', 0)",
            (gzip.compress(orjson.dumps(docs[6:])),),
        )
        assert outbox.status().depth == {"job": 10}
        sink = _HalfSink()
        result = outbox.flush(sink, batch_size=100, max_batches=1)  # type: ignore[arg-type]
        assert (result.sent["job"], result.dead["job"], result.retried["job"]) == (5, 1, 4)
        assert outbox.status().depth == {"job": 4} and outbox.dead_letters()[0]["id"] == "r5"
        result = outbox.flush(sink)  # type: ignore[arg-type]
        assert result.sent["job"] == 4 and outbox.status().depth == {}


def test_the_store_keeps_each_value_as_it_comes_or_as_text(tmp_path: Path) -> None:
    """The rows are built a column at a time; a column with one odd value is converted value by
    value: text columns hold text (``str()``), measured columns numbers and text as they are,
    anything else as JSON. A record that cannot be stored is refused alone, never its batch."""
    base = {"timestamp": "2026-11-21T14:00:00Z", "partition": "p"}
    docs = [
        dict(base, id="a", site="UCSD", total_cpus=2),
        dict(base, id="b", site=7, total_cpus=1.5),
        dict(base, id="c", site=True, total_cpus=True),
        dict(base, id="d", total_cpus="12"),
        dict(base, id="e", site=["x"], total_cpus={"n": 1}),
    ]
    with EmbeddedStore(tmp_path / "store.sqlite") as store:
        assert store.send("slot", docs).acked == ["a", "b", "c", "d", "e"]
        assert store.send("slot", docs[:2]).acked == ["a", "b"]  # again: replaced, not added
        assert [d["id"] for d in store.query("slot")] == ["a", "b", "c", "d", "e"]
    with sqlite3.connect(tmp_path / "store.sqlite") as db:
        rows = db.execute("SELECT id, site, typeof(total_cpus), total_cpus FROM slot ORDER BY id").fetchall()
    assert rows == [
        ("a", "UCSD", "integer", 2),
        ("b", "7", "real", 1.5),
        ("c", "True", "integer", 1),
        ("d", None, "text", "12"),
        ("e", "['x']", "text", '{"n":1}'),
    ]
    # a record that cannot be stored is refused by itself; the others of its batch are stored
    with EmbeddedStore(tmp_path / "other.sqlite") as store:
        sent = store.send("slot", [dict(base, id="f"), {"timestamp": "2026-11-21T14:00:00Z"}])
        assert sent.acked == ["f"] and sent.rejected == {
            "None": "a slot record the embedded store cannot hold (a record to encode has no string id, got None)"
        }
        big = store.send("slot", [dict(base, id="g", total_cpus=2**64), dict(base, id="h", total_cpus=2**63 - 1)])
        assert big.acked == ["h"] and "64" in big.rejected["g"]  # orjson or SQLite says it
        assert sorted(d["id"] for d in store.query("slot")) == ["f", "h"]


def test_a_flush_writes_through_the_writer_it_is_given(tmp_path: Path) -> None:
    """The collector's flusher hands what a flush writes to the outbox's one writer thread: with
    a writer given, the flushing connection writes nothing (here it cannot: query_only), the
    writer's outbox deletes, counts attempts and keeps dead letters."""
    path = tmp_path / "outbox.sqlite"
    docs = [{"id": f"r{i}", "timestamp": "2026-11-21T14:00:00Z"} for i in range(10)]
    with Outbox(path) as reader, Outbox(path) as writer:
        writer.commit({"job": docs[:4]}, {})
        writer.commit_parcels([Parcel.encoded("job", docs[4:])])
        reader._db.execute("PRAGMA query_only = 1")
        writes: list[str] = []

        def write(fn: Any) -> object:
            writes.append(type(fn).__name__)
            return fn(writer)

        sink = _HalfSink()
        result = reader.flush(sink, batch_size=100, writer=write)  # type: ignore[arg-type]
        # r0-r9 in one batch: r0-r4 taken, r5 refused, r6-r9 to retry: they wait for the next
        # flush, not for the next batch of this one, which would post them again at once
        assert (result.sent["job"], result.dead["job"], result.retried["job"]) == (5, 1, 4)
        assert writes == ["partial"] and writer.status().depth == {"job": 4}
        result = reader.flush(sink, batch_size=100, writer=write)  # type: ignore[arg-type]
        assert (result.sent["job"], result.dead["job"], result.retried["job"]) == (4, 0, 0)
        assert writes == ["partial"] * 2
        assert writer.status().depth == {} and [d["id"] for d in writer.dead_letters()] == ["r5"]

        class Down:
            def send_encoded(self, kind: str, records: Encoded) -> SendResult:
                return self.send(kind, records.decoded())

            def send(self, kind: str, docs: Any) -> SendResult:
                raise SinkError("connection refused")

        writer.commit({"job": docs[:1]}, {})
        assert reader.flush(Down(), writer=write).retried["job"] == 1  # type: ignore[arg-type]
        assert len(writes) == 3
        assert writer._db.execute("SELECT count, attempts, last_error FROM parcel").fetchall() == [
            (1, 1, "connection refused")
        ]


def test_an_outbox_of_the_previous_version_is_read_and_sent(tmp_path: Path) -> None:
    """A file written before cycles committed parcels: a row per record in ``item`` (with its
    index by kind and seq), no parcel table. Its checkpoints are read, its items are sent
    before what is committed after, and its dead letters can be put back."""
    path = tmp_path / "outbox.sqlite"
    docs = slot_docs()
    with sqlite3.connect(path) as db:
        db.executescript(
            """
            CREATE TABLE item (seq INTEGER PRIMARY KEY AUTOINCREMENT, kind TEXT NOT NULL, id TEXT NOT NULL,
                doc TEXT NOT NULL, enqueued_at REAL NOT NULL, attempts INTEGER NOT NULL DEFAULT 0, last_error TEXT,
                UNIQUE (kind, id));
            CREATE INDEX item_kind_seq ON item(kind, seq);
            CREATE TABLE dead_letter (kind TEXT NOT NULL, id TEXT NOT NULL, doc TEXT NOT NULL, error TEXT NOT NULL,
                failed_at REAL NOT NULL, PRIMARY KEY (kind, id));
            CREATE TABLE checkpoint (source TEXT PRIMARY KEY, value TEXT NOT NULL, updated_at REAL NOT NULL);
            """
        )
        db.executemany(
            "INSERT INTO item(kind, id, doc, enqueued_at, attempts, last_error) "
            "VALUES (?, ?, ?, 1795300000.0, 2, 'timeout')",
            [("slot", d["id"], orjson.dumps(d).decode()) for d in docs[:30]],
        )
        db.execute(
            "INSERT INTO dead_letter VALUES ('slot', ?, ?, 'mapping conflict', 1795300100.0)",
            (docs[30]["id"], orjson.dumps(docs[30]).decode()),
        )
        db.execute("""INSERT INTO checkpoint VALUES ('history:x', '{"end": 5, "ids": []}', 1795300000.0)""")
    db.close()
    newer = dict(docs[0], interval_s=12.5)
    with Outbox(path) as outbox, EmbeddedStore(tmp_path / "store.sqlite") as store:
        assert outbox.checkpoint("history:x") == {"end": 5, "ids": []}
        assert outbox._db.execute("PRAGMA page_size").fetchone() == (4096,)  # an existing file keeps its pages
        status = outbox.status()
        assert (status.depth, status.oldest, status.dead_letters) == ({"slot": 30}, 1795300000.0, {"slot": 1})
        outbox.commit({"slot": [newer, *docs[31:]]}, {"history:x": {"end": 6, "ids": []}})
        assert outbox.retry_dead_letters() == {"slot": 1}
        assert [d["id"] for d in outbox.waiting("slot")] == [d["id"] for d in docs[:31]] + [
            newer["id"],
            *(d["id"] for d in docs[31:]),
        ]
        result = outbox.flush(store, batch_size=10)
        assert result.sent["slot"] == 37 and outbox.status().depth == {} and outbox.status().dead_letters == {}
        assert store.count("slot") == 36 and outbox.checkpoint("history:x") == {"end": 6, "ids": []}
        assert [d["interval_s"] for d in store.query("slot") if d["id"] == newer["id"]] == [
            12.5
        ]  # the newer copy, stored last


def test_the_store_indexes_the_time_only(tmp_path: Path) -> None:
    """Every query bounds the time; an index of a label only slowed the writes. A store made by
    an earlier version loses its label indexes when first touched, and its queries still run."""
    path = tmp_path / "store.sqlite"
    docs = slot_docs()
    with sqlite3.connect(path) as db:  # as the previous version made it
        db.execute(
            'CREATE TABLE slot (id TEXT PRIMARY KEY, timestamp TEXT, "site" TEXT, "partition" TEXT, doc TEXT NOT NULL)'
        )
        for c in ("timestamp", "site", "partition"):
            db.execute(f'CREATE INDEX "slot_{c}" ON slot("{c}")')
        db.executemany(
            "INSERT INTO slot VALUES (?, ?, ?, ?, ?)",
            [(d["id"], d["timestamp"], d["site"], d["partition"], orjson.dumps(d).decode()) for d in docs],
        )
    db.close()
    with EmbeddedStore(path) as store:
        assert store.count("slot") == 36
        indexes = {r[1] for r in store._db.execute("PRAGMA index_list(slot)")}
        assert indexes == {"sqlite_autoindex_slot_1", "slot_timestamp"}
        assert len(store.query("slot", since=docs[0]["timestamp"])) == 36
        plan = store._db.execute(
            "EXPLAIN QUERY PLAN SELECT doc FROM slot WHERE timestamp >= ? AND timestamp < ?", ("a", "b")
        ).fetchall()
        assert "USING INDEX slot_timestamp" in plan[0][3]


def test_a_parcel_larger_than_a_batch_is_sent_in_slices(tmp_path: Path) -> None:
    """A batch takes the first ``batch_size`` records of a parcel; the rest waits in it, and an
    attempt is counted only when a record that was sent is left."""
    docs = [{"id": f"r{i}", "timestamp": "2026-11-21T14:00:00Z"} for i in range(10)]
    with Outbox(tmp_path / "outbox.sqlite") as outbox:
        outbox.commit({"job": docs}, {})
        result = outbox.flush(_HalfSink(), batch_size=4, max_batches=1)  # type: ignore[arg-type]
        assert (result.sent["job"], result.dead["job"], result.retried["job"]) == (2, 1, 1)  # r0, r1; r2; r3
        row = "SELECT count, attempts, last_error FROM parcel"
        assert outbox._db.execute(row).fetchall() == [(7, 1, "429")]
        assert [d["id"] for d in outbox.waiting("job")] == ["r3", *(f"r{i}" for i in range(4, 10))]

        class Taking:
            def send_encoded(self, kind: str, records: Encoded) -> SendResult:
                return self.send(kind, records.decoded())

            def send(self, kind: str, batch: Any) -> SendResult:
                return SendResult(acked=[d["id"] for d in batch])

        assert outbox.flush(Taking(), batch_size=4, max_batches=1).sent["job"] == 4  # type: ignore[arg-type]
        assert outbox._db.execute(row).fetchall() == [(3, 1, "429")]
        assert outbox.flush(Taking(), batch_size=4).sent["job"] == 3 and outbox.status().depth == {}  # type: ignore[arg-type]


def test_outboxes_opened_at_once_all_open(tmp_path: Path) -> None:
    # The collector's writer and flusher open the outbox together, and so may two probe
    # commands: a new file opened in WAL mode from four connections at once failed ~5 % of the
    # time with "database is locked" (SQLite does not wait there); collector/transaction.py waits.
    def use(path: Path) -> None:
        with Outbox(path) as outbox:
            assert outbox.status().depth == {}

    assert opened_at_once(use, tmp_path) == []


def test_a_drained_backlog_gives_its_space_back_and_the_wal_is_cut_back(tmp_path: Path) -> None:
    """A backlog (a store down for an hour) grows the file and its WAL; once it is sent, the
    file gives its free pages back and a checkpoint cuts the WAL back to its limit, instead
    of both keeping their largest size for good."""
    path = tmp_path / "outbox.sqlite"
    wal = tmp_path / "outbox.sqlite-wal"
    filler = "x" * 2000
    docs = [{"id": f"r{i}", "timestamp": "2026-11-21T14:00:00Z", "pad": filler} for i in range(10_000)]
    with (
        Outbox(path, autocheckpoint=False, wal_limit_bytes=1 << 20) as writer,
        Outbox(path, wal_limit_bytes=1 << 20) as flusher,
    ):
        for start in range(0, len(docs), 1000):
            writer.commit({"job": docs[start : start + 1000]}, {})
        assert wal.stat().st_size > 15 << 20  # ~20 MB committed, none checkpointed (the collector's writer)
        flusher.wal_checkpoint()
        writer.commit({"job": docs[:1]}, {})  # the next commit starts the WAL again, cut back to the limit
        assert wal.stat().st_size <= 1 << 20
        assert flusher.flush(_TakesAll(), batch_size=5000).sent["job"] == 10_001
        flusher.wal_checkpoint()
        grown = path.stat().st_size
        assert grown > 15 << 20
        given = flusher.shrink(keep_free_bytes=1 << 20)
        flusher.wal_checkpoint()  # the file is cut at the checkpoint
        writer.commit({"job": docs[:1]}, {})
        assert given > 10 << 20 and path.stat().st_size < grown - (10 << 20)
        assert wal.stat().st_size <= 1 << 20


class _TakesAll:
    """A store that takes every record."""

    def send_encoded(self, kind: str, records: Encoded) -> SendResult:
        return self.send(kind, records.decoded())

    def send(self, kind: str, docs: Sequence[Mapping[str, Any]]) -> SendResult:
        return SendResult(acked=[d["id"] for d in docs])


def test_parcels_of_the_previous_version_are_read_and_sent(tmp_path: Path) -> None:
    """A file whose parcels hold JSON arrays (a cycle's) and gzip-compressed ones (a request's),
    in a parcel table without ``fields``: opened (the column added), sent, and what is left of
    a parcel is rewritten encoded."""
    path = tmp_path / "outbox.sqlite"
    docs = slot_docs()
    with sqlite3.connect(path) as db:
        db.execute(
            "CREATE TABLE parcel (seq INTEGER PRIMARY KEY AUTOINCREMENT, kind TEXT NOT NULL, count INTEGER NOT NULL,"
            " docs BLOB NOT NULL, encoding TEXT NOT NULL, enqueued_at REAL NOT NULL,"
            " attempts INTEGER NOT NULL DEFAULT 0, last_error TEXT)"
        )
        db.execute(
            "INSERT INTO parcel(kind, count, docs, encoding, enqueued_at) VALUES ('slot', 20, ?, 'json', 1.0)",
            (orjson.dumps(docs[:20]),),
        )
        db.execute(
            "INSERT INTO parcel(kind, count, docs, encoding, enqueued_at) VALUES ('slot', 16, ?, 'gzip', 2.0)",
            (gzip.compress(orjson.dumps(docs[20:])),),
        )
    db.close()
    with Outbox(path) as outbox, Outbox(path) as again, EmbeddedStore(tmp_path / "store.sqlite") as store:
        assert again.waiting("slot") == docs
        assert outbox.flush(store, batch_size=15, max_batches=1).sent["slot"] == 15
        rows = outbox._db.execute("SELECT count, encoding FROM parcel ORDER BY seq").fetchall()
        assert rows == [(5, "records"), (16, "gzip")]
        assert outbox.waiting("slot") == docs[15:]
        assert outbox.flush(store).sent["slot"] == 21 and outbox.status().depth == {}
        assert sorted(store.query("slot"), key=lambda d: d["id"]) == sorted(docs, key=lambda d: d["id"])
