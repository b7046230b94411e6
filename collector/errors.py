"""fairacct's exceptions: one tree, shared by the probes and the collector.

The probes' own branch (``SourceError``, ``ClassAdError``: what reading a pool finds) is in
:mod:`probes.errors`; it grows from :class:`FairacctError` like the rest.

    FairacctError                 anything fairacct raises on purpose
    ├── ConfigError               a bad configuration file or option (names the key)
    ├── SinkError                 a record could not be stored
    │   ├── ElasticsearchError    Elasticsearch or OpenSearch failed (names the URL and the request)
    │   └── StoreError            the embedded SQLite store (or an outbox) failed
    │       └── DiskFullError     ... because its file system is full: nothing was written, and the
    │                             same write succeeds once there is room
    ├── BusyError                 another writer of the store holds the lease of this work (the daily
    │                             summaries: collectors on one store take turns); nothing was written
    ├── RecordError               a Gratia record or envelope cannot be read (hostile or malformed XML,
    │                             a value GRACC would refuse); names the record and the field
    └── IngestError               the collector service refuses a request (collector/server/replies.py
        │                         maps each kind, once, to an HTTP status, a body and a metric)
        ├── BadRequestError       the request is malformed: its body, its encoding, its JSON or form
        │   └── SenderNotAllowedError  a Gratia sender (the form's ``from``) not in collector.gratia_senders
        ├── UnauthorizedError     no bearer token, or one the collector does not know
        ├── ForbiddenError        a known token, but records in another probe's name
        ├── SchemaTooNewError     a record of a newer schema than the collector takes (a probe
        │                         upgraded before its collector); the probe keeps its records
        ├── TooLargeError         the body is over the size limit (as sent or decompressed), or holds
        │                         more records than a request may
        ├── UnsupportedMediaError a Content-Type or Content-Encoding the endpoint does not take
        ├── NotFoundError         a path the collector does not answer (names those it does)
        ├── MethodNotAllowedError a method the path does not take (names those it does)
        ├── TooManyRequestsError  the probe has as many requests under way as it may; retry later
        │   └── SlowDownError     the store is slower than the probes and the outbox is at its
        │                         backpressure depth; retry later
        ├── OverloadedError       the outbox holds more records than it may; retry later
        └── DisconnectedError     the connection closed before the body was whole (the client left,
                                  or the collector's body deadline passed); nothing was stored

Only the command line turns these into messages and exit codes; library code raises.
Foreign exceptions (OSError, sqlite3, classad2, htcondor2) are translated where they
cross into fairacct, with ``raise ... from exc`` so the cause stays visible.
"""

from __future__ import annotations

__all__ = [
    "BadRequestError",
    "BusyError",
    "ConfigError",
    "DisconnectedError",
    "DiskFullError",
    "ElasticsearchError",
    "FairacctError",
    "ForbiddenError",
    "IngestError",
    "MethodNotAllowedError",
    "NotFoundError",
    "OverloadedError",
    "RecordError",
    "SchemaTooNewError",
    "SenderNotAllowedError",
    "SinkError",
    "SlowDownError",
    "StoreError",
    "TooLargeError",
    "TooManyRequestsError",
    "UnauthorizedError",
    "UnsupportedMediaError",
]


class FairacctError(Exception):
    """Base of every error fairacct raises on purpose."""


class ConfigError(FairacctError):
    """The configuration (file or command line) is not valid; the message names the key."""


class SinkError(FairacctError):
    """Records could not be written to a sink."""


class ElasticsearchError(SinkError):
    """Elasticsearch or OpenSearch refused a request or could not be reached.

    The message names the URL (never its credentials) and what was being done. ``status`` is
    the HTTP status of the answer (None when none came); ``transient`` says whether the same
    request may succeed later (connection failures, timeouts, 408, 429 and 5xx).
    """

    def __init__(self, message: str, *, status: int | None = None, transient: bool = False) -> None:
        super().__init__(message)
        self.status = status
        self.transient = transient


class StoreError(SinkError):
    """The embedded store (SQLite) failed."""


class DiskFullError(StoreError):
    """The file system under an outbox or the embedded store is full (SQLite's ``database or
    disk is full``, ENOSPC, a quota or a file size limit): the write was rolled back whole, and
    it succeeds once there is room. Apart from other store failures because what to do differs:
    free space on that file system (or wait for the outbox to give some back), not mend a store."""


class BusyError(FairacctError):
    """Another writer of the store holds the lease of this work (the daily summaries, which
    collectors sharing one store make one at a time): the work is its now; try again once it
    is done, or once its lease runs out. The message names the holder and until when."""


class RecordError(FairacctError):
    """A Gratia record or envelope cannot be read: hostile or malformed XML, or a value GRACC
    would refuse. The message names the record and the field, what was expected and what came.

    ``index`` is the record's position among the envelope's elements (0-based), None when the
    whole document is to blame; ``reason`` is the message without that position.
    """

    def __init__(self, reason: str, *, index: int | None = None) -> None:
        self.reason = reason
        self.index = index
        super().__init__(reason if index is None else f"record {index}: {reason}")


class IngestError(FairacctError):
    """The collector service refuses a request; the message is for the sender, so it names
    what was expected and what came, and never a secret."""


class BadRequestError(IngestError):
    """The request is malformed (its body, encoding, JSON or form); sending it again is useless."""


class SenderNotAllowedError(BadRequestError):
    """A Gratia probe (the form's ``from``) that the collector does not take records from.
    Gratia probes carry no token: ``collector.gratia_senders`` is the list of those it takes.
    A BadRequestError because GRACC answers every request it refuses with 400."""


class UnauthorizedError(IngestError):
    """No bearer token, or a token the collector does not know."""


class ForbiddenError(IngestError):
    """A known token, but the request would write in another probe's name."""


class SchemaTooNewError(IngestError):
    """A record's ``schema_version`` is newer than the collector takes: its probe is of a later
    release than the collector. Nothing is stored; the probe keeps the batch (it is not the
    record's fault) until the collector is upgraded."""


class TooLargeError(IngestError):
    """The body is over the collector's size limit, as sent or once decompressed, or it holds
    more records than one request may: the sender should send smaller batches."""


class UnsupportedMediaError(IngestError):
    """A Content-Type or Content-Encoding that the endpoint does not take."""


class NotFoundError(IngestError):
    """A path the collector does not answer: most often a probe's ``store.url`` that is wrong."""


class MethodNotAllowedError(IngestError):
    """A method the path does not take; ``allowed`` are those it does (the reply's ``Allow``)."""

    def __init__(self, message: str, allowed: tuple[str, ...]) -> None:
        super().__init__(message)
        self.allowed = allowed


class OverloadedError(IngestError):
    """The collector's outbox holds more records than it may: the store is not keeping up."""


class TooManyRequestsError(IngestError):
    """The probe already has as many requests under way as one probe may
    (``collector.max_requests_per_probe``); it should send again once they are answered."""


class SlowDownError(TooManyRequestsError):
    """The store takes records more slowly than the probes send them, and the collector's
    outbox holds ``collector.backpressure_depth`` records: the probe should keep its batch and
    send it again after the reply's ``Retry-After``, so that the outbox stays bounded."""


class DisconnectedError(IngestError):
    """The connection closed before the request's body was whole: the client went away, or
    the collector closed it at its body deadline. Nothing was stored, and no one hears a reply."""
