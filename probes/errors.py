"""The probes' exceptions: what reading a pool's ads can find wrong.

    FairacctError (collector.errors)
    ├── ConfigError (collector.errors)
    └── SourceError               a source cannot be read at all (names the file, collector or schedd)
        └── ClassAdError          one ad is malformed (names the file, the line and the attribute)

They grow from :class:`~collector.errors.FairacctError`, so the command line turns them into
one line and an exit code as it does every other error; the collector knows nothing of them.
"""

from __future__ import annotations

from collector.errors import FairacctError

__all__ = ["ClassAdError", "SourceError"]


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
