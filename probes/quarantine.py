"""The quarantine: malformed ads, kept as they were read, for a person to look at.

Nothing read is lost: an ad that cannot be parsed is skipped by the cycle, counted, and
written here with where it came from and why it was refused.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

from probes.sources.classad import Malformed

__all__ = ["write_quarantine"]


def write_quarantine(malformed: Sequence[Malformed], directory: Path, now: datetime) -> Path:
    """Write malformed ads to a new file in ``directory``; return its path.

    Each ad is preceded by comment lines naming its file, line and reason. The file is
    written whole (temporary file, fsync, rename) so a reader never sees half of it.
    """
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"malformed-{now.strftime('%Y%m%dT%H%M%S.%fZ')}.ads"
    with tempfile.NamedTemporaryFile("w", encoding="utf-8", dir=directory, delete=False, suffix=".tmp") as fh:
        for m in malformed:
            fh.write(f"# from {m.path} line {m.line}\n# reason: {m.reason}\n")
            fh.write(m.text.rstrip("\n") + "\n\n")
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(fh.name, path)
    return path
