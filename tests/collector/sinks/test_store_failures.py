"""What a failing Elasticsearch or OpenSearch store costs the sink (issue 54, points 3 and 4):
a request that gets no answer leaves nothing behind for the cyclic garbage collector, and a
bulk the store finds too large (413) is halved until it fits, a record too large alone
rejected with the reason while the rest is stored.

Both client flavours, the real ones; the records end in osmem-server. What osmem cannot do
(reset connections, hang, refuse a body over a size as ``http.max_content_length`` does) is
:mod:`tests.collector.fake_store`, a process in front of it.
"""

from __future__ import annotations

import gc
import logging
import socket
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from collector.outbox import Outbox
from collector.sinks.elasticsearch import ElasticsearchSink
from collector.sinks.elasticsearch.bulk import cut
from collector.sinks.elasticsearch.copies import Pending

from ..conftest import fake_store

FLAVOURS = [pytest.param("http", id="elasticsearch-client"), pytest.param("opensearch+http", id="opensearch-py")]


def docs(n: int, pad: int, prefix: str = "r") -> list[dict[str, Any]]:
    return [
        {"id": f"{prefix}{i}", "kind": "job", "timestamp": "2026-11-21T14:00:00Z", "user": "alice", "pad": "x" * pad}
        for i in range(n)
    ]


def bodies_left_in_cycles(send: Callable[[], object], at_least: int) -> int:
    """Bytes of strings of ``at_least`` bytes or more (request bodies) that ``send()`` left in
    frames only the cyclic garbage collector can free. Logging is off meanwhile: pytest keeps
    every record, with the exception a client logs (opensearch-py does) and its frames."""
    gc.collect()
    enabled = gc.isenabled()
    gc.disable()
    logging.disable(logging.CRITICAL)
    try:
        send()
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
        frames = [o for o in gc.garbage if isinstance(o, types.FrameType)]
        return sum(
            len(v) for f in frames for v in f.f_locals.values() if isinstance(v, (bytes, str)) and len(v) >= at_least
        )
    finally:
        logging.disable(logging.NOTSET)
        gc.set_debug(0)
        gc.garbage.clear()
        if enabled:
            gc.enable()


@pytest.fixture(params=["refused", "reset", "silent"])
def unanswering(request: pytest.FixtureRequest) -> Iterator[str]:
    """A store that gives no answer: a loopback port that refuses connections (bound, never
    listening, so no one else takes it), one that resets them, one that never answers."""
    if request.param == "refused":
        with socket.socket() as held:
            held.bind(("127.0.0.1", 0))
            yield f"http://127.0.0.1:{held.getsockname()[1]}"
    else:
        with fake_store(request.param) as url:
            yield url


@pytest.mark.parametrize("scheme", FLAVOURS)
def test_a_request_without_an_answer_leaves_no_body_behind(scheme: str, unanswering: str) -> None:
    # Before: each attempt left its bulk in cycles of urllib3's and the client's frames and
    # exceptions, in two copies (the sink's and the client's encoding), and the collector grew by
    # that each attempt while its store was down; a timeout (silent) was not even retried by the
    # elasticsearch client's flavour.
    batch = docs(500, 2000)
    results = []
    with ElasticsearchSink(
        unanswering.replace("http", scheme, 1), max_retries=2, timeout_s=0.5, sleep=lambda s: None
    ) as sink:
        left = bodies_left_in_cycles(lambda: results.append(sink.send("job", batch)), at_least=500 * 2000)
    assert left == 0
    (result,) = results
    assert result.acked == [] and result.rejected == {}
    assert sorted(result.retry) == sorted(d["id"] for d in batch)


@pytest.mark.parametrize("scheme", FLAVOURS)
def test_in_an_outage_one_bulk_waits_its_retries_out_not_every_one(scheme: str, unanswering: str) -> None:
    sleeps: list[float] = []
    url = unanswering.replace("http", scheme, 1)
    with ElasticsearchSink(url, batch_size=100, max_retries=2, timeout_s=0.5, sleep=sleeps.append) as sink:
        result = sink.send("job", docs(500, 100))
    assert len(sleeps) == 2  # before: 10, two for each of the five bulks
    assert len(result.retry) == 500 and result.acked == []
    later = [e for e in result.retry.values() if e.endswith("not sent: an earlier bulk of its batch failed")]
    assert len(later) == 400


@pytest.mark.parametrize(
    ("sizes", "count", "size", "parts"),
    [
        ([10, 10, 10, 10], 2, 100, [2, 2]),  # by count
        ([10, 10, 10, 10], 10, 25, [2, 2]),  # by bytes
        ([10, 30, 10], 10, 25, [1, 1, 1]),  # one over the budget goes alone
        ([30], 10, 25, [1]),
        ([10, 10, 5], 10, 25, [3]),  # exactly the budget
        ([], 10, 25, []),
    ],
)
def test_bulks_are_cut_by_count_and_by_bytes(sizes: list[int], count: int, size: int, parts: list[int]) -> None:
    lines = {f"d{i}": Pending("fairacct-job-2026.11", b"x" * n, None) for i, n in enumerate(sizes)}
    got = list(cut(lines, count, lambda: size))
    assert [len(p) for p in got] == parts
    assert [i for p in got for i in p] == list(lines)  # in order, each once


def seen(proxy: str) -> list[dict[str, Any]]:
    """The bulk requests the fake store saw: their bytes and its answer."""
    return [r for r in httpx.get(f"{proxy}/_fake/requests").json() if r["path"] == "/_bulk"]


@pytest.fixture
def limited(osmem_clone: Any) -> Iterator[tuple[str, str]]:
    """osmem behind a proxy that refuses bodies over 300,000 bytes with 413, as Elasticsearch
    over its http.max_content_length: the proxy's URL, and osmem's."""
    with fake_store("limit:300000", upstream=osmem_clone.url) as proxy:
        yield proxy, osmem_clone.url


@pytest.mark.parametrize("scheme", FLAVOURS)
def test_a_bulk_the_store_finds_too_large_is_halved_until_it_fits(scheme: str, limited: tuple[str, str]) -> None:
    # Before: the 413 raised, and the same body was sent again by every flush, for ever.
    proxy, direct = limited
    with ElasticsearchSink(proxy.replace("http", scheme, 1)) as sink:
        sink.install_templates()
        result = sink.send("job", docs(40, 20_000))  # one bulk of about 820 KB
        assert len(result.acked) == 40 and result.rejected == {} and result.retry == {}
        first = seen(proxy)
        # 806 KB, refused; cut to 403 KB of sources, its first 20 records refused; cut to 201 KB of
        # sources: 10 records a request (their action lines on top)
        assert [r["status"] for r in first] == [413, 413] + [200] * 4
        assert [r["bytes"] for r in first][:2] == [805_620, 402_800]
        assert all(r["bytes"] <= 300_000 for r in first if r["status"] == 200)
        assert sink.bulks.max_bytes == 402_800 // 2  # cut to fit from now on
        more = sink.send("job", docs(40, 20_000, prefix="s"))
        assert len(more.acked) == 40
        assert [r["status"] for r in seen(proxy)[len(first) :]] == [200] * 4  # ten a request: no 413 again
    with ElasticsearchSink(direct) as store:
        assert store.count("job") == 80


@pytest.mark.parametrize("scheme", FLAVOURS)
def test_a_record_too_large_alone_is_rejected_with_the_reason_and_the_rest_stored(
    scheme: str, limited: tuple[str, str]
) -> None:
    proxy, direct = limited
    batch = docs(10, 1000) + docs(1, 400_000, prefix="huge") + docs(10, 1000, prefix="after")
    with ElasticsearchSink(proxy.replace("http", scheme, 1)) as sink:
        sink.install_templates()
        result = sink.send("job", batch)
    assert sorted(result.rejected) == ["huge0"]
    assert result.rejected["huge0"].startswith(
        "job document huge0: too large for the store: a bulk request of it alone (400"
    )
    assert result.rejected["huge0"].endswith(
        "bulk write of 1 job documents failed: 413 Request Entity Too Large); raise the store's "
        "http.max_content_length (or make the record smaller), then put it back in the outbox (fairacct outbox retry)"
    )  # before: "413 None" (the elasticsearch client) or "413 " (opensearch-py), the answer's body being empty
    assert len(result.acked) == 20 and result.retry == {}
    with ElasticsearchSink(direct) as store:
        assert store.count("job") == 20


def test_the_outbox_sets_a_record_too_large_aside_and_the_rest_flows(limited: tuple[str, str], tmp_path: Path) -> None:
    proxy, direct = limited
    with Outbox(tmp_path / "outbox.sqlite") as outbox, ElasticsearchSink(proxy) as sink:
        sink.install_templates()
        outbox.commit({"job": docs(1, 400_000, prefix="huge")}, {})  # first in line
        outbox.commit({"job": docs(200, 1000, prefix="other")}, {})  # another probe's, behind it
        result = outbox.flush(sink)
        assert result.sent["job"] == 200 and result.dead["job"] == 1
        assert outbox.status().depth == {} and outbox.status().dead_letters == {"job": 1}
        (letter,) = outbox.dead_letters()
        assert letter["id"] == "huge0" and "too large for the store" in letter["error"]
        assert outbox.flush(sink).sent == {}  # nothing sent again
    with ElasticsearchSink(direct) as store:
        assert store.count("job") == 200


@pytest.mark.parametrize("scheme", FLAVOURS)
def test_bulk_requests_are_cut_to_the_bytes_given(scheme: str, limited: tuple[str, str]) -> None:
    proxy, direct = limited
    with ElasticsearchSink(proxy.replace("http", scheme, 1), bulk_bytes=50_000) as sink:
        sink.install_templates()
        assert len(sink.send("job", docs(20, 10_000)).acked) == 20
    requests = seen(proxy)
    assert [r["status"] for r in requests] == [200] * 5  # four records (about 40 KB) a request
    assert all(r["bytes"] <= 50_000 for r in requests)
    with ElasticsearchSink(direct) as store:
        assert store.count("job") == 20
