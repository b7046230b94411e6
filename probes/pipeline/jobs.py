"""The cycle's jobs as objects (:class:`Job`: a name, an interval, a run), and the two that
reach past the outbox: the HTCondor priority sync (:class:`PrioritySync`, which keeps the
bindings' worker it reaches the negotiator through) and the daily summaries (:func:`summaries`).

:class:`~probes.pipeline.cycle.ProbeCycle` makes the jobs of its configuration; the service
schedules each on its interval, ``probe once`` runs each once (:meth:`ProbeCycle.once`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import date
from typing import TYPE_CHECKING, Any

from collector.outbox import Outbox, OutboxStatus
from collector.records import encode_docs
from collector.summaries.run import Summarized, last_days, summarize
from collector.summaries.spec import EXPORTED
from probes.config import ProbeConfig
from probes.pipeline.lane import Batch, RecordLane
from probes.pipeline.priority import SyncResult, windowed_ledger
from probes.pipeline.priority import sync as priority_sync

if TYPE_CHECKING:
    from probes.sources.bindings import Bindings
    from probes.sources.negotiator import NegotiatorLike

__all__ = ["Job", "PrioritySync", "Summaries", "Synced", "summaries"]


@dataclass(frozen=True)
class Job:
    """One job of the cycle: its ``name``, how often the service runs it (``every_s``, seconds)
    and ``run(outbox, now)``: the job, committing to ``outbox`` (the calling thread's own), as
    of ``now`` (UNIX seconds); it returns what it did (what the job's kind says)."""

    name: str
    every_s: float
    run: Callable[[Outbox, float], Any]


@dataclass(frozen=True)
class Synced:
    """A priority sync: its ``result`` (plan, commands, records), what it ``committed`` and the
    outbox after (``status``)."""

    result: SyncResult
    committed: Batch
    status: OutboxStatus


class PrioritySync:
    """The HTCondor priority sync (``[priority] sync = true``): the negotiator read and set
    through the bindings' worker (killed at ``pool.timeout_s``), made at the first run and kept
    until :meth:`close`, unless a ``negotiator`` client is given; its ``priority`` records
    committed through the ``lane``."""

    def __init__(
        self, config: ProbeConfig, lane: RecordLane, *, probe: str, negotiator: NegotiatorLike | None = None
    ) -> None:
        self.config = config
        self.lane = lane
        self.probe = probe
        self._negotiator = negotiator
        self._bindings: Bindings | None = None

    def __repr__(self) -> str:
        return f"PrioritySync(probe={self.probe!r}, connected={self._negotiator is not None})"

    def run(self, outbox: Outbox, now: float) -> Synced:
        """Sync the negotiator to the fairshare ledger in ``outbox`` as of ``now``; commit the records."""
        if self._negotiator is None:
            from probes.sources.bindings import Bindings  # the bindings' worker: only when a sync runs

            p = self.config.pool
            self._bindings = Bindings(p.condor_config, p.timeout_s, p.token_file)
            self._negotiator = self._bindings.negotiator()
        ledger = windowed_ledger(outbox.checkpoint, self.config, now=now)
        done = priority_sync(self.config, self._negotiator, ledger, now=now, probe=self.probe)
        records = {"priority": encode_docs("priority", done.docs)} if done.docs else {}
        committed = self.lane.commit(outbox, [Batch(records)])
        return Synced(done, committed, outbox.status())

    def close(self) -> None:
        """End the bindings' worker, if one was made (a call in flight is abandoned)."""
        if self._bindings is not None:
            self._bindings.close()


@dataclass(frozen=True)
class Summaries:
    """A summaries run: the days it covered (``first`` .. ``last``, UTC) and what it wrote."""

    first: date
    last: date
    done: Summarized


def summaries(lane: RecordLane, days: int, *, now: float, probe: str) -> Summaries:
    """Re-summarize the last ``days`` days up to ``now`` in the lane's store (late records count).
    A probe's store holds no Gratia records: those reach a store through a collector, which
    summarizes them."""
    first, last = last_days(now, days)
    with lane.store() as sink:
        done = summarize(sink, first, last, probe=probe, kinds=EXPORTED)
    return Summaries(first, last, done)
