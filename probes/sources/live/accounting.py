"""The negotiator's groups, as its ``Accounting`` ads in the collector name them.

One collector query per pool (its replicas in order): ``AdType.Accounting`` ads with
``IsAccountingGroup``, projected to ``Name``. Not the negotiator's ``getPriorities``, whose
answer the bindings cut short (issue 34, point 7); the negotiator advertises every configured
group and the root ``<none>`` there each negotiation cycle, and they stay until
``CLASSAD_LIFETIME`` after it stops. See :mod:`probes.sources.negotiator_groups` for what they
are used for.
"""

from __future__ import annotations

from collections.abc import Sequence

import htcondor2

from probes.errors import SourceError
from probes.sources.live.calls import Calls
from probes.sources.negotiator_groups import accounting_groups

__all__ = ["negotiator_groups"]

_CONSTRAINT = "IsAccountingGroup =?= true"
_PROJECTION = ["Name", "IsAccountingGroup"]


def negotiator_groups(calls: Calls, groups: Sequence[Sequence[str | None]]) -> tuple[frozenset[str] | None, str | None]:
    """The group names the negotiators of the pools (``groups``: each pool's collector
    replicas) advertise, all pools together; None when no pool's collector holds an
    ``Accounting`` ad, with why (a collector failing, or no negotiator advertising)."""
    names: set[str] = set()
    answered, problems = False, []
    for group in groups:
        try:
            ads, source = calls.failover(
                group,
                "the negotiator's accounting groups",
                lambda c: list(c.query(htcondor2.AdType.Accounting, _CONSTRAINT, _PROJECTION)),
            )
        except SourceError as exc:
            problems.append(str(exc))
            continue
        if not ads:
            problems.append(f"collector {source}: no Accounting ads (no negotiator has advertised its groups)")
            continue
        answered = True
        names |= accounting_groups(ads)
    if not answered:
        return None, "; ".join(problems) or "no collector"
    return frozenset(names), None
