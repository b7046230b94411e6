"""What one request may cost the collector (issue 24, item 4), against a real collector
process: a body's memory and its reply are bounded. Each case is one that cost the collector
without bound before these limits (the figures are in the docstrings)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from collector.sinks.http import CollectorSink

from .conftest import Collector, free_port, record
from .test_ingest import post, stored

MIB = 2**20
LIMIT = 8 * MIB  # the records body limit of the memory tests' collector (the default)


def collector(tmp_path_factory: pytest.TempPathFactory, name: str, **settings: Any) -> Collector:
    c = Collector(tmp_path_factory.mktemp(name), free_port(), {"p1": "token-one", "p2": "token-two"},
                  {"flush_every_s": 0.2, **settings})  # fmt: skip
    return c.start()


@pytest.fixture(scope="module")
def roomy(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Gratia's body limit (64 MiB) and the records' (8 MiB), as by default."""
    c = collector(tmp_path_factory, "roomy", max_body_size="64 MiB", max_records_body_size="8 MiB",
                  max_records_per_request=5000)  # fmt: skip
    yield c
    c.stop()


# Memory and replies


def peak_growth_kib(c: Collector, send: Any) -> tuple[Any, int]:
    """What ``send()`` returned, and how far the collector's resident memory rose above where
    it was (its high-water mark reset first: /proc/PID/clear_refs)."""
    assert c.process is not None
    status = Path(f"/proc/{c.process.pid}/status")
    Path(f"/proc/{c.process.pid}/clear_refs").write_text("5")

    def kib(field: str) -> int:
        line = next(x for x in status.read_text().splitlines() if x.startswith(field))
        return int(line.split()[1])

    before = kib("VmRSS")
    result = send()
    return result, kib("VmHWM") - before


def zeros(size: int) -> bytes:
    """A JSON array of zeros, ``size`` bytes long: a million records refused a MiB (issue 24)."""
    return b"[" + b"0," * ((size - 3) // 2) + b"0]"


def test_a_2_mib_body_of_zeros_gets_a_small_reply_and_costs_little_memory(roomy: Collector) -> None:
    """Before: 400, a reply of 82.8 MB (every one of the 1,048,576 refusals with its reason)
    after 11 s, and the collector's memory up by 717 MB at its peak."""
    reply, growth = peak_growth_kib(roomy, lambda: post(roomy, zeros(2 * MIB)))
    assert reply.status_code == 413 and len(reply.content) < 200, reply.content[:200]
    assert reply.json()["error"] == (
        "the batch holds 1048575 records, over the limit of 5000 a request; send smaller batches"
    )
    assert growth < 80 * 1024, f"{growth} KiB"
    assert httpx.get(f"{roomy.url}/healthz").status_code == 200


@pytest.mark.parametrize(
    ("item", "bound"),
    [(b"0", 20), (b'{"a":{}}', 40)],  # a list of pointers; the costliest JSON to parse found (see body.py)
)
def test_a_body_at_the_limit_costs_a_bounded_multiple_of_it(roomy: Collector, item: bytes, bound: int) -> None:
    """Before, 8 MiB of zeros cost gigabytes (4 million refusals); at 60 MiB the collector passed
    14.9 GB and stopped answering /healthz."""
    body = b"[" + b",".join([item] * ((LIMIT - 2) // (len(item) + 1))) + b"]"
    assert LIMIT - len(item) - 1 <= len(body) <= LIMIT
    reply, growth = peak_growth_kib(roomy, lambda: post(roomy, body))
    assert reply.status_code == 413 and len(reply.content) < 200
    assert "over the limit of 5000 a request" in reply.json()["error"]
    assert growth < bound * LIMIT // 1024, f"{growth} KiB for {len(body)} bytes"
    assert httpx.get(f"{roomy.url}/healthz", timeout=5).status_code == 200


def test_a_body_over_the_limit_is_refused_before_it_is_read(roomy: Collector) -> None:
    body = zeros(60 * MIB)  # what took the collector past 14.9 GB
    reply, growth = peak_growth_kib(roomy, lambda: post(roomy, body))
    assert reply.status_code == 413
    assert reply.json()["error"] == f"the body is {len(body)} bytes, over the limit of {LIMIT}; send smaller batches"
    assert growth < 16 * 1024, f"{growth} KiB"
    assert httpx.get(f"{roomy.url}/healthz", timeout=5).status_code == 200


def test_every_refused_record_is_listed_and_the_reply_stays_small(roomy: Collector) -> None:
    """A batch at the record limit, half refused: each refused one is listed (the first ten with
    their reasons), so a probe knows exactly which are durable; before, a reply of 200 KB."""
    items: list[Any] = [record(i, "p1") if i % 2 == 0 else i for i in range(5000)]
    reply = post(roomy, orjson.dumps(items))
    assert reply.status_code == 400 and len(reply.content) < 48 * 1024, len(reply.content)
    body = reply.json()
    assert (body["accepted"], body["refused"], len(body["rejected"])) == (2500, 2500, 2500)
    assert [r["index"] for r in body["rejected"]] == list(range(1, 5000, 2))
    assert body["rejected"][0] == {"index": 1, "id": None, "reason": "expected a JSON object (a record), got 1"}
    assert all(set(r) == {"index", "id", "reason"} for r in body["rejected"][:10])
    assert all(set(r) == {"index"} for r in body["rejected"][10:])
    assert "2500 of 5000 records refused (the first, record 1: expected a JSON object" in body["error"]


def test_the_probe_knows_each_record_refused_and_splits_a_batch_over_the_record_limit(
    roomy: Collector, tmp_path: Path
) -> None:
    token = tmp_path / "p1.token"
    token.write_text("token-one\n")
    docs = [record(f"s{i}", "p1", cpus="many" if i % 3 == 0 else 1.0) for i in range(300)]
    with CollectorSink(f"collector+{roomy.url}", token_file=token) as sink:
        sent = sink.send("job", docs)
        assert sent.acked == [d["id"] for i, d in enumerate(docs) if i % 3]
        assert list(sent.rejected) == [d["id"] for i, d in enumerate(docs) if i % 3 == 0]
        reasons = list(sent.rejected.values())
        assert all(r.startswith("refused by the collector: field 'cpus': expected a double") for r in reasons[:10])
        assert all(r.startswith("refused by the collector, one of 100 records refused") for r in reasons[10:])
        assert "the first's: field 'cpus': expected a double" in reasons[-1]
        many = [record(f"m{i}", "p1") for i in range(6000)]  # over the 5000 a request: 413, sent in halves
        assert sink.send("job", many).acked == [d["id"] for d in many]
    ids = stored_ids(roomy, "p1", {d["id"] for d in many})
    assert not {d["id"] for i, d in enumerate(docs) if i % 3 == 0} & ids


def test_ndjson_is_read_a_line_at_a_time_and_counted(roomy: Collector) -> None:
    ndjson = {"Content-Type": "application/x-ndjson"}
    blank = b"\n" * (4 * MIB) + orjson.dumps(record("nd", "p1")) + b"\n" + b" \n" * 1000
    reply, growth = peak_growth_kib(roomy, lambda: post(roomy, blank, **ndjson))
    assert (reply.status_code, reply.json()) == (202, {"accepted": 1, "rejected": []})
    assert growth < 40 * 1024, f"{growth} KiB"  # not a list of four million empty lines
    lines = b"\n".join([b"0"] * 5001)
    reply = post(roomy, lines, **ndjson)
    assert reply.status_code == 413 and "more than 5000 records" in reply.json()["error"]


def stored_ids(c: Collector, probe: str, expect: set[str]) -> set[str]:
    """The source ids of ``probe``'s stored records, once ``expect`` are all among them."""
    deadline = time.monotonic() + 30
    while not expect <= (ids := {d["source_id"] for d in stored(c) if d["probe"] == probe}):
        assert time.monotonic() < deadline, f"{len(expect - ids)} of {len(expect)} not stored"
        time.sleep(0.2)
    return ids
