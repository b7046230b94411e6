"""A store that fails as real ones do where osmem-server cannot, run as a process on 127.0.0.1.

``python tests/collector/fake_store.py MODE [--upstream URL]`` prints ``{"url": ...}`` once it
listens, and ends when its stdin closes (its test is over). Modes:

- ``proxy``: every request forwarded to ``--upstream`` (osmem-server), its answer sent back;
- ``limit:BYTES``: the same, except that a request whose body is over BYTES is refused as
  Elasticsearch refuses one over its ``http.max_content_length``: ``413 Request Entity Too
  Large`` with an empty body, the connection kept;
- ``reset``: every connection is reset (RST) once the request's head and the first 64 KiB of
  its body are read: a load balancer with no node behind it, a firewall that rejects;
- ``silent``: requests are read and never answered: a hung node (the client times out);
- ``status:CODE``: every request is answered ``CODE`` with an Elasticsearch error body (401: a
  revoked API key).

``POST /_fake/mode`` with a mode as its body switches to it (a store that was up goes down);
``GET /_fake/requests`` lists the requests that came (method, path, body bytes, status). Neither
is forwarded. The clients on the other side are the real ones, and the records end in a real
server.
"""

from __future__ import annotations

import argparse
import http.client
import http.server
import json
import socket
import struct
import sys
import threading
from typing import Any
from urllib.parse import urlsplit

_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length"}


class _Store:
    """The fake store's mode and what it saw, shared by its handler threads."""

    def __init__(self, mode: str, upstream: str | None) -> None:
        self.mode, self.upstream = mode, upstream
        self.seen: list[dict[str, Any]] = []
        self.lock = threading.Lock()


def _handler(store: _Store) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def _answer(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
            self.send_response(status)
            for name, value in (headers or {"Content-Type": "application/json"}).items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _any(self) -> None:
            size = int(self.headers.get("Content-Length") or 0)
            mode = store.mode
            if mode == "reset" and not self.path.startswith("/_fake/"):
                self.rfile.read(min(size, 65536))
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                self.connection.close()  # with RST
                self.close_connection = True
                return
            body = self.rfile.read(size) if size else b""
            if self.path == "/_fake/requests":
                with store.lock:
                    self._answer(200, json.dumps(store.seen).encode())
                return
            if self.path == "/_fake/mode":
                store.mode = body.decode()
                self._answer(200, b"{}")
                return
            if mode == "silent":
                threading.Event().wait()
            if mode.startswith("status:"):
                code = int(mode.partition(":")[2])
                error = {"type": "security_exception", "reason": "refused by the fake store"}
                status, answer, headers = code, json.dumps({"error": error, "status": code}).encode(), None
            elif mode.startswith("limit:") and size > int(mode.partition(":")[2]):
                status, answer, headers = 413, b"", {}
            else:
                status, answer, headers = self._forward(body)
            with store.lock:
                store.seen.append({"method": self.command, "path": self.path, "bytes": size, "status": status})
            self._answer(status, answer, headers)

        def _forward(self, body: bytes) -> tuple[int, bytes, dict[str, str]]:
            assert store.upstream is not None, "a proxy needs --upstream"
            target = urlsplit(store.upstream)
            conn = http.client.HTTPConnection(target.hostname, target.port, timeout=60)
            try:
                headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP}
                conn.request(self.command, self.path, body=body or None, headers=headers)
                reply = conn.getresponse()
                data = reply.read()
                kept = {k: v for k, v in reply.getheaders() if k.lower() not in _HOP}
                return reply.status, data, kept
            finally:
                conn.close()

        def do_GET(self) -> None:
            self._any()

        def do_POST(self) -> None:
            self._any()

        def do_PUT(self) -> None:
            self._any()

        def do_DELETE(self) -> None:
            self._any()

    return Handler


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A connection this store reset, or a client gone: nothing to say."""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode")
    parser.add_argument("--upstream")
    args = parser.parse_args()
    server = _Server(("127.0.0.1", 0), _handler(_Store(args.mode, args.upstream)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print(json.dumps({"url": f"http://127.0.0.1:{server.server_address[1]}"}), flush=True)
    sys.stdin.read()  # until the test closes it


if __name__ == "__main__":
    main()
