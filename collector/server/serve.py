"""Running the collector: uvicorn on a socket bound here, so that a port in use, a bad TLS
certificate or an unreadable token directory is an error with a message, not a log line
followed by an exit deep inside the server.

The store is asked once at start (:func:`check_store_at_start`), and its answer decides:

- **it does not answer as a store should** (down, a timeout, 5xx, 429): the collector starts all
  the same, says so in one WARNING line, and takes records into its outbox; its flusher checks
  the templates and moves the indices once the store answers (:mod:`collector.sinks.gate`). A
  restart or a reboot during a store's outage must not be an outage of the collector: the probes
  would keep their records meanwhile, but a collector that cannot start during an outage turns
  every restart (an upgrade, a host's reboot, systemd's own restarts) into one.
- **it answers and refuses** (credentials it does not take, a privilege missing, templates missing
  or outdated with ``store.install_templates = false``, a TLS certificate not trusted): the
  collector does not start (exit 1), the reason in one line. Nothing the collector can wait for
  mends that, the fault is in what the operator configured or installed, and the moment to say
  it is when the operator starts the collector: a collector that started would answer every
  probe 202 for records it cannot deliver, hiding the fault behind replies that say all is well.
  systemd's ``Restart=on-failure`` tries again every few seconds, so once it is mended (the
  credentials, ``fairacct mappings install``) the collector starts by itself. (A store that
  begins to refuse while the collector runs does not stop it: /healthz says ``degraded``, the
  flusher logs it at ERROR, and the records wait.)
"""

from __future__ import annotations

import ctypes
import gc
import logging
import math
import resource
import signal
import socket
import ssl
import sys
from collections.abc import Callable

import uvicorn

from collector.addresses import trust_list
from collector.errors import ConfigError, FairacctError, SinkError
from collector.outbox import Outbox
from collector.server.app import create_app, store_gate, store_sink_factory
from collector.server.connections import Connections, guarded_protocol
from collector.server.flusher import said_prepared
from collector.settings import CollectorSettings
from collector.sinks import Opening, Sink, open_store
from collector.sinks.gate import TemplateGate

__all__ = ["START_CHECK_TIMEOUT_S", "check_store_at_start", "serve"]

_log = logging.getLogger("fairacct.collector")

# Young collections every 20,000 allocations rather than 700: what a request allocates is
# garbage by its reply anyway (about a tenth less CPU a record in bench_collector.py --gratia,
# when an envelope's whole tree was built at once).
GC_THRESHOLDS = (20_000, 20, 20)


START_CHECK_TIMEOUT_S = 10.0
"""How long the store has to answer each request of the check at start (seconds): a store that
takes its connections and never answers delays the start by this much, not by its 30 s timeout."""


def check_store_at_start(settings: CollectorSettings, gate: TemplateGate) -> None:
    """Ask the store once, through ``gate``, before the collector starts (see the module
    docstring): a store that refuses raises :class:`SinkError` (the collector does not start);
    one that does not answer is said in a WARNING line, and the flusher asks again."""
    # the sink's request timeout, not the flusher's bulk size: a check sends nothing
    sink = open_store(settings.store, Opening(settings.state_dir, timeout_s=START_CHECK_TIMEOUT_S))
    try:
        said_prepared(gate.ensure(sink))
    except SinkError as exc:
        if gate.refused:
            raise SinkError(
                f"{exc}; the store answered and refused, which no wait mends: the collector does not start until it "
                "is fixed (a store that is down or answers 5xx does not stop it)"
            ) from exc
        _log.warning(
            "store: %s; the collector starts all the same: it takes records into its outbox, and its flusher checks "
            "the store's index templates (and moves the indices behind them) once the store answers", exc,
        )  # fmt: skip
    finally:
        sink.close()


def serve(
    settings: CollectorSettings, sink_factory: Callable[[], Sink] | None = None, *, gate: TemplateGate | None = None
) -> None:
    """Serve until SIGTERM or SIGINT (uvicorn's graceful shutdown: requests under way are answered,
    the outbox writer commits what is waiting, the flusher settles its batch). The store is asked
    first (:func:`check_store_at_start`, through ``gate``, by default :func:`store_gate`'s): a
    store that refuses stops the start; one that does not answer does not."""
    factory = sink_factory or store_sink_factory(settings)
    factory().close()  # a store URL that cannot be opened fails here, not in the flusher
    Outbox(settings.outbox_path).close()  # so does an outbox that cannot be created
    gate = gate or store_gate(settings)
    check_store_at_start(settings, gate)
    _enough_files(settings.max_connections)
    connections = Connections.of(settings, _tls_context(settings))
    app = create_app(settings, factory, connections=connections, gate=gate)
    config = uvicorn.Config(
        app,
        # deadlines, the caps on connections, bounded headers, and TLS (its handshake counted and
        # bounded as any connection's, which TLS begun by the event loop before uvicorn's is not)
        http=guarded_protocol(connections),
        ws="none",
        # the guard closes idle connections first (and counts them); uvicorn's own timer is a backstop
        timeout_keep_alive=math.ceil(settings.idle_timeout_s) + 1,
        lifespan="on",
        access_log=False,
        log_config=None,  # the caller's logging (one line per event on stderr)
        server_header=False,
        # an X-Forwarded-For believed from anyone (uvicorn's default: from 127.0.0.1, or as the environment
        # says) would let any local user take a Gratia sender's address
        proxy_headers=bool(settings.trusted_proxies),
        forwarded_allow_ips=trust_list(settings.trusted_proxies),  # IPv4 ones also as a hop writes them mapped
        timeout_graceful_shutdown=30,
    )
    config.load()
    sock = _listen(settings.listen_address, settings.port)
    # The outbox writer needs the GIL back a few times per commit while the event loop parses
    # the next requests; with Python's default 5 ms switch interval each of those waits can
    # cost 5 ms, and group commits (hence replies) slow to a crawl. 0.5 ms keeps them short.
    sys.setswitchinterval(0.0005)
    # What is alive now (modules, the configuration's models: a hundred thousand objects and more)
    # lives as long as the process; every full garbage collection would walk it again, and parsing
    # a Gratia envelope (tens of thousands of elements) sets off many: with this heap not frozen,
    # envelope_docs took over half as long again (bench_gratia.py). Frozen, the collector never
    # looks at it.
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)
    if not _keep_freed_memory():
        _log.debug("malloc keeps its own thresholds (not glibc's)")
    server = uvicorn.Server(config)
    _log.info("collector listening on %s://%s:%d", settings.scheme, settings.listen_address, sock.getsockname()[1])
    # uvicorn handles SIGTERM and SIGINT, not this: ignored until the app's lifespan says it from
    # the event loop (create_app), rather than dying of its default
    hangup = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        server.run(sockets=[sock])
    finally:
        signal.signal(signal.SIGHUP, hangup)
        sock.close()
    if not server.started:
        raise FairacctError("the collector did not start; the log above says why")


def _tls_context(settings: CollectorSettings) -> ssl.SSLContext | None:
    """The server's TLS context when the collector serves TLS itself (a server's defaults:
    TLS 1.2 and up), None when it serves plain http; a ConfigError when the certificate or
    its key cannot be loaded."""
    if not settings.tls_cert_file:
        return None
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2  # (Python's default since 3.10: said, not assumed)
    try:
        context.load_cert_chain(settings.tls_cert_file, settings.tls_key_file)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(
            "collector tls_cert_file/tls_key_file: "
            f"cannot load {settings.tls_cert_file} and {settings.tls_key_file} ({exc})"
        ) from exc
    return context


# glibc's malloc maps a block of 128 KiB or more on its own and unmaps it when freed, and trims
# the top of an arena back to the kernel once enough of it is free: each envelope's form,
# decoded in the conversion thread, found its megabytes given back and faulted them in again,
# a thousand page faults and more a request (costly in a virtual machine). Kept up to these
# sizes, freed memory is reused (bench_collector.py --gratia: a handful of page faults a decoded
# form, and a sixth less CPU a record). The process keeps what its largest requests needed.
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc's malloc.h
_MMAP_THRESHOLD = 32 * 2**20  # glibc's largest: blocks below are taken from and freed to the arenas
_TRIM_THRESHOLD = 128 * 2**20  # free memory an arena keeps at its top


def _keep_freed_memory() -> bool:
    """Have glibc keep freed memory for reuse (see above); whether it took the settings (not
    where malloc is not glibc's)."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # no C library to ask, or one without mallopt
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD) and mallopt(_M_TRIM_THRESHOLD, _TRIM_THRESHOLD))


# Files the collector opens besides its connections: the outbox and the store (SQLite's
# database, journal and shared memory, per connection), Elasticsearch's connection pool, its
# logs, the token directory as it is read again.
_FILES_BESIDES_CONNECTIONS = 100


def _enough_files(max_connections: int) -> None:
    """Have the process allowed to open ``max_connections`` connections and what else it needs:
    its soft limit raised as far as its hard limit lets it, else a ConfigError. (At the limit,
    the event loop could accept nothing, probes included; under it, the cap decides.)"""
    needed = max_connections + _FILES_BESIDES_CONNECTIONS
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= needed:
        return
    if hard != resource.RLIM_INFINITY and hard < needed:
        raise ConfigError(
            f"collector max_connections: {max_connections} connections need {needed} open files, but this "
            f"process may open at most {hard} (its hard limit: systemd's LimitNOFILE, ulimit -Hn); "
            f"lower max_connections to at most {max(1, hard - _FILES_BESIDES_CONNECTIONS)} or raise the limit"
        )
    resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))


def _listen(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise ConfigError(
            f"collector listen_address/port: cannot listen on {host}:{port} ({exc.strerror}); choose another"
        ) from None
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock
