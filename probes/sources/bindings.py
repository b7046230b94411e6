"""The htcondor2 bindings, called in worker processes that are killed at the deadline.

The bindings hold Python's global interpreter lock while a query waits on a daemon: a
collector that accepts connections and never answers (a stopped process, a hung host) blocks
*every* thread of the calling process for HTCondor's whole timeout, so no deadline, health
request or flush of the service can run meanwhile. Hence no call into the bindings is made in
the service's process. Each runs in a worker process (the ``spawn`` start method: a fresh
interpreter, none of the service's threads, locks or open databases); the caller waits on a
pipe, which releases the lock, and a call that has not answered by its deadline is abandoned by
killing its worker (SIGKILL: a process stopped in a system call cannot do otherwise). Workers
are kept between calls (starting one imports the bindings, about half a second), one per caller
in flight, and a new one is started after a kill.

What crosses the boundary is plain data: the call (its name and arguments as strings and
numbers, a schedd's location ad as text) and the answer (ClassAds as text in the new syntax,
parsed back with classad2, expressions unevaluated, as the bindings returned them; or the
bindings' error as its type and message). ClassAds cross in chunks of :data:`CHUNK` ads, each
freed in the worker once sent, so that neither side pickles, or holds twice, a schedd's whole
history or a collector's whole answer: :meth:`Bindings.stream` hands them over a chunk at a
time (the bindings answer both as one list, which the worker alone holds, less what it sent).

A schedd's history answer (up to ``pool.history_piece`` jobs: ``Schedd.history`` answers a list,
which the worker holds) is one call however long it takes, and so is a collector's startd ads,
so their deadline is not the call's length but the worker's silence: a stream waits as long as
the worker keeps receiving (it spends CPU time on every ad the schedd sends), and is abandoned
once it has spent none for ``timeout_s`` (where ``/proc`` does not tell a process's CPU time,
``timeout_s`` is the deadline of each chunk, as of any call). The objects handed to
:class:`~probes.sources.live.LivePool` (:meth:`Bindings.collector`, :meth:`Bindings.schedd`)
have the bindings' method signatures, so the pool's code is the same for the bindings and for a
test's fakes. :meth:`Bindings.negotiator`'s client departs from them once: it reads the
negotiator's priorities whole (``priority_answer``), as ``getPriorities`` loses all but nine
entries (see :mod:`probes.sources.negotiator`).
"""

from __future__ import annotations

import math
import multiprocessing
import multiprocessing.connection
import os
import threading
import weakref
from collections.abc import Iterator
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

import classad2
import htcondor2

from collector.errors import ConfigError

__all__ = ["CHUNK", "Bindings", "BindingsError", "configure", "security_context"]

#: How long a new worker may take to import and configure the bindings (not the call's deadline:
#: a loaded machine can take seconds to start Python, and no daemon is involved yet).
_START_S = 60.0

#: ClassAds per message from a worker: about 1 MB of text for a history projection, so that a
#: message is cheap to pickle and the caller converts one while the worker prints the next.
CHUNK = 1000


class BindingsError(RuntimeError):
    """A call into the bindings failed in the worker (its message is the bindings' own), or the
    worker gave no answer by the deadline."""


def security_context(token_file: str) -> htcondor2.SecurityContext | None:
    """The security context of an IDTOKEN file (``pool.token_file``); None without one."""
    if not token_file:
        return None
    try:
        token = Path(token_file).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"pool.token_file: cannot read {token_file!r} ({exc})") from None
    if not token:
        raise ConfigError(f"pool.token_file: {token_file!r} is empty, expected an IDTOKEN")
    return htcondor2.SecurityContext(token)


def configure(condor_config: str, timeout_s: float) -> None:
    """Process-wide HTCondor settings: ``condor_config`` instead of CONDOR_CONFIG (when set),
    and QUERY_TIMEOUT from ``timeout_s``."""
    if condor_config:
        if not Path(condor_config).is_file():
            raise ConfigError(f"pool.condor_config: no such file {condor_config!r}")
        # reload_config(path) ignores its argument on htcondor 25 (COLLECTOR_HOST stayed unset):
        # the bindings read the file CONDOR_CONFIG names, in this worker's own environment
        os.environ["CONDOR_CONFIG"] = condor_config
        htcondor2.reload_config()
    htcondor2.param["QUERY_TIMEOUT"] = str(max(1, math.ceil(timeout_s)))


# -- the worker's side --------------------------------------------------------------------------


def _send_answer(conn: multiprocessing.connection.Connection, answer: Any) -> None:
    """Send an answer: a list of ClassAds as ``("ads", texts)`` messages of :data:`CHUNK` ads and
    a closing ``("done", count)``, each ad freed once sent (a history of a million jobs is
    gigabytes of ClassAds); anything else as ``("ok", ("other", repr))`` (the caller says it is
    not ads)."""
    if not (isinstance(answer, list) and all(isinstance(a, classad2.ClassAd) for a in answer)):
        conn.send(("ok", ("other", repr(answer))))
        return
    for first in range(0, len(answer), CHUNK):
        last = min(first + CHUNK, len(answer))
        conn.send(("ads", [str(answer[i]) for i in range(first, last)]))
        answer[first:last] = [None] * (last - first)  # same length: no shifting of a long list
    conn.send(("done", len(answer)))


def _answer(request: tuple[Any, ...], security: htcondor2.SecurityContext | None) -> Any:
    daemon, where, method, kwargs = request
    if daemon == "collector":
        collector = htcondor2.Collector(where, security)
        if method == "query":
            ad_type = htcondor2.AdType(kwargs.pop("ad_type"))
            return collector.query(ad_type=ad_type, **kwargs)
        if method == "locateAll":
            return collector.locateAll(htcondor2.DaemonType(kwargs["daemon_type"]))
    elif daemon == "schedd":
        schedd = htcondor2.Schedd(classad2.parseOne(where, classad2.ParserType.New))
        if method == "query":
            return schedd.query(opts=htcondor2.QueryOpt(kwargs.pop("opts")), **kwargs)
        if method == "history":
            return schedd.history(**kwargs)
    elif daemon == "negotiator":  # the pool's negotiator (COLLECTOR_HOST's), or the one of a location ad
        location = classad2.parseOne(where, classad2.ParserType.New) if where else None
        negotiator = htcondor2.Negotiator(location)
        if method == "priority_answer":
            return [_priority_answer(negotiator, bool(kwargs.get("rollup", False)))]
        if method in ("setFactor", "setUsage", "setPriority"):
            getattr(negotiator, method)(str(kwargs["user"]), float(kwargs["value"]))
            return None
    raise ValueError(f"unknown call {daemon}.{method}")


def _priority_answer(negotiator: htcondor2.Negotiator, rollup: bool) -> classad2.ClassAd:
    """The negotiator's priority answer whole (``NumSubmittors``, ``Name<i>``, ...): the call
    ``Negotiator.getPriorities`` makes, before it splits the answer and loses entries 10 and up
    (see :mod:`probes.sources.negotiator`). The wheel offers no public call for it."""
    command_return = getattr(htcondor2.htcondor2_impl, "_negotiator_command_return", None)
    command = getattr(htcondor2.Negotiator, "_GET_PRIORITY_ROLLUP" if rollup else "_GET_PRIORITY", None)
    if command_return is None or command is None:
        raise RuntimeError(
            f"this htcondor2 ({htcondor2.version()}) lacks _negotiator_command_return or Negotiator._GET_PRIORITY: "
            "fairacct cannot read the negotiator's priority answer whole (getPriorities alone keeps only its "
            "entries 1..9); use an htcondor wheel of 25.x"
        )
    return command_return(negotiator._addr, command)


def _serve(conn: multiprocessing.connection.Connection, condor_config: str, timeout_s: float, token_file: str) -> None:
    """A worker's loop: configure once, then answer calls until the pipe closes. A caller gone
    while it answers (the probe killed during a flush) ends it quietly: no traceback of a broken
    pipe in the probe's log for a process nobody waits for."""
    try:
        _answer_calls(conn, condor_config, timeout_s, token_file)
    except (BrokenPipeError, ConnectionResetError):
        return


def _answer_calls(
    conn: multiprocessing.connection.Connection, condor_config: str, timeout_s: float, token_file: str
) -> None:
    try:
        configure(condor_config, timeout_s)
        security = security_context(token_file)
    except Exception as exc:  # noqa: BLE001 - handed to the caller, which raises it as a SourceError
        conn.send(("error", type(exc).__name__, str(exc)))
        return
    conn.send(("ready",))
    while True:
        try:
            request = conn.recv()
        except (EOFError, OSError):
            return  # the service closed the pipe (or died): nothing more to do
        try:
            answer = _answer(request, security)
        except Exception as exc:  # noqa: BLE001 - every failure of the bindings goes back as data
            conn.send(("error", type(exc).__name__, str(exc)))
            continue
        _send_answer(conn, answer)
        del answer


# -- the caller's side ----------------------------------------------------------------------------


class _Worker:
    def __init__(self, context: Any, args: tuple[Any, ...]) -> None:
        self.conn, child = multiprocessing.Pipe()
        self.process: BaseProcess = context.Process(
            target=_serve, args=(child, *args), name="fairacct: htcondor2", daemon=True
        )
        self.process.start()
        child.close()
        self.ready = False

    def kill(self) -> None:
        if self.process.is_alive():
            self.process.kill()
        self.process.join(5)
        self.conn.close()


class Bindings:
    """Clients of the bindings whose every call runs in a worker killed at ``timeout_s``.

    ``condor_config``, ``timeout_s`` and ``token_file`` are the pool's settings of those names.
    :meth:`close` kills every worker, in flight or idle (the service stopping).
    """

    def __init__(self, condor_config: str, timeout_s: float, token_file: str = "") -> None:
        if condor_config and not Path(condor_config).is_file():
            raise ConfigError(f"pool.condor_config: no such file {condor_config!r}")
        self.timeout_s = timeout_s
        self._args = (condor_config, timeout_s, token_file)
        self._context = multiprocessing.get_context("spawn")
        self._lock = threading.Lock()
        self._idle: list[_Worker] = []
        self._busy: set[_Worker] = set()
        self._closed = False
        self.killed = 0  # workers killed at a deadline
        # a pool dropped without close() does not leave its workers behind
        weakref.finalize(self, _kill_all, self._idle, self._busy)

    def __repr__(self) -> str:
        return f"Bindings(timeout_s={self.timeout_s:g}, workers={len(self._idle) + len(self._busy)})"

    def collector(self, address: str | None, security: htcondor2.SecurityContext | None = None) -> _CollectorClient:
        """A client of the collector at ``address`` (None: COLLECTOR_HOST). The worker builds its
        own security context from ``pool.token_file``; ``security`` is the caller's copy."""
        return _CollectorClient(self, address)

    def schedd(self, location: classad2.ClassAd) -> _ScheddClient:
        """A client of the schedd of ``location`` (a location ad, as locateAll gives it)."""
        return _ScheddClient(self, str(location))

    def negotiator(self, location: classad2.ClassAd | None = None) -> _NegotiatorClient:
        """A client of the negotiator of ``location`` (None: the pool's, from COLLECTOR_HOST)."""
        return _NegotiatorClient(self, None if location is None else str(location))

    def close(self) -> None:
        """Kill every worker; calls in flight fail at once, later ones are refused."""
        with self._lock:
            self._closed = True
            workers = [*self._idle, *self._busy]
            self._idle.clear()
        for worker in workers:
            worker.kill()

    def call(self, request: tuple[Any, ...]) -> Any:
        """Run ``request`` in a worker: the bindings' answer (ClassAds parsed back), or raise
        BindingsError (the bindings' error, or no answer by the deadline: the worker is killed)."""
        ads: list[classad2.ClassAd] = []
        for kind, value in self._replies(request, patient=False):
            if kind == "other":
                return value  # not ClassAds: the caller names what it got
            ads.extend(value)
        return ads

    def stream(self, request: tuple[Any, ...]) -> Iterator[classad2.ClassAd]:
        """Run ``request`` in a worker and yield its ClassAds as they arrive, a chunk at a time;
        waits as long as the worker keeps receiving (see the module docstring). An answer that
        is not ClassAds raises BindingsError. A consumer that stops early costs the worker: it
        is killed, the rest of the answer still in its pipe."""
        for kind, value in self._replies(request, patient=True):
            if kind == "other":
                raise BindingsError(f"expected ClassAds, the bindings answered {value[:200]}")
            yield from value

    def _replies(self, request: tuple[Any, ...], *, patient: bool) -> Iterator[tuple[str, Any]]:
        """The answer to ``request``: ``("ads", [ClassAd, ...])`` per chunk, or one ``("other",
        value)``. The worker goes back to the idle ones once it has answered whole; a worker
        left mid-answer (a deadline, an error, a consumer that stopped) is killed."""
        worker = self._take()
        whole = False
        try:
            worker.conn.send(request)
            while True:
                reply = self._receive(worker, self.timeout_s, patient=patient)
                if reply[0] != "ads":
                    break
                yield "ads", [classad2.parseOne(text, classad2.ParserType.New) for text in reply[1]]
            whole = True
        except (OSError, EOFError) as exc:  # the worker died, or close() killed it
            raise BindingsError(f"the worker calling htcondor2 is gone ({exc or type(exc).__name__})") from None
        finally:
            if whole:
                self._give_back(worker)
            else:
                self._drop(worker)
        if reply[0] == "error":
            raise BindingsError(reply[2] or reply[1])
        if reply[0] == "ok":
            yield "other", reply[1][1]

    def _take(self) -> _Worker:
        with self._lock:
            if self._closed:
                raise BindingsError("not asked, the probe is stopping")
            worker = self._idle.pop() if self._idle else None
            if worker is None:
                worker = _Worker(self._context, self._args)
            self._busy.add(worker)
        if not worker.ready:
            try:
                reply = self._receive(worker, _START_S)
            except (OSError, EOFError, BindingsError) as exc:
                self._drop(worker)
                raise BindingsError(f"the worker calling htcondor2 did not start: {exc}") from None
            if reply[0] == "error":
                self._drop(worker)
                raise BindingsError(reply[2] or reply[1])
            worker.ready = True
        return worker

    def _receive(self, worker: _Worker, timeout: float, *, patient: bool = False) -> tuple[Any, ...]:
        """The worker's next message within ``timeout``; ``patient``: or longer, for as long as
        the worker spends CPU time in every ``timeout`` (it is receiving an answer)."""
        # poll() waits without the GIL: the service's other threads run meanwhile
        spent = _cpu_seconds(worker.process.pid) if patient else None
        while not worker.conn.poll(timeout):
            now = None if spent is None else _cpu_seconds(worker.process.pid)
            if now is None or spent is None or now <= spent:
                raise BindingsError(f"no answer within {timeout:g} s (pool.timeout_s)")
            spent = now  # still receiving: a long history, not a silent daemon
        reply: tuple[Any, ...] = worker.conn.recv()
        return reply

    def _give_back(self, worker: _Worker) -> None:
        with self._lock:
            self._busy.discard(worker)
            if self._closed:
                worker.kill()
            else:
                self._idle.append(worker)

    def _drop(self, worker: _Worker) -> None:
        with self._lock:
            self._busy.discard(worker)
            self.killed += 1
        worker.kill()


def _cpu_seconds(pid: int | None) -> float | None:
    """CPU time a process has spent (user and system), from /proc; None where there is none."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
            fields = fh.read().rpartition(")")[2].split()  # the command's name may hold spaces
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def _kill_all(idle: list[_Worker], busy: set[_Worker]) -> None:
    for worker in [*idle, *busy]:
        worker.kill()


class _CollectorClient:
    """``htcondor2.Collector``'s calls, made in a worker."""

    def __init__(self, bindings: Bindings, address: str | None) -> None:
        self._bindings = bindings
        self._address = address

    def query(
        self, ad_type: htcondor2.AdType, constraint: str | None = None, projection: list[str] | None = None
    ) -> Iterator[classad2.ClassAd]:
        """The ads as they arrive, a chunk at a time: nothing is asked until the first is wanted
        (see :meth:`Bindings.stream`)."""
        kwargs = {"ad_type": int(ad_type), "constraint": constraint, "projection": projection}
        return self._bindings.stream(("collector", self._address, "query", kwargs))

    def locateAll(self, daemon_type: htcondor2.DaemonType) -> Any:  # noqa: N802 - the bindings' name
        return self._bindings.call(("collector", self._address, "locateAll", {"daemon_type": int(daemon_type)}))


class _ScheddClient:
    """``htcondor2.Schedd``'s calls, made in a worker."""

    def __init__(self, bindings: Bindings, location: str) -> None:
        self._bindings = bindings
        self._location = location

    def query(self, constraint: str = "true", projection: list[str] | None = None, opts: Any = None) -> Any:
        opt = int(opts or htcondor2.QueryOpt.Default)
        kwargs = {"constraint": constraint, "projection": projection or [], "opts": opt}
        return self._bindings.call(("schedd", self._location, "query", kwargs))

    def history(
        self,
        constraint: str | None = None,
        projection: list[str] | None = None,
        match: int = -1,
        since: str | None = None,
    ) -> Iterator[classad2.ClassAd]:
        """The ads as they arrive: nothing is asked until the first is wanted (see
        :meth:`Bindings.stream`)."""
        kwargs = {"constraint": constraint, "projection": projection or [], "match": match, "since": since}
        return self._bindings.stream(("schedd", self._location, "history", kwargs))


class _NegotiatorClient:
    """``htcondor2.Negotiator``'s calls the priority sync makes, in a worker; the priorities
    read whole (:meth:`priority_answer`) instead of by ``getPriorities``."""

    def __init__(self, bindings: Bindings, location: str | None) -> None:
        self._bindings = bindings
        self._location = location

    def priority_answer(self, rollup: bool = False) -> classad2.ClassAd:
        """The negotiator's answer to a priority query, one ClassAd whole (``NumSubmittors``,
        ``Name<i>``, ...: what ``condor_userprio -long -legacy`` prints), where the bindings'
        ``getPriorities`` loses its entries 10 and up; split by
        :func:`~probes.sources.negotiator.submitter_ads`."""
        answer = self._bindings.call(("negotiator", self._location, "priority_answer", {"rollup": rollup}))
        if not (isinstance(answer, list) and len(answer) == 1):
            raise BindingsError(f"expected the negotiator's answer as one ClassAd, the worker gave {answer!r:.200}")
        ad: classad2.ClassAd = answer[0]
        return ad

    def setFactor(self, user: str, factor: float) -> None:  # noqa: N802
        self._bindings.call(("negotiator", self._location, "setFactor", {"user": user, "value": factor}))

    def setUsage(self, user: str, usage: float) -> None:  # noqa: N802
        self._bindings.call(("negotiator", self._location, "setUsage", {"user": user, "value": usage}))

    def setPriority(self, user: str, priority: float) -> None:  # noqa: N802
        self._bindings.call(("negotiator", self._location, "setPriority", {"user": user, "value": priority}))
