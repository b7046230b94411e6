"""fairacct's collector side: stores and serves records; knows nothing of HTCondor.

The names below are the package's public surface; they are imported when first used, so that
``from collector.errors import ConfigError`` (every command line does) costs the exception tree,
not pandas and the stores.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from collector.lazy import lazy_names

if TYPE_CHECKING:
    from collector.errors import ConfigError, FairacctError, SinkError, StoreError
    from collector.outbox import Outbox
    from collector.records import record_id, table_docs
    from collector.sinks import SendResult, open_sink
    from collector.sinks.sqlite import EmbeddedStore

__all__ = [
    "ConfigError",
    "EmbeddedStore",
    "FairacctError",
    "Outbox",
    "SendResult",
    "SinkError",
    "StoreError",
    "open_sink",
    "record_id",
    "table_docs",
]

_WHERE = {
    **dict.fromkeys(("ConfigError", "FairacctError", "SinkError", "StoreError"), "errors"),
    "Outbox": "outbox",
    "record_id": "records",
    "table_docs": "records",
    "SendResult": "sinks",
    "open_sink": "sinks",
    "EmbeddedStore": "sinks.sqlite",
}


__getattr__ = lazy_names(__name__, _WHERE, globals())
