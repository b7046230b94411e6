"""The probe service (``fairacct probe run``): :mod:`~probes.service.scheduler` runs the cycles
on an APScheduler cadence; :mod:`~probes.service.health` serves ``/healthz`` and ``/metrics``."""

from __future__ import annotations

from probes.service.scheduler import ProbeService

__all__ = ["ProbeService"]
