"""What a sender may report for: the sites and pools a probe's token speaks for, the ProbeName
and sites a Gratia sender speaks for.

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

A Gratia sender (``collector.gratia_senders``, no token: its name and networks) is bounded the
same way, on the fields GRACC's summaries group by (issue 54): its records' ``ProbeName`` must be
its own name (the form's ``from``: gratia-probe writes its ProbeName into both) and their
``SiteName`` one of its ``sites``. One record beyond refuses the envelope whole (403), as GRACC
refuses an envelope whole for one record it cannot read; the reply says the sender "is not
allowed", which fairacct's own Gratia sink (collector/sinks/gratia.py) reads as the operator's
to mend, and keeps its records, as gratia-probe keeps them on any reply but ``OK``. A record that
names neither field names no one's rows (GRACC's summaries group it under ``N/A``), as a
fairacct record without a site or pool.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from collector.addresses import IPAddress
from collector.errors import ForbiddenError
from collector.settings import GratiaSender, ProbeScope

__all__ = ["SCOPED_FIELDS", "Bound", "Scope"]

SCOPED_FIELDS = ("site", "pool")
"""The fields of a fairacct record a probe's scope bounds (each a dimension of the summaries)."""

_ENVELOPE = "the envelope was refused whole and nothing of it stored"


@dataclass(frozen=True)
class Bound:
    """One field a sender's records may name only within ``allowed``; ``mend`` says who can
    change that, and how, in the refusal."""

    field: str
    allowed: frozenset[str]
    mend: str


@dataclass(frozen=True)
class Scope:
    """What ``probe`` may report for: the ``bounds`` on its records' fields. ``refusal`` words
    what a record beyond them is ("may not", for a token's probe; "is not allowed to", for a
    Gratia sender, the words its sink reads), ``also`` what the refusal added."""

    probe: str
    bounds: tuple[Bound, ...]  # no default: a scope of no bounds would let a record name anything
    who: str = "probe"
    refusal: str = "may not"
    also: str = ""

    @classmethod
    def of(cls, probe: str, listed: Sequence[ProbeScope]) -> Scope:
        """``probe``'s scope from the configuration's list (``collector.probes``); no site and
        no pool when it is not listed."""
        entry = next((e for e in listed if e.probe == probe), None)
        mend = "the collector's operator lists them in collector.probes"
        return cls(probe, tuple(
            Bound(field, frozenset(getattr(entry, f"{field}s", ()) if entry else ()), mend) for field in SCOPED_FIELDS
        ))  # fmt: skip

    @classmethod
    def of_sender(cls, sender: str, address: IPAddress | None, listed: Sequence[GratiaSender]) -> Scope:
        """A Gratia ``sender``'s scope (``collector.gratia_senders``): its own name, and the sites
        of the entries that name it and hold ``address`` (a sender listed twice, from two networks,
        reports from each for that entry's sites)."""
        entries = [e for e in listed if e.probe == sender and address is not None and e.allows(address)]
        sites = frozenset(site for e in entries for site in e.sites)
        return cls(
            sender,
            (Bound("ProbeName", frozenset({sender}), "a Gratia sender reports under its own name (the form's 'from') "
                   "only"),
             Bound("SiteName", sites, "the collector's operator lists them in collector.gratia_senders")),
            who="sender", refusal="is not allowed to", also=f"; {_ENVELOPE}",
        )  # fmt: skip

    def check(self, doc: Mapping[str, Any], index: int) -> None:
        """Nothing when record ``index`` of a batch or an envelope (``doc``) is within the scope;
        ForbiddenError naming the record, the field and what the sender may report for otherwise."""
        for bound in self.bounds:
            value = doc.get(bound.field)
            # not a string: never a listed name (and a JSON list or object is not hashable)
            if value is not None and not (isinstance(value, str) and value in bound.allowed):
                may = ", ".join(sorted(bound.allowed)) if bound.allowed else "none"
                raise ForbiddenError(
                    f"record {index} is for {bound.field} {_short(value)}, which {self.who} {self.probe!r} "
                    f"{self.refusal} report for (its {bound.field}s: {may[:400]}); {bound.mend}{self.also}"
                )


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
