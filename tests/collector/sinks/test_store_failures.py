"""What a failing Elasticsearch or OpenSearch store costs the sink (issue 54, point 3): a
request that gets no answer leaves nothing behind for the cyclic garbage collector.

Both client flavours, the real ones. What osmem-server cannot do (reset connections, hang) is
:mod:`tests.collector.fake_store`, a process.
"""

from __future__ import annotations

import gc
import logging
import socket
import types
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from collector.sinks.elasticsearch import ElasticsearchSink

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
    # Before: each attempt left its bulk in a cycle of urllib3's and the client's frames and
    # exceptions, in ten copies (12 MB of a 1.2 MB bulk), and the collector grew by that each
    # attempt while its store was down; a timeout (silent) was not even retried by the
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
