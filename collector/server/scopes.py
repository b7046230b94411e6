"""What a probe may report for: the sites and pools its token speaks for.

A token proves which probe sends; it says nothing of which site's accounts the records move.
So the collector's configuration names, for each probe, the sites and pools it may report
for (``collector.probes``)::

    probes = [{probe = "fairacct@ce01.example.org", sites = ["SiteA"], pools = ["cm.site-a.org"]}]

A record that names a ``site`` (or a ``pool``) not among its probe's refuses the whole request
with 403 (:class:`~collector.errors.ForbiddenError`), as a record in another probe's name does:
nothing of it is stored, and the probe keeps the batch and sends it again once the operator
has listed the site (a probe's configuration error must not cost records, and a batch is one
probe's records of one pool, so one record for another site means they all are). A probe the
list does not name may report for no site and no pool: its records may only leave both out
(null). Hence summaries and exports, which group by site and pool, never count a record its
sender was not allowed to send.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from collector.errors import ForbiddenError
from collector.settings import ProbeScope

__all__ = ["SCOPED_FIELDS", "Scope"]

SCOPED_FIELDS = ("site", "pool")
"""The fields of a record a probe's scope bounds (each a dimension of the summaries)."""


@dataclass(frozen=True)
class Scope:
    """The sites and pools ``probe`` may report for."""

    probe: str
    sites: frozenset[str] = frozenset()
    pools: frozenset[str] = frozenset()

    @classmethod
    def of(cls, probe: str, listed: Sequence[ProbeScope]) -> Scope:
        """``probe``'s scope from the configuration's list (``collector.probes``); nothing
        when it is not listed."""
        for entry in listed:
            if entry.probe == probe:
                return cls(probe, frozenset(entry.sites), frozenset(entry.pools))
        return cls(probe)

    def check(self, doc: Mapping[str, Any], index: int) -> None:
        """Nothing when record ``index`` of a batch (``doc``) is within the scope;
        ForbiddenError naming the record, the field and what the probe may report for otherwise."""
        for field, allowed in (("site", self.sites), ("pool", self.pools)):
            value = doc.get(field)
            if value is not None and value not in allowed:
                may = ", ".join(sorted(allowed)) if allowed else "none"
                raise ForbiddenError(
                    f"record {index} is for {field} {_short(value)}, which probe {self.probe!r} may not report for "
                    f"(its {field}s: {may[:400]}); the collector's operator lists them in collector.probes"
                )


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
