"""Bulk writes: a batch of records cut into ``_bulk`` requests by count and by bytes, each
preceded by the lookup of its ids in other months (:mod:`~collector.sinks.elasticsearch.copies`),
retried while its failure may pass, halved when the store finds it too large.

A request holds at most ``batch_size`` records and ``max_bytes`` bytes of their sources (a
record larger than that goes alone; the action lines and the deletes of copies in other months
come on top). Counting documents alone was not enough: 16
records of 7.8 MB made bulks of 125 MB, and a cluster refuses a body over its
``http.max_content_length`` (100 MB by default; 10 MiB on small Amazon OpenSearch Service
instances) with 413, whatever it holds. Sent again as it was, the same body was refused again,
for ever, and every record behind it waited (issue 54, point 4). So a 413 lowers this writer's
budget to half the size refused and sends the request again cut to it (in halves, or smaller
parts: each cut again while refused), until what fits is stored, and the next requests are cut
to fit from the start; a document refused alone is rejected for good, with the reason, and the
outbox sets it aside as a dead letter while the rest flows.

Every item's result is read (:func:`~collector.sinks.elasticsearch.copies.settle`): 2xx is
acknowledged, 408/429/5xx is worth another try, any other 4xx (a mapping conflict) is rejected
for good with the server's reason. Failures of a whole
request that may pass (connection refused or reset, timeouts, 408, 429, 5xx) are retried with
bounded, jittered exponential backoff; after the budget the documents are reported in
``retry`` (the outbox keeps them), never raised away or dropped. Any other failure of a whole
request (authentication, TLS, a request the server cannot read) raises
:class:`~collector.errors.ElasticsearchError`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from collector.errors import ElasticsearchError
from collector.sinks.base import SendResult
from collector.sinks.elasticsearch.copies import Pending, Plan, settle
from collector.sinks.elasticsearch.transport import Client

__all__ = ["BULK_BYTES", "Bulks", "cut"]

_log = logging.getLogger("collector.sinks.elasticsearch")

BULK_BYTES = 16 * 2**20
"""The bytes of one bulk request by default: within Elasticsearch's advice (a few MB to a few
tens), a sixth of its default ``http.max_content_length``, and about 1.5 times a batch of 2,000
of the largest records a probe makes."""

_TOO_LARGE = 413


def cut(pending: Mapping[str, Pending], count: int, size: Callable[[], int]) -> Iterator[dict[str, Pending]]:
    """``pending`` (id -> record), in order, in parts of at most ``count`` records and ``size()``
    bytes of sources; a record over it alone makes a part of its own. ``size`` is asked again for
    each record, so that a budget lowered while the parts are sent (a 413) cuts the rest."""
    part: dict[str, Pending] = {}
    used = 0
    for id_, record in pending.items():
        if part and (len(part) >= count or used + len(record.source) > size()):
            yield part
            part, used = {}, 0
        part[id_] = record
        used += len(record.source)
    if part:
        yield part


@dataclass
class Bulks:
    """Writes records of one kind through ``client`` (see the module docstring). ``plans``
    looks a part's ids up and says what to write for each (the sink's lookup, made again before
    each attempt). ``where`` starts every message; ``sleep`` waits and ``jitter`` returns [0, 1),
    parameters so that tests need not wait. ``max_bytes`` is lowered by a 413 (:meth:`_too_large`)."""

    client: Client
    where: str
    batch_size: int
    max_bytes: int
    max_retries: int
    backoff_s: float
    backoff_max_s: float
    sleep: Callable[[float], None]
    jitter: Callable[[], float]
    plans: Callable[[str, Mapping[str, Pending]], dict[str, Plan]]

    def write(self, kind: str, pending: Mapping[str, Pending], result: SendResult) -> None:
        """Store ``pending`` (id -> record), in as many requests as the budgets cut them into;
        what became of each goes into ``result``. Once a request is left to retry, the rest are
        not sent but left to retry too: in an outage each would wait its whole retry budget out,
        and the outbox sends them again anyway."""
        parts = cut(pending, self.batch_size, lambda: self.max_bytes)
        for part in parts:
            self._bulk(kind, part, result)
            if result.retry:  # the store is down or behind: the next parts would wait their retries out too
                later = [i for rest in parts for i in rest]
                result.retry.update(
                    dict.fromkeys(later, f"{self.where}: not sent: an earlier bulk of its batch failed")
                )
                return

    def _bulk(self, kind: str, pending: dict[str, Pending], result: SendResult) -> None:
        """One lookup and one bulk request of ``pending`` (id -> record), retrying what may pass;
        halved on 413."""
        errors: dict[str, str] = {}
        size = sum(len(r.source) for r in pending.values())
        for attempt in range(self.max_retries + 1):
            if attempt:
                delay = self._delay(attempt)
                _log.warning(
                    "%s: %d %s documents not stored yet (%s); retry %d of %d in %.3g s",
                    self.where, len(pending), kind, next(iter(errors.values())), attempt, self.max_retries, delay,
                )  # fmt: skip
                self.sleep(delay)
            body = b""
            try:
                plans = self.plans(kind, pending)
                writes = {i: p for i, p in plans.items() if p.actions}
                response = None
                if writes:
                    body = b"".join(p.lines for p in writes.values())
                    size = len(body)
                    what = f"bulk write of {len(writes)} {kind} documents"
                    response = self.client.request("POST", "/_bulk", body, what=what, ndjson=True)
            except ElasticsearchError as exc:
                if exc.status != _TOO_LARGE and not exc.transient:
                    raise
                errors = dict.fromkeys(pending, str(exc))
                if exc.status == _TOO_LARGE:
                    break
                continue
            finally:
                del body  # neither kept through the wait before the next attempt nor while its parts go
            for i, p in plans.items():
                if not p.actions:  # a newer copy stored, and no other: nothing to write
                    settle(i, p, (), result)
            errors = self._read_items(kind, response, writes, result)
            pending = {i: pending[i] for i in errors}
            if not pending:
                return
        else:
            result.retry.update(errors)
            return
        self._too_large(kind, pending, size, next(iter(errors.values())), result)

    def _too_large(self, kind: str, pending: dict[str, Pending], size: int, error: str, result: SendResult) -> None:
        """The store refused a body of ``size`` bytes as too large: requests cut to half that size
        from now on, ``pending`` sent again so (in halves, or smaller parts, each cut again while
        refused); one document refused alone is rejected."""
        self.max_bytes = max(1, min(self.max_bytes, size // 2))
        if len(pending) == 1:
            ((id_, _),) = pending.items()
            result.rejected[id_] = (
                f"{kind} document {id_}: too large for the store: a bulk request of it alone ({size} bytes) was "
                f"refused ({error}); raise the store's http.max_content_length (or make the record smaller), then put "
                "it back in the outbox (fairacct outbox retry)"
            )
            _log.error("%s: %s", self.where, result.rejected[id_])
            return
        _log.warning(
            "%s: a bulk request of %d %s documents (%d bytes) is too large for the store (413): sent again in "
            "requests of at most %d bytes, as every request from now on", self.where, len(pending), kind, size,
            self.max_bytes,
        )  # fmt: skip
        self.write(kind, pending, result)

    def _read_items(self, kind: str, response: Any, plans: dict[str, Plan], result: SendResult) -> dict[str, str]:
        """Sort a bulk response's items into ``result``
        (:func:`~collector.sinks.elasticsearch.copies.settle`, a record's index and deletes
        together); return the transient errors by id."""
        if not plans:
            return {}
        items = response.get("items") if isinstance(response, Mapping) else None
        expected = sum(len(p.actions) for p in plans.values())
        if not isinstance(items, list) or len(items) != expected:
            got = len(items) if isinstance(items, list) else "no"
            return dict.fromkeys(plans, f"{self.where}: bulk response has {got} items for {expected} {kind} actions")
        transient = {}
        at = 0
        for id_, p in plans.items():
            error = settle(id_, p, items[at : at + len(p.actions)], result)
            at += len(p.actions)
            if error is not None:
                transient[id_] = f"{self.where}: {error}"
        return transient

    def _delay(self, attempt: int) -> float:
        """Seconds before retry ``attempt`` (1, 2, ...): exponential, capped, jittered."""
        base = min(self.backoff_max_s, self.backoff_s * 2 ** (attempt - 1))
        return float(base * (0.5 + 0.5 * self.jitter()))
