"""Leases in Elasticsearch or OpenSearch: a document each, in the index ``<prefix>-lease``.

A lease is taken by reading its document (a real-time ``GET``) and writing it back only if it
did not change since: ``if_seq_no`` and ``if_primary_term`` of what was read (optimistic
concurrency control), or ``_create`` when there is none yet. Of two writers asking at once,
the second's write is refused (409) and it reads the lease again, finding it taken. No script
is needed (servers that forbid scripts, such as osmem, take this). The document holds the
``holder``, the ``token`` and when it ``expires`` (see :class:`~collector.sinks.base.Lease`).

The index is made by the cluster at the first lease, with its defaults (no template matches
it; a cluster that makes no index by itself needs it made once, ``PUT <prefix>-lease``); a
writer needs the right to write it and read it, as it writes the record indices.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from collector.errors import ElasticsearchError
from collector.sinks.base import Lease, next_token
from collector.sinks.elasticsearch.transport import Client

__all__ = ["lease_index", "release_lease", "take_lease"]

_TRIES = 5  # reads and conditional writes before giving up (each lost only to another writer's write)


def lease_index(prefix: str) -> str:
    return f"{prefix}-lease"


def take_lease(client: Client, prefix: str, name: str, holder: str, ttl_s: float, now: float) -> Lease:
    """See :meth:`collector.sinks.base.Sink.take_lease`."""
    path = f"/{lease_index(prefix)}"
    for _ in range(_TRIES):
        held, guard = _read(client, path, name)
        if held is not None and held.holder != holder and now < held.expires:
            return held
        if held is None:
            token, target = next_token(None, now), f"{path}/_create/{name}"
        else:  # renewed, the same token; a new grant (free, run out, let go), a new one
            token = held.token if held.held_by(holder, now) else next_token(held.token, now)
            target = f"{path}/_doc/{name}?if_seq_no={guard[0]}&if_primary_term={guard[1]}"
        lease = Lease(name, holder, token, now + ttl_s)
        try:
            client.request(
                "PUT", target, {"holder": holder, "token": token, "expires": lease.expires},
                what=f"taking the lease {name!r}",
            )  # fmt: skip
        except ElasticsearchError as exc:
            if exc.status == 409:  # another writer's came first: read it again
                continue
            raise
        return lease
    raise ElasticsearchError(f"taking the lease {name!r}: it changed under every one of {_TRIES} tries", transient=True)


def release_lease(client: Client, prefix: str, lease: Lease) -> None:
    """See :meth:`collector.sinks.base.Sink.release_lease`."""
    path = f"/{lease_index(prefix)}"
    held, guard = _read(client, path, lease.name)
    if held is None or (held.holder, held.token) != (lease.holder, lease.token):
        return  # another has it now: not ours to let go
    try:
        client.request(
            "PUT", f"{path}/_doc/{lease.name}?if_seq_no={guard[0]}&if_primary_term={guard[1]}",
            {"holder": lease.holder, "token": lease.token, "expires": 0}, what=f"letting the lease {lease.name!r} go",
        )  # fmt: skip
    except ElasticsearchError as exc:
        if exc.status != 409:  # 409: taken meanwhile (it had run out): not ours any more
            raise


def _read(client: Client, path: str, name: str) -> tuple[Lease | None, tuple[int, int]]:
    """The lease as stored (None: none yet) and the sequence number and primary term to write it back under."""
    try:
        answer = client.request("GET", f"{path}/_doc/{name}", None, what=f"reading the lease {name!r}")
    except ElasticsearchError as exc:
        if exc.status == 404:  # no index yet, or no document
            return None, (0, 0)
        raise
    source: Any = answer.get("_source") if isinstance(answer, Mapping) and answer.get("found") else None
    if not isinstance(source, Mapping):
        return None, (0, 0)
    lease = Lease(name, str(source.get("holder")), int(source.get("token", 0)), float(source.get("expires", 0.0)))
    return lease, (int(answer["_seq_no"]), int(answer["_primary_term"]))
