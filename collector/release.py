"""This installation's release: the version its wheel was built with (``setup.py`` makes it from
the repository: ``0.2.0``, or ``0.2.0.post3+g1a2b3c4d5e`` for a build between releases).

The probe sends it with every request (:data:`RELEASE_HEADER`), so a collector can count records
and probes by the sender's release and a rollout can be followed in its ``/metrics``.
"""

from __future__ import annotations

import functools
from importlib.metadata import PackageNotFoundError, version

__all__ = ["RELEASE_HEADER", "UNKNOWN_RELEASE", "release"]

RELEASE_HEADER = "X-Fairacct-Release"
"""The request header a probe names its release in (a probe of a release before it sends none)."""

UNKNOWN_RELEASE = "0+unknown"
"""The release of a source tree run without being installed."""


@functools.cache
def release() -> str:
    """This installation's version, as ``fairacct --version`` says it."""
    try:
        return version("fairacct")
    except PackageNotFoundError:  # running from a source tree that is not installed
        return UNKNOWN_RELEASE
