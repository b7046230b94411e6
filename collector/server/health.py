"""``GET /healthz``: what the collector says of itself, and the outbox's gauges of ``/metrics``.

A full outbox disk or a failing commit, a stopped flusher or summarizer, or a stale store is a
failure (503: the load balancer takes the collector out); a store that is down or unchecked,
records set aside, a stuck delivery or a failed summary run is "degraded" (200: records are
taken and wait). Times are UNIX seconds, shown in RFC 3339 (UTC).
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

from collector.server.committer import GroupCommitter
from collector.server.flusher import STUCK_ROUNDS, Flusher, FlushState
from collector.server.metrics import OutboxGauges
from collector.server.room import Room
from collector.server.summarizer import Summarizer, SummaryState
from collector.settings import CollectorSettings

__all__ = ["OUTBOX_FAILURE_HOLD_S", "flush_degraded", "health_document", "iso", "outbox_gauges", "reachable"]


def health_document(
    settings: CollectorSettings, committer: GroupCommitter, flusher: Flusher, summarizer: Summarizer, now: float
) -> tuple[dict[str, Any], int]:
    """The ``/healthz`` document at ``now`` (UNIX s) and its status code (a stopped summarizer
    is started again, and said)."""
    state = flusher.state
    since = state.last_store_success or state.started
    stale = committer.depth > 0 and now - since > settings.store_stale_s
    revived = summarizer.revive()
    room = committer.room()
    outbox_failing = _outbox_failing(committer, state, room, now)
    failing = [
        *(["flusher stopped"] if not flusher.alive else []),
        *([outbox_failing] if outbox_failing else []),
        *(["summarizer stopped (started again)"] if revived else []),
        *([f"summarizer failing: {summarizer.state.crashed}"] if summarizer.state.crashed else []),
        *(["store stale"] if stale else []),
    ]
    status = "; ".join(failing) or "ok"
    degraded = _store_degraded(state) + flush_degraded(state) + _summaries_degraded(summarizer.state)
    # A full outbox disk wins over a store that is down or unchecked: requests get 503 then, and
    # the load balancer must hear it (status and 503), while a store's outage alone is a 200 (the
    # records are taken and wait). Both are said all the same: the status names the disk, and
    # "degraded" keeps the store's line, "disk_full" and "store_reachable" are both set.
    if status == "ok" and degraded:
        status = "degraded"  # taking and delivering records, and something to look at: 200 all the same
    doc = {
        "status": status,
        "degraded": degraded,
        "outbox": {
            "depth": committer.depth,
            "oldest": iso(state.oldest),
            "dead_letters": sum(state.dead_letters.values()),
            "disk_full": bool(outbox_failing and outbox_failing.startswith(_FULL)),
            "free_bytes": room.free,
            "unrecorded": state.unrecorded,
            "last_dead_letter": _dead_letter(state.last_dead_letter),
        },
        "delivery": {
            "stuck": _stuck(state),
            "stuck_rounds": state.stuck_rounds,
            "stuck_since": iso(state.stuck_since),
        },
        "last_flush": iso(state.last_flush),
        "last_store_success": iso(state.last_store_success),
        "last_error": state.last_error,
        "store": settings.store.url,
        "store_reachable": reachable(state),
        "templates_checked": state.templates_checked,
        "store_stale_s": settings.store_stale_s,
        "summaries": {
            "last_run": {name: iso(at) for name, at in summarizer.state.last_run.items()},
            "failures": summarizer.state.failures,
            "last_error": summarizer.state.last_error,
            "crashes": summarizer.state.crashes,
            "crashed": summarizer.state.crashed,
            "restarts": summarizer.state.restarts,
            "waiting_for_store": summarizer.state.waiting,
            "deferred": summarizer.state.deferred,
            "busy": summarizer.state.busy,
            "deleted": summarizer.state.deleted,
        },
    }
    return doc, 200 if status in ("ok", "degraded") else 503


def outbox_gauges(committer: GroupCommitter, flusher: Flusher) -> OutboxGauges:
    """The outbox's gauges of ``/metrics``, now."""
    state = flusher.state
    room = committer.room()
    full = _outbox_failing(committer, state, room, time.time())
    return OutboxGauges(
        committer.depth, state.oldest, state.dead_letters, state.last_store_success, committer.commits,
        room.free, bool(full and full.startswith(_FULL)), state.unrecorded, state.stuck_rounds,
    )  # fmt: skip


def reachable(state: FlushState) -> bool | None:
    """Whether the store answered as a store the last time the flusher asked (a refusal is an
    answer); None while that is not known (before the first check, or between a failed round and
    the next check)."""
    if state.templates_checked or state.store_refuses:
        return True
    return False if state.store_problem is not None else None


def _store_degraded(state: FlushState) -> list[str]:
    """The store's templates could not be checked: records are taken and wait (200 all the same:
    a collector out of its load balancer during a store's outage would take nothing at all)."""
    if state.store_problem is None:
        return []
    if state.store_refuses:
        return [f"the store refuses: {state.store_problem}; records are taken and wait in the outbox until it is fixed"]
    return [
        f"the store is unreachable ({state.store_problem}): its index templates are unchecked; records are taken "
        "and wait in the outbox until it answers"
    ]


def flush_degraded(state: FlushState) -> list[str]:
    """What a running collector's operator should look at, though records are taken: records
    set aside (the store refused them for good), delivery stuck (the store took none of the
    records waiting in :data:`~collector.server.flusher.STUCK_ROUNDS` rounds in a row), flush
    rounds that failed unexpectedly."""
    out = []
    if dead := sum(state.dead_letters.values()):
        said = f"{dead} record(s) set aside: the store refused them for good (dead letters in the outbox)"
        if (last := state.last_dead_letter) is not None:
            said += f"; the last, {last['kind']} {last['id']} at {iso(last['failed_at'])}: {last['error']}"
        out.append(said)
    if _stuck(state):
        out.append(
            f"delivery stuck: the store took none of the {state.depth} record(s) waiting in {state.stuck_rounds} "
            f"flush rounds in a row, since {iso(state.stuck_since)}: {state.last_error}"
        )
    if state.crashed:
        out.append(f"the last flush round failed unexpectedly ({state.crashes} so far): {state.crashed}")
    return out


def _stuck(state: FlushState) -> bool:
    return state.stuck_rounds >= STUCK_ROUNDS and state.depth > 0


def _dead_letter(letter: dict[str, Any] | None) -> dict[str, Any] | None:
    """The newest dead letter as /healthz shows it (its time in RFC 3339)."""
    return None if letter is None else {**letter, "failed_at": iso(letter["failed_at"])}


OUTBOX_FAILURE_HOLD_S = 300.0
"""How long /healthz reports a failed outbox commit when no commit came after it (seconds):
long enough for probes' retries to come and tell again, short enough that a collector whose
disk was freed while no request came is not kept out of its load balancer for ever."""


_FULL = "outbox disk full: "


def _outbox_failing(committer: GroupCommitter, state: FlushState, room: Room, now: float) -> str | None:
    """Why requests would get 503 from the outbox now, or records wait that it cannot write
    down, as /healthz says it; None when neither. A full file system (``outbox disk full: ...``)
    is said while there is no room for a request's body (the reserve kept), while the flusher
    cannot write to the outbox, or after a commit that found no room until one succeeds or room
    was freed since (within :data:`OUTBOX_FAILURE_HOLD_S`); any other failed commit
    (``outbox failing: ...``) until one succeeds, within that hold."""
    full = []
    if not room.fits(committer.request_bytes):
        full.append(f"{room.says(committer.request_bytes)}; requests get 503 until there is room")
    if state.disk_full is not None:
        waiting = f"{state.unrecorded} record(s) the store took wait to be written down, " if state.unrecorded else ""
        why = f"the flusher cannot write to the outbox: {waiting}nothing is sent until it can"
        full.append(f"{why} ({state.disk_full})")
    if full:
        return _FULL + "; ".join(full)
    failing = committer.failing
    if failing is None or now - failing[1] >= OUTBOX_FAILURE_HOLD_S:
        return None
    if committer.full_at_free is None:
        return f"outbox failing: the last commit failed, every request gets 503 until one succeeds ({failing[0]})"
    if room.free is None or room.free <= committer.full_at_free:  # no room freed since (a quota, a size limit)
        return f"{_FULL}the last commit found no room, every request gets 503 until one succeeds ({failing[0]})"
    return None


def _summaries_degraded(state: SummaryState) -> list[str]:
    """Summary runs the store failed (the summaries are late; records are taken all the same)."""
    return [f"the last summary run failed ({state.failures} so far): {state.last_error}"] if state.last_error else []


def iso(seconds: float | None) -> str | None:
    return None if seconds is None else datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
