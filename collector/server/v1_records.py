"""``POST /v1/records``: a batch of fairacct records from a probe.

The body is a JSON array of records (``Content-Type: application/json``) or one record per
line (``application/x-ndjson``), optionally ``Content-Encoding: gzip``. The token names the
probe; every record must be in that probe's name and of a kind a probe makes, and is stored
under an id of that probe's (:mod:`collector.server.judge`): a probe touches only its own
records.

Replies (the one rule for a probe: **what is not listed in ``rejected`` is durable when the
reply has an ``accepted`` field**):

* **202** ``{"accepted": N, "rejected": []}``: every record is durable in the collector's
  outbox. Delete them.
* **400** ``{"error": "...", "accepted": N, "refused": R, "rejected": [...]}``: the R records
  listed were refused one by one (``index`` counts from 0 in the batch: array position, or
  non-empty line); every other record is durable. Delete the accepted ones; the refused ones
  will never be accepted as they are (dead letters). Every refused record is listed, the first
  :data:`REASONS_LISTED` as ``{"index", "id", "reason"}``, the others as ``{"index"}`` alone:
  a batch holds at most ``collector.max_records_per_request`` records, so the reply is bounded.
* **400/401/403/409/413/415** ``{"error": "..."}`` (no ``accepted`` field): the request was refused
  whole and nothing was stored. 409 (``schema_too_new``): a record's ``schema_version`` is newer
  than the collector takes (:data:`collector.records.ACCEPTED_SCHEMA_VERSIONS`); the probe was
  upgraded before its collector and keeps the batch until the collector is upgraded. 403: a
  record is in another probe's name, or for a site or pool this probe may not report for
  (``collector.probes``, :mod:`collector.server.scopes`); the probe keeps the batch until the
  operator lists it. 413: the body is over ``collector.max_records_body_size`` (or
  ``max_body_size``), or holds more than ``max_records_per_request`` records; send it in halves.
* **429** ``{"error": "..."}`` with ``Retry-After``: the probe has ``max_requests_per_probe``
  requests under way (or ``max_connections_per_probe`` connections, each with one), or the store
  is slower than the probes, the outbox holds ``backpressure_depth`` records and this probe holds
  its share of them (:mod:`collector.server.backlog`); nothing was stored; send the batch again
  after ``Retry-After``. A reply given before the body was read closes the connection.
* **503** ``{"error": "..."}`` with ``Retry-After``: nothing was stored (the outbox is over its
  depth, or the disk failed); send the same batch later.

Each record taken is given the moment it was taken as its version
(:func:`collector.records.received_version`), carried beside it to the store: a correction a
probe sends after its first copy, through this collector or another on the same store, is the
one the store keeps, whichever collector flushes last.
"""

from __future__ import annotations

import time
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from collector.outbox import Parcel
from collector.records import received_version
from collector.release import RELEASE_HEADER, sender_release
from collector.server.body import decode_records
from collector.server.ingest import Endpoint, Ingest
from collector.server.judge import Judgement, Refusal, judge_records
from collector.server.replies import Style
from collector.server.scopes import Scope
from collector.settings import CollectorSettings

__all__ = ["REASONS_LISTED", "RECORDS", "post_records"]

REASONS_LISTED = 10  # refused records listed with their id and reason; the others by index alone


async def post_records(request: Request, ingest: Ingest) -> Response:
    with ingest.sender(request) as probe:
        settings = ingest.settings
        data = (await ingest.body(request, settings.max_records_body_bytes)).data
        # Parsing and judging cost time linear in the body, but a few megabytes of records take
        # a second of CPU: in a thread of their own (Ingest.judges), so that the event loop goes
        # on answering (other probes' batches, /healthz) meanwhile.
        parcels, judged = await ingest.judged(
            _judge, data, request.headers.get("content-type"), Scope.of(probe, settings.probes), settings
        )
        del data  # the commit waits with the accepted records alone
        await ingest.make_durable("records", probe, parcels, refused=len(judged.refused))
        ingest.metrics.schema_versions(judged.schemas)
        ingest.metrics.sender(probe, sender_release(request.headers.get(RELEASE_HEADER)), judged.count)
    if not judged.refused:
        return JSONResponse({"accepted": judged.count, "rejected": []}, status_code=202)
    first, refused = judged.refused[0], len(judged.refused)
    return JSONResponse(
        {
            "error": f"{refused} of {judged.count + refused} records refused (the first, record {first.index}: "
            f"{first.reason}); the {judged.count} others are durable",
            "accepted": judged.count,
            "refused": refused,
            "rejected": [_listed(r, i) for i, r in enumerate(judged.refused)],
        },
        status_code=400,
    )


def _judge(
    data: bytes, content_type: str | None, scope: Scope, settings: CollectorSettings
) -> tuple[list[Parcel], Judgement]:
    """The accepted records in parcels, encoded, and the judgement: of what the request parsed,
    only the accepted records outlive this call (a refused item is dropped as it is judged)."""
    items = decode_records(data, content_type, settings.max_records_per_request)
    now = time.time()
    judged = judge_records(items, scope, now=now, max_fields=settings.max_fields_per_record)
    # each record's version, the moment it was taken: of two copies of an id the store keeps the later
    version = received_version(now)
    return [Parcel.encoded(kind, docs, version=version) for kind, docs in judged.accepted.items()], judged


def _listed(refusal: Refusal, position: int) -> dict[str, Any]:
    return refusal.as_json() if position < REASONS_LISTED else {"index": refusal.index}


RECORDS = Endpoint("/v1/records", "records", Style.JSON, post_records)
