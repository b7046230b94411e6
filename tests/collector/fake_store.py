"""A store that fails as real ones do where osmem-server cannot, run as a process on 127.0.0.1.

``python -m tests.collector.fake_store MODE [--upstream URL]`` prints ``{"url": ...}`` once it
listens, and ends when its stdin closes (its test is over). Modes:

- ``reset``: every connection is reset (RST) once the request's first bytes are read: a store
  behind a load balancer with no node up, a firewall that rejects;
- ``silent``: connections are accepted and never answered: a hung node (the client times out);
- ``status:CODE``: every request is answered ``CODE`` with an Elasticsearch error body (401: a
  revoked API key);
- ``limit:BYTES``: a proxy to ``--upstream`` (osmem-server) that refuses a request whose body is
  over BYTES as Elasticsearch does over its ``http.max_content_length``: ``413 Request Entity
  Too Large`` with an empty body, the connection kept. ``GET /_fake/requests`` lists what came
  (method, path, body bytes, status), not forwarded.

The clients on the other side are the real ones, and the records end in a real server.
"""

from __future__ import annotations

import argparse
import contextlib
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


def _reset(listener: socket.socket) -> None:
    while True:
        conn, _ = listener.accept()
        with contextlib.suppress(OSError):
            conn.recv(65536)
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close with RST
        conn.close()


def _silent(listener: socket.socket) -> None:
    held = []
    while True:
        held.append(listener.accept()[0])


def _handler(mode: str, upstream: str | None) -> type[http.server.BaseHTTPRequestHandler]:
    seen: list[dict[str, Any]] = []
    lock = threading.Lock()

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
            body = self.rfile.read(size) if size else b""
            if self.path == "/_fake/requests":
                with lock:
                    self._answer(200, json.dumps(seen).encode())
                return
            if mode.startswith("status:"):
                code = int(mode.partition(":")[2])
                error = {"type": "security_exception", "reason": "refused by the fake store"}
                self._answer(code, json.dumps({"error": error, "status": code}).encode())
                return
            limit = int(mode.partition(":")[2])
            if size > limit:
                status, answer, headers = 413, b"", {}
            else:
                status, answer, headers = self._forward(body)
            with lock:
                seen.append({"method": self.command, "path": self.path, "bytes": size, "status": status})
            self._answer(status, answer, headers)

        def _forward(self, body: bytes) -> tuple[int, bytes, dict[str, str]]:
            assert upstream is not None
            target = urlsplit(upstream)
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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode")
    parser.add_argument("--upstream")
    args = parser.parse_args()
    if args.mode in ("reset", "silent"):
        listener = socket.create_server(("127.0.0.1", 0))
        port = listener.getsockname()[1]
        serve = _reset if args.mode == "reset" else _silent
        threading.Thread(target=serve, args=(listener,), daemon=True).start()
    else:
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _handler(args.mode, args.upstream))
        server.daemon_threads = True
        port = server.server_address[1]
        threading.Thread(target=server.serve_forever, daemon=True).start()
    print(json.dumps({"url": f"http://127.0.0.1:{port}"}), flush=True)
    sys.stdin.read()  # until the test closes it


if __name__ == "__main__":
    main()
