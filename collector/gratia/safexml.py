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

The tree is the standard ``xml.etree.ElementTree`` one, built by its C ``TreeBuilder`` straight
from expat's events (character data and end tags never pass through Python); only the start
and end of each element pass through a Python handler, which counts, checks the depth and,
for the root and its children, keeps the byte offsets of their tags, so that a record's
original XML can be cut out of the envelope verbatim (:func:`inner_xml`). An element's tag is
its local name alone: Gratia records are read, as Go's decoder reads them, by local name
whatever the namespace (``urwg:``, ``urf:`` or none). Attribute names keep theirs, as expat
gives them (``'URI local'``, or ``'local'`` outside any namespace: :func:`split_name`), which
the attribute rules need.

Why not ``defusedxml``: it installs the same refusals on the same expat, but builds the tree
through the pure-Python ElementTree, which is slower, and it gives no byte offsets, which
``RawXML`` needs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import NamedTuple, NoReturn
from xml.etree.ElementTree import Element, TreeBuilder
from xml.parsers import expat

from collector.errors import RecordError

__all__ = [
    "DEFAULT_LIMITS", "XmlDocument", "XmlLimits", "chardata", "inner_xml", "local_name", "parse_xml", "split_name",
]  # fmt: skip

_SEP = " "  # between a namespace URI and a local name in expat's names; never in an XML name
# A start tag (expat has checked it is well formed): the name, attributes with quoted values
# (which may hold '>'), then '>' or '/>'.
_START_TAG = re.compile(rb"""<[^\s/>]+(?:\s+[^\s=]+\s*=\s*(?:"[^"]*"|'[^']*'))*\s*/?>""")
_ENTITY_DECL = re.compile(rb"<!ENTITY\s+(?:%\s+)?([^\s>]+)\s+(SYSTEM|PUBLIC)?")


@dataclass(frozen=True)
class XmlLimits:
    """How much a document may hold before it is refused.

    ``max_bytes``: bytes of the document as received (default 16 MiB, about 8,000 records of
    2 KiB; gratia-probe sends 100 records an envelope by default and never more than about
    2 MB). ``max_depth``: nesting of elements, the root being 1 (an envelope's records need 5).
    ``max_elements``: elements in the whole document (a record has about 30), which bounds the
    memory the tree takes (a few hundred bytes an element).
    """

    max_bytes: int = 16 * 2**20
    max_depth: int = 32
    max_elements: int = 1_000_000

    def __post_init__(self) -> None:
        for name in ("max_bytes", "max_depth", "max_elements"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"XmlLimits.{name} must be a positive integer, got {value!r}")


DEFAULT_LIMITS = XmlLimits()


class XmlDocument(NamedTuple):
    """A parsed document: its ``root``, the ``source`` bytes it was parsed from, and ``spans``:
    for the root and each of its children, the byte offsets ``[start, end]`` of its start tag and
    of its end tag (for an empty-element tag, ``end`` is the byte after it)."""

    root: Element
    source: bytes
    spans: dict[Element, list[int]]


_NAMES: dict[str, tuple[str, str]] = {}
_LOCAL_NAMES: dict[str, str] = {}
_CACHED = 10_000  # names kept in each cache: a hostile document may invent any number


def split_name(name: str) -> tuple[str, str]:
    """``('URI', 'local')`` of an expat name, ``('', 'local')`` without a namespace (cached:
    documents repeat a few dozen names)."""
    split = _NAMES.get(name)
    if split is None:
        ns, _, local = name.rpartition(_SEP)
        split = (ns, local)
        if len(_NAMES) < _CACHED:
            _NAMES[name] = split
    return split


def local_name(name: str) -> str:
    """The local name in an expat name (``'URI local'`` or ``'local'``)."""
    local = _LOCAL_NAMES.get(name)
    if local is None:
        local = split_name(name)[1]
        if len(_LOCAL_NAMES) < _CACHED:
            _LOCAL_NAMES[name] = local
    return local


def chardata(element: Element) -> str:
    """The character data directly inside ``element``, verbatim, as Go's ``xml:",chardata"``
    collects it: its text and the text after each child, not the children's own text."""
    text = element.text or ""
    if len(element):
        text += "".join(child.tail or "" for child in element)
    return text


def parse_xml(data: bytes | str, limits: XmlLimits = DEFAULT_LIMITS) -> XmlDocument:
    """The tree of ``data`` (UTF-8 bytes; a ``str`` is encoded), or :class:`RecordError`.

    See the module docstring for what is refused and why.
    """
    if isinstance(data, str):
        try:
            data = data.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise RecordError(f"the document cannot be UTF-8: character {exc.start} is {exc.reason}") from None
    _screen(data, limits)
    parser = expat.ParserCreate("UTF-8", _SEP)
    parser.buffer_text = True
    parser.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)
    parser.StartDoctypeDeclHandler = _refuse_doctype
    parser.EntityDeclHandler = _refuse_entity
    parser.UnparsedEntityDeclHandler = _refuse_entity
    parser.ExternalEntityRefHandler = _refuse_external

    builder = TreeBuilder()
    build_start, build_end = builder.start, builder.end
    spans: dict[Element, list[int]] = {}
    depth = elements = 0
    max_depth, max_elements = limits.max_depth, limits.max_elements
    locals_ = _LOCAL_NAMES

    # Called for every element (tens of thousands a request): kept to the bare minimum.
    def start(name: str, attrs: dict[str, str]) -> None:
        nonlocal depth, elements
        depth += 1
        elements += 1
        if depth > max_depth:
            raise RecordError(f"elements are nested deeper than the limit of {max_depth} levels")
        if elements > max_elements:
            raise RecordError(f"the document holds more than the limit of {max_elements:,} elements")
        tag = locals_.get(name) or local_name(name)
        if depth > 2:
            build_start(tag, attrs)
        else:
            spans[build_start(tag, attrs)] = [parser.CurrentByteIndex, -1]

    def end(name: str) -> None:
        nonlocal depth
        tag = locals_.get(name) or local_name(name)
        if depth > 2:
            build_end(tag)
        else:
            spans[build_end(tag)][1] = parser.CurrentByteIndex
        depth -= 1

    parser.StartElementHandler = start
    parser.EndElementHandler = end
    parser.CharacterDataHandler = builder.data
    try:
        parser.Parse(data, True)
    except expat.ExpatError as exc:
        raise RecordError(f"the document is not well-formed XML ({exc})") from None
    return XmlDocument(builder.close(), data, spans)


def inner_xml(document: XmlDocument, element: Element) -> bytes:
    """The bytes between ``element``'s start and end tags in the source, verbatim (Go's
    ``xml:",innerxml"``); for the root and its children, the only elements whose offsets are kept."""
    span = document.spans.get(element)
    if span is None:
        raise ValueError(f"<{element.tag}> is not the root nor one of its children: no offsets kept")
    match = _START_TAG.match(document.source, span[0])
    if match is None or match.group().endswith(b"/>"):
        return b""
    return document.source[match.end() : span[1]]


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
