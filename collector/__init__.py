"""fairacct's collector side: stores and serves records; knows nothing of HTCondor."""

from collector.errors import ClassAdError, ConfigError, FairacctError, SinkError, SourceError, StoreError
from collector.outbox import Outbox
from collector.records import record_id, table_docs
from collector.sinks import SendResult, open_sink
from collector.sinks.sqlite import EmbeddedStore

__all__ = [
    "ClassAdError",
    "ConfigError",
    "EmbeddedStore",
    "FairacctError",
    "Outbox",
    "SendResult",
    "SinkError",
    "SourceError",
    "StoreError",
    "open_sink",
    "record_id",
    "table_docs",
]
