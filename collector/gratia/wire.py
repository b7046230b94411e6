"""The wire form of ``POST /gratia-servlets/rmi``, as gratia-probe sends it and GRACC answers it.

gratia-probe (``common/gratia/common/connect_utils.py``, ``encodeData``) posts an
``application/x-www-form-urlencoded`` body, built with ``urllib.urlencode``:

* ``command=multiupdate``: ``arg1`` is a ``<RecordEnvelope>`` of records (its bundle, at most
  about 2 MB), ``from`` the probe's name, and its outbox as it stands: ``xmlfiles`` (records
  waiting as files), ``tarfiles`` (archives waiting), ``maxpendingfiles``, ``backlog`` (an
  estimate of the records still to send) and ``bundlesize`` (its bundle size setting, not the
  number of records in this envelope);
* ``command=update`` with ``arg1=xxx``: a ping (GRACC answers ``OK`` and stores nothing).

:func:`decode_rmi` turns a body into :class:`Ping` or :class:`MultiUpdate` and raises
:class:`BadRequestError` for anything else, with GRACC's checks: ``command``, ``arg1`` and
``from`` must be there and not empty. Two commands GRACC does not take are refused too:
``update`` with anything but ``xxx`` is a Gratia collector's replication (``|``-separated
records), and gratia-probe's ``URLEncodedUpdate`` is what it sends when bundling is off; the
message says what to change. As in Go's ``FormValue``, the first value of a repeated field
counts. The integers are read strictly (gratia-probe sends integers).

The replies are GRACC's texts, which gratia-probe's ``Response`` reads by their text: exactly
``OK`` is success and lets the probe delete its files; anything else makes it keep them and
retry. :data:`POST_TOO_LARGE` is the text gratia-probe recognises to send smaller bundles.
"""

from __future__ import annotations

import binascii
import re
from dataclasses import dataclass
from urllib.parse import unquote_to_bytes

from collector.errors import BadRequestError

__all__ = [
    "INTERNAL_ERROR", "OK", "POST_TOO_LARGE", "UNAVAILABLE",
    "MultiUpdate", "Ping", "decode_rmi", "record_error_reply", "request_error_reply",
]  # fmt: skip

OK = "OK"
UNAVAILABLE = "Service unavailable right now"  # GRACC's 503: the records are not durable
INTERNAL_ERROR = "Internal server error"  # GRACC's 500
# gratia-probe's Response matches "java.lang.IllegalStateException: Post too large" (what the
# old Java collector said) and then makes its bundles 10 % smaller, or quarantines a record
# that is too large alone; GRACC has no such reply, so its probes just retry.
POST_TOO_LARGE = "Error: java.lang.IllegalStateException: Post too large"

_PING = "xxx"
_INTEGER = re.compile(r"[+-]?[0-9]{1,18}", re.ASCII)
_INTEGERS = ("bundlesize", "xmlfiles", "tarfiles", "maxpendingfiles", "backlog")
_MAX_FIELDS = 64  # gratia-probe sends 9


@dataclass(frozen=True)
class Ping:
    """``command=update&arg1=xxx``: the probe checks that the collector answers."""

    probe: str


@dataclass(frozen=True)
class MultiUpdate:
    """``command=multiupdate``: ``xml`` is the ``<RecordEnvelope>`` (collector/gratia/envelope.py
    reads it); the integers are the probe's outbox as it reported it, None when absent."""

    probe: str
    xml: str
    bundlesize: int | None = None
    xmlfiles: int | None = None
    tarfiles: int | None = None
    maxpendingfiles: int | None = None
    backlog: int | None = None

    def __repr__(self) -> str:  # the envelope may be megabytes: name its size, not its text
        outbox = ", ".join(f"{name}={getattr(self, name)!r}" for name in _INTEGERS)
        return f"MultiUpdate(probe={self.probe!r}, xml=<{len(self.xml):,} characters>, {outbox})"


def decode_rmi(body: bytes | str) -> Ping | MultiUpdate:
    """The request in an ``application/x-www-form-urlencoded`` body (see the module docstring)."""
    form = _form(body.encode("utf-8") if isinstance(body, str) else body)
    command = _required(form, "command")
    if command == "multiupdate":
        probe, xml = _required(form, "from"), _required(form, "arg1")
        return MultiUpdate(
            probe, xml, bundlesize=_integer(form, "bundlesize"), xmlfiles=_integer(form, "xmlfiles"),
            tarfiles=_integer(form, "tarfiles"), maxpendingfiles=_integer(form, "maxpendingfiles"),
            backlog=_integer(form, "backlog"),
        )  # fmt: skip
    if command == "update":
        probe, arg1 = _required(form, "from"), _required(form, "arg1")
        if arg1 == _PING:
            return Ping(probe)
        raise BadRequestError(
            f"command=update carries a Gratia collector's replication, which this collector does not take "
            f"(only arg1={_PING}, a ping); probes send their records with command=multiupdate"
        )
    if command == "URLEncodedUpdate":
        raise BadRequestError(
            "command=URLEncodedUpdate (one record at a time) is not taken: set the probe's BundleSize "
            "above 1 so that it sends command=multiupdate"
        )
    raise BadRequestError(f"unknown command {command!r}: expected 'multiupdate', or 'update' with arg1={_PING}")


def request_error_reply(reason: str) -> str:
    """GRACC's body for a bad request (HTTP 400): ``Error handling request: <reason>``."""
    return f"Error handling request: {reason}"


def record_error_reply(reason: str) -> str:
    """GRACC's body for a bad record (HTTP 400): ``Error processing record: <reason>``."""
    return f"Error processing record: {reason}"


def _form(body: bytes) -> dict[str, str]:
    """The fields of a form, the first value of each name (Go's ``FormValue``), as ``parse_qsl``
    reads them (``&`` between fields, a field without ``=`` has an empty value)."""
    if body.count(b"&") >= _MAX_FIELDS:
        raise BadRequestError(f"the form has more than {_MAX_FIELDS} fields")
    form: dict[str, str] = {}
    for field in body.split(b"&"):
        if field:
            key, _, value = field.partition(b"=")
            name = _unquote(key, "a field name")
            if name not in form:
                form[name] = _unquote(value, f"field {name!r}")
    return form


def _unquote(raw: bytes, what: str) -> str:
    """Percent-decode (``+`` is a space) and read as UTF-8.

    An envelope arrives with most of its bytes escaped (``<`` is ``%3C``), and the standard
    library's unquoting loops in Python over each escape: for a 2 MB bundle that is tens of
    milliseconds. Quoted-printable decoding (``binascii.a2b_qp``, in C) turns ``=3C`` into ``<``
    and copies anything else, so ``%`` is written ``=`` and decoded that way, when nothing in
    the value could mean something else to it (a raw ``=``, a line break) and every escape was
    a valid one (each shortens the value by two bytes); otherwise ``unquote_to_bytes`` decodes it.
    """
    plus = raw.replace(b"+", b" ")
    escapes = plus.count(b"%")
    decoded = plus
    if escapes:
        shortcut = b"=" not in plus and b"\n" not in plus and b"\r" not in plus
        if shortcut:
            decoded = binascii.a2b_qp(plus.replace(b"%", b"="))
        if not shortcut or len(plus) - len(decoded) != 2 * escapes:
            decoded = unquote_to_bytes(plus)
    try:
        return decoded.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadRequestError(f"{what} is not UTF-8 once percent-decoded (byte {exc.start}: {exc.reason})") from None


def _required(form: dict[str, str], key: str) -> str:
    value = form.get(key, "")
    if not value:
        raise BadRequestError(f'missing key "{key}"' if key not in form else f'key "{key}" is empty')
    return value


def _integer(form: dict[str, str], key: str) -> int | None:
    value = form.get(key)
    if value is None or value == "":
        return None
    if _INTEGER.fullmatch(value.strip()) is None:
        raise BadRequestError(f"{key}: expected an integer, got {value[:40]!r}")
    return int(value)
