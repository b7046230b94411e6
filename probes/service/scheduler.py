"""The probe service: ``fairacct probe run``, a site's probe for months without supervision.

An APScheduler 3 scheduler runs each of the cycle's jobs (:attr:`ProbeCycle.jobs
<probes.pipeline.cycle.ProbeCycle.jobs>`, :class:`~probes.pipeline.jobs.Job`), each with
``max_instances=1`` (a slow run is never overlapped by the next), coalescing (missed runs become
one) and a misfire grace time (``probe.misfire_grace_s``):

=================  =========================  =================================================
job                every                      what it does
=================  =========================  =================================================
snapshot           ``pool.interval_s``        slots and allocations (with the idle demand), one
                                              outbox transaction with the time of the snapshot
                                              (:func:`~probes.pipeline.cycle.snapshot_step`)
history            ``probe.history_every_s``  new jobs of every schedd (or history file), priced
                                              against the latest snapshot's machines, one
                                              transaction with their checkpoints and the
                                              fairshare usage ledger (``history_step``)
fairshare          each window's end          a ``fairshare`` record per credential for every
                                              window (``fairshare.interval_s``) that closed
                                              (``fairshare_step``)
priority           ``priority.every_s``       the negotiator synced to the fairshare ledger
                                              (``priority.sync``), its ``priority`` records
flush              ``probe.flush_every_s``    sends the outbox to the store
                                              (:meth:`~probes.pipeline.lane.RecordLane.deliver`)
summaries          ``summaries.every_s``      re-summarizes the last ``summaries.recent_days``
                                              days in the store (and ``nightly_days`` daily)
=================  =========================  =================================================

A slot record stands for the time since the previous snapshot accounted (its ``observed_at``
is kept in the outbox, so across restarts too), never longer than ``pool.interval_s``: after a
missed cycle or an outage (the probe or the collector was down) the rest is reported as
unobserved (a WARNING, ``fairacct_unobserved_seconds_total`` and a ``gap`` record per node the
last snapshot had): a probe that was down does not claim to have watched, and slots are not
counted empty or full for time nobody saw them.
Fairshare windows are rolled on their boundaries (multiples of ``fairshare.interval_s`` since
the epoch, UTC), whenever the service started.

The jobs are those of :class:`~probes.pipeline.cycle.ProbeCycle`, which ``probe once`` runs
whole, so both make the same records of the same inputs: this module only schedules them and
reports what they did (logs, ``/healthz``, ``/metrics``); a delivery is judged by
:func:`~probes.pipeline.verdict.judge`, as ``probe once`` judges its own. With slot
sources the history waits for the first snapshot (and fails its run without one) rather than
record jobs unpriced: its jobs stay past the checkpoint for the next run.

A cycle commits its records and its checkpoints in one transaction, so a crash or a stop
leaves nothing half-written; the commits that read what they change (the fairshare ledger)
hold one lock. The flush holds neither while it waits on the store: its transactions are the
short ones that settle what the store acknowledged, so a store that hangs or is down for
minutes never holds up a snapshot. The first flush, and the first after the store failed
(it may come back empty), checks the store's index templates before sending anything and
installs them if ``store.install_templates`` allows; otherwise the records wait.

A source that fails (a collector or schedd that does not answer, answers late or answers
garbage; a file that cannot be read) costs that run, or that schedd's part of
it, with one log line and a metric; the next run goes on. SIGTERM and SIGINT stop the
service: calls to the pool in flight are abandoned (their cycle commits nothing), running jobs
finish, the outbox is flushed once more if the store answers, and :meth:`ProbeService.run`
returns.

The fairshare usage ledger (usage per window and credential, under ``fairshare.metric``) is a
checkpoint of the outbox, updated in the transaction of the job records it comes from. Usage
that arrives for a window already rolled counts in the later windows' decayed sums, but the
rolled window's records are not rewritten.
"""

from __future__ import annotations

import logging
import math
import re
import threading
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.interval import IntervalTrigger

from collector.errors import ConfigError, FairacctError, SinkError
from collector.outbox import OutboxStatus
from collector.records import iso_utc
from probes.config import ProbeConfig
from probes.config.store import UPSTREAM_JOBS
from probes.errors import SourceError
from probes.files import check_writable
from probes.pipeline.cycle import HistoryStep, ProbeCycle, Ran, SnapshotStep
from probes.pipeline.jobs import Job, Summaries, Synced
from probes.pipeline.lane import Batch, Delivery
from probes.pipeline.priority import plan_notes
from probes.pipeline.reading import Reading
from probes.pipeline.verdict import judge
from probes.service.flush_line import flush_line
from probes.service.health import HealthServer, Metrics
from probes.service.outages import SourceOutages
from probes.service.signals import StopSignals
from probes.sources import sandbox
from probes.sources.checkpoints import LEDGER_KEY, ROLLED_KEY
from probes.sources.live import LivePool
from probes.sources.negotiator import NegotiatorLike
from probes.sources.report import problem_lines
from probes.sources.status import incomplete_nodes
from probes.sources.unheard import UNBILLED

__all__ = ["ProbeService"]

log = logging.getLogger("fairacct.service")


class ProbeService:
    """The scheduler of the cycle's jobs, the health server. ``clock`` gives UNIX seconds (the
    snapshot time and interval, the fairshare windows); ``pool`` is the live pool to read (by
    default one built from the configuration when ``sources.live`` is set); ``negotiator``,
    the priority sync's client (by default one through the bindings)."""

    def __init__(
        self,
        config: ProbeConfig,
        *,
        probe: str,
        clock: Callable[[], float] = time.time,
        pool: LivePool | None = None,
        negotiator: NegotiatorLike | None = None,
    ) -> None:
        self.cycle = ProbeCycle(config, probe=probe, pool=pool, negotiator=negotiator)
        self.sources = self.cycle.sources
        if not (self.sources.slots or self.sources.jobs):
            raise ConfigError(
                "no sources: set sources.status_files or sources.history, "
                "or sources.live = true to read the pool itself"
            )
        sandbox.configure(config.sources.evaluation_budget_s)
        self.config = config
        self.probe = probe
        self.clock = clock
        self.pool = self.sources.pool
        self.lane = self.cycle.lane
        self.outbox_path = self.lane.path
        self.metrics = Metrics(clock)
        self._running = 0  # jobs running now (a bounded stop waits for them, up to a point)
        self._failing: dict[str, str] = {}  # the error a job fails with now, said once
        self._outages = SourceOutages()  # the sources each job finds down, said once
        self._failed_runs: dict[str, int] = {}
        self._idle = threading.Condition()
        self._stopping = threading.Event()
        self._snapshot_done = threading.Event()
        self._scheduler: BackgroundScheduler | None = None
        self._health: HealthServer | None = None
        self.jobs: dict[str, Job] = self.cycle.jobs
        self._said: dict[str, Callable[[Any], str | None]] = {
            "snapshot": self._snapshot_said,
            "history": self._history_said,
            "fairshare": self._fairshare_said,
            "priority": self._priority_said,
            "flush": self._flush_said,
            "summaries": _summaries_said,
            "summaries_nightly": _summaries_said,
        }

    def __repr__(self) -> str:
        return f"ProbeService(probe={self.probe!r}, jobs={list(self.jobs)}, outbox={str(self.outbox_path)!r})"

    # -- running ----------------------------------------------------------------------------------

    def run(self, *, duration: float | None = None, stop: threading.Event | None = None) -> str:
        """Start, wait for SIGTERM/SIGINT (in the main thread), ``stop`` or ``duration`` seconds,
        stop cleanly. Returns why it stopped."""
        with StopSignals(stop or threading.Event()) as signals:
            try:
                self.start()
                signals.wait(duration)
                log.info("stopping (%s)", signals.why)
            finally:
                self.stop()
        return signals.why

    def start(self) -> None:
        """Start the health server and the scheduler; every job runs once at once."""
        check_writable(self.config.probe.state_dir, "probe.state_dir")  # refuse now, not an ERROR every period
        port = self.config.probe.health_port
        if port:
            self._health = HealthServer(self.metrics, self.config.probe.health_address, port)
            self._health.start()
        grace = max(1, math.ceil(self.config.probe.misfire_grace_s))
        scheduler = BackgroundScheduler(
            timezone=UTC,
            executors={"default": ThreadPoolExecutor(max_workers=len(self.jobs) + 1)},
            job_defaults={"max_instances": 1, "coalesce": True, "misfire_grace_time": grace},
        )
        now = datetime.now(UTC)
        for name, job in self.jobs.items():
            every = job.every_s
            self.metrics.register(name, every)
            # fairshare windows close on multiples of their width since the epoch: the roll runs
            # then (and once at start, for the windows that closed while the service was down)
            start = None
            if name == "fairshare":
                start = datetime.fromtimestamp(math.floor(now.timestamp() / every) * every, UTC)
            scheduler.add_job(
                self._run,
                IntervalTrigger(seconds=every, start_date=start, timezone=UTC),
                args=(name,),
                id=name,
                name=name,
                next_run_time=now,
            )
        self._scheduler = scheduler
        scheduler.start()
        where = (
            f"; health and metrics on http://{self.config.probe.health_address}:{self._health.port}/"
            if self._health
            else ""
        )
        log.info(
            "started: %s, store %s, outbox %s%s",
            ", ".join(f"{n} every {job.every_s:g} s" for n, job in self.jobs.items()),
            self.config.store.url.split("@")[-1],
            self.outbox_path,
            where,
        )

    def stop(self) -> None:
        """Stop the jobs, flush once more, stop the health server: within ``probe.stop_timeout_s``.

        Calls to the pool in flight are abandoned at once; a job still running at the deadline
        (a store that hangs) is left behind, which loses nothing: its transaction is either
        committed or not, and what the store did not acknowledge waits in the outbox."""
        if self._stopping.is_set():
            return
        self._stopping.set()
        deadline = time.monotonic() + self.config.probe.stop_timeout_s
        if self.pool is not None:
            self.pool.cancel()
        self.cycle.close()  # the priority sync's bindings: a call in flight is abandoned
        if self._scheduler is not None and self._scheduler.running:
            self._scheduler.shutdown(wait=False)
        with self._idle:
            self._idle.wait_for(lambda: self._running == 0, timeout=max(0.0, deadline - time.monotonic()))
            left = self._running
        if left:
            log.warning("stop: %d job(s) still running at probe.stop_timeout_s, left behind", left)
        else:
            self._final_flush(deadline)
        if self._health is not None:
            self._health.stop()
        log.info("stopped")

    def _final_flush(self, deadline: float) -> None:
        """One last flush, given what is left of the stop's time."""
        outcome: list[str] = []

        def flush() -> None:
            try:
                outcome.append(f"final flush: {self.run_job('flush') or 'nothing to send'}")
            except FairacctError as exc:
                outcome.append(f"final flush: {_one_line(str(exc))}; the records wait in the outbox for the next start")

        worker = threading.Thread(target=flush, name="fairacct: final flush", daemon=True)
        worker.start()
        worker.join(max(0.0, deadline - time.monotonic()))
        if worker.is_alive():
            log.warning(
                "final flush: the store did not answer within probe.stop_timeout_s; the records wait in the outbox"
            )
        elif outcome[0].endswith("next start"):
            log.warning("%s", outcome[0])
        else:
            log.info("%s", outcome[0])

    def _run(self, name: str) -> None:
        """Run one job: time it, count it, log one line; a FairacctError costs only this run."""
        with self._idle:
            if self._stopping.is_set():
                return
            self._running += 1
        log.debug("%s: started", name)
        started = time.monotonic()
        error: str | None = None
        summary: str | None = None
        interrupted = False
        try:
            summary = self.run_job(name)
        except FairacctError as exc:
            error = _one_line(str(exc))
            if self._stopping.is_set() and isinstance(exc, SourceError):
                # the stop abandoned the call: neither a run nor a failure of the pool
                interrupted = True
                log.info("%s: interrupted by the stop, nothing was committed", name)
            else:
                if isinstance(exc, SourceError):
                    self.metrics.source_failed("collector" if self.pool is not None else "files")
                self._log_failure(name, error)
        except BaseException as exc:  # counted, then handed on: APScheduler logs a bug with its traceback
            error = f"{type(exc).__name__}: {_one_line(str(exc))}"
            raise
        finally:
            duration = time.monotonic() - started
            if not interrupted:
                self.metrics.finished(name, ok=error is None, duration_s=duration, error=error)
            with self._idle:
                self._running -= 1
                self._idle.notify_all()
        if error is None and name in self._failing:
            del self._failing[name]
            log.info("%s: succeeded again after %d failed run(s)", name, self._failed_runs.pop(name, 0))
        if summary:
            log.info("%s: %s in %.2f s", name, summary, duration)
        elif error is None and not interrupted:  # a run with nothing to say: INFO stays quiet, DEBUG says it ran
            log.debug("%s: nothing to do, %.2f s", name, duration)

    def _log_failure(self, name: str, error: str) -> None:
        """An ERROR line for a job's failure, once while it fails the same way: a wrong store URL
        or a long outage is said once, not every period (/healthz and /metrics count them all),
        and said again when the reason changes."""
        self._failed_runs[name] = self._failed_runs.get(name, 0) + 1
        reason = re.sub(r"\d+", "#", error)  # the same way: the counts in it (records waiting) grow
        if self._failing.get(name) == reason:
            log.debug("%s failed again: %s", name, error)
            return
        self._failing[name] = reason
        log.error("%s failed: %s%s", name, error, " (said once while it fails the same way)")

    # -- the jobs -----------------------------------------------------------------------------------

    def run_job(self, name: str) -> str | None:
        """Run the cycle's job ``name`` now, with the outbox of this thread, and say what it did
        (metrics, warnings, one line); a FairacctError when it failed."""
        if name == "history":
            self._await_snapshot()
        with self.lane.open() as outbox:
            done = self.jobs[name].run(outbox, self.clock())
        return self._said[name](done)

    def _snapshot_said(self, ran: Ran[SnapshotStep]) -> str:
        """The snapshot job (:meth:`ProbeCycle.snapshot`): its problems and figures."""
        reading, step = ran.read, ran.step
        self._problems(reading, "snapshot")
        if reading.snapshot is None:  # the job exists only with slot sources
            raise SourceError("the snapshot found no slots in the sources")
        self._snapshot_done.set()
        if step.replayed:
            return step.replayed
        self._committed(ran.enqueued, ran.status)
        if step.interval_s is not None:
            self.metrics.set_snapshot_interval(step.interval_s, step.unobserved_s)
            if step.unobserved_s:
                log.warning(
                    "the snapshot came %.0f s after the last one, more than pool.interval_s (%g s): "
                    "it stands for %.0f s, the %.0f s before are unobserved (gap records name them per node)",
                    step.interval_s + step.unobserved_s, self.config.pool.interval_s, step.interval_s,
                    step.unobserved_s,
                )  # fmt: skip
        demand = ", idle demand unknown"
        if (idle := reading.idle) is not None:
            demand = f", {int(idle['count'].sum())} idle jobs in {len(idle)} autoclusters"
        snapshot = reading.snapshot
        standing = sum(len(ran.committed.records.get(kind, [])) for kind in ("slot", "allocation"))  # not the bucket's
        return (
            f"{len(snapshot.slots)} slots, {len(snapshot.allocations)} allocations{demand}, "
            f"{standing} records standing for {step.interval_s or 0:.0f} s"
        )

    def _history_said(self, ran: Ran[HistoryStep]) -> str:
        """The history job (:meth:`ProbeCycle.history`): new jobs past every checkpoint."""
        reading = ran.read
        self._problems(reading, "history")
        self._committed(ran.enqueued, ran.status)
        failed = len(reading.failures)
        jobs = reading.job_count or 0
        return f"{jobs} new jobs" + (f", {failed} source(s) skipped" if failed else "")

    def _flush_said(self, delivery: Delivery) -> str | None:
        """The delivery, judged (:func:`~probes.pipeline.verdict.judge`): a SinkError while
        records wait in the outbox; the records refused for good said as a WARNING."""
        if delivery.installed:
            log.info("flush: installed index templates %s (store.install_templates)", ", ".join(delivery.installed))
        verdict = judge(delivery)
        status = delivery.status
        self.metrics.set_outbox(status.depth, status.oldest, status.dead_letters)
        if delivery.flushed is not None:
            self.metrics.flushed(delivery.flushed.sent)
        for reason in verdict.queued:
            if reason.source is not None:
                self.metrics.source_failed(reason.source)
        if verdict.queued:
            raise SinkError("; ".join(reason.text for reason in verdict.queued))
        for reason in verdict.refused:
            log.warning("flush: %s", reason.text)
        assert delivery.flushed is not None  # else the verdict queued the records
        waiting = sum(n for kind, n in status.depth.items() if kind != UPSTREAM_JOBS)
        return flush_line(delivery.flushed, delivery.upstream, waiting)

    def _fairshare_said(self, ran: Ran[Batch]) -> str | None:
        """The fairshare roll (:func:`fairshare_step`): the windows that closed since the last."""
        self._committed(ran.enqueued, ran.status)
        done = ran.committed
        if LEDGER_KEY not in done.checkpoints:  # the first roll only marks where rolls start; or none closed
            return None
        docs = done.records.get("fairshare")
        if not docs:
            last = float(done.checkpoints[ROLLED_KEY]["window_start"])
            return f"rolled the windows up to {iso_utc([last])[0]}: no usage in them, 0 records"
        names = ", ".join(sorted({s for s in docs.column("timestamp") if s}))  # a window's start, ISO
        return f"rolled window(s) {names}: {len(docs)} records"

    def _priority_said(self, synced: Synced) -> str:
        """The priority sync: the commands it ran, the submitters it set."""
        self._committed(synced.committed.counts(), synced.status)
        for command in synced.result.commands:
            log.info("priority sync: %s", command)
        return "; ".join([f"set {len(synced.result.applied)} submitter(s)", *plan_notes(synced.result.plan)])

    # -- helpers ------------------------------------------------------------------------------------

    def _committed(self, enqueued: Mapping[str, int], status: OutboxStatus) -> None:
        """A job's commit in the metrics: the records by kind, and the outbox after it."""
        self.metrics.committed(dict(enqueued))
        self.metrics.set_outbox(status.depth, status.oldest, status.dead_letters)
        log.debug(
            "committed %s; the outbox holds %s",
            ", ".join(f"{n} {kind}" for kind, n in enqueued.items()) or "nothing",
            ", ".join(f"{n} {kind}" for kind, n in status.depth.items()) or "nothing",
        )

    def _problems(self, reading: Reading, job: str) -> None:
        """A metric per failed source, logged once while down (:class:`SourceOutages`); malformed ads quarantined."""
        for source in reading.failures:
            self.metrics.source_failed(source)
        self.metrics.quarantined_ads({name: len(report.malformed) for name, report in reading.reports.items()})
        if reading.snapshot is not None and "status" in reading.reports:
            rejects = reading.reports["status"].rejects
            self.metrics.status_read(
                reading.snapshot.unheard["since"].tolist(),
                {why: rejects[key] for why, key in UNBILLED.items()},
                len(incomplete_nodes(reading.snapshot)),
            )
        quarantine = self.config.probe.state_dir / "quarantine"
        problems = problem_lines(reading.reports, {}, quarantine, datetime.now(UTC))  # the sources' apart
        self._outages.log(log, job, reading.failures, problems)

    def _await_snapshot(self) -> None:
        """With slot sources, the history waits for the first snapshot (up to ``pool.timeout_s``
        + 5 s) and is not read without one: its jobs would be recorded unpriced, unlike the
        same jobs read by ``probe once``; they stay past the checkpoint for the next run."""
        if not self.sources.slots:
            return
        deadline = time.monotonic() + self.config.pool.timeout_s + 5
        while not self._snapshot_done.wait(0.2):
            if self._stopping.is_set() or time.monotonic() > deadline:
                raise SourceError(
                    "no slot snapshot yet: the history's jobs are priced against the pool's machines, "
                    "so they are read once a snapshot succeeded"
                )


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _summaries_said(ran: Summaries) -> str:
    return f"{ran.done.total} summaries of {ran.first} .. {ran.last}"
