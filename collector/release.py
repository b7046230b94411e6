"""This installation's release: the version its wheel was built with (``setup.py`` makes it from
the repository: ``0.2.0``, or ``0.2.0.post3+g1a2b3c4d5e`` for a build between releases).

The probe sends it with every request (:data:`RELEASE_HEADER`), so a collector can count records
and probes by the sender's release and a rollout can be followed in its ``/metrics``.
"""

from __future__ import annotations

import functools
import re
from importlib.metadata import PackageNotFoundError, version

__all__ = ["NOT_SAID", "RELEASE_HEADER", "UNKNOWN_RELEASE", "release", "sender_release"]

RELEASE_HEADER = "X-Fairacct-Release"
"""The request header a probe names its release in (a probe of a release before it sends none)."""

UNKNOWN_RELEASE = "0+unknown"
"""The release of a source tree run without being installed."""

NOT_SAID = "none"
"""A sender's release when its request names none: a probe of a release before 0.2.0."""

_RELEASE = re.compile(r"[0-9][0-9A-Za-z.+!_-]{0,63}")  # a version as setup.py writes it, 64 characters at most


@functools.cache
def release() -> str:
    """This installation's version, as ``fairacct --version`` says it."""
    try:
        return version("fairacct")
    except PackageNotFoundError:  # running from a source tree that is not installed
        return UNKNOWN_RELEASE


def sender_release(header: str | None) -> str:
    """The release a request's :data:`RELEASE_HEADER` names, as a metric's label: the version, or
    :data:`NOT_SAID` for none, or ``"invalid"`` for anything that is not a version (a label is
    never free text)."""
    if header is None:
        return NOT_SAID
    return header if _RELEASE.fullmatch(header) else "invalid"
