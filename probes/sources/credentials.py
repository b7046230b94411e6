"""Credentials as HTCondor writes them."""

from __future__ import annotations

__all__ = ["group_of"]


def group_of(accounting_group: object) -> str | None:
    """The group of an AccountingGroup: 'group_cms.alice@pool' -> 'group_cms';
    an ungrouped 'alice@pool' (or nothing) -> None."""
    if not isinstance(accounting_group, str):
        return None
    group, dot, _ = accounting_group.partition("@")[0].rpartition(".")
    return group if dot else None
