"""A long history answer says how far it got (issue 25 item 8): log lines for the service and
a callback the command line draws a bar with on a terminal; against the real pool's schedd."""

from __future__ import annotations

import io
import logging
import time

import pytest

from probes.cli.progress import progress_counter
from probes.pipeline.reading import live_pool
from tests.htcondor_pool import HTCondorPool
from tests.sources.test_live_pool import pool_config


def test_the_history_pass_reports_its_progress(htcondor_pool: HTCondorPool, caplog: pytest.LogCaptureFixture) -> None:
    live = live_pool(pool_config(htcondor_pool, pool={"history_match": 1}))  # one job a chunk
    live.progress_every_s = 0.0  # a line per chunk (every 30 s in the service)
    counted: list[tuple[str, int]] = []
    live.on_progress = lambda schedd, n: counted.append((schedd, n))
    schedds, _ = live.schedds()
    with caplog.at_level(logging.INFO, logger="fairacct.live"):
        read = live.history(schedds, lambda key: None)
    assert len(read.jobs) == 2  # the pool's two finished jobs
    assert counted == [("vm", 1), ("vm", 1)]
    lines = [r.getMessage() for r in caplog.records if "jobs read so far" in r.getMessage()]
    assert [line.split(", ")[0] for line in lines] == [
        "schedd vm: history: 1 jobs read so far",
        "schedd vm: history: 2 jobs read so far",
    ]


@pytest.mark.parametrize("tty", [True, False])
def test_the_history_counter_is_drawn_on_a_terminal_only(tty: bool) -> None:
    class Stream(io.StringIO):
        def isatty(self) -> bool:
            return tty

    stream = Stream()
    with progress_counter("reading the history", "jobs", stream=stream) as advance:
        advance("vm", 2000)
        time.sleep(0.2)  # tqdm redraws at most every 0.1 s
        advance("vm", 500)
    text = stream.getvalue()
    assert ("2500jobs" in text.replace(" ", "") and "vm" in text) is tty
    assert (text == "") is not tty
