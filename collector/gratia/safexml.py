"""XML from the network, read as hostile until it has proved otherwise.

A Gratia probe's envelope is parsed by the standard library's expat (``pyexpat``) into an
``xml.etree.ElementTree`` tree, with these refusals, each a :class:`RecordError` whose message
names what was found and what is accepted:

* **size**: a document over ``limits.max_bytes`` is refused before anything is parsed;
* **encoding**: UTF-8 only, as GRACC's Go decoder (which has no charset reader). Expat honours
  a forced encoding for declarations but still switches to UTF-16 on a byte-order mark or a
  ``<\\0`` start, so a document with a NUL byte (never legal in XML, and in every UTF-16 or
  UTF-32 document, as ``<`` is) is refused first;
* **DTDs and entities**: a document type declaration is the only place entities can be
  declared, and in UTF-8 it can only be written as the bytes ``<!DOCTYPE``, so a document that
  holds them is refused before expat sees it: no internal subset, no entity expansion
  ("billion laughs"), no external entity or DTD fetched from a file or a URL. Expat's own DTD,
  entity and external-reference handlers are set to refuse as well, and parameter entities
  are never parsed: a second wall, in case the first had a gap;
* **depth and element count**: over ``limits.max_depth`` nested elements or
  ``limits.max_elements`` elements in all, parsing stops with an error, so a flood of tiny
  elements cannot turn a few megabytes into gigabytes of tree.

The tree is the standard ``xml.etree.ElementTree`` one, with tags cut to their local names and
the byte offsets of the root and its children kept (:mod:`collector.gratia.xmltree`, whose
names this module offers). Two parsers build that same document:

* **plain documents**, what gratia-probe sends (elements, text and at most an XML
  declaration): the C ``XMLParser`` and ``TreeBuilder`` build the tree with no Python call per
  element, a child of the root at a time, and the offsets are found in the bytes; when they
  cannot be found for sure this path gives up, never raising (:mod:`collector.gratia.plainxml`
  says when and why). About a third less CPU a record than the exact parser (bench_gratia.py);
* **any other document**, and any document that the first path does not take to the end (not
  well-formed, too deep, offsets not found: it never raises): expat with a Python handler on the
  start and end of each element, which counts elements and depth as they come, stops at the
  first excess, and takes the offsets from ``CurrentByteIndex``. Its messages are the ones a
  refused document gets.

:func:`parse_xml` gives the whole tree; :func:`stream_children` the root's children one at a
time, each dropped from the tree once given, so that an envelope's tree is never whole in memory
(what the collector uses: collector/gratia/envelope.py).

A test parses every fixture and generated document both ways and finds the same tree, offsets
and verdicts.

Why not ``defusedxml``: it installs the same refusals on the same expat, but builds the tree
through the pure-Python ElementTree, which is slower, and it gives no byte offsets, which
``RawXML`` needs.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import NoReturn
from xml.etree.ElementTree import Element, TreeBuilder
from xml.parsers import expat

from collector.errors import RecordError
from collector.gratia.plainxml import PlainReader, parse_plain
from collector.gratia.xmltree import (
    _EXPAT_NAMES,
    DEFAULT_LIMITS,
    EXPAT_SEPARATOR,
    START_TAG,
    XmlDocument,
    XmlLimits,
    chardata,
    element_tree_name,
    empty_tag,
    inner_xml,
    local_name,
    split_name,
)

__all__ = [
    "DEFAULT_LIMITS", "XmlDocument", "XmlLimits", "chardata", "inner_xml", "local_name", "parse_xml", "split_name",
    "stream_children",
]  # fmt: skip

_ENTITY_DECL = re.compile(rb"<!ENTITY\s+(?:%\s+)?([^\s>]+)\s+(SYSTEM|PUBLIC)?")


def parse_xml(data: bytes | str, limits: XmlLimits = DEFAULT_LIMITS) -> XmlDocument:
    """The tree of ``data`` (UTF-8 bytes; a ``str`` is encoded), or :class:`RecordError`.

    See the module docstring for what is refused and why, and for the two parsers.
    """
    data = _utf8(data)
    _screen(data, limits)
    return parse_plain(data, limits) or _parse_exact(data, limits)


def stream_children(
    data: bytes | str, limits: XmlLimits = DEFAULT_LIMITS
) -> tuple[Element, Iterator[tuple[Element, bytes]]]:
    """The root of ``data`` and an iterator over the root's children, one at a time, each with
    the bytes between its tags (what :func:`inner_xml` cuts): what :func:`parse_xml` gives,
    without ever holding the whole tree.

    A plain document is read :data:`~collector.gratia.plainxml.FEED_BYTES` at a time, and a child is given, then dropped
    from the tree, once the parser is past its end tag: the tree in memory is a few dozen
    records whatever the envelope's size, and it stays in the CPU's caches (converting an
    envelope of hundreds of records takes a sixth less CPU than from its whole tree: bench_gratia.py).
    The root comes with its tag and attributes; its children only through the iterator. Any other document,
    and a plain one given up part-way (then its children already given are exactly the exact
    parser's), is read whole by the exact parser, and the iterator goes on with its children.
    RecordError as from :func:`parse_xml`, raised by this call or by the iterator: a consumer
    must not keep what it made of the children before it has read them all.
    """
    data = _utf8(data)
    _screen(data, limits)
    reader = PlainReader.open(data, limits, keep=False)
    if reader is None:
        document = _parse_exact(data, limits)
        return document.root, _exact_children(document, 0)
    return reader.root, _streamed(reader, data, limits)


def _streamed(reader: PlainReader, data: bytes, limits: XmlLimits) -> Iterator[tuple[Element, bytes]]:
    given = 0
    for child, start, end in reader.children():
        yield child, data[start:end]
        given += 1
    if reader.failed:
        yield from _exact_children(_parse_exact(data, limits), given)


def _exact_children(document: XmlDocument, first: int) -> Iterator[tuple[Element, bytes]]:
    for child in document.root[first:]:
        yield child, inner_xml(document, child)


def _utf8(data: bytes | str) -> bytes:
    if isinstance(data, bytes):
        return data
    try:
        return data.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise RecordError(f"the document cannot be UTF-8: character {exc.start} is {exc.reason}") from None


def _parse_exact(data: bytes, limits: XmlLimits) -> XmlDocument:
    """The document of any ``data``, by expat with a Python handler per element (see the
    module docstring)."""
    parser = expat.ParserCreate("UTF-8", EXPAT_SEPARATOR)
    parser.buffer_text = True
    parser.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)
    parser.StartDoctypeDeclHandler = _refuse_doctype
    parser.EntityDeclHandler = _refuse_entity
    parser.UnparsedEntityDeclHandler = _refuse_entity
    parser.ExternalEntityRefHandler = _refuse_external

    builder = TreeBuilder()
    build_start, build_end = builder.start, builder.end
    starts: dict[Element, int] = {}  # where the start tags of the root and its children are
    ends: dict[Element, int] = {}  # and their end tags (the byte after an empty-element tag)
    depth = elements = 0
    max_depth, max_elements = limits.max_depth, limits.max_elements
    names = _EXPAT_NAMES

    # Called for every element: kept to the bare minimum.
    def start(name: str, attrs: dict[str, str]) -> None:
        nonlocal depth, elements
        depth += 1
        elements += 1
        if depth > max_depth:
            raise RecordError(f"elements are nested deeper than the limit of {max_depth} levels")
        if elements > max_elements:
            raise RecordError(f"the document holds more than the limit of {max_elements:,} elements")
        tag = local_name(names.get(name) or element_tree_name(name))
        if attrs:
            attrs = {element_tree_name(key): value for key, value in attrs.items()}
        if depth > 2:
            build_start(tag, attrs)
        else:
            starts[build_start(tag, attrs)] = parser.CurrentByteIndex

    def end(name: str) -> None:
        nonlocal depth
        tag = local_name(names.get(name) or element_tree_name(name))
        if depth > 2:
            build_end(tag)
        else:
            ends[build_end(tag)] = parser.CurrentByteIndex
        depth -= 1

    parser.StartElementHandler = start
    parser.EndElementHandler = end
    parser.CharacterDataHandler = builder.data
    try:
        parser.Parse(data, True)
    except expat.ExpatError as exc:
        raise RecordError(f"the document is not well-formed XML ({exc})") from None
    finally:
        # The handlers hold the parser in their closure and the parser holds them: a cycle that
        # only the garbage collector breaks, keeping the whole tree alive until it runs (on a
        # collector's heap, a tenth of a second or more every few seconds, and the slowest
        # replies waited for it).
        parser.StartElementHandler = parser.EndElementHandler = None
    spans = {}
    for element, offset in starts.items():
        start_tag = START_TAG.match(data, offset)
        assert start_tag is not None  # expat read a start tag there
        inner = start_tag.end()
        spans[element] = (inner, inner if empty_tag(start_tag) else ends[element])
    return XmlDocument(builder.close(), data, spans)


def _screen(data: bytes, limits: XmlLimits) -> None:
    """Refuse, before parsing, what must never reach the parser (see the module docstring)."""
    if len(data) > limits.max_bytes:
        raise RecordError(f"the document is {len(data):,} bytes, over the limit of {limits.max_bytes:,} bytes")
    if b"\x00" in data:
        raise RecordError("the document is not UTF-8 (it holds NUL bytes: UTF-16 or UTF-32?); Gratia XML is UTF-8")
    if b"<!DOCTYPE" in data:
        entity = _ENTITY_DECL.search(data)
        if entity is not None and entity.group(2):
            name = entity.group(1).decode("utf-8", "replace")
            raise RecordError(
                f"an external entity (<!ENTITY {name} {entity.group(2).decode()} ...>) was found: "
                "DTDs and entities are refused, they would read files or URLs"
            )
        if entity is not None:
            name = entity.group(1).decode("utf-8", "replace")
            raise RecordError(
                f"an entity declaration (<!ENTITY {name} ...>) was found: DTDs and entities are refused, "
                "their expansion can blow up (billion laughs)"
            )
        raise RecordError("a document type declaration (<!DOCTYPE ...>) was found: DTDs are refused in Gratia XML")


def _refuse_doctype(*_: object) -> NoReturn:
    raise RecordError("a document type declaration (<!DOCTYPE ...>) was found: DTDs are refused in Gratia XML")


def _refuse_entity(*_: object) -> NoReturn:
    raise RecordError("an entity declaration was found: DTDs and entities are refused")


def _refuse_external(*_: object) -> NoReturn:
    raise RecordError("an external entity reference was found: external entities are refused")
