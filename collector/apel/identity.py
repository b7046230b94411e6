"""Who a job is to APEL: its VO, VO group and VO role, from the FQAN of its VOMS proxy.

An FQAN is ``/<vo>[/<subgroup>...][/Role=<role>][/Capability=<capability>]``: the VO is the
first component, the group the path before ``Role=``, the role ``Role=<role>`` (APEL keeps the
``Role=`` prefix, as APEL's client does); ``Capability`` is deprecated and ignored.
"""

from __future__ import annotations

__all__ = ["parse_fqan"]


def parse_fqan(fqan: str | None) -> tuple[str | None, str | None, str | None]:
    """(VO, VO group, VO role) of ``fqan``; (None, None, None) when it is not an FQAN."""
    if not fqan or not fqan.startswith("/"):
        return None, None, None
    parts = [p for p in fqan.split("/") if p]
    groups = [p for p in parts if "=" not in p]
    role = next((p for p in parts if p.startswith("Role=")), None)
    if not groups:
        return None, None, role
    return groups[0], "/" + "/".join(groups), role
