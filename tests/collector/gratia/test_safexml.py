"""Hostile XML is refused, each kind with its own message; ordinary XML is read verbatim."""

from __future__ import annotations

import pytest
from defusedxml import DefusedXmlException
from defusedxml.ElementTree import fromstring as defused_fromstring

from collector.errors import RecordError
from collector.gratia import safexml
from collector.gratia.safexml import XmlLimits, chardata, inner_xml, local_name, parse_xml, split_name

from .conftest import URWG, jur

BILLION_LAUGHS = b"""<?xml version="1.0"?>
<!DOCTYPE lolz [
 <!ENTITY lol "lol">
 <!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
 <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
 <!ENTITY lol4 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
 <!ENTITY lol5 "&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;">
 <!ENTITY lol6 "&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;">
 <!ENTITY lol7 "&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;">
 <!ENTITY lol8 "&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;">
 <!ENTITY lol9 "&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;">
]>
<RecordEnvelope><JobUsageRecord><ProbeName>&lol9;</ProbeName></JobUsageRecord></RecordEnvelope>"""
EXTERNAL_ENTITY = b"""<?xml version="1.0"?>
<!DOCTYPE r [<!ENTITY xxe SYSTEM "file:///etc/passwd">]>
<JobUsageRecord><ProbeName>&xxe;</ProbeName></JobUsageRecord>"""
EXTERNAL_PARAMETER_ENTITY = b"""<?xml version="1.0"?>
<!DOCTYPE r [<!ENTITY % remote SYSTEM "http://127.0.0.1:9/evil.dtd"> %remote;]>
<JobUsageRecord/>"""
EXTERNAL_DTD = (
    b'<?xml version="1.0"?>\n<!DOCTYPE JobUsageRecord SYSTEM "http://127.0.0.1:9/urwg.dtd">\n<JobUsageRecord/>'
)
BARE_DTD = b"<!DOCTYPE RecordEnvelope>\n<RecordEnvelope/>"
ATTACKS = [BILLION_LAUGHS, EXTERNAL_ENTITY, EXTERNAL_PARAMETER_ENTITY, EXTERNAL_DTD, BARE_DTD]


def nested(depth: int) -> bytes:
    return b"<a>" * depth + b"</a>" * depth


@pytest.mark.parametrize(
    ("document", "limits", "match"),
    [
        pytest.param(BILLION_LAUGHS, None, r"entity declaration \(<!ENTITY lol \.\.\.>\).*billion laughs",
                     id="billion-laughs"),
        pytest.param(EXTERNAL_ENTITY, None, r"external entity \(<!ENTITY xxe SYSTEM \.\.\.>\).*files or URLs",
                     id="external-entity"),
        pytest.param(EXTERNAL_PARAMETER_ENTITY, None, r"external entity \(<!ENTITY remote SYSTEM",
                     id="external-parameter-entity"),
        pytest.param(EXTERNAL_DTD, None, r"document type declaration \(<!DOCTYPE \.\.\.>\).*DTDs are refused",
                     id="external-dtd"),
        pytest.param(BARE_DTD, None, r"document type declaration .* DTDs are refused", id="dtd"),
        pytest.param(nested(33), None, r"nested deeper than the limit of 32 levels", id="too-deep"),
        pytest.param(nested(5), XmlLimits(max_depth=4), r"nested deeper than the limit of 4 levels",
                     id="too-deep-for-limit"),
        pytest.param(b"<a>" + b"x" * 2000 + b"</a>", XmlLimits(max_bytes=1000),
                     r"is 2,007 bytes, over the limit of 1,000 bytes", id="too-big"),
        pytest.param(b"<a>" + b"<b/>" * 10 + b"</a>", XmlLimits(max_elements=10), r"more than the limit of 10 elements",
                     id="too-many-elements"),
        pytest.param(b"OK", None, r"not well-formed XML \(syntax error: line 1, column 0\)", id="not-xml"),
        pytest.param(b"", None, r"not well-formed XML \(no element found", id="empty"),
        pytest.param(b"<RecordEnvelope><JobUsageRecord>", None, r"not well-formed XML \(no element found: line 1",
                     id="truncated"),
        pytest.param(b"<a><b></a></b>", None, r"not well-formed XML \(mismatched tag", id="mismatched"),
        pytest.param(b"<a>&undefined;</a>", None, r"not well-formed XML \(undefined entity", id="undefined-entity"),
        pytest.param("<a>é</a>".encode("utf-16"), None, r"not UTF-8 \(it holds NUL bytes", id="utf-16"),
        pytest.param(b'<?xml version="1.0" encoding="ISO-8859-1"?><a>\xe9</a>', None,
                     r"not well-formed XML \(not well-formed \(invalid token\)", id="latin-1"),
        pytest.param(b"<u:a>x</u:a>", None, r"not well-formed XML \(unbound prefix", id="unbound-prefix"),
    ],
)  # fmt: skip
def test_hostile_or_broken_xml_is_refused_with_its_reason(
    document: bytes, limits: XmlLimits | None, match: str
) -> None:
    with pytest.raises(RecordError, match=match) as caught:
        parse_xml(document, limits or XmlLimits())
    assert caught.value.index is None


@pytest.mark.parametrize("document", ATTACKS)
def test_the_attacks_are_real_ones_that_defusedxml_refuses_too(document: bytes) -> None:
    # A differential check on the test documents themselves: each is refused by defusedxml with
    # DTDs forbidden, so the refusals above are refusals of real attacks, not of typos.
    with pytest.raises(DefusedXmlException):
        defused_fromstring(document, forbid_dtd=True)


@pytest.mark.parametrize("document", ATTACKS[:3])
def test_expat_refuses_dtds_and_entities_even_past_the_byte_screen(
    document: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The second wall: with the screen of the raw bytes taken away, expat's own handlers refuse.
    monkeypatch.setattr(safexml, "_screen", lambda data, limits: None)
    with pytest.raises(RecordError, match=r"document type declaration|entity"):
        parse_xml(document)


def test_the_limits_are_inclusive() -> None:
    assert parse_xml(nested(4), XmlLimits(max_depth=4)).root.tag == "a"
    assert len(parse_xml(b"<a>" + b"<b/>" * 9 + b"</a>", XmlLimits(max_elements=10)).root) == 9
    document = b"<a>" + b"x" * 993 + b"</a>"
    assert len(document) == 1000 and parse_xml(document, XmlLimits(max_bytes=1000)).root.text == "x" * 993


@pytest.mark.parametrize("name", ["max_bytes", "max_depth", "max_elements"])
@pytest.mark.parametrize("value", [0, -1, 2.5, True])
def test_limits_must_be_positive_integers(name: str, value: object) -> None:
    with pytest.raises(ValueError, match=rf"XmlLimits\.{name} must be a positive integer, got {value!r}"):
        XmlLimits(**{name: value})  # type: ignore[arg-type]


def test_attributes_keep_their_namespace_and_their_order() -> None:
    document = parse_xml(
        b'<r xmlns="urn:a" xmlns:u="urn:u"><u:x u:b="1" a="2" u:a="3">t</u:x></r>'
    )  # fmt: skip
    [x] = list(document.root)
    assert (document.root.tag, x.tag) == ("r", "x")  # elements by local name, whatever their namespace
    assert [(split_name(k), v) for k, v in x.attrib.items()] == [
        (("urn:u", "b"), "1"), (("", "a"), "2"), (("urn:u", "a"), "3"),
    ]  # fmt: skip
    assert local_name("{urn:u}b") == "b" and local_name("plain") == "plain" and split_name("plain") == ("", "plain")


def test_chardata_is_the_text_directly_inside_verbatim() -> None:
    root = parse_xml(b"<a> one <b>two</b> three &amp; <![CDATA[<four>]]><!-- no --><c/>five </a>").root
    assert chardata(root) == " one  three & <four>five "
    assert chardata(root[0]) == "two" and chardata(root[1]) == ""


def test_inner_xml_is_cut_from_the_source_verbatim() -> None:
    source = (
        b'\xef\xbb\xbf<?xml version="1.0" encoding="UTF-8"?>\n<RecordEnvelope>\n'
        b'<JobUsageRecord urwg:x="a>b" xmlns:urwg="urn:u">\n'
        b" <Host >h\xc3\xa9</Host><!-- c --><![CDATA[<x>]]>\n</JobUsageRecord>\n"
        b"<JobUsageRecord/>\n<JobUsageRecord ></JobUsageRecord >\n</RecordEnvelope>"
    )  # fmt: skip
    document = parse_xml(source)
    first, empty, blank = list(document.root)
    assert inner_xml(document, first) == b"\n <Host >h\xc3\xa9</Host><!-- c --><![CDATA[<x>]]>\n"
    assert inner_xml(document, empty) == b"" and inner_xml(document, blank) == b""
    assert inner_xml(document, document.root).startswith(b"\n<JobUsageRecord urwg:x=")
    with pytest.raises(ValueError, match=r"<Host> is not the root nor one of its children"):
        inner_xml(document, first[0])


def test_a_str_that_utf8_cannot_hold_is_refused() -> None:
    with pytest.raises(RecordError, match=r"^the document cannot be UTF-8: character 3 is surrogates not allowed$"):
        parse_xml("<a>\ud800</a>")


def test_a_str_is_read_as_utf8_and_a_record_as_gratia_writes_it_parses() -> None:
    document = parse_xml(jur("<ProbeName>condor:é</ProbeName>").decode())
    assert document.root.tag == "JobUsageRecord" and split_name(next(iter(document.root[0].attrib)))[0] == URWG
    assert [chardata(e) for e in document.root if e.tag == "ProbeName"] == ["condor:é"]
