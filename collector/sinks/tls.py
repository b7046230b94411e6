"""Why a TLS handshake with a store failed, in the words an operator acts on.

The clients report a failed certificate check as "TLS error" or as a chain of wrapped
exceptions; the reason is OpenSSL's verify message, deep in that chain. :func:`tls_reason`
finds it and says what it means and what to do.
"""

from __future__ import annotations

import ssl

from collector.sinks.cycles import chained

__all__ = ["tls_reason"]

_MEANINGS = (
    ("self-signed", "the server's certificate is self-signed (or signed by a CA that is not trusted): "
                    "give its CA with ca_file"),
    ("unable to get local issuer", "the server's certificate is signed by a CA that is not trusted: "
                                   "give it with ca_file"),
    ("hostname mismatch", "the server's certificate is not for this host name: use the name it was issued for"),
    ("ip address mismatch", "the server's certificate is not for this IP address: use the name it was issued for"),
    ("doesn't match", "the server's certificate is not for this host name or address: use the name it was issued for"),
    ("expired", "the server's certificate has expired"),
    ("not yet valid", "the server's certificate is not valid yet (is this host's clock right?)"),
)  # fmt: skip


def tls_reason(exc: BaseException) -> str | None:
    """What went wrong in the TLS handshake behind ``exc`` (a client's error wrapping an
    ``ssl.SSLError`` at any depth), or None when it is not a TLS failure."""
    for item in chained(exc):
        # urllib3 checks host names itself and raises its own CertificateError (a ValueError)
        if isinstance(item, ssl.SSLError) or type(item).__name__ == "CertificateError":
            text = getattr(item, "verify_message", None) or getattr(item, "reason", None) or str(item)
            lowered = str(text).lower()
            for key, meaning in _MEANINGS:
                if key in lowered:
                    return f"TLS: {meaning} ({text})"
            return f"TLS: {text}"
    return None
