"""Request bodies: read within a size limit, gunzipped within the same limit, split into items.

The limit holds for the body as sent (``Content-Length`` is checked before anything is read,
and the stream is counted as it comes) and for the body decompressed (a gzip bomb stops at
the limit, never inflated in full). It is inflated beside the event loop, in a thread (zlib
lets go of the GIL), in time linear in the body: 16 bombs of 60 MiB at once stalled every
other request for 21 s when they were inflated on the loop (issue 35). A JSON body must be an array; an NDJSON body
(``application/x-ndjson``) is one item per non-empty line, and a line that is not JSON is one
refused item, not a refused request. A batch holds at most so many items.

What a body costs: the body itself (as sent, and decompressed), and its parse. orjson parses
a JSON array whole, which for a hostile body costs up to about 35 times its size
(``[{"a":{}},...]``; ``[[],[],...]`` costs an empty list, 56 bytes and a pointer, for every 3
bytes); an NDJSON body is parsed a line at a time, each line as its item is asked for. Hence
the small limit of ``/v1/records`` (``collector.max_records_body_size``), and at most two
parses at a time (the threads that judge batches, :attr:`collector.server.ingest.Ingest.judges`),
whose refused items are dropped as they are judged.
"""

from __future__ import annotations

import asyncio
import re
import zlib
from collections.abc import Callable, Iterator
from concurrent.futures import Executor
from dataclasses import dataclass

import orjson
from starlette.requests import ClientDisconnect, Request

from collector.errors import BadRequestError, DisconnectedError, TooLargeError, UnsupportedMediaError
from collector.server.connections import CLOSED_BY
from collector.server.sources import Lease

__all__ = ["NDJSON_TYPES", "Body", "Unreadable", "decode_records", "gunzip", "is_ndjson", "read_body"]

NDJSON_TYPES = frozenset({"application/x-ndjson", "application/ndjson", "application/jsonl", "application/x-jsonlines"})
_JSON_TYPES = frozenset({"application/json", ""})
_LINE = re.compile(rb"\S[^\n]*")  # an NDJSON line that is not blank (from its first non-space)


@dataclass(frozen=True)
class Unreadable:
    """An NDJSON line that is not JSON: refused by itself, with the parser's reason."""

    reason: str


@dataclass(frozen=True)
class Body:
    """A request body: ``data`` as decompressed; ``gzip``, the body as sent when it was one
    gzip member and nothing else (what the outbox may keep as it is), else None."""

    data: bytes
    gzip: bytes | None = None


async def read_body(
    request: Request, limit: int, *, lease: Lease | None = None, inflating: Executor | None = None
) -> Body:
    """The request's body, decompressed when ``Content-Encoding: gzip``, at most ``limit`` bytes
    both as sent and as decompressed (:class:`TooLargeError`). Every byte, as sent and as
    inflated, is taken from ``lease`` when there is one (a request without a token:
    :mod:`collector.server.sources`). The body is inflated in ``inflating`` (the event loop's
    default executor when None), never on the event loop."""
    declared = request.headers.get("content-length")
    if declared is not None:
        if not declared.isdigit():
            raise BadRequestError(f"Content-Length must be a number of bytes, got {declared[:40]!r}")
        if int(declared) > limit:
            raise TooLargeError(f"the body is {int(declared)} bytes, over the limit of {limit}; send smaller batches")
    encoding = request.headers.get("content-encoding", "identity").strip().lower()
    if encoding not in ("gzip", "x-gzip", "identity", ""):  # refused before its body, as the rest
        raise UnsupportedMediaError(f"Content-Encoding must be gzip or identity, got {encoding[:40]!r}")
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise TooLargeError(f"the body is over the limit of {limit} bytes; send smaller batches")
            if lease is not None:
                lease.take(len(chunk))
            chunks.append(chunk)
    except ClientDisconnect:
        expected = f" of {declared}" if declared is not None else ""
        by = request.scope.get(CLOSED_BY)
        who = "the client closed the connection" if by is None else f"the collector closed the connection ({by})"
        raise DisconnectedError(f"{who} after {size}{expected} bytes of the body") from None
    body = b"".join(chunks)
    del chunks
    if encoding in ("gzip", "x-gzip"):
        take = None if lease is None else lease.take
        loop = asyncio.get_running_loop()
        data, members = await loop.run_in_executor(inflating, gunzip, body, limit, take)
        return Body(data, body if members == 1 else None)
    return Body(body)


# zlib is given the input a piece at a time, and asked for the output a slice at a time: its
# unconsumed input is then never more than a piece to copy (the whole rest of the body, copied
# again for every slice, made inflating quadratic in the body), and each slice is taken from
# the request's budget before the next is made.
_PIECE = 64 * 1024  # bytes of gzip given to zlib at a time
_SLICE = 1024 * 1024  # bytes of output asked of zlib at a time


def gunzip(data: bytes, limit: int, take: Callable[[int], None] | None = None) -> tuple[bytes, int]:
    """``data`` (one or more gzip members) decompressed, refusing more than ``limit`` bytes of
    output; and the number of members (0 when trailing bytes followed them). ``take(n)`` is
    called for every ``n`` bytes of output before they are kept (it raises to stop). Costs
    time linear in ``data`` and the output, and memory of the output (twice, at the end)."""
    out = bytearray()
    members = 0
    view = memoryview(data)
    at = 0  # bytes of data given to zlib
    while True:
        inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
        pending: bytes | memoryview = b""
        while not inflater.eof:
            if not pending:
                if at >= len(view):
                    raise BadRequestError("the gzip body is truncated (no end of stream)")
                pending = view[at : at + _PIECE]
                at += len(pending)
            try:
                chunk = inflater.decompress(pending, min(_SLICE, limit + 1 - len(out)))
            except zlib.error as exc:
                raise BadRequestError(f"the body is not valid gzip ({exc})") from None
            pending = inflater.unconsumed_tail
            if len(out) + len(chunk) > limit:
                raise TooLargeError(f"the body decompresses to over the limit of {limit} bytes; send smaller batches")
            if take is not None and chunk:
                take(len(chunk))
            out += chunk
        members += 1
        at -= len(inflater.unused_data)  # what followed the member, in the last piece given
        if at >= len(view):
            return bytes(out), members
        if view[at] == 0 and not bytes(view[at:]).strip(b"\0"):  # padding after the last member
            return bytes(out), 0


def is_ndjson(content_type: str | None) -> bool:
    """Whether a Content-Type names NDJSON (one JSON value per line)."""
    return (content_type or "").split(";", 1)[0].strip().lower() in NDJSON_TYPES


def decode_records(body: bytes, content_type: str | None, max_items: int) -> Iterator[object]:
    """The items of a batch: parsed JSON values, and :class:`Unreadable` for bad NDJSON lines.

    ``application/json`` (or no Content-Type): a JSON array; ``application/x-ndjson``: one JSON
    value per line, each parsed as it is asked for. Anything else is :class:`UnsupportedMediaError`
    (raised now); a JSON body that is not an array, or not JSON, is :class:`BadRequestError`, and
    more than ``max_items`` items :class:`TooLargeError` (raised as the items are read).
    """
    media = (content_type or "").split(";", 1)[0].strip().lower()
    if is_ndjson(media):
        return _ndjson_items(body, max_items)
    if media not in _JSON_TYPES:
        raise UnsupportedMediaError(
            f"Content-Type must be application/json (an array) or application/x-ndjson, got {media[:60]!r}"
        )
    return _array_items(body, max_items)


def _ndjson_items(body: bytes, max_items: int) -> Iterator[object]:
    for count, line in enumerate(_LINE.finditer(body), 1):
        if count > max_items:
            raise _too_many(max_items)
        try:
            yield orjson.loads(line.group())
        except orjson.JSONDecodeError as exc:
            yield Unreadable(f"not JSON ({exc})")


def _array_items(body: bytes, max_items: int) -> Iterator[object]:
    try:
        value = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise BadRequestError(f"the body is not JSON ({exc})") from None
    if not isinstance(value, list):
        raise BadRequestError(
            f"expected a JSON array of records (or NDJSON with Content-Type application/x-ndjson), "
            f"got a JSON {_json_type(value)}"
        )
    if len(value) > max_items:
        raise _too_many(max_items, len(value))
    yield from value


def _too_many(limit: int, count: int | None = None) -> TooLargeError:
    what = f"{count} records" if count is not None else f"more than {limit} records"
    return TooLargeError(f"the batch holds {what}, over the limit of {limit} a request; send smaller batches")


def _json_type(value: object) -> str:
    return {dict: "object", str: "string", int: "number", float: "number", bool: "boolean"}.get(type(value), "null")
