"""What every sink is: the :class:`Sink` protocol and what it says of a batch (:class:`SendResult`).

A sink takes a batch of documents of one kind and says, per document, what became of it:
stored (``acked``), worth another try later (``retry``: an outage, 429, 5xx), or refused for
good (``rejected``: a mapping conflict, a malformed document). The outbox deletes only what
was acknowledged and moves rejected documents to its dead-letter table.

The protocol is everything the probe, the collector and the command line ask of a store, so
no caller needs to know which store it has: writing (``send``), reading back (``count``,
``query``) and the index templates (``check_templates``, ``install_templates``), which a
store without templates answers trivially.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

__all__ = ["SendResult", "Sink", "TemplateCheck"]


@dataclass
class SendResult:
    """What a sink did with each document of a batch, by id."""

    acked: list[str] = field(default_factory=list)
    retry: dict[str, str] = field(default_factory=dict)  # id -> error, transient
    rejected: dict[str, str] = field(default_factory=dict)  # id -> error, permanent


@dataclass(frozen=True)
class TemplateCheck:
    """Which kinds' index templates are missing from the store, and which differ (kind ->
    what differs) from ``mappings/``. A store without templates is always ``ok``."""

    missing: list[str] = field(default_factory=list)
    differ: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.missing and not self.differ


class Sink(Protocol):
    """A store of records (the embedded SQLite store, Elasticsearch/OpenSearch, ...)."""

    def send(self, kind: str, docs: Sequence[Mapping[str, Any]]) -> SendResult:
        """Store documents of one kind (each with ``id`` and ``timestamp``)."""

    def count(self, kind: str) -> int:
        """How many documents of ``kind`` are stored."""

    def query(
        self, kind: str, *, since: str | None = None, until: str | None = None, limit: int | None = None
    ) -> list[dict[str, Any]]:
        """Documents of ``kind``, oldest first; ``since``/``until`` are ISO-8601 UTC bounds on
        ``timestamp`` (since inclusive, until exclusive)."""

    def check_templates(self) -> TemplateCheck:
        """Which kinds' index templates are missing or outdated (nothing, for a store without)."""

    def install_templates(self) -> list[str]:
        """Install (or update) the index template of every kind; the names installed."""

    def close(self) -> None: ...
