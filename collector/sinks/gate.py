"""The store's index templates, checked before any record goes in: one gate for the probe's
deliveries and the collector's flusher alike.

Without fairacct's templates Elasticsearch guesses each field's type from the first document
that has it (``user`` as text, ``end`` as a float), and an index made so keeps those types for
its month. So records are sent only once the templates were found right (or installed, where
``store.install_templates`` allows: :func:`~collector.sinks.ensure_templates`): at the first
delivery, and again after every delivery that left records behind after errors, since a store
that failed may come back empty (a cluster rebuilt or restored has no templates). The collector's
gate also moves the indices made by an older template behind the current one
(:func:`~collector.sinks.upgrade_store`) the first time the templates are found right, and each
time it installs them, before it sends a record; a probe never moves indices.

A check that fails says why (:attr:`TemplateGate.problem`) and whether the store answered and
refused (:attr:`TemplateGate.refused`: credentials, a privilege, templates missing that may not
be installed; no wait mends that) or did not answer as a store should (down, a timeout, 5xx or
429: it may pass). Stores without templates (the embedded store, a collector, Gratia) always pass.
"""

from __future__ import annotations

from dataclasses import dataclass

from collector.errors import ElasticsearchError, SinkError
from collector.sinks import ensure_templates, upgrade_store
from collector.sinks.base import Sink

__all__ = ["Prepared", "TemplateGate"]


@dataclass(frozen=True)
class Prepared:
    """What a check did: the templates it installed, and a line per index it moved."""

    installed: tuple[str, ...] = ()
    migrated: tuple[str, ...] = ()


class TemplateGate:
    """Whether records may go to the store at ``url`` now (see the module docstring).

    ``install``: install missing or outdated templates (``store.install_templates``);
    ``migrate``: move the indices behind them (the collector). Not safe to check from two
    threads at once; reading :attr:`checked` from another is.
    """

    def __init__(self, url: str, *, install: bool, migrate: bool = False) -> None:
        self.url = url
        self.install = install
        self.migrate = migrate
        self.checked = False
        """The templates were found right since the store last failed: records may be sent."""
        self.problem: str | None = None
        """Why the last check failed (None: it did not, or none was made yet)."""
        self.refused = False
        """The last check failed because the store answered and refused (see the module docstring)."""
        self._moved = False  # the indices were looked at once (the collector's start)

    def __repr__(self) -> str:
        state = "checked" if self.checked else "refused" if self.refused else "unchecked"
        return f"TemplateGate({self.url!r}, {state}, install={self.install}, migrate={self.migrate})"

    def ensure(self, sink: Sink) -> Prepared:
        """Check the templates (install them, move the indices) unless they were checked since the
        store last failed. Raises :class:`SinkError` when they are not right, or the store did not
        answer: no record may be sent then."""
        if self.checked:
            return Prepared()
        try:
            installed = tuple(ensure_templates(sink, self.url, install=self.install))
            moving = self.migrate and (installed or not self._moved)
            migrated = tuple(upgrade_store(sink)) if moving else ()
        except SinkError as exc:
            self.problem = str(exc)
            self.refused = not (isinstance(exc, ElasticsearchError) and exc.transient)
            raise
        self.checked, self.problem, self.refused = True, None, False
        self._moved = self._moved or self.migrate
        return Prepared(installed, migrated)

    def settle(self, *, errors: bool, waiting: int) -> None:
        """After a delivery: records left behind after errors mean the store failed, and it may
        come back empty, so the templates are checked again before the next one."""
        if errors and waiting:
            self.checked = False

    def forget(self) -> None:
        """The store failed outside a delivery's count (a delivery raised): check again."""
        self.checked = False
