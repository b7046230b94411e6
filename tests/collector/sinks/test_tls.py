"""A TLS failure says why (issue 13, item 6): a self-signed certificate, a certificate for
another host name, an expired one. Real TLS servers on 127.0.0.1 with certificates made by
openssl for the test; the store's real client on the other side."""

from __future__ import annotations

import http.server
import shutil
import ssl
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from collector.errors import ElasticsearchError, SinkError
from collector.sinks import open_sink
from collector.sinks.tls import tls_reason

pytestmark = pytest.mark.skipif(
    shutil.which("openssl") is None, reason="needs the openssl command to make certificates"
)


def _certificate(where: Path, name: str, *extra: str) -> tuple[Path, Path]:
    cert, key = where / f"{name}.pem", where / f"{name}.key"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
         "-subj", "/CN=localhost", *extra],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert, key


@pytest.fixture
def tls_server(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """An HTTPS server on 127.0.0.1 with a self-signed certificate for 'localhost' only."""
    cert, key = _certificate(tmp_path, "server", "-days", "2", "-addext", "subjectAltName=DNS:localhost")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield cert, f"{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("scheme", ["https", "opensearch+https"])
def test_a_self_signed_certificate_is_named(tls_server: tuple[Path, str], tmp_path: Path, scheme: str) -> None:
    _, port = tls_server
    sink = open_sink(f"{scheme}://localhost:{port}", base=tmp_path, auth={"max_retries": 0})
    with pytest.raises(
        ElasticsearchError, match=r"TLS: the server's certificate is self-signed .*give its CA with ca_file"
    ):
        sink.install_templates()
    sink.close()


def test_a_certificate_for_another_name_is_named(tls_server: tuple[Path, str], tmp_path: Path) -> None:
    cert, port = tls_server
    sink = open_sink(f"https://127.0.0.1:{port}", base=tmp_path, auth={"ca_certs_file": str(cert), "max_retries": 0})
    with pytest.raises(
        ElasticsearchError, match=r"TLS: the server's certificate is not for this (IP address|host name or address)"
    ):
        sink.install_templates()
    sink.close()


def test_the_collector_sink_names_it_too(tls_server: tuple[Path, str], tmp_path: Path) -> None:
    _, port = tls_server
    token = tmp_path / "token"
    token.write_text("t0k3n\n")
    sink = open_sink(f"collector+https://localhost:{port}", base=tmp_path, auth={"token_file": str(token)})
    with pytest.raises(SinkError, match=r"no answer from the collector \(TLS: the server's certificate is self-signed"):
        sink.send("slot", [{"id": "a", "kind": "slot", "timestamp": "2026-11-21T14:00:00Z"}])
    sink.close()


def test_an_expired_certificate_is_named() -> None:
    """OpenSSL's own verify error, as the clients wrap it, reads as 'expired'."""
    error = ssl.SSLCertVerificationError(1, "certificate verify failed")
    error.verify_message = "certificate has expired"
    wrapped = ConnectionError("TLS error")
    wrapped.__cause__ = error
    assert tls_reason(wrapped) == "TLS: the server's certificate has expired (certificate has expired)"
    assert tls_reason(ConnectionError("connection refused")) is None
