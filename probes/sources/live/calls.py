"""The network side of a live pool: one call at a time, each with a deadline.

Every network call runs with a deadline (``pool.timeout_s``): a daemon that does not answer,
answers too late or answers something that is not a list of ClassAds raises one
:class:`~probes.errors.SourceError` naming it. The bindings hold the GIL while they wait on a
daemon, so they are never called in this process: by default the clients come from
:class:`~probes.sources.bindings.Bindings`, whose every call runs in a worker process killed at
the deadline. The objects standing in for the daemons come from ``collector_factory`` and
``schedd_factory``: those clients by default, a test's fakes otherwise.

A daemon may send a projected attribute as an expression over attributes that were not asked
for (a glidein's ``GLIDEIN_ToRetire = DaemonStartTime + 86400``): those are added to that
query's projection, the query is asked again once, and later queries ask for them from the
start (:attr:`Calls.learned`, per kind of query).
"""

from __future__ import annotations

import functools
import itertools
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Protocol, TypeVar

import classad2
import htcondor2

from collector.errors import ConfigError
from probes.config import PoolSettings
from probes.errors import SourceError
from probes.sources.bindings import Bindings, security_context
from probes.sources.live.projections import unique_names

__all__ = [
    "Calls",
    "CollectorFactory",
    "CollectorLike",
    "ScheddFactory",
    "ScheddLike",
    "close_stream",
    "collector_name",
    "missing_refs",
    "replica_groups",
    "translated",
]

log = logging.getLogger("fairacct.live")

T = TypeVar("T")


class CollectorLike(Protocol):
    """What fairacct calls on an ``htcondor2.Collector``."""

    def query(
        self, ad_type: htcondor2.AdType, constraint: str | None = None, projection: list[str] | None = None
    ) -> Iterable[classad2.ClassAd]: ...

    def locateAll(self, daemon_type: htcondor2.DaemonType) -> list[classad2.ClassAd]: ...  # noqa: N802 - the bindings' name


class ScheddLike(Protocol):
    """What fairacct calls on an ``htcondor2.Schedd``."""

    def query(
        self, constraint: str = ..., projection: list[str] = ..., opts: htcondor2.QueryOpt = ...
    ) -> list[classad2.ClassAd]: ...

    def history(
        self, constraint: str | None = None, projection: list[str] = ..., match: int = -1, since: str | None = None
    ) -> Iterable[classad2.ClassAd]: ...


class CollectorFactory(Protocol):
    """(address or None for COLLECTOR_HOST, security context) -> a collector client."""

    def __call__(self, address: str | None, security: htcondor2.SecurityContext | None, /) -> CollectorLike: ...


class ScheddFactory(Protocol):
    """(a schedd's location ad, as locateAll gives it) -> a schedd client."""

    def __call__(self, location: classad2.ClassAd, /) -> ScheddLike: ...


def replica_groups(collectors: Sequence[str]) -> list[list[str | None]]:
    """``pool.collectors`` as pools, each the addresses of its replicas in order
    (``"cm1:9618, cm2:9618"`` is one pool of two); none configured: one pool at COLLECTOR_HOST
    (``[[None]]``)."""
    groups: list[list[str | None]] = []
    for entry in collectors:
        replicas: list[str | None] = [a.strip() for a in entry.split(",") if a.strip()]
        if not replicas:
            raise ConfigError(f"pool.collectors: expected host:port entries, got an empty one ({entry!r})")
        groups.append(replicas)
    return groups or [[None]]


def collector_name(address: str | None) -> str:
    """A collector as messages and ``source`` columns name it."""
    return address or "COLLECTOR_HOST"


class Calls:
    """The clients of a pool's daemons and the one way to call them.

    ``collector_factory`` and ``schedd_factory`` make the clients of the single network calls:
    by default those of :class:`~probes.sources.bindings.Bindings`, which make every call in a
    worker process killed at ``pool.timeout_s`` (there ``pool.condor_config`` is loaded and
    ``pool.timeout_s`` becomes HTCondor's QUERY_TIMEOUT). :meth:`cancel` makes calls in flight
    give up at once (the service stopping). ``abandoned`` counts the calls given up on (their
    threads may still be waiting on a daemon); ``learned``: per kind of query (``startd``,
    ``idle``, ``history``), the attributes its answers referred to beyond its projection.
    """

    def __init__(
        self,
        pool: PoolSettings,
        *,
        collector_factory: CollectorFactory | None = None,
        schedd_factory: ScheddFactory | None = None,
    ) -> None:
        self.timeout_s = pool.timeout_s
        self.security = security_context(pool.token_file)
        self.bindings: Bindings | None = None
        if collector_factory is None or schedd_factory is None:
            self.bindings = Bindings(pool.condor_config, pool.timeout_s, pool.token_file)
            collector_factory = collector_factory or self.bindings.collector
            schedd_factory = schedd_factory or self.bindings.schedd
        self._collector_factory: CollectorFactory = collector_factory
        self._schedd_factory: ScheddFactory = schedd_factory
        self._cancel = threading.Event()
        self.abandoned = 0
        self.learned: dict[str, set[str]] = {"startd": set(), "idle": set(), "history": set()}

    def cancel(self) -> None:
        """Make calls in flight, and later ones, fail at once (the bindings' workers are killed)."""
        self._cancel.set()
        if self.bindings is not None:
            self.bindings.close()

    def call(self, what: str, call: Callable[[], T]) -> T:
        """Run one network call with the deadline; translate the bindings' errors."""
        if self._cancel.is_set():
            raise SourceError(f"{what}: not asked, the probe is stopping")
        box: dict[str, Any] = {}
        done = threading.Event()

        def run() -> None:
            try:
                box["value"] = call()
            except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread, translated or re-raised there
                box["error"] = exc
            finally:
                done.set()

        worker = threading.Thread(target=run, name=f"fairacct: {what}", daemon=True)
        started = time.monotonic()
        worker.start()
        while not done.wait(0.05):
            if self._cancel.is_set():
                self.abandoned += 1
                raise SourceError(f"{what}: abandoned, the probe is stopping")
            if time.monotonic() - started >= self.timeout_s:
                self.abandoned += 1
                raise SourceError(f"{what}: no answer within {self.timeout_s:g} s (pool.timeout_s)")
        error = box.get("error")
        if error is not None:
            raise translated(what, error)
        return box["value"]  # type: ignore[no-any-return]

    def ads(self, what: str, call: Callable[[], Any]) -> list[classad2.ClassAd]:
        """A call whose answer must be a list of ClassAds."""
        answer = self.call(what, call)
        if not isinstance(answer, (list, tuple)):
            raise SourceError(f"{what}: expected a list of ClassAds, got {type(answer).__name__}")
        for i, ad in enumerate(answer):
            if not isinstance(ad, classad2.ClassAd):
                raise SourceError(f"{what}: expected a list of ClassAds, item {i} is a {type(ad).__name__}")
        return list(answer)

    def next_ads(self, what: str, ads: Iterator[Any], n: int, first: int) -> list[classad2.ClassAd]:
        """The next ``n`` ads of a streamed answer (fewer at its end): the bindings' errors
        translated, and anything that is not a ClassAd refused."""
        if self._cancel.is_set():
            raise SourceError(f"{what}: abandoned, the probe is stopping")
        try:
            chunk = list(itertools.islice(ads, n))
        except Exception as exc:  # the bindings' errors become SourceError, others go on as they are
            error = translated(what, exc)
            if error is exc:
                raise
            raise error from exc
        for i, ad in enumerate(chunk):
            if not isinstance(ad, classad2.ClassAd):
                raise SourceError(f"{what}: expected a list of ClassAds, item {first + i} is a {type(ad).__name__}")
        return chunk

    def projected(
        self, kind: str, what: str, base: Sequence[str], ask: Callable[[list[str]], list[classad2.ClassAd]]
    ) -> list[classad2.ClassAd]:
        """Ask with the projection ``base`` (and what was learned for ``kind``); when the answer's
        expressions refer to attributes it lacks, learn them and ask again, once."""
        projection = self.projection(kind, base)
        ads = ask(projection)
        missing = missing_refs(ads, projection)
        if missing:
            self.learned[kind] |= missing
            log.info(
                "%s: the answer refers to %s, which the projection lacked; asking again with them",
                what, ", ".join(sorted(missing)),
            )  # fmt: skip
            ads = ask([*projection, *sorted(missing)])
        return ads

    def projection(self, kind: str, base: Sequence[str]) -> list[str]:
        """``base`` with what the answers of ``kind`` were found to refer to beyond it."""
        return unique_names([*base, *sorted(self.learned[kind])])

    def collector(self, call: Callable[[CollectorLike], T], address: str | None) -> T:
        """``call`` on a client of the collector at ``address`` (None: COLLECTOR_HOST); not
        itself under the deadline: run it through :meth:`call`."""
        return call(self._collector_factory(address, self.security))

    def schedd(self, name: str, location: classad2.ClassAd) -> ScheddLike:
        """A client of the schedd ``name`` located by ``location`` (its ad from locateAll)."""
        return self.call(f"schedd {name}: connect", lambda: self._schedd_factory(location))

    def failover(
        self, group: Sequence[str | None], what: str, call: Callable[[CollectorLike], Any]
    ) -> tuple[list[classad2.ClassAd], str]:
        """Ask the replicas of one pool in order until one answers: (its ads, its address)."""
        return self.first_answer(
            group, what, lambda address, label: self.ads(label, functools.partial(self.collector, call, address))
        )

    def first_answer(
        self, group: Sequence[str | None], what: str, ask: Callable[[str | None, str], T]
    ) -> tuple[T, str]:
        """``ask(address, label)`` of the replicas of one pool in order until one answers without
        a SourceError: (its answer, its name); every replica failing raises one SourceError."""
        problems = []
        for i, address in enumerate(group):
            name = collector_name(address)
            try:
                return ask(address, f"collector {name}: {what}"), name
            except SourceError as exc:
                problems.append(str(exc))
                if i < len(group) - 1 and not self._cancel.is_set():
                    log.warning("%s; trying the next replica", exc)
        raise SourceError(
            problems[0] if len(problems) == 1 else "no collector of the pool answered: " + "; ".join(problems)
        )


def translated(what: str, error: BaseException) -> BaseException:
    """The bindings' errors (and the workers'), as a SourceError naming ``what`` was asked;
    anything else as it is."""
    if isinstance(error, (htcondor2.HTCondorException, classad2.ClassAdException, OSError, RuntimeError, ValueError)):
        text = " ".join(str(error).split()) or type(error).__name__
        result = SourceError(f"{what}: {text}")
        result.__cause__ = error
        return result
    return error


def missing_refs(ads: Sequence[classad2.ClassAd], projection: Sequence[str]) -> set[str]:
    """Attributes that the projected attributes' expressions refer to and the projection lacks."""
    wanted = {p.lower() for p in projection}
    missing: set[str] = set()
    for ad in ads:
        for name in projection:
            value = ad.get(name)
            if not isinstance(value, classad2.ExprTree):
                continue  # a literal (or absent)
            for ref in ad.externalRefs(value):
                scope, dot, attr = ref.rpartition(".")
                # classad2 lists "" for an expression whose references are all internal
                if attr and (not dot or scope.lower() == "my") and attr.lower() not in wanted:
                    missing.add(attr)
    return missing


def close_stream(ads: Iterator[Any]) -> None:
    """Close a streamed answer left early (asked again, a failure): its worker is freed."""
    close = getattr(ads, "close", None)
    if close is not None:
        close()
