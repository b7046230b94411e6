"""Running the collector: uvicorn on a socket bound here, so that a port in use, a bad TLS
certificate or an unreadable token directory is an error with a message, not a log line
followed by an exit deep inside the server.
"""

from __future__ import annotations

import gc
import logging
import socket
import ssl
import sys
from collections.abc import Callable

import uvicorn

from collector.errors import ConfigError, FairacctError
from collector.outbox import Outbox
from collector.server.app import create_app, store_sink_factory
from collector.server.settings import ServerSettings
from collector.sinks import Sink

__all__ = ["serve"]

_log = logging.getLogger("fairacct.collector")

# A young collection runs when the objects the collector tracks, allocated less freed, pass
# the first threshold (Python's is 700). A Gratia envelope of 500 records is a tree of ~15,000
# elements alive at once and freed whole after its conversion: at 20,000, one collection every
# envelope walked the tree under way for nothing (~4.5 ms each, none collected anything: ~8 us
# of CPU a record, bench_collector.py --gratia with gc.callbacks); at 100,000 a tree comes and
# goes between two collections, which now come only from what outlives requests.
GC_THRESHOLDS = (100_000, 20, 20)


def serve(settings: ServerSettings, sink_factory: Callable[[], Sink] | None = None) -> None:
    """Serve until SIGTERM or SIGINT (uvicorn's graceful shutdown: requests under way are answered,
    the outbox writer commits what is waiting, the flusher settles its batch)."""
    factory = sink_factory or store_sink_factory(settings)
    factory().close()  # a store URL that cannot be opened fails here, not in the flusher
    Outbox(settings.outbox_path).close()  # so does an outbox that cannot be created
    app = create_app(settings, factory)
    config = uvicorn.Config(
        app,
        ssl_certfile=settings.tls_cert_file,
        ssl_keyfile=settings.tls_key_file,
        lifespan="on",
        access_log=False,
        log_config=None,  # the caller's logging (one line per event on stderr)
        server_header=False,
        timeout_graceful_shutdown=30,
    )
    try:
        config.load()
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(
            f"collector tls_cert_file/tls_key_file: cannot load {settings.tls_cert_file} and {settings.tls_key_file} ({exc})"
        ) from exc
    sock = _listen(settings.host, settings.port)
    # The outbox writer needs the GIL back a few times per commit while the event loop parses
    # the next requests; with Python's default 5 ms switch interval each of those waits can
    # cost 5 ms, and group commits (hence replies) slow to a crawl. 0.5 ms keeps them short.
    sys.setswitchinterval(0.0005)
    # What is alive now (modules, the configuration's models: ~170,000 objects) lives as long as
    # the process; every full garbage collection would walk it again, and parsing a Gratia
    # envelope (tens of thousands of elements) sets off many: envelope_docs took 108 ms instead
    # of 63 ms for 500 records with this heap (measured). Frozen, the collector never looks at it.
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)
    server = uvicorn.Server(config)
    _log.info("collector listening on %s://%s:%d", settings.scheme, settings.host, sock.getsockname()[1])
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
    if not server.started:
        raise FairacctError("the collector did not start; the log above says why")


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
