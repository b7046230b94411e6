"""The worker of the htcondor2 bindings: answers cross in chunks, and a long answer outlives the
deadline for as long as the worker keeps receiving it (a schedd's history is one call)."""

from __future__ import annotations

import multiprocessing
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import classad2
import pytest

from probes.sources.bindings import CHUNK, Bindings, BindingsError, _send_answer


def test_an_answer_of_classads_crosses_in_chunks_each_freed_once_sent() -> None:
    sending, receiving = multiprocessing.Pipe()
    ads = [classad2.ClassAd({"ClusterId": i, "Owner": f"u{i}"}) for i in range(2 * CHUNK + 5)]
    sender = threading.Thread(target=_send_answer, args=(sending, ads))  # a pipe holds less than the answer
    sender.start()
    messages = [receiving.recv()]
    while messages[-1][0] == "ads":
        messages.append(receiving.recv())
    sender.join()
    assert [(kind, len(body)) if kind == "ads" else (kind, body) for kind, body in messages] == [
        ("ads", CHUNK), ("ads", CHUNK), ("ads", 5), ("done", 2 * CHUNK + 5)
    ]  # fmt: skip
    texts = [text for kind, body in messages[:-1] for text in body]
    assert [classad2.parseOne(t, classad2.ParserType.New)["ClusterId"] for t in texts] == list(range(2 * CHUNK + 5))
    assert ads == [None] * (2 * CHUNK + 5)  # the worker holds no ad it has sent

    _send_answer(sending, None)  # not ClassAds: said as it is, for the caller to name
    assert receiving.recv() == ("ok", ("other", "None"))


@pytest.fixture
def processes() -> Iterator[dict[str, subprocess.Popen[bytes]]]:
    """A process that spends CPU time (a worker receiving a long answer) and one that does not."""
    made = {
        "busy": subprocess.Popen([sys.executable, "-c", "while True: pass"]),
        "idle": subprocess.Popen(["sleep", "60"]),
    }
    yield made
    for proc in made.values():
        proc.kill()
        proc.wait()


def test_a_long_answer_is_waited_for_while_the_worker_works_and_not_when_it_is_silent(
    processes: dict[str, subprocess.Popen[bytes]],
) -> None:
    bindings = Bindings("", 0.3)
    ours, theirs = multiprocessing.Pipe()
    worker: Any = SimpleNamespace(conn=ours, process=SimpleNamespace(pid=processes["busy"].pid))
    threading.Timer(1.5, theirs.send, (("done", 0),)).start()
    started = time.monotonic()
    assert bindings._receive(worker, 0.3, patient=True) == ("done", 0)  # five times the deadline
    assert time.monotonic() - started >= 1.4

    worker.process.pid = processes["idle"].pid
    late = threading.Timer(
        60, theirs.send, (("done", 1),)
    )  # were it patient with a silent worker: an answer, not a raise
    late.start()
    try:
        with pytest.raises(BindingsError, match=r"^no answer within 0\.3 s \(pool\.timeout_s\)$"):
            bindings._receive(worker, 0.3, patient=True)
    finally:
        late.cancel()

    worker.process.pid = processes["busy"].pid  # a call that is not a stream: its deadline is the deadline
    with pytest.raises(BindingsError, match=r"^no answer within 0\.3 s"):
        bindings._receive(worker, 0.3)
