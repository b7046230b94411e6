"""``[probe]``: the probe's own state and its service's cadence."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from probes.config.fields import LaxPath, Section

__all__ = ["ProbeSettings"]


class ProbeSettings(Section):
    state_dir: LaxPath = Field(
        Path("state"), description="Directory for the embedded store, the outbox, checkpoints and quarantine."
    )
    history_every_s: float = Field(900.0, gt=0, description="Seconds between history reads of the service (probe run).")
    flush_every_s: float = Field(60.0, gt=0, description="Seconds between outbox flushes to the store.")
    misfire_grace_s: float = Field(
        60.0,
        gt=0,
        description="A run of the service that is late by more than this is skipped (coalesced) rather than run late.",
    )
    health_address: str = Field("127.0.0.1", description="Address the /healthz and /metrics endpoint listens on.")
    health_port: int = Field(0, ge=0, le=65535, description="Port of the /healthz and /metrics endpoint; 0: off.")
    stop_timeout_s: float = Field(
        30.0,
        gt=0,
        description="Seconds SIGTERM may take: running jobs and one last flush, then what is left waits in the "
        "outbox for the next start. Keep it well under the unit's TimeoutStopSec (120).",
    )
