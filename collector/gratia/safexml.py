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

The tree is the standard ``xml.etree.ElementTree`` one. An element's tag is its local name
alone: Gratia records are read, as Go's decoder reads them, by local name whatever the namespace
(``urwg:``, ``urf:`` or none). Attribute names keep theirs, as ElementTree writes them
(``'{URI}local'``, or ``'local'`` outside any namespace: :func:`split_name`), which the attribute
rules need. For the root and its children, the byte offsets of their tags are kept, so that a
record's original XML can be cut out of the envelope verbatim (:func:`inner_xml`). Two parsers
build that same document:

* **plain documents**, what gratia-probe sends (elements, text and at most an XML declaration:
  no comment, CDATA section or processing instruction, no more ``<`` than ``limits.max_elements``):
  the C ``XMLParser`` and ``TreeBuilder`` build the tree with no Python call per element; the
  depth is checked on the tree (parsing is iterative, and the elements are bounded before it:
  each takes a ``<`` and four bytes at least); tags are cut to their local names in one pass;
  and the records' offsets are found in the bytes, where in such a document every ``<`` opens
  a tag and a child's end tag is the first one of its name after its start tag unless it holds
  an element of that very name (then this path gives up). About a fifth less CPU than the exact
  parser (40 against 48 us a record here);
* **any other document**, and any document that the first path does not take to the end (not
  well-formed, too deep, offsets not found: it never raises): expat with a Python handler on the
  start and end of each element, which counts elements and depth as they come, stops at the
  first excess, and takes the offsets from ``CurrentByteIndex``. Its messages are the ones a
  refused document gets.

A test parses every fixture and generated document both ways and finds the same tree, offsets
and verdicts.

Why not ``defusedxml``: it installs the same refusals on the same expat, but builds the tree
through the pure-Python ElementTree, which is slower, and it gives no byte offsets, which
``RawXML`` needs.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple, NoReturn, TypeVar
from xml.etree.ElementTree import Element, ParseError, TreeBuilder, XMLParser
from xml.parsers import expat

from collector.errors import RecordError

__all__ = [
    "DEFAULT_LIMITS", "XmlDocument", "XmlLimits", "chardata", "inner_xml", "local_name", "parse_xml", "split_name",
]  # fmt: skip

_SEP = " "  # between a namespace URI and a local name in expat's names; never in an XML name
# A start tag (expat has checked it is well formed): the name, attributes with quoted values
# (which may hold '>'), then '>' or '/>'.
_START_TAG = re.compile(rb"""<([^\s/>]+)(?:\s+[^\s=]+\s*=\s*(?:"[^"]*"|'[^']*'))*\s*/?>""")
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
    for the root and each of its children, the byte offsets ``(start, end)`` of what lies
    between its start and end tags (an empty-element tag: ``start == end``)."""

    root: Element
    source: bytes
    spans: dict[Element, tuple[int, int]]


_T = TypeVar("_T")
_NAMES: dict[str, tuple[str, str]] = {}
_LOCAL_NAMES: dict[str, str] = {}
_CACHED = 10_000  # names kept in each cache: a hostile document may invent any number


def split_name(name: str) -> tuple[str, str]:
    """``('URI', 'local')`` of an ElementTree name, ``('', 'local')`` without a namespace
    (cached: documents repeat a few dozen names)."""
    return _cached(_NAMES, name, _split)


def local_name(name: str) -> str:
    """The local name in an ElementTree name (``'{URI}local'`` or ``'local'``), cached."""
    return _cached(_LOCAL_NAMES, name, lambda qualified: _split(qualified)[1])


def _split(name: str) -> tuple[str, str]:
    ns, _, local = name[1:].partition("}") if name[:1] == "{" else ("", "", name)
    return ns, local


def _cached(cache: dict[str, _T], key: str, make: Callable[[str], _T]) -> _T:
    """``cache[key]``, made by ``make`` the first time and kept while the cache holds fewer than
    :data:`_CACHED` keys."""
    value = cache.get(key)
    if value is None:
        value = make(key)
        if len(cache) < _CACHED:
            cache[key] = value
    return value


def chardata(element: Element) -> str:
    """The character data directly inside ``element``, verbatim, as Go's ``xml:",chardata"``
    collects it: its text and the text after each child, not the children's own text."""
    text = element.text or ""
    if len(element):
        text += "".join(child.tail or "" for child in element)
    return text


def parse_xml(data: bytes | str, limits: XmlLimits = DEFAULT_LIMITS) -> XmlDocument:
    """The tree of ``data`` (UTF-8 bytes; a ``str`` is encoded), or :class:`RecordError`.

    See the module docstring for what is refused and why, and for the two parsers.
    """
    if isinstance(data, str):
        try:
            data = data.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise RecordError(f"the document cannot be UTF-8: character {exc.start} is {exc.reason}") from None
    _screen(data, limits)
    return _parse_plain(data, limits) or _parse_exact(data, limits)


def _parse_plain(data: bytes, limits: XmlLimits) -> XmlDocument | None:
    """The document of a plain ``data`` by the C parser; None when it is not plain or not
    within the limits (the module docstring says what is plain and why this is exact)."""
    if b"<!" in data:
        return None
    # each element has a '<' and takes 4 bytes at least ('<a/>'): count only when that may matter
    if len(data) > 4 * limits.max_elements and data.count(b"<") > limits.max_elements:
        return None
    root_start = data.find(b"<")
    if data.startswith(b"<?", root_start):  # the XML declaration
        declaration_end = data.find(b"?>", root_start)
        root_start = data.find(b"<", declaration_end) if declaration_end > 0 else -1
    if root_start < 0 or data.find(b"<?", root_start) >= 0:
        return None
    parser = XMLParser(target=TreeBuilder(), encoding="UTF-8")  # the declared encoding is ignored, as below
    try:
        parser.feed(data)
        root = parser.close()
    except ParseError:
        return None
    if _deeper_than(root, limits.max_depth):
        return None
    names = _LOCAL_NAMES
    for element in root.iter():
        tag = element.tag
        if tag[:1] == "{":
            element.tag = names.get(tag) or local_name(tag)
    spans = _plain_spans(data, root_start, root)
    return None if spans is None else XmlDocument(root, data, spans)


def _deeper_than(root: Element, max_depth: int) -> bool:
    """Whether ``root`` has elements nested deeper than ``max_depth`` levels (the root is 1);
    level by level, looking into an element only when it has children."""
    parents = [root] if len(root) else []
    depth = 1
    while parents:
        depth += 1
        if depth > max_depth:
            return True
        parents = [child for parent in parents for child in parent if len(child)]
    return False


def _plain_spans(data: bytes, root_start: int, root: Element) -> dict[Element, tuple[int, int]] | None:
    """The offsets :func:`_parse_exact` gives, found in a plain document's bytes; None where
    they cannot be told for sure."""
    start_tag = _START_TAG.match(data, root_start)
    if start_tag is None:
        return None
    if _empty(start_tag):
        return {root: (start_tag.end(), start_tag.end())}
    inner = start_tag.end()
    spans = {}
    position = inner
    for child in root:
        start = data.find(b"<", position)  # in a plain document, the next tag
        start_tag = _START_TAG.match(data, start) if start >= 0 else None
        if start_tag is None:
            return None
        if _empty(start_tag):
            spans[child] = (start_tag.end(), start_tag.end())
            position = start_tag.end()
            continue
        name = start_tag.group(1)
        end = data.find(b"</" + name, start_tag.end())
        if end < 0 or data[end + 2 + len(name) : end + 3 + len(name)] not in (b">", b" ", b"\t", b"\n", b"\r"):
            return None
        if data.find(b"<" + name, start_tag.end(), end) >= 0:  # perhaps an element of the same name inside
            return None
        spans[child] = (start_tag.end(), end)
        position = data.find(b">", end) + 1
    end = data.find(b"</", position)
    if end < 0 or data.find(b"<", position) != end:
        return None
    spans[root] = (inner, end)
    return spans


def _empty(start_tag: re.Match[bytes]) -> bool:
    """Whether a start tag matched by :data:`_START_TAG` is an empty-element tag (``<a/>``)."""
    return start_tag.string[start_tag.end() - 2] == 0x2F  # '/'


def _parse_exact(data: bytes, limits: XmlLimits) -> XmlDocument:
    """The document of any ``data``, by expat with a Python handler per element (see the
    module docstring)."""
    parser = expat.ParserCreate("UTF-8", _SEP)
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
        tag = local_name(names.get(name) or _element_tree_name(name))
        if attrs:
            attrs = {_element_tree_name(key): value for key, value in attrs.items()}
        if depth > 2:
            build_start(tag, attrs)
        else:
            starts[build_start(tag, attrs)] = parser.CurrentByteIndex

    def end(name: str) -> None:
        nonlocal depth
        tag = local_name(names.get(name) or _element_tree_name(name))
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
        # collector's heap, 100-190 ms every two seconds, and the slowest replies waited for it).
        parser.StartElementHandler = parser.EndElementHandler = None
    spans = {}
    for element, start in starts.items():
        start_tag = _START_TAG.match(data, start)
        assert start_tag is not None  # expat read a start tag there
        inner = start_tag.end()
        spans[element] = (inner, inner if _empty(start_tag) else ends[element])
    return XmlDocument(builder.close(), data, spans)


_EXPAT_NAMES: dict[str, str] = {}


def _element_tree_name(name: str) -> str:
    """An expat name as ElementTree writes it: ``'URI local'`` -> ``'{URI}local'``, cached."""
    return _cached(_EXPAT_NAMES, name, _universal)


def _universal(name: str) -> str:
    ns, _, local = name.rpartition(_SEP)
    return f"{{{ns}}}{local}" if ns else local


def inner_xml(document: XmlDocument, element: Element) -> bytes:
    """The bytes between ``element``'s start and end tags in the source, verbatim (Go's
    ``xml:",innerxml"``); for the root and its children, the only elements whose offsets are kept."""
    span = document.spans.get(element)
    if span is None:
        raise ValueError(f"<{element.tag}> is not the root nor one of its children: no offsets kept")
    return document.source[span[0] : span[1]]


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
