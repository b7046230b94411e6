"""Who a job is to APEL: its VO, VO group and VO role, from the FQAN of its VOMS proxy.

An FQAN is ``/<vo>[/<subgroup>...][/Role=<role>][/Capability=<capability>]``. The three are
read as APEL's own ``parse_fqan`` reads them (``apel/common/parsing_utils.py``), which its
server applies to every individual job record and its client to every summary: the first FQAN
of a ``;``-separated list; the VO its first component; the role the first component starting
``Role=`` in any case, kept whole (``role=pilot`` stays ``role=pilot``); the group every
component before the role, so ``/cms/Capability=NULL``, without a role, has the group
``/cms/Capability=NULL``. What APEL would read as no value (``NULL``, ``None``) is no value.
"""

from __future__ import annotations

from collector.apel.keys import clean

__all__ = ["FQAN_SEPARATOR", "is_fqan", "parse_fqan"]

FQAN_SEPARATOR = ";"
"""What separates the FQANs of a list; APEL takes the first."""


def is_fqan(text: str | None) -> bool:
    """Whether APEL's ``parse_fqan`` reads ``text`` as an FQAN (its first FQAN starts with ``/``)."""
    return bool(text) and str(text).split(FQAN_SEPARATOR)[0].startswith("/")


def parse_fqan(fqan: str | None) -> tuple[str | None, str | None, str | None]:
    """(VO, VO group, VO role) of ``fqan`` as APEL reads them; (None, None, None) when it is
    not an FQAN."""
    if fqan is None or not is_fqan(fqan):
        return None, None, None
    pieces = fqan.split(FQAN_SEPARATOR)[0].split("/")
    group: list[str] = []
    role = None
    for piece in pieces:
        if not piece:
            continue
        if piece.lower().startswith("role="):
            role = piece
            break
        group.append(piece)
    return clean(pieces[1]), clean("/" + "/".join(group)) if group else None, clean(role)
