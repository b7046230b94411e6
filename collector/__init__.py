"""fairacct's collector side: stores and serves records; knows nothing of HTCondor."""

from collector.errors import ClassAdError, ConfigError, FairacctError, SinkError, SourceError, StoreError
from collector.store import EmbeddedStore, record_id

__all__ = [
    "ClassAdError",
    "ConfigError",
    "EmbeddedStore",
    "FairacctError",
    "SinkError",
    "SourceError",
    "StoreError",
    "record_id",
]
