"""The probe's side of OSG's GRACC: a sink that sends job records as Gratia JobUsageRecords.

Store URL ``gratia+https://HOST[:PORT]/gratia-servlets/rmi`` (``gratia+http://`` for loopback
and tests). Job records become JobUsageRecords (:mod:`collector.gratia.jobusage`), bundled
``bundle_size`` to an envelope (GratiaCore's ``BundleSize``, 100) and POSTed as gratia-probe
does: a form with ``command=multiupdate``, the ``<RecordEnvelope>`` in ``arg1``, the probe's
name in ``from`` and ``bundlesize``. The reply's body decides, as it does for gratia-probe:

* ``OK``: every record of the bundle is acknowledged (the outbox deletes them);
* 413, or ``Error`` about the records (GRACC refuses an envelope whole when one record of it
  cannot be converted): the bundle is split in halves, each sent again, until the record that is
  refused stands alone; that record goes to the outbox's dead letters with the reply;
* ``Error`` saying this sender, its address or a record's site is not allowed (fairacct's
  collector: "... is not allowed to report for ..."), any other reply (5xx, a proxy's page), or
  no answer: the outbox keeps that bundle and the ones after it and the flusher tries
  again later (:class:`SinkError` when no bundle of the batch was answered); the bundles
  answered before it are settled, as gratia-probe deletes each bundle on its ``OK``, and are
  not sent again. Only the collector's operator can mend a sender refused, and that must not
  cost records.

A record is the same bytes every time it is sent (see :mod:`collector.gratia.jobusage`), so a
bundle sent again after a lost ``OK`` (the probe killed between send and acknowledgement) is
stored once by a collector that keys records on their content, as GRACC and fairacct's do.

A job record that condor-ap would leave out of GRACC (a DAGMan job, a Grid = Local job, one
without a VO or without an end: :data:`probes.sources.condor_ap.LEFT_OUT`) is acknowledged
without being sent, and counted by reason (``SendResult.left_out``, logged).

Gratia carries job usage only: records of other kinds (slots, gaps, fairshare...) are
acknowledged without being sent; a site that wants them too keeps a store of its own for them.
"""

from __future__ import annotations

import logging
import os
from typing import Any, Protocol
from urllib.parse import urlencode, urlunsplit

import httpx
import orjson

from collector.encoded import Encoded
from collector.errors import ConfigError, RecordError, SinkError
from collector.gratia.jobusage import GratiaIdentity, default_probe_name, envelope_xml, left_out, record_xml
from collector.sinks.base import SendResult
from collector.sinks.http import TIMEOUT_S, WriteOnlySink, tls_context
from collector.sinks.registry import Opening, endpoint

__all__ = ["BUNDLE_SIZE", "GratiaSink", "GratiaSinkSettings"]

log = logging.getLogger(__name__)

_SCHEMES = {"gratia+http": "http", "gratia+https": "https"}
BUNDLE_SIZE = 100
"""Records to an envelope: GratiaCore's default ``BundleSize``."""
_REPLY_BYTES = 500  # of a reply read, and kept in an error or dead letter
_NOT_ALLOWED = ("is not allowed", "is not among the networks")  # the operator's to mend: retry


class GratiaSinkSettings(Protocol):
    """The settings a Gratia collector is opened with (``[store]``'s or ``[upstream]``'s keys):
    its URL, the CA bundle that verifies it (empty: the system's) and how records name their
    sender."""

    @property
    def url(self) -> str: ...
    @property
    def ca_file(self) -> str: ...
    @property
    def gratia_probe_name(self) -> str: ...
    @property
    def gratia_site(self) -> str: ...
    @property
    def gratia_bundle_size(self) -> int: ...


class GratiaSink(WriteOnlySink):
    """Job records to a Gratia collector (GRACC, or fairacct's ``/gratia-servlets/rmi``); see the
    module docstring. ``probe_name`` (empty: ``condor-ap:<fqdn>``), ``site`` (the ``SiteName`` of a
    record that names none), ``ca_file`` for https, ``timeout_s`` bounds one request,
    ``transport`` replaces httpx's (tests)."""

    def __init__(
        self,
        url: str,
        *,
        probe_name: str = "",
        site: str = "",
        grid: str = "OSG",
        bundle_size: int = BUNDLE_SIZE,
        ca_file: str | os.PathLike[str] | None = None,
        timeout_s: float = TIMEOUT_S,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        parts = endpoint(url, "gratia")
        if bundle_size < 1:
            raise ConfigError(f"store.gratia_bundle_size: expected at least 1, got {bundle_size}")
        self.url = url
        self.endpoint = urlunsplit((_SCHEMES[parts.scheme], parts.netloc, parts.path or "/gratia-servlets/rmi", "", ""))
        self.who = GratiaIdentity(probe_name or default_probe_name(), site, grid)
        self.bundle_size = bundle_size
        self._client = httpx.Client(
            headers={"User-Agent": "fairacct-probe"},
            timeout=timeout_s,
            verify=tls_context(ca_file) if parts.scheme == "gratia+https" else False,
            transport=transport,
        )

    @classmethod
    def from_settings(cls, settings: GratiaSinkSettings, opening: Opening) -> GratiaSink:
        """The sink of ``[store]``'s or ``[upstream]``'s settings
        (:func:`collector.sinks.registry.open_store`), with the opening's request timeout
        (seconds) when given."""
        timeout_s = TIMEOUT_S if opening.timeout_s is None else opening.timeout_s
        return cls(
            settings.url, probe_name=settings.gratia_probe_name, site=settings.gratia_site,
            bundle_size=settings.gratia_bundle_size, ca_file=settings.ca_file or None, timeout_s=timeout_s,
        )  # fmt: skip

    @classmethod
    def from_url(cls, url: str, **options: Any) -> GratiaSink:
        """The sink of a store URL; ``options`` as the constructor takes them."""
        return cls(url, **options)

    _no_templates = "a Gratia collector has no index templates to install"
    _not_read = "records sent to Gratia are read in GRACC, not through the probe"
    _not_summed = "records sent to Gratia are summed in GRACC, not through the probe"

    def __repr__(self) -> str:
        return f"GratiaSink({self.url!r}, probe_name={self.who.probe_name!r})"

    def ping(self) -> str:
        """``GET`` of the servlet's URL: the Gratia collector answers (a servlet taking POSTs only
        may say 405); nothing is sent, and there is no token to try."""
        status, _ = self._ask("GET", self.endpoint, "the Gratia collector")
        if status >= 500 or status == 404:
            raise SinkError(f"{self.endpoint}: the Gratia collector answered {status}")
        return f"the Gratia collector answered (HTTP {status})"

    def send_encoded(self, kind: str, records: Encoded) -> SendResult:
        """Send job records as JobUsageRecords, ``bundle_size`` to a request; records of other
        kinds are acknowledged unsent (Gratia has no place for them). A record that cannot be
        made a JobUsageRecord is refused for good, with the reason."""
        result = SendResult()
        if kind != "job":
            result.acked.extend(records.ids)
            return result
        ids: list[str] = []
        xml: list[str] = []
        for id_, raw in zip(records.ids, records.docs, strict=True):
            try:
                doc = orjson.loads(raw)
                if why := left_out(doc):  # condor-ap would not report it, or GRACC would quarantine it
                    result.acked.append(id_)
                    result.left_out[why] += 1
                    continue
                xml.append(record_xml(doc, self.who))
            except (RecordError, orjson.JSONDecodeError, TypeError, ValueError) as exc:
                result.rejected[id_] = f"cannot be made a JobUsageRecord: {exc}"
                continue
            ids.append(id_)
        if result.left_out:
            reasons = "; ".join(f"{n} {why}" for why, n in sorted(result.left_out.items()))
            log.info("%s: %d job record(s) not sent, as condor-ap leaves them out: %s", self.endpoint,
                     result.left_out.total(), reasons)  # fmt: skip
        for at in range(0, len(ids), self.bundle_size):
            try:
                self._send(ids[at : at + self.bundle_size], xml[at : at + self.bundle_size], result)
            except SinkError as exc:
                if not result.acked and not result.rejected:
                    raise
                # the bundles answered are settled, as gratia-probe deletes each bundle on its OK:
                # only the rest is sent again
                answered = set(result.acked) | result.rejected.keys()
                result.retry.update((id_, str(exc)) for id_ in ids[at:] if id_ not in answered)
                break
        return result

    def _send(self, ids: list[str], records: list[str], result: SendResult) -> None:
        form = [("command", "multiupdate"), ("arg1", envelope_xml(records)), ("from", self.who.probe_name),
                ("bundlesize", str(len(records)))]  # fmt: skip
        headers = {"Content-Type": "application/x-www-form-urlencoded"}
        status, text = self._ask("POST", self.endpoint, "the Gratia collector", urlencode(form).encode(),
                                 headers=headers, limit=_REPLY_BYTES)  # fmt: skip
        text = text.strip()
        if status == 200 and text.startswith("OK"):
            result.acked.extend(ids)
            return
        refused = status == 413 or (
            text.startswith("Error") and status < 500 and not any(s in text for s in _NOT_ALLOWED)
        )
        if not refused:
            raise SinkError(f"{self.endpoint}: the Gratia collector answered {status}: {text!r}")
        if len(ids) > 1:  # find the record refused: the others go through
            half = len(ids) // 2
            self._send(ids[:half], records[:half], result)
            self._send(ids[half:], records[half:], result)
            return
        log.warning("%s refused job record %s: %s", self.endpoint, ids[0], text)
        result.rejected[ids[0]] = f"refused by the Gratia collector ({status}): {text}"
