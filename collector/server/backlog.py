"""Who holds the outbox's backlog, for backpressure that falls on the probe that causes it.

Backpressure (:meth:`collector.server.committer.GroupCommitter.admit`) once refused every probe
alike as soon as the outbox held more than ``backpressure_depth`` records: one probe sending 8
batches of 5,000 records at once kept a quiet one at 429 for 45 of its 59 tries (issue 54).
Now the budget is shared by the probes that hold the backlog, ``backpressure_depth / n`` each:
a probe holding its share or more gets 429, one under it is taken. While the outbox is over the
budget, some probe holds its share or more: the one that fills it is refused, and the others
are taken until they hold theirs.

What each probe holds is counted here, not in the outbox: the outbox sends its records oldest
first (by kind, in rounds of a few seconds), so the records waiting are, near enough, the
newest ``depth`` records admitted, and each probe's part of them is its part of that window.
The window is kept in segments of about ``segment_records`` records, each counting its records
by probe, so its memory is a few counters per segment however small the requests: the oldest
segment is dropped once the newer ones cover the depth. A probe's count may be over its truth
by one segment (the oldest, partly sent), never under; records that waited from before a
restart are held by no probe.
"""

from __future__ import annotations

from collections import Counter, deque
from dataclasses import dataclass, field

__all__ = ["Backlog"]


@dataclass
class _Segment:
    held: Counter[str] = field(default_factory=Counter)  # records by probe
    total: int = 0


class Backlog:
    """The newest records admitted to the outbox, counted by probe (see the module docstring).
    Not thread-safe: its owner (the group committer) holds its lock around every call."""

    def __init__(self, segment_records: int) -> None:
        self.segment_records = max(1, segment_records)
        self._segments: deque[_Segment] = deque([_Segment()])
        self._held: Counter[str] = Counter()  # over every segment kept
        self._total = 0

    def __repr__(self) -> str:
        return f"Backlog({self._total} records of {len(self._held)} probes in {len(self._segments)} segments)"

    def add(self, probe: str, count: int, depth: int) -> None:
        """``count`` records of ``probe`` admitted; ``depth``: the records waiting now, theirs included."""
        last = self._segments[-1]
        if last.total >= self.segment_records:
            last = _Segment()
            self._segments.append(last)
        last.held[probe] += count
        last.total += count
        self._held[probe] += count
        self._total += count
        self.trim(depth)

    def trim(self, depth: int) -> None:
        """Forget the oldest segments the outbox no longer holds: those the newer ones cover ``depth`` without."""
        while len(self._segments) > 1 and self._total - self._segments[0].total >= depth:
            gone = self._segments.popleft()
            self._held -= gone.held  # (drops the probes that hold nothing more)
            self._total -= gone.total

    def held(self, probe: str) -> int:
        """Records of ``probe`` among those waiting (an upper bound, see the module docstring)."""
        return self._held[probe]

    def holders(self, probe: str) -> int:
        """The probes that share the budget when ``probe`` asks: those holding records, and it."""
        return len(self._held) + (probe not in self._held)
