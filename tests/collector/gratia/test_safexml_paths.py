"""The two parsers of safexml give one document: the C parser's plain path (what gratia-probe
sends) and the exact expat path (anything else), the same tree, offsets and verdicts; and
stream_children gives the exact parser's children one at a time, whatever the size of the
pieces the C parser is fed."""

from __future__ import annotations

from pathlib import Path
from xml.etree.ElementTree import Element

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collector.errors import RecordError
from collector.gratia import plainxml, safexml
from collector.gratia.safexml import XmlDocument, XmlLimits, inner_xml, parse_xml, stream_children

from .conftest import PAIRS, copies, envelope, jur
from .test_safexml import ATTACKS, nested


def subtree(element: Element) -> list[tuple[object, ...]]:
    """Every element under ``element`` and itself, in document order: tag, attributes in order,
    text, tail, children."""
    return [(e.tag, list(e.attrib.items()), e.text, e.tail, len(e)) for e in element.iter()]


def shape(document: XmlDocument) -> list[tuple[object, ...]]:
    """:func:`subtree` of the root, each element with its offsets (root and children only)."""
    return [(*row, document.spans.get(e)) for row, e in zip(subtree(document.root), document.root.iter(), strict=True)]


def both(data: bytes, limits: XmlLimits = safexml.DEFAULT_LIMITS) -> tuple[XmlDocument | None, XmlDocument | str]:
    """What the plain path gives (None: not taken) and what the exact path gives (or its refusal)."""
    plain = plainxml.parse_plain(data, limits)
    try:
        exact: XmlDocument | str = safexml._parse_exact(data, limits)
    except RecordError as exc:
        exact = exc.reason
    return plain, exact


def streamed(data: bytes, limits: XmlLimits = safexml.DEFAULT_LIMITS) -> tuple[str, list[object]] | str:
    """What stream_children gives: the root's tag and each child's subtree and inner bytes, or
    the refusal (raised by the call or by the iterator)."""
    try:
        root, children = stream_children(data, limits)
        return root.tag, [(subtree(child), inner) for child, inner in children]
    except RecordError as exc:
        return exc.reason


def assert_same(data: bytes, limits: XmlLimits = safexml.DEFAULT_LIMITS) -> XmlDocument | None:
    plain, exact = both(data, limits)
    if plain is not None:
        assert isinstance(exact, XmlDocument), f"the plain path read what the exact one refuses: {exact}"
        assert shape(plain) == shape(exact)
        for mine, theirs in zip((plain.root, *plain.root), (exact.root, *exact.root), strict=True):
            assert inner_xml(plain, mine) == inner_xml(exact, theirs)
    try:  # the stream gives what parse_xml gives, refusals included
        whole = parse_xml(data, limits)
        children = [(subtree(child), inner_xml(whole, child)) for child in whole.root]
        assert streamed(data, limits) == (whole.root.tag, children)
    except RecordError as exc:
        assert streamed(data, limits) == exc.reason
    return plain


def test_gratia_probes_envelopes_take_the_plain_path(gracc: Path) -> None:
    records = [(gracc / f"{name}.xml").read_bytes() for name in PAIRS]
    document = assert_same(envelope([copy for record in records for copy in copies(record, 5)]))
    assert document is not None and len(document.root) == 30
    for record in records:  # a bare record, with its own XML declaration
        assert assert_same(record) is not None


@pytest.mark.parametrize(
    ("data", "plain"),
    [
        pytest.param(b'<R a="x>y"><J/><J >t</J ><J\n\tb="1"\n>u</J\n></R>', True,
                     id="empty, spaced and attributed tags"),
        pytest.param(b"\xef\xbb\xbf<?xml version='1.0'?>\n<R>\n <u:J xmlns:u='urn:u' u:a='1'>x<u:K/>y</u:J>\n</R>\n",
                     True, id="bom, prefixes"),
        pytest.param(b"<R/>", True, id="empty root"),
        pytest.param(b"<R>text only</R>", True, id="no children"),
        pytest.param(b"<R><J><J>inner</J></J></R>", False, id="a child holds an element of its own name"),
        pytest.param(b"<R><J><JX>inner</JX></J></R>", False, id="a child holds a longer name"),
        pytest.param(b"<R><J>x</J><!-- c --></R>", False, id="comment"),
        pytest.param(b"<R><J><![CDATA[</J>]]></J></R>", False, id="cdata"),
        pytest.param(b"<R><?pi x?><J/></R>", False, id="processing instruction"),
        pytest.param(b'<?xml version="1.0" encoding="ISO-8859-1"?><a>\xe9</a>', False, id="latin-1 refused"),
        pytest.param(b"<a><b></a></b>", False, id="mismatched"),
        pytest.param(b"<R><J>" + nested(30) + b"</J></R>", True, id="as deep as the limit"),
        pytest.param(b"<R><J>" + nested(31) + b"</J></R>", False, id="deeper than the limit"),
        *(pytest.param(attack, False, id=f"attack {n}") for n, attack in enumerate(ATTACKS)),
    ],
)  # fmt: skip
def test_each_document_is_read_alike_or_left_to_the_exact_parser(data: bytes, plain: bool) -> None:
    assert (assert_same(data) is not None) is plain


def test_the_plain_path_counts_each_tag_as_an_element_at_most() -> None:
    # '<' bounds the elements from above (end tags count too): within the limit of 10, 9
    # children and the root's two tags are plain, 9 children within 11 '<' are left to the
    # exact parser, which counts the elements themselves and reads them.
    limits = XmlLimits(max_elements=10)
    assert assert_same(b"<a>" + b"<b/>" * 8 + b"</a>", limits) is not None
    assert assert_same(b"<a>" + b"<b/>" * 9 + b"</a>", limits) is None
    assert len(parse_xml(b"<a>" + b"<b/>" * 9 + b"</a>", limits).root) == 9


def test_the_plain_path_never_decides_a_refusal() -> None:
    # Too deep, too many elements, malformed: the plain path declines, and parse_xml's message
    # is the exact parser's, the one a refused document always got.
    with pytest.raises(RecordError, match=r"nested deeper than the limit of 4 levels"):
        parse_xml(nested(5), XmlLimits(max_depth=4))
    with pytest.raises(RecordError, match=r"more than the limit of 10 elements"):
        parse_xml(b"<a>" + b"<b/>" * 10 + b"</a>", XmlLimits(max_elements=10))


def test_a_tree_is_freed_when_dropped_not_by_the_garbage_collector() -> None:
    # The exact parser's handlers and the parser held each other: every tree waited for a
    # collection of the garbage collector, which then walked hundreds of thousands of objects.
    import gc
    import weakref

    for data in (jur("<ProbeName>p</ProbeName>"), jur("<!-- exact path --><ProbeName>p</ProbeName>")):
        gc.disable()
        try:
            root = parse_xml(data).root
            ref = weakref.ref(root[0])
            del root
            assert ref() is None
        finally:
            gc.enable()


_NAME = st.sampled_from(["J", "K", "u:J", "u:K", "JX"])
_TEXT = st.sampled_from(["", "x", " ", "\n", "a&amp;b", "&lt;/J&gt;", "é", "/>"])


@st.composite
def documents(draw: st.DrawFn, depth: int = 0) -> str:
    """A small document of elements, text, attributes and now and then a comment or CDATA."""
    name = draw(_NAME) if depth else "R"
    attrs = draw(st.sampled_from(["", ' a="1"', " u:a='&gt;'", ' b="x>y" u:b="2"']))
    if depth > 3 or draw(st.integers(0, 4)) == 0:
        return f"<{name}{attrs}/>"
    parts = []
    for _ in range(draw(st.integers(0, 3))):
        parts.append(draw(_TEXT))
        kind = draw(st.integers(0, 9))
        parts.append("<!--c-->" if kind == 0 else "<![CDATA[<J>]]>" if kind == 1 else draw(documents(depth + 1)))
    spaced = draw(st.sampled_from(["", " ", "\n"]))
    xmlns = ' xmlns:u="urn:u"' if depth == 0 else ""
    return f"<{name}{xmlns}{attrs}>{''.join(parts)}</{name}{spaced}>"


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])  # a loaded machine is slow
@given(documents(), st.sampled_from(["", '<?xml version="1.0" encoding="UTF-8"?>\n']))
def test_generated_documents_are_read_alike(body: str, declaration: str) -> None:
    assert_same((declaration + body).encode())


@pytest.mark.parametrize("feed", [1, 2, 7, 64, 1000])
@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(body=documents())
def test_documents_streamed_in_any_pieces_are_read_alike(body: str, feed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    # A child is given once the parser has started a later sibling or ended the document, so
    # whatever the C parser held back of a piece (expat 2.6 defers small additions) it is whole.
    monkeypatch.setattr(plainxml, "FEED_BYTES", feed)
    assert_same(body.encode())


def test_an_envelope_is_streamed_in_pieces_of_records_not_whole(gracc: Path) -> None:
    records = [(gracc / f"{name}.xml").read_bytes() for name in PAIRS]
    data = envelope([copy for record in records for copy in copies(record, 200)])
    root, children = stream_children(data)
    held, given = [], 0
    for child, inner in children:
        held.append(len(root))  # the children read but not yet given
        assert inner.startswith(b"\n") and inner.endswith(b"\n") and child.tag == "JobUsageRecord"
        given += 1
    # 1,200 records of ~1.9 KB read 64 KiB at a time: never more than a piece's worth in the tree
    assert given == 1200 and max(held) <= 64 * 1024 // 1000 and len(root) == 0


def test_a_stream_given_up_part_way_goes_on_with_the_exact_parser(monkeypatch: pytest.MonkeyPatch) -> None:
    # The third child holds an element of its own name (offsets not sure); the fourth is deeper
    # than the plain path looks: both are the exact parser's, the first two the plain path's.
    monkeypatch.setattr(plainxml, "FEED_BYTES", 8)
    data = b"<R><J>1</J><J>2</J><J><J>3</J></J><K>" + nested(3) + b"</K></R>"
    _root, children = stream_children(data)
    given = [(child.tag, inner) for child, inner in children]
    assert given == [("J", b"1"), ("J", b"2"), ("J", b"<J>3</J>"), ("K", nested(3))]
    with pytest.raises(RecordError, match=r"nested deeper than the limit of 3 levels"):
        list(stream_children(data, XmlLimits(max_depth=3))[1])
    with pytest.raises(RecordError, match=r"not well-formed XML"):  # found after two children were given
        list(stream_children(b"<R><J>1</J><J>2</J><J>3</K></R>")[1])
