"""Leases in the embedded store: a row of its ``lease`` table each (layout 2,
:mod:`collector.sinks.sqlite_layout`), read and written in one write transaction, so that of
two processes asking at once (two collectors on one store file) one gets the lease and the
other finds it taken. See :class:`~collector.sinks.base.Lease`.
"""

from __future__ import annotations

import sqlite3

from collector.sinks.base import Lease, next_token
from collector.transaction import write_transaction

__all__ = ["release_lease", "take_lease"]


def take_lease(db: sqlite3.Connection, path: str, name: str, holder: str, ttl_s: float, now: float) -> Lease:
    """See :meth:`collector.sinks.base.Sink.take_lease`."""
    with write_transaction(db, path, f"cannot take the lease {name!r}"):
        row = db.execute("SELECT holder, token, expires FROM lease WHERE name = ?", (name,)).fetchone()
        if row is not None:
            held = Lease(name, str(row[0]), int(row[1]), float(row[2]))
            if held.holder != holder and now < held.expires:
                return held
            # renewed, the same token; a new grant (free, run out, or let go by this holder
            # after an earlier run) a new one, so that each run's writes have their own
            token = held.token if held.held_by(holder, now) else next_token(held.token, now)
        else:
            token = next_token(None, now)
        lease = Lease(name, holder, token, now + ttl_s)
        db.execute(
            "INSERT INTO lease(name, holder, token, expires) VALUES (?, ?, ?, ?) ON CONFLICT(name) DO UPDATE SET "
            "holder = excluded.holder, token = excluded.token, expires = excluded.expires",
            (name, holder, token, lease.expires),
        )
    return lease


def release_lease(db: sqlite3.Connection, path: str, lease: Lease) -> None:
    """See :meth:`collector.sinks.base.Sink.release_lease`."""
    with write_transaction(db, path, f"cannot let the lease {lease.name!r} go"):
        db.execute(
            "UPDATE lease SET expires = 0 WHERE name = ? AND holder = ? AND token = ?",
            (lease.name, lease.holder, lease.token),
        )
