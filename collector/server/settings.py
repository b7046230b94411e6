"""The collector service's own settings: a small frozen value, independent of any file format.

The ``[collector]`` section of fairacct's TOML file is validated by the probe's configuration
model and converted into this class by the command line (``fairacct collector serve``); tests
and embedders build it directly. Nothing here is secret: tokens stay in their files, and the
store's credentials are named by file or environment variable, never held by value.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from collector.errors import ConfigError

__all__ = ["ServerSettings"]

MIB = 1024**2


@dataclass(frozen=True)
class ServerSettings:
    """What the collector service needs to run.

    ``token_dir``: one file per probe, named after the probe, holding its bearer token.
    ``state_dir``: the collector's outbox (``outbox.sqlite``) and, for a ``sqlite:///`` store
    URL with a relative path, the embedded store. ``store_url`` and ``store_options`` are what
    :func:`collector.sinks.open_sink` takes. ``gratia_senders``: the Gratia probes (``from``
    names) the Gratia endpoint accepts. ``max_body_bytes`` bounds a request body both as sent
    and decompressed; ``max_outbox_depth`` is the number of waiting records over which the
    collector answers 503. ``store_stale_s``: /healthz answers 503 when records have been
    waiting this long without the store taking any. ``max_group_records`` bounds one group
    commit (the records of several requests committed in one transaction). The store's
    summaries are re-made for the last ``summaries_recent_days`` days every
    ``summaries_every_s`` seconds and for the last ``summaries_nightly_days`` once a day
    (0 days: never; GRACC's 7 days, 15 minutes and 365 days by default).
    """

    token_dir: Path
    state_dir: Path
    store_url: str = "sqlite:///store.sqlite"
    store_options: Mapping[str, Any] = field(default_factory=dict)
    host: str = "127.0.0.1"
    port: int = 8080
    tls_cert_file: Path | None = None
    tls_key_file: Path | None = None
    gratia_senders: tuple[str, ...] = ()
    max_body_bytes: int = 64 * MIB
    max_outbox_depth: int = 2_000_000
    flush_every_s: float = 5.0
    flush_batch_size: int = 2000
    store_stale_s: float = 900.0
    max_group_records: int = 50_000
    summaries_recent_days: int = 7
    summaries_every_s: float = 900.0
    summaries_nightly_days: int = 365

    def __post_init__(self) -> None:
        for name, minimum in (
            ("max_body_bytes", 1), ("max_outbox_depth", 1), ("flush_batch_size", 1), ("max_group_records", 1),
            ("summaries_recent_days", 0), ("summaries_nightly_days", 0),
        ):  # fmt: skip
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
                raise ConfigError(f"collector {name}: expected an integer of at least {minimum}, got {value!r}")
        for name in ("flush_every_s", "store_stale_s", "summaries_every_s"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
                raise ConfigError(f"collector {name}: expected a number of seconds greater than 0, got {value!r}")
        if isinstance(self.port, bool) or not isinstance(self.port, int) or not 0 <= self.port <= 65535:
            raise ConfigError(f"collector port: expected 0 to 65535 (0: any free port), got {self.port!r}")
        if (self.tls_cert_file is None) != (self.tls_key_file is None):
            raise ConfigError(
                "collector TLS: give both tls_cert_file and tls_key_file, or neither (plain HTTP behind a proxy), "
                f"got {'only the certificate' if self.tls_key_file is None else 'only the key'}"
            )

    @property
    def outbox_path(self) -> Path:
        return self.state_dir / "outbox.sqlite"

    @property
    def scheme(self) -> str:
        return "https" if self.tls_cert_file is not None else "http"
