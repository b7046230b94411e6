"""fairacct's collector side: stores and serves records; knows nothing of HTCondor.

The names below are the package's public surface; they are imported when first used, so that
``from collector.errors import ConfigError`` (every command line does) costs the exception tree,
not pandas and the stores.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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

_WHERE = {
    **dict.fromkeys(
        ("ClassAdError", "ConfigError", "FairacctError", "SinkError", "SourceError", "StoreError"), "collector.errors"
    ),
    "Outbox": "collector.outbox",
    "record_id": "collector.records",
    "table_docs": "collector.records",
    "SendResult": "collector.sinks",
    "open_sink": "collector.sinks",
    "EmbeddedStore": "collector.sinks.sqlite",
}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(importlib.import_module(_WHERE[name]), name)
    raise AttributeError(f"module 'collector' has no attribute {name!r}")
