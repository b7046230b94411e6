"""Deleting stale documents (:meth:`Sink.delete_stale <collector.sinks.base.Sink.delete_stale>`):
the summaries of groups a rewrite of their days no longer made.

The stale documents are found a page at a time (a search of every month of the kind, sorted by
``id``, each page after the last id of the one before) and deleted by one bulk request a page.
Each delete is guarded: with a ``version``, ``version_type`` ``external`` deletes a document
only if its version is below it (a summary a later run wrote meanwhile, under a newer lease's
token, stays: its 409 is not an error); without one, the ``_seq_no`` the search saw (a document
changed since stays). A ``_delete_by_query`` could not be guarded so: a query cannot ask for a
document's ``_version``.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from typing import Any

from collector.errors import ElasticsearchError
from collector.sinks.elasticsearch.transport import Client, error_text, is_transient

__all__ = ["PAGE", "delete_stale"]

PAGE = 1000
"""Stale documents found and deleted a request."""


def delete_stale(
    client: Client,
    pattern: str,
    where: str,
    query: Mapping[str, Any],
    keep: Collection[str],
    version: int | None,
) -> int:
    """Delete the documents of ``pattern`` that ``query`` finds and whose id is not in ``keep``,
    each only if its version is below ``version`` (when given; see the module docstring); how
    many went. ``where`` starts the messages of errors."""
    client.request("POST", f"/{pattern}/_refresh", None, what=f"refreshing {pattern}")
    body: dict[str, Any] = {
        "query": {"bool": {"filter": [query], "must_not": [{"ids": {"values": list(keep)}}]}},
        "_source": False,
        "version": True,
        "seq_no_primary_term": True,
        "size": PAGE,
        "sort": [{"id": "asc"}],
        "track_total_hits": False,
    }
    deleted = 0
    while True:
        answer = client.request(
            "POST", f"/{pattern}/_search?ignore_unavailable=true&allow_no_indices=true", body,
            what=f"finding stale documents of {pattern}",
        )  # fmt: skip
        hits = answer.get("hits", {}).get("hits", []) if isinstance(answer, Mapping) else []
        if not hits:
            return deleted
        lines = b"".join(_delete(hit, version) for hit in hits)
        response = client.request(
            "POST", "/_bulk?refresh=true", lines.decode(), what=f"deleting {len(hits)} stale documents of {pattern}",
            ndjson=True,
        )  # fmt: skip
        deleted += _deleted(response, where)
        if len(hits) < PAGE:
            return deleted
        body["search_after"] = hits[-1]["sort"]


def _delete(hit: Mapping[str, Any], version: int | None) -> bytes:
    action: dict[str, Any] = {"_index": hit["_index"], "_id": hit["_id"]}
    if version is not None:
        action |= {"version": version, "version_type": "external"}
    else:
        action |= {"if_seq_no": hit["_seq_no"], "if_primary_term": hit["_primary_term"]}
    return json.dumps({"delete": action}, separators=(",", ":")).encode() + b"\n"


def _deleted(response: Any, where: str) -> int:
    """How many of a bulk response's deletes deleted a document; an ElasticsearchError for the
    first that failed other than by finding the document gone or newer (404, 409)."""
    items = response.get("items") if isinstance(response, Mapping) else None
    deleted = 0
    for item in items if isinstance(items, list) else []:
        outcome: Any = item.get("delete", {}) if isinstance(item, Mapping) else {}
        status = outcome.get("status")
        if status in (404, 409):  # gone already, or newer than the run deleting: it stays
            continue
        if not isinstance(status, int) or not 200 <= status < 300:
            raise ElasticsearchError(
                f"{where}: deleting a stale document failed: {status} {error_text(outcome.get('error'))}",
                status=status if isinstance(status, int) else None,
                transient=not isinstance(status, int) or is_transient(status),
            )
        deleted += outcome.get("result") == "deleted"
    return deleted
