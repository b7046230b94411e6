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
* **400** ``{"error": "...", "accepted": N, "rejected": [{"index", "id", "reason"}, ...]}``:
  the records listed were refused one by one (``index`` counts from 0 in the batch: array
  position, or non-empty line); every other record is durable. Delete the accepted ones; the
  refused ones will never be accepted as they are (dead letters).
* **400/401/403/413/415** ``{"error": "..."}`` (no ``accepted`` field): the request was refused
  whole and nothing was stored.
* **503** ``{"error": "..."}`` with ``Retry-After``: nothing was stored (the outbox is over its
  depth, or the disk failed); send the same batch later.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from collector.outbox import Parcel
from collector.server.body import decode_records
from collector.server.ingest import Endpoint, Ingest
from collector.server.judge import judge_records
from collector.server.replies import Style

__all__ = ["RECORDS", "post_records"]


async def post_records(request: Request, ingest: Ingest) -> Response:
    probe = ingest.probe(request)
    body = await ingest.body(request)
    content_type = request.headers.get("content-type")
    items = decode_records(body.data, content_type)
    judged = judge_records(items, probe)  # accepted records carry their stored (owned) ids
    parcels = [Parcel.encoded(kind, docs) for kind, docs in judged.accepted.items()]
    await ingest.make_durable("records", probe, parcels, refused=len(judged.refused))
    if not judged.refused:
        return JSONResponse({"accepted": judged.count, "rejected": []}, status_code=202)
    first = judged.refused[0]
    return JSONResponse(
        {
            "error": f"{len(judged.refused)} of {len(items)} records refused (the first, record {first.index}: "
            f"{first.reason}); the {judged.count} others are durable",
            "accepted": judged.count,
            "rejected": [r.as_json() for r in judged.refused],
        },
        status_code=400,
    )


RECORDS = Endpoint("/v1/records", "records", Style.JSON, post_records)
