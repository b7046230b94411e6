"""What a flush of the probe service says: one line of what the store and ``[upstream]`` took."""

from __future__ import annotations

from collector.flushing import FlushResult

__all__ = ["flush_line"]


def flush_line(result: FlushResult, upstream: FlushResult | None, waiting: int) -> str | None:
    """The line of a flush that sent ``result`` to the store (and ``upstream`` to ``[upstream]``,
    None without one), ``waiting`` records left in the outbox; None when nothing was sent."""
    sent = sum(result.sent.values())
    up = sum(upstream.sent.values()) if upstream is not None else 0
    if not sent and not up:
        return None
    kinds = ", ".join(f"{n} {k}" for k, n in sorted(result.sent.items()))
    if sent and not any(result.untold(k) for k in result.sent):  # the store said which it held already (a backfill)
        new, already = sum(result.new.values()), sum(result.already_stored.values())
        kinds += f"; {new} new, {already} already stored"
    left_out = sum(result.left_out.values()) + (sum(upstream.left_out.values()) if upstream is not None else 0)
    told = f"; {up} job records to [upstream]" if up else ""
    if left_out:  # acknowledged, not sent: what condor-ap would not report (logged by reason by the sink)
        told += f"; {left_out} job records left out of GRACC as condor-ap leaves them"
    return f"sent {sent} records ({kinds}), {waiting} waiting{told}"
