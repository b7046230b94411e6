"""``POST /gratia-servlets/rmi``: what real Gratia probes (opensciencegrid/gratia-probe) send to
GRACC, answered as GRACC's collector answers it.

The body is ``application/x-www-form-urlencoded`` (collector/gratia/wire.py reads it;
``Content-Encoding: gzip`` is taken too): ``command=update&arg1=xxx`` is a ping,
``command=multiupdate`` carries a ``<RecordEnvelope>`` in ``arg1`` and the probe's name in
``from``. gratia-probe reads only the body of the reply: exactly ``OK`` lets it delete the
records it sent; anything else makes it keep them in its outbox and send them again later.
The statuses are GRACC's, for operators and proxies.

======  =====================================================  ==============================================
status  body                                                   when
======  =====================================================  ==============================================
200     ``OK``                                                 a ping; or every record of the envelope is
                                                               durable in the collector's outbox (the same
                                                               group commit as ``/v1/records``, before the
                                                               reply), other record types acknowledged,
                                                               records GRACC's raw pipeline quarantines (no
                                                               EndTime nor StartTime, ...: collector/gratia/
                                                               rawdoc.py) counted as record errors, logged
                                                               and not stored
400     ``Error handling request: <reason>``                   the form is wrong (no ``command``, ``from`` or
                                                               ``arg1``, an unknown command, a field not an
                                                               integer); the envelope is not XML this
                                                               collector reads (malformed, a DTD or entity,
                                                               too deep, not UTF-8, not an envelope); or the
                                                               sender is not allowed (below)
400     ``Error processing record: <n> of <m> records ...``    a record GRACC's collector cannot read (a time
                                                               that is not RFC 3339, an Origin hop that is
                                                               not an integer): the envelope is refused whole
                                                               and nothing of it is stored, as GRACC does
403     ``Error handling request: record <i> is for            a record under another ProbeName than the
        SiteName ..., which sender ... is not allowed to       sender's, or for a SiteName not among its
        report for ...``                                       ``sites`` (below): the envelope is refused
                                                               whole and nothing of it is stored
413     ``Error: java.lang.IllegalStateException: Post too     the body is over ``collector.max_body_size``
        large``                                                (as sent or decompressed) or the envelope over
                                                               the XML size limit (16 MiB): the text makes
                                                               gratia-probe send smaller bundles
415     ``Error handling request: <reason>``                   a Content-Type that is not a form
503     ``Service unavailable right now``                      nothing was stored: the outbox is over its
        (+ ``Retry-After``)                                    depth, or its commit failed (the reason is
                                                               logged); the probe keeps its records
======  =====================================================  ==============================================

**Senders.** Gratia probes carry no token, so the collector takes records only from the
probes named in ``collector.gratia_senders``, each with the networks it sends from and the
sites it reports for (``{probe = "condor:ce01.example.org", networks = ["192.0.2.0/24"],
sites = ["SiteA"]}``; the probe is the form's ``from``). A request from an address in none of
those networks is refused before a byte of its body is read (400 ``Error handling request:
address ... is not among the networks ...``; the connection is then closed with the first of
the strangers', not kept for a body it is not given); a sender not listed, or not from one of
its own networks, gets **400** ``Error handling request: sender '<from>' is not allowed ...``,
pings included: GRACC has no
list of senders and answers every request it refuses with 400 and that text, and gratia-probe,
which reads only the text, keeps the records and retries, so nothing is lost while the
operator adds the name. **An empty list refuses every sender**: the endpoint is off until
senders are named (a collector reachable from the network must not take records in any name
from anyone). The address is the connection's, or the one a proxy listed in
``collector.trusted_proxies`` gives in ``X-Forwarded-For`` (none by default); an IPv4-mapped
one (a collector listening on ``"::"``) is compared as the IPv4 address it is
(:mod:`collector.addresses`). Senders' bodies,
carrying no token, are read and inflated within the memory of requests without one
(:mod:`collector.server.sources`).

**What a sender may report for** (issue 54). GRACC's summaries group by a record's own
``ProbeName`` and ``SiteName``, so a listed sender could put its usage in another probe's and
another site's rows. A sender's records must carry its own name as ``ProbeName`` (gratia-probe
writes its ProbeName into both) and one of its ``sites`` as ``SiteName``
(``{probe = ..., networks = [...], sites = ["SiteA"]}``, :class:`~collector.server.scopes.Scope`):
one record beyond refuses the envelope whole with **403** (checked once every record converted,
after the 400 for a record that cannot be: that one is the sender's to mend, this the operator's),
counted as ``forbidden`` as a probe's record for another site is. gratia-probe keeps the records
and sends them again; fairacct's Gratia sink reads "is not allowed" as the operator's to mend,
and keeps them too.

**Records** become documents of kind ``gratia`` exactly as GRACC's collector makes them
(collector/gratia/); their ids are hashes of their content, so an envelope sent again (gratia-probe
re-sends what got no ``OK``) stores nothing new. Other record types (``StorageElement``,
``ProbeDetails``, ...) are acknowledged, counted in ``fairacct_collector_records_skipped_total``
by type, and not stored. Metrics by endpoint (``gratia``) and probe (the ``from`` name)
as for ``/v1/records``.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Sequence

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response

from collector import faults
from collector.addresses import ip_of
from collector.errors import BadRequestError, RecordError, SenderNotAllowedError, TooLargeError, UnsupportedMediaError
from collector.gratia import DEFAULT_LIMITS, MultiUpdate, decode_rmi, envelope_docs
from collector.gratia.envelope import OTHER_TAGS, EnvelopeResult
from collector.gratia.rawdoc import KIND
from collector.gratia.wire import OK
from collector.outbox import Parcel
from collector.records import received_version
from collector.server.connections import Trust, vouch
from collector.server.ingest import Endpoint, Ingest
from collector.server.replies import Style
from collector.server.scopes import Scope
from collector.server.sources import Lease
from collector.settings import GratiaSender

__all__ = ["GRATIA", "allowed_sender", "allowed_source", "convert", "post_rmi"]

NAME = "gratia"
_log = logging.getLogger("fairacct.collector")
_FORM = "application/x-www-form-urlencoded"
_DECODED_ON_LOOP = 64 * 1024  # bytes of form; a ping is about 60


async def post_rmi(request: Request, ingest: Ingest) -> Response:
    media = (request.headers.get("content-type") or "").split(";", 1)[0].strip().lower()
    if media not in (_FORM, ""):
        raise UnsupportedMediaError(f"Content-Type must be {_FORM}, got {media[:60]!r}")
    senders = ingest.settings.gratia_senders
    address = request.client.host if request.client else None
    allowed_source(address, senders)  # before a byte of the body: a stranger's is never read nor inflated
    vouch(request.scope, Trust.SENDER)
    with ingest.anonymous_lease(request) as lease:
        return await _post_rmi(request, ingest, lease, address)


async def _post_rmi(request: Request, ingest: Ingest, lease: Lease, address: str | None) -> Response:
    body = await ingest.body(request, lease=lease)
    # A ping is decoded here; an envelope's form (a megabyte: milliseconds of percent-decoding)
    # in the conversion's thread, where it interleaves with nothing: on the loop, sharing the
    # core with the conversion of the previous envelope, it cost several times its own CPU
    # (bench_collector.py --gratia; the figures are in the benchmarks' README, in the source tree).
    small = len(body.data) <= _DECODED_ON_LOOP
    rmi = decode_rmi(body.data) if small else await ingest.off_loop(decode_rmi, body.data)
    senders = ingest.settings.gratia_senders
    allowed_sender(rmi.probe, address, senders)
    if not isinstance(rmi, MultiUpdate):  # a ping
        return PlainTextResponse(OK)
    scope = Scope.of_sender(rmi.probe, ip_of(address), senders)
    result = await ingest.off_loop(convert, rmi, scope)  # tens of milliseconds of CPU: not on the event loop
    if result.errors:
        ingest.metrics.judged(NAME, rmi.probe, 0, len(result.errors))
        index, reason = result.errors[0]
        raise RecordError(
            f"{len(result.errors)} of {result.total} records cannot be converted, so the envelope was refused "
            f"whole and nothing of it stored (the first, record {index}: {reason})"
        )
    quarantined = len(result.quarantined)
    parcel = Parcel.encoded(KIND, result.docs, version=received_version(time.time()))  # as /v1/records' records
    await ingest.make_durable(NAME, rmi.probe, [parcel], refused=quarantined)
    faults.point("gratia-after-commit")  # tests only: durable, and the sender never hears OK
    if quarantined:
        index, reason = result.quarantined[0]
        _log.info(
            "gratia: %s: %d of %d records set aside as GRACC quarantines them, not stored (the first, record %d: %s)",
            rmi.probe[:200], quarantined, result.total, index, reason[:200],
        )  # fmt: skip
    if result.skipped:
        types: Counter[str] = Counter()
        for tag, n in result.skipped.items():
            types[tag if tag in OTHER_TAGS else "other"] += n
        ingest.metrics.skipped_records(NAME, rmi.probe, types)
    return PlainTextResponse(OK)


def allowed_source(address: str | None, senders: Sequence[GratiaSender]) -> None:
    """Nothing when ``address`` is in the networks of one of ``senders``; SenderNotAllowedError
    otherwise (see the module docstring). Decided from the connection alone, before the body."""
    if not senders:
        raise SenderNotAllowedError("this collector takes no Gratia records (its collector.gratia_senders is empty)")
    ip = ip_of(address)
    if ip is None or not any(sender.allows(ip) for sender in senders):
        raise SenderNotAllowedError(
            f"address {(address or '-')[:60]} is not among the networks of collector.gratia_senders: ask the "
            "collector's operator to add the sender with the networks it sends from"
        )


def allowed_sender(sender: str, address: str | None, senders: Sequence[GratiaSender]) -> None:
    """Nothing when ``sender`` is in ``senders`` and ``address`` in that sender's networks;
    SenderNotAllowedError otherwise (see the module docstring)."""
    named = [s for s in senders if s.probe == sender]
    if not named:
        raise SenderNotAllowedError(
            f"sender {sender[:200]!r} is not allowed: ask the collector's operator to add it to "
            "collector.gratia_senders"
        )
    ip = ip_of(address)
    if ip is None or not any(s.allows(ip) for s in named):
        raise SenderNotAllowedError(
            f"sender {sender[:200]!r} is not allowed from address {(address or '-')[:60]}: ask the collector's "
            "operator to add the address to its networks in collector.gratia_senders"
        )


def convert(rmi: MultiUpdate, scope: Scope | None = None) -> EnvelopeResult:
    """The envelope's documents; TooLargeError over the XML size limit, BadRequestError when
    the envelope cannot be read at all (GRACC: ``error unmarshalling xml``); ForbiddenError when
    every record converted and one is beyond ``scope`` (what the sender may report for)."""
    xml = rmi.xml.encode("utf-8")
    if len(xml) > DEFAULT_LIMITS.max_bytes:
        raise TooLargeError(
            f"the envelope is {len(xml)} bytes, over the limit of {DEFAULT_LIMITS.max_bytes}; send smaller bundles"
        )
    try:
        result = envelope_docs(xml, probe=rmi.probe, received=time.time())
    except RecordError as exc:
        raise BadRequestError(f"error unmarshalling xml: {exc}") from None
    if scope is not None and not result.errors:  # a record that cannot be converted is told first
        for index, doc in zip(result.positions, result.docs, strict=True):
            scope.check(doc, index)
    return result


GRATIA = Endpoint("/gratia-servlets/rmi", NAME, Style.TEXT, post_rmi)
