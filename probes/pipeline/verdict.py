"""What a delivery came to, said once for ``probe once`` and the service alike: :func:`judge`.

=============  ===========  ==================================================================
outcome        exit status  when
=============  ===========  ==================================================================
``delivered``  0            nothing the delivery was to send waits in the outbox, nothing refused
``partly``     3            records wait in the outbox for the next delivery: the store (or
                            ``[upstream]``) did not take them, or its index templates refused
``failed``     1            the store (or ``[upstream]``) refused records for good: dead letters
=============  ===========  ==================================================================

``probe once`` prints the reasons and exits with the status; the service's flush fails its run
(an ERROR, ``/healthz``) while records wait, and says the records refused for good as a WARNING
(they left the queue: ``/healthz`` is ``degraded`` while they are dead letters).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from probes.config.store import UPSTREAM_JOBS

if TYPE_CHECKING:
    from probes.pipeline.lane import Delivery

__all__ = ["DELIVERED", "FAILED", "PARTLY", "Reason", "Verdict", "judge"]

DELIVERED, FAILED, PARTLY = 0, 1, 3
"""The exit statuses of the outcomes (``probe once``'s: EXIT_OK, EXIT_FAILED, EXIT_QUEUED)."""


@dataclass(frozen=True)
class Reason:
    """Why a delivery was not whole: its ``text``, and the ``source`` that failed (``sink``, the
    store; ``upstream``, ``[upstream]``'s collector; None: the store's templates refused)."""

    text: str
    source: str | None = None


@dataclass(frozen=True)
class Verdict:
    """A delivery judged: its ``outcome``, why records wait (``queued``) and why records were
    refused for good (``refused``), and the exit status the outcome gives."""

    outcome: Literal["delivered", "partly", "failed"]
    queued: tuple[Reason, ...] = ()
    refused: tuple[Reason, ...] = ()

    @property
    def exit_status(self) -> int:
        return {"delivered": DELIVERED, "partly": PARTLY, "failed": FAILED}[self.outcome]

    @property
    def reasons(self) -> tuple[Reason, ...]:
        """Every reason, those for good first."""
        return self.refused + self.queued


def judge(delivery: Delivery) -> Verdict:
    """The one verdict of a delivery (see the module docstring)."""
    status, flushed, up = delivery.status, delivery.flushed, delivery.upstream
    queued: list[Reason] = []
    refused: list[Reason] = []
    waiting = sum(n for kind, n in status.depth.items() if kind != UPSTREAM_JOBS)
    dead = {k: n for k, n in (flushed.dead.items() if flushed else ()) if n}
    if dead:
        example = delivery.dead_example
        refused.append(Reason(
            f"the store refused {sum(dead.values())} record(s) for good, now dead letters "
            f"({', '.join(f'{n} {k}' for k, n in sorted(dead.items()))})"
            + (f", e.g. {example['kind']} {example['id']}: {example['error']}" if example else "")
            + "; see `fairacct outbox --dead-letters`, fix the cause, then `fairacct outbox retry`",
            "sink",
        ))  # fmt: skip
    if up is not None and (refused_up := sum(up.dead.values())):
        refused.append(Reason(f"[upstream] refused {refused_up} job record(s) for good; see `fairacct outbox`",
                              "upstream"))  # fmt: skip
    if flushed is None or (flushed.errors and waiting):
        why = delivery.unsent or "the store's index templates could not be checked"
        queued.append(Reason(
            f"{waiting} record(s) queued in the outbox, not sent: {why}; "
            "the next `probe once` or `probe run` sends them",
            None if flushed is None else "sink",
        ))  # fmt: skip
    if up is not None and up.errors and (upstream_waiting := status.depth.get(UPSTREAM_JOBS, 0)):
        queued.append(Reason(
            f"[upstream] did not take every job record: {up.errors[0]}; {upstream_waiting} wait in the outbox, "
            "see `fairacct outbox`",
            "upstream",
        ))  # fmt: skip
    outcome: Literal["delivered", "partly", "failed"] = "failed" if refused else "partly" if queued else "delivered"
    return Verdict(outcome, tuple(queued), tuple(refused))
