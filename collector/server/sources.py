"""What requests without a token may hold in memory: bytes of bodies, per source and in all.

A probe's requests are bounded by its token (``max_requests_per_probe`` bodies of at most
``max_records_body_size``). Requests without one (Gratia senders, who carry no token) are
bounded here instead: the bytes their bodies hold, as sent and as decompressed, are taken from a
budget of the source address's (``anonymous_memory_per_source``; an IPv6 source is its /64, what
one host is given) and from one of all such requests together (``anonymous_memory``), as the
bytes arrive and as they are inflated, and given back when the request ends.

A request the budgets cannot hold is refused: 503 with Retry-After (the sender keeps its records
and sends them again) when others hold the budget; 413 when the request alone is over its
source's budget, which no retry would change.
"""

from __future__ import annotations

import ipaddress
import threading
from collections import Counter
from dataclasses import dataclass, field

from collector.addresses import ip_of
from collector.errors import OverloadedError, TooLargeError

__all__ = ["Lease", "SourceBudgets", "source_of"]


def source_of(host: str | None) -> str:
    """The budget's key for a client address: the address itself (an IPv4-mapped one in IPv4
    form), an IPv6 address's /64."""
    address = ip_of(host)
    if address is None:
        return host or "-"  # a Unix socket, or a test client's made-up name
    if isinstance(address, ipaddress.IPv6Address):
        return str(ipaddress.IPv6Network((address, 64), strict=False))
    return str(address)


@dataclass(eq=False)
class SourceBudgets:
    """The bytes requests without a token hold, by source (see the module docstring). Taken
    from the event loop and from the inflating threads: a lock keeps the counts whole."""

    per_source: int
    total: int
    held: Counter[str] = field(default_factory=Counter)
    _in_all: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def in_all(self) -> int:
        """Bytes held now, by every source."""
        return self._in_all

    def lease(self, host: str | None) -> Lease:
        """A request's share of its source's budget (from nothing; :meth:`Lease.close` gives it back)."""
        return Lease(self, source_of(host))

    def _take(self, source: str, size: int, mine: int) -> None:
        with self._lock:
            held = self.held[source]
            if mine + size > self.per_source:
                raise TooLargeError(
                    f"the body needs over {self.per_source} bytes (as sent and decompressed), the most a request "
                    "without a token may hold (collector.anonymous_memory_per_source); send smaller bundles"
                )
            if held + size > self.per_source or self._in_all + size > self.total:
                raise OverloadedError(
                    f"requests without a token from {source} hold {held} bytes of bodies, or those of every address "
                    "their limit (collector.anonymous_memory_per_source, anonymous_memory); retry later"
                )
            self.held[source] = held + size
            self._in_all += size

    def _give_back(self, source: str, size: int) -> None:
        with self._lock:
            self._in_all -= size
            left = self.held[source] - size
            if left > 0:
                self.held[source] = left
            else:
                del self.held[source]


@dataclass(eq=False)
class Lease:
    """One request's bytes from its source's budget."""

    budgets: SourceBudgets
    source: str
    size: int = 0

    def take(self, size: int) -> None:
        """Hold ``size`` more bytes; OverloadedError (503) when the budgets have not them free,
        TooLargeError (413) when this request alone would be over its source's budget."""
        self.budgets._take(self.source, size, self.size)
        self.size += size

    def close(self) -> None:
        """Give back every byte held."""
        if self.size:
            self.budgets._give_back(self.source, self.size)
            self.size = 0
