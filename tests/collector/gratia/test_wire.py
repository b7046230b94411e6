"""The form of POST /gratia-servlets/rmi as gratia-probe encodes it, and GRACC's replies as
gratia-probe reads them."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import parse_qsl, urlencode

import pytest
from hypothesis import given
from hypothesis import strategies as st

from collector.errors import BadRequestError
from collector.gratia import envelope_docs
from collector.gratia.wire import (
    INTERNAL_ERROR,
    OK,
    POST_TOO_LARGE,
    UNAVAILABLE,
    MultiUpdate,
    Ping,
    _form,
    decode_rmi,
    record_error_reply,
    request_error_reply,
)

from .conftest import PAIRS, envelope, jur, pair


def probe_body(command: str, xml: str, probe: str = "condor:submit-3.chtc.wisc.edu", **outbox: int) -> str:
    """A body as gratia-probe's connect_utils.encodeData builds it: urllib's urlencode of these
    fields, in this order."""
    counts = {"xmlfiles": 12, "tarfiles": 0, "maxpendingfiles": 100000, "backlog": 3, "bundlesize": 100, **outbox}
    return urlencode(
        [
            ("command", command), ("arg1", xml), ("from", probe), ("xmlfiles", counts["xmlfiles"]),
            ("tarfiles", counts["tarfiles"]), ("maxpendingfiles", counts["maxpendingfiles"]),
            ("backlog", counts["backlog"]), ("bundlesize", counts["bundlesize"]),
        ]
    )  # fmt: skip


def test_a_multiupdate_as_gratia_probe_posts_it(gracc: Path) -> None:
    xml = envelope([pair(gracc, name)[0] for name in PAIRS]).decode()
    body = probe_body("multiupdate", xml, xmlfiles=-1)
    request = decode_rmi(body.encode("ascii"))
    assert request == MultiUpdate(
        "condor:submit-3.chtc.wisc.edu", xml, bundlesize=100, xmlfiles=-1, tarfiles=0, maxpendingfiles=100000, backlog=3
    )
    assert isinstance(request, MultiUpdate) and len(envelope_docs(request.xml, probe=request.probe).docs) == 6
    assert repr(request).startswith(f"MultiUpdate(probe='condor:submit-3.chtc.wisc.edu', xml=<{len(xml):,} characters>")


def test_the_envelope_survives_the_form_encoding_byte_for_byte() -> None:
    xml = jur("<ProbeName>a+b &amp; c%20d = é</ProbeName><EndTime>2016-05-27T22:44:08Z</EndTime>").decode()
    request = decode_rmi(probe_body("multiupdate", xml))
    assert isinstance(request, MultiUpdate) and request.xml == xml
    assert envelope_docs(request.xml).docs[0]["ProbeName"] == "a+b & c%20d = é"


def test_a_ping() -> None:
    assert decode_rmi(b"command=update&arg1=xxx&from=condor%3Asubmit-3") == Ping("condor:submit-3")


def test_optional_fields_may_be_missing_and_the_first_of_a_repeated_field_counts() -> None:
    request = decode_rmi("command=multiupdate&from=p&arg1=<a/>&from=q&arg1=<b/>&bundlesize=")
    assert request == MultiUpdate("p", "<a/>")


@pytest.mark.parametrize(
    ("body", "match"),
    [
        (b"", r'^missing key "command"$'),
        (b"arg1=xxx&from=p", r'^missing key "command"$'),
        (b"command=&arg1=xxx&from=p", r'^key "command" is empty$'),
        (b"command=multiupdate&from=p", r'^missing key "arg1"$'),
        (b"command=multiupdate&arg1=%3Ca%2F%3E", r'^missing key "from"$'),
        (b"command=multiupdate&arg1=&from=p", r'^key "arg1" is empty$'),
        (b"command=update&arg1=xxx", r'^missing key "from"$'),
        (b"command=update&from=p&arg1=replication|%3CJobUsageRecord%2F%3E|raw|extra",
         r"^command=update carries a Gratia collector's replication"),
        (b"command=URLEncodedUpdate&from=p&arg1=%3CJobUsageRecord%2F%3E",
         r"^command=URLEncodedUpdate .* set the probe's BundleSize above 1"),
        (b"command=delete&from=p&arg1=x",
         r"^unknown command 'delete': expected 'multiupdate', or 'update' with arg1=xxx$"),
        (b"command=multiupdate&from=p&arg1=x&bundlesize=many", r"^bundlesize: expected an integer, got 'many'$"),
        (b"command=multiupdate&from=p&arg1=x&backlog=1.5", r"^backlog: expected an integer, got '1.5'$"),
        (b"command=multiupdate&from=p&arg1=x&xmlfiles=99999999999999999999", r"^xmlfiles: expected an integer"),
        (b"command=multiupdate&from=p&arg1=\xff",
         r"^field 'arg1' is not UTF-8 once percent-decoded \(byte 0: invalid start byte\)$"),
        (b"command=multiupdate&from=p&arg1=%3C%FF",
         r"^field 'arg1' is not UTF-8 once percent-decoded \(byte 1: invalid start byte\)$"),
        (b"command=multiupdate&from%FF=p&arg1=x", r"^a field name is not UTF-8 once percent-decoded"),
        (b"&".join(b"f%d=1" % i for i in range(65)), r"^the form has more than 64 fields$"),
    ],
)  # fmt: skip
def test_anything_else_is_a_bad_request(body: bytes, match: str) -> None:
    with pytest.raises(BadRequestError, match=match):
        decode_rmi(body)


_FORM_BYTES = st.lists(
    st.sampled_from([b"a", b"%", b"3", b"C", b"c", b"e", b"9", b"+", b"=", b"&", b"\n", b"%3D", b"%26"])
)


@given(_FORM_BYTES.map(b"".join))
def test_the_fast_form_decoder_reads_what_the_standard_library_reads(body: bytes) -> None:
    # A differential check of the quoted-printable shortcut in wire._form against parse_qsl.
    expected: dict[str, str] = {}
    for key, value in parse_qsl(body.decode("ascii"), keep_blank_values=True, encoding="utf-8", errors="replace"):
        expected.setdefault(key, value)
    try:
        assert _form(body) == expected
    except BadRequestError as exc:  # invalid UTF-8 once decoded: parse_qsl had to replace bytes
        assert "\ufffd" in "".join(expected) + "".join(expected.values()), exc


@given(st.text(min_size=1), st.text(min_size=1))
def test_any_text_survives_the_form_encoding(probe: str, xml: str) -> None:
    assert decode_rmi(urlencode({"command": "multiupdate", "from": probe, "arg1": xml})) == MultiUpdate(probe, xml)


# gratia-probe's Response (common/gratia/common/response.py) reads a reply by its text:
_PROBE_SUCCESS = "OK"
_PROBE_STOPS_BUNDLING = re.compile(r"Error: Unknown Command: multiupdate", re.IGNORECASE)
_PROBE_SHRINKS_BUNDLES = re.compile(r".*java.lang.IllegalStateException: Post too large.*", re.IGNORECASE)


def test_the_replies_are_graccs_and_gratia_probe_reads_them_as_meant() -> None:
    assert OK == _PROBE_SUCCESS
    assert request_error_reply('missing key "from"') == 'Error handling request: missing key "from"'
    assert record_error_reply("EndTime: bad") == "Error processing record: EndTime: bad"
    assert (UNAVAILABLE, INTERNAL_ERROR) == ("Service unavailable right now", "Internal server error")
    failures = [request_error_reply("x"), record_error_reply("x"), UNAVAILABLE, INTERNAL_ERROR, POST_TOO_LARGE]
    # none is success (the probe would delete its records), none makes the probe stop bundling
    assert all(f != _PROBE_SUCCESS and not _PROBE_STOPS_BUNDLING.match(f) for f in failures)
    assert _PROBE_SHRINKS_BUNDLES.search(POST_TOO_LARGE)
