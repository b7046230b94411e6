"""The collector service: HTTP ingest of records, durable before the reply, flushed to the store.

``create_app(settings, sink_factory)`` is the ASGI application (Starlette); ``serve(settings)``
runs it on uvicorn. See :mod:`collector.server.app` for the routes and the choice of Starlette,
:mod:`collector.server.v1_records` for the replies a probe gets,
:mod:`collector.server.gratia_rmi` for those a Gratia probe gets, and
:mod:`collector.server.committer` for how a reply waits until its records are on disk,
:mod:`collector.server.room` for the room it keeps on the outbox's file system, and
:mod:`collector.server.connections` for the deadlines and the caps on connections (TLS
handshakes included), and :mod:`collector.server.backlog` for how backpressure is shared.
"""

from collector.server.app import create_app
from collector.server.ingest import Endpoint, Ingest
from collector.server.replies import Style
from collector.server.serve import serve
from collector.settings import CollectorSettings

__all__ = ["CollectorSettings", "Endpoint", "Ingest", "Style", "create_app", "serve"]
