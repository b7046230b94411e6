"""fairacct's exceptions: one tree, shared by the probes and the collector.

    FairacctError                 anything fairacct raises on purpose
    ├── ConfigError               a bad configuration file or option (names the key)
    ├── SourceError               a source cannot be read at all (names the file, collector or schedd)
    │   └── ClassAdError          one ad is malformed (names the file, the line and the attribute)
    └── SinkError                 a record could not be stored
        ├── ElasticsearchError    Elasticsearch or OpenSearch failed (names the URL and the request)
        └── StoreError            the embedded SQLite store failed

Only the command line turns these into messages and exit codes; library code raises.
Foreign exceptions (OSError, sqlite3, classad2, htcondor2) are translated where they
cross into fairacct, with ``raise ... from exc`` so the cause stays visible.
"""

from __future__ import annotations

__all__ = [
    "ClassAdError",
    "ConfigError",
    "ElasticsearchError",
    "FairacctError",
    "SinkError",
    "SourceError",
    "StoreError",
]


class FairacctError(Exception):
    """Base of every error fairacct raises on purpose."""


class ConfigError(FairacctError):
    """The configuration (file or command line) is not valid; the message names the key."""


class SourceError(FairacctError):
    """A source of ads (a file, a collector, a schedd) cannot be read."""


class ClassAdError(SourceError):
    """One ad is malformed.

    ``path`` and ``line`` locate the ad (``line`` is 1-based, the first line of the ad, or of the
    offending attribute when it is known); ``attribute`` is set when one attribute is to blame.
    """

    def __init__(self, path: str, line: int, reason: str, attribute: str | None = None) -> None:
        self.path = path
        self.line = line
        self.reason = reason
        self.attribute = attribute
        where = f"{path} line {line}"
        what = f"attribute '{attribute}': {reason}" if attribute else reason
        super().__init__(f"{where}: {what}")


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
