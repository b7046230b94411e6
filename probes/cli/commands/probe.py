"""``fairacct probe once|run|checkpoints``: the probe.

``probe once`` runs one cycle into the store (each of the cycle's configured jobs once, the
priority sync and the summaries included) and prints what it found; ``probe run`` is the
service (APScheduler) until a signal; ``probe checkpoints`` lists where the probe has read each
history up to, and sets one back; ``probe from-condor-ap`` takes over GRACC's records from
condor-ap at its exact cutoff (:mod:`probes.sources.handoff`).

Each schedd's (and each history file's) checkpoint is in the outbox
(:mod:`probes.sources.checkpoints`). An operator lists them; ``--reset NAME`` forgets one (the
next pass reads that history whole); ``--reset NAME --since DATE`` backfills: the next pass
reads the jobs that ended at or after DATE, by the rule of a checkpoint that holds only an end
time (the schedd's scan stops ``pool.history_lookback_s`` before it), and leaves a position
behind as every pass does. Records have deterministic ids, so the jobs read again are stored
once. Changing a checkpoint takes the state directory's lock: not while the probe runs.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from collector.errors import ConfigError
from probes.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    check_config,
    log_lines,
    nonzero,
    print_doc,
    print_text,
    probe_name,
    report_problems,
    require,
    warn_loose_token,
)
from probes.cli.options import ALL_SOURCES, add_actions, add_options, condor_option

if TYPE_CHECKING:
    from probes.cli.views import Section
    from probes.config import ProbeConfig
    from probes.pipeline.cycle import Cycle
    from probes.pipeline.lane import Delivery
    from probes.pipeline.reading import Reading
    from probes.sources.live import LivePool

__all__ = ["HELP", "add_arguments", "run"]

HELP = "run the probe"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    action = add_actions(parser)
    once = "run one cycle into the store (each configured job once: the summaries, the priority sync too), print it"
    add_options(action("once", help=once), *ALL_SOURCES)
    service = add_options(
        action("run", help="run the probe service (APScheduler) until SIGTERM or SIGINT"),
        *ALL_SOURCES,
        "--log-level",
        "--log-format",
    )
    service.add_argument(
        "--for", dest="duration", type=float, metavar="SECONDS", help="stop after SECONDS (a demo, a test)"
    )
    condor_option(service)
    _checkpoints_arguments(
        add_options(action("checkpoints", help="where each schedd's history was read up to; reset or backfill one"))
    )
    _handoff_arguments(
        add_options(action("from-condor-ap", help="take over from condor-ap: send GRACC exactly the jobs it did not"))
    )


def run(args: argparse.Namespace, config: ProbeConfig) -> int:
    """probe once: one cycle into the store, and what it found; probe run: the service; probe
    checkpoints: the history checkpoints."""
    if args.action == "run":
        return _serve(config, args.duration)
    if args.action == "checkpoints":
        print_text(args, *_checkpoints(args, config))
        return EXIT_OK
    if args.action == "from-condor-ap":
        print_text(args, *_handoff(args, config))
        return EXIT_OK
    require(
        config.sources.live or config.sources.status_files or config.sources.history or config.sources.idle_files,
        "sources",
        "--status-file, --idle-file or --history (or set sources.live = true)",
    )
    cycle, delivery = _store_cycle(config, args.strict)
    report_problems(cycle.reading, args, quarantine=config.probe.state_dir / "quarantine")
    if cycle.snapshot.replayed:
        print(f"fairacct: {cycle.snapshot.replayed}", file=sys.stderr)
    if cycle.snapshot.unobserved_s:
        print(
            f"fairacct: note: {cycle.snapshot.unobserved_s:.0f} s before this snapshot were not observed (more "
            f"than pool.interval_s = {config.pool.interval_s:g} s since the last one): no slot record claims them, "
            "gap records name them per node",
            file=sys.stderr,
        )
    print_doc(args, *_show_cycle(cycle, delivery, config))
    return _delivery(cycle, delivery)


# -- probe once ----------------------------------------------------------------------------------


def _store_cycle(config: ProbeConfig, strict: bool | None) -> tuple[Cycle, Delivery]:
    """The cycle (:meth:`~probes.pipeline.cycle.ProbeCycle.once`, the service's jobs once
    each), committed to the outbox whatever the store does, then sent if it can be."""
    from collector.sinks import open_store
    from collector.statelock import hold_state_dir
    from probes.files import check_writable
    from probes.pipeline.cycle import ProbeCycle
    from probes.pipeline.lane import RecordLane

    state = config.probe.state_dir
    warn_loose_token(config)
    check_writable(state, "probe.state_dir")
    with hold_state_dir(state, "probe.state_dir"), _history_progress(config) as pool:
        sink = open_store(config.store, config.opening())  # a missing token: refused before the outbox
        lane = RecordLane(config)
        cycle = ProbeCycle(config, probe=probe_name(), strict=strict, pool=pool, lane=lane)
        try:
            with lane.open() as outbox:
                done, delivery = cycle.once(outbox, sink)
                _installed(delivery.installed)
                return done, delivery
        finally:
            cycle.close()
            sink.close()


@contextlib.contextmanager
def _history_progress(config: ProbeConfig) -> Iterator[LivePool | None]:
    """The live pool of ``probe once``, counting the history it reads on a bar when stderr is a
    terminal (a first pass or a backfill can read years of jobs); None: the configuration's."""
    if not (config.sources.live and sys.stderr.isatty()):
        yield None
        return
    from probes.cli.progress import progress_counter
    from probes.pipeline.reading import live_pool

    pool = live_pool(config)
    with progress_counter("reading the history", "jobs") as advance:
        pool.on_progress = advance
        yield pool


def _installed(names: tuple[str, ...]) -> None:
    if names:
        print(f"fairacct: installed index templates (store.install_templates): {', '.join(names)}", file=sys.stderr)


def _show_cycle(cycle: Cycle, delivery: Delivery, config: ProbeConfig) -> tuple[dict[str, Any], list[Section]]:
    """What was read, the snapshot's accounting, and what became of the records."""
    from collector.sinks import describe_url
    from probes.cli import views
    from probes.pipeline.overhead import overhead_report

    reading, flushed = cycle.reading, delivery.flushed
    doc: dict[str, Any] = {
        "read": views.read_json(reading, slots=False)["read"],
        "enqueued": cycle.enqueued,
        "sent": nonzero(flushed.sent) if flushed else {},
        "new": nonzero(flushed.new) if flushed else {},
        "already_stored": nonzero(flushed.already_stored) if flushed else {},
        "untold": {k: n for k in flushed.sent if (n := flushed.untold(k))} if flushed else {},
        "retry": nonzero(flushed.retried) if flushed else {},
        "dead": nonzero(flushed.dead) if flushed else {},
        "unsent": delivery.unsent,
        "left_out": dict(flushed.left_out) if flushed else {},
    }
    if (up := delivery.upstream) is not None:  # [upstream]'s Gratia collector
        doc["upstream"] = {"sent": nonzero(up.sent), "retry": nonzero(up.retried), "dead": nonzero(up.dead),
                           "left_out": dict(up.left_out)}  # fmt: skip
    sections: list[Section] = [("read", _read_summary(reading))]
    report = cycle.snapshot.overhead
    if report is None and reading.snapshot is not None:  # a replay: shown, though not recorded again
        report = overhead_report(reading.snapshot, config, reading.idle)
    if report is not None:
        doc |= {"overhead": views.overhead_json(report), "bill": views.bill_json(report.nodes, report.bills)}
        sections += views.overhead_sections(report, per_slot=False)
        sections += views.bill_sections(report.nodes, report.bills, per_job=False)
    where = describe_url(config.store.url, config.probe.state_dir)
    sections.append(("records", views.records_summary(cycle.enqueued, delivery, where)))
    if up is not None:
        sent_up = f"job: {up.sent.get('job', 0)} records to [upstream] {config.upstream.url}"
        sections.append(("upstream", "\n".join([sent_up, *views.left_out_lines(up.left_out)])))
    if cycle.done or cycle.failed or cycle.skipped:  # the priority sync, the summaries: when configured
        doc["jobs"] = {name: {"done": line} for name, line in cycle.done.items()}
        doc["jobs"] |= {name: {"failed": error} for name, error in cycle.failed.items()}
        doc["jobs"] |= {name: {"skipped": why} for name, why in cycle.skipped.items()}
        lines = [f"{name}: {line}" for name, line in cycle.done.items()]
        lines += [f"{name}: failed" for name in cycle.failed] + [f"{name}: not run" for name in cycle.skipped]
        sections.append(("jobs", "\n".join(lines)))
    return doc, sections


def _read_summary(result: Reading) -> str:
    lines = []
    if result.snapshot is not None:
        s, a = result.snapshot.slots, result.snapshot.allocations
        types = ", ".join(f"{n} {str(k).lower()}" for k, n in s["slot_type"].value_counts().items())
        lines.append(f"{len(s)} slots ({types}), {len(a)} allocations")
    if result.idle is not None:
        lines.append(f"{int(result.idle['count'].sum())} idle jobs in {len(result.idle)} autoclusters")
    if result.job_count is not None:
        lines.append(f"{result.job_count} jobs from the history")
    return "\n".join(lines)


def _delivery(cycle: Cycle, delivery: Delivery) -> int:
    """What became of the cycle's records (:func:`~probes.pipeline.verdict.judge`, as the
    service judges its flushes) and of its other jobs, on stderr when not all went well: the
    exit code."""
    from probes.pipeline.verdict import judge

    verdict = judge(delivery)
    for reason in verdict.reasons:
        print(f"fairacct: {reason.text}", file=sys.stderr)
    for name, why in cycle.skipped.items():
        print(f"fairacct: {name}: not run, {why}", file=sys.stderr)
    for name, error in cycle.failed.items():
        print(f"fairacct: {name} failed: {error}", file=sys.stderr)
    if cycle.failed and verdict.exit_status == EXIT_OK:
        return EXIT_FAILED
    return verdict.exit_status


# -- probe run -----------------------------------------------------------------------------------


def _serve(config: ProbeConfig, duration: float | None) -> int:
    """The service, logging to stderr one line per event, until a signal or --for."""
    from collector.statelock import hold_state_dir
    from probes.files import check_writable
    from probes.service.scheduler import ProbeService  # APScheduler is imported only by the service

    logging.getLogger("apscheduler").setLevel(logging.WARNING)
    check_config(config)  # what `probe once` and `config check` refuse (a missing token), refused before starting
    warn_loose_token(config)
    check_writable(config.probe.state_dir, "probe.state_dir")
    with (
        hold_state_dir(config.probe.state_dir, "probe.state_dir"),
        log_lines(config.log.level, config.log.format, config.log.file),
    ):
        service = ProbeService(config, probe=probe_name())
        service.run(duration=duration)
    return EXIT_OK


# -- probe checkpoints ---------------------------------------------------------------------------


def _checkpoints_arguments(cmd: argparse.ArgumentParser) -> None:
    cmd.add_argument(
        "--reset",
        metavar="NAME",
        help="a schedd's name (as listed) or a history file's path: forget its checkpoint (with --since: set it)",
    )
    cmd.add_argument(
        "--since",
        metavar="DATE",
        help="with --reset: the next pass reads the jobs that ended at or after DATE (ISO-8601 UTC or UNIX seconds)",
    )


def _checkpoints(args: argparse.Namespace, config: ProbeConfig) -> tuple[dict[str, Any], str]:
    """probe checkpoints: list the history checkpoints, or reset one; the JSON document and the
    text to print."""
    from collector.outbox import Outbox
    from collector.statelock import hold_state_dir
    from probes.cli.times import parse_time
    from probes.files import check_writable
    from probes.pipeline.lane import Batch, RecordLane
    from probes.sources.checkpoints import HISTORY_PREFIX as _HISTORY
    from probes.sources.checkpoints import checkpoint_key, history_key

    if args.since and not args.reset:
        raise ConfigError("--since needs --reset NAME: the schedd (or history file) to backfill")
    state = config.probe.state_dir
    outbox_path = state / "outbox.sqlite"
    if not outbox_path.is_file():
        raise ConfigError(f"probe.state_dir: no outbox in {state}: this probe has read nothing yet")
    if not args.reset:
        with Outbox(outbox_path) as outbox:
            listed = outbox.checkpoints(_HISTORY)
        rows = [_row(source, value, at) for source, (value, at) in listed.items()]
        text = "\n".join(f"{r['name']}: {r['describe']}" for r in rows) or f"no history checkpoints in {outbox_path}"
        return {"checkpoints": rows}, text
    since = parse_time(args.since, "--since") if args.since else None
    check_writable(state, "probe.state_dir")
    lane = RecordLane(config)
    with hold_state_dir(state, "probe.state_dir"), lane.open() as outbox:
        listed = outbox.checkpoints(_HISTORY)
        source = next(
            (s for s in (checkpoint_key(args.reset), history_key(args.reset), args.reset) if s in listed), None
        )
        if source is None and since is None:
            names = ", ".join(_row(s, v, a)["name"] for s, (v, a) in listed.items()) or "none"
            raise ConfigError(f"--reset: no history checkpoint named {args.reset!r} (there are: {names})")
        if source is None:  # a backfill of a history not read yet: its name as the probe will look it up
            source = history_key(args.reset) if "/" in args.reset else checkpoint_key(args.reset)
        if since is None:
            outbox.forget_checkpoint(source)
            text = f"{_name(source)}: checkpoint forgotten; the next pass reads its whole history"
        else:
            lane.commit(outbox, [Batch(checkpoints={source: {"end": since, "ids": []}})])
            text = f"{_name(source)}: the next pass reads the jobs that ended at or after {_iso(since)}"
    return {"reset": _name(source), "since": since}, text


# -- probe from-condor-ap -------------------------------------------------------------------------


def _handoff_arguments(cmd: argparse.ArgumentParser) -> None:
    from probes.sources.handoff import DATA_FOLDER, LOG_FOLDER, WORKING_FOLDER

    cmd.add_argument(
        "--data",
        metavar="DIR",
        default=DATA_FOLDER,
        help=f"condor-ap's DataFolder, the schedd's PER_JOB_HISTORY_DIR (default {DATA_FOLDER})",
    )
    cmd.add_argument(
        "--working",
        metavar="DIR",
        default=WORKING_FOLDER,
        help=f"condor-ap's WorkingFolder, its outbox (default {WORKING_FOLDER})",
    )
    cmd.add_argument(
        "--logs",
        metavar="DIR",
        default=LOG_FOLDER,
        help=f"condor-ap's LogFolder: its last run ended when it last wrote there (default {LOG_FOLDER})",
    )
    cmd.add_argument("--at", metavar="TIME", help="the end of condor-ap's last run, when its logs are gone")


def _handoff(args: argparse.Namespace, config: ProbeConfig) -> tuple[dict[str, Any], str]:
    """probe from-condor-ap: read condor-ap's cutoff from what it left, write it into the state
    directory (made on a fresh install), and set back every history checkpoint the probe has to
    the earliest end of a job it must now send; the JSON document and the text to print."""
    from pathlib import Path

    from collector.statelock import hold_state_dir
    from probes.cli.times import parse_time
    from probes.files import check_writable
    from probes.pipeline.lane import Batch, RecordLane
    from probes.sources.checkpoints import HISTORY_PREFIX
    from probes.sources.handoff import read_handoff, save_handoff

    at = parse_time(args.at, "--at") if args.at else None
    handoff = read_handoff(Path(args.data), Path(args.working), Path(args.logs), at=at)
    since = handoff.cutoff if handoff.since is None else handoff.since
    state = config.probe.state_dir
    check_writable(state, "probe.state_dir")
    reset: list[str] = []
    with hold_state_dir(state, "probe.state_dir"):
        path = save_handoff(handoff, state)
        lane = RecordLane(config)
        if lane.path.is_file():  # a probe that read already reads again from there
            with lane.open() as outbox:
                listed = outbox.checkpoints(HISTORY_PREFIX)
                for source, (value, _) in listed.items():
                    if not isinstance(value, dict) or float(value.get("end", -1.0)) > since:
                        lane.commit(outbox, [Batch(checkpoints={source: {"end": since, "ids": []}})])
                        reset.append(_name(source))
    found = ", ".join(f"{n} {what}" for what, n in handoff.found.items())
    lines = [
        f"condor-ap's last run ended {_iso(handoff.cutoff)}; it has not sent {len(handoff.unsent)} job(s) ({found})",
        f"GRACC gets from fairacct every job that ended after {_iso(handoff.cutoff)} and those "
        f"{len(handoff.unsent)}, and none of the jobs condor-ap sent (written to {path})",
        "do not run condor-ap again: stop its cron and remove it, or its outbox is sent twice",
    ]
    if reset:
        lines.append(f"the next pass reads again the jobs that ended at or after {_iso(since)}: {', '.join(reset)}")
    doc = {"cutoff": handoff.cutoff, "since": since, "unsent": len(handoff.unsent), "found": handoff.found,
           "handoff": str(path), "checkpoints_reset": reset}  # fmt: skip
    return doc, "\n".join(lines)


def _name(source: str) -> str:
    from probes.sources.checkpoints import history_name

    return history_name(source)


def _row(source: str, value: Any, at: float) -> dict[str, Any]:
    end = float(value.get("end", -1.0)) if isinstance(value, dict) else -1.0
    tail = value.get("tail", []) if isinstance(value, dict) else []
    describe = (
        (f"jobs read up to {_iso(end)}" if end >= 0 else "no job read yet")
        + (f", position at job {tail[0]}" if tail else "")
        + f" (updated {_iso(at)})"
    )
    return {"name": _name(source), "source": source, "end": end, "tail": tail, "updated": _iso(at),
            "describe": describe, "value": json.loads(json.dumps(value))}  # fmt: skip


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
