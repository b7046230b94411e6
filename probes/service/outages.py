"""Sources that are down, said once: a schedd that stops answering is named when it goes down
and when it answers again (with how many reads were skipped), not at every snapshot.

The service reads every source at each run of a job (a snapshot every ``pool.interval_s``, the
history every ``probe.history_every_s``); a schedd down for a minute would otherwise put the
same WARNING in the log at every run of each (/healthz and /metrics count every skipped read).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

__all__ = ["SourceOutages"]


class SourceOutages:
    """The sources each job found down at its last run, and for how many runs in a row."""

    def __init__(self) -> None:
        self._down: dict[tuple[str, str], int] = {}  # (job, source): runs in a row it was skipped

    def lines(self, job: str, failures: Mapping[str, str]) -> list[tuple[int, str]]:
        """The log lines (level, text) of a run of ``job`` that skipped ``failures`` (source:
        why): a WARNING for a source newly down, DEBUG while it stays down, an INFO when a
        source down at the job's last run answers again."""
        out: list[tuple[int, str]] = []
        for source, why in sorted(failures.items()):
            runs = self._down.get((job, source), 0)
            self._down[(job, source)] = runs + 1
            text = f"{source} skipped: {' '.join(why.split())}"
            out.append((logging.DEBUG, text) if runs else (logging.WARNING, f"{text} (said once while it is down)"))
        for key in [k for k in self._down if k[0] == job and k[1] not in failures]:
            runs = self._down.pop(key)
            out.append((logging.INFO, f"{key[1]} answers again ({job}) after {runs} run(s) that skipped it"))
        return out

    def log(self, logger: logging.Logger, job: str, failures: Mapping[str, str], problems: Sequence[str] = ()) -> None:
        """:meth:`lines` written to ``logger``, and the run's other ``problems``, each a WARNING."""
        for level, text in [*self.lines(job, failures), *((logging.WARNING, p) for p in problems)]:
            logger.log(level, "%s", text)
