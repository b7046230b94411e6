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
  the C ``XMLParser`` and ``TreeBuilder`` build the tree with no Python call per element, fed
  64 KiB at a time, each child of the root taken as soon as it is whole; its depth is checked
  on its tree (parsing is iterative, and the elements are bounded before it: each takes a
  ``<`` and four bytes at least); its tags are cut to their local names; and its offsets are
  found in the bytes, where in such a document every ``<`` opens a tag and a child's end tag
  is the first one of its name after its start tag unless it holds an element of that very
  name (then this path gives up). About a third less CPU a record than the exact parser
  (bench_gratia.py);
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
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import NamedTuple, NoReturn, TypeVar
from xml.etree.ElementTree import Element, ParseError, TreeBuilder, XMLParser
from xml.parsers import expat

from collector.errors import RecordError

__all__ = [
    "DEFAULT_LIMITS", "XmlDocument", "XmlLimits", "chardata", "inner_xml", "local_name", "parse_xml", "split_name",
    "stream_children",
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
    data = _utf8(data)
    _screen(data, limits)
    return _parse_plain(data, limits) or _parse_exact(data, limits)


def stream_children(
    data: bytes | str, limits: XmlLimits = DEFAULT_LIMITS
) -> tuple[Element, Iterator[tuple[Element, bytes]]]:
    """The root of ``data`` and an iterator over the root's children, one at a time, each with
    the bytes between its tags (what :func:`inner_xml` cuts): what :func:`parse_xml` gives,
    without ever holding the whole tree.

    A plain document is read :data:`_FEED_BYTES` at a time, and a child is given, then dropped
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
    reader = _PlainReader.open(data, limits, keep=False)
    if reader is None:
        document = _parse_exact(data, limits)
        return document.root, _exact_children(document, 0)
    return reader.root, _streamed(reader, data, limits)


def _streamed(reader: _PlainReader, data: bytes, limits: XmlLimits) -> Iterator[tuple[Element, bytes]]:
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


def _parse_plain(data: bytes, limits: XmlLimits) -> XmlDocument | None:
    """The document of a plain ``data`` by the C parser; None when it is not plain or not
    within the limits (the module docstring says what is plain and why this is exact)."""
    reader = _PlainReader.open(data, limits, keep=True)
    if reader is None:
        return None
    spans = {child: (start, end) for child, start, end in reader.children()}
    if reader.failed:
        return None
    spans[reader.root] = reader.root_span
    return XmlDocument(reader.root, data, spans)


_FEED_BYTES = 64 * 1024  # fed to the C parser at a time: some 30 records of an envelope


class _PlainReader:
    """A plain document read by the C parser, :data:`_FEED_BYTES` at a time, its root's children
    given as soon as they are whole (:meth:`children`), with their offsets found in the bytes.

    The C ``TreeBuilder`` gives the root only when the document ends, so the reader opens an
    element of its own first, which the root becomes a child of. A child is whole once the parser
    has started a later sibling, or the document has ended: true whatever the parser held back
    of what it was fed (expat 2.6 defers reparsing small additions). A reader that gives up (not
    well-formed, too deep, offsets it cannot be sure of) sets :attr:`failed`, and the exact
    parser must say what the document is.
    """

    root: Element  # read by open()

    def __init__(self, data: bytes, limits: XmlLimits, root_start: int, *, keep: bool) -> None:
        self.data = data
        self.max_depth = limits.max_depth
        self.keep = keep  # whether the tree keeps the children given (parse_xml) or drops them (streams)
        builder = TreeBuilder()
        self.holder = builder.start("document", {})
        self.parser = XMLParser(target=builder, encoding="UTF-8")  # the declared encoding is ignored, as below
        self.fed = 0  # bytes of data fed to the parser
        self.closed = False  # whether the parser was told the document ended (and found it well-formed)
        self.root_start = root_start
        self.root_span = (0, 0)
        self.failed = False

    @classmethod
    def open(cls, data: bytes, limits: XmlLimits, *, keep: bool) -> _PlainReader | None:
        """A reader whose :attr:`root` has been read; None when ``data`` is not plain or its
        root cannot be read so."""
        root_start = _plain_root_start(data, limits)
        if root_start < 0:
            return None
        reader = cls(data, limits, root_start, keep=keep)
        while not len(reader.holder):
            if reader.closed or not reader._feed():
                return None
        reader.root = reader.holder[0]
        reader.root.tag = local_name(reader.root.tag)
        return reader

    def _feed(self) -> bool:
        """Feed the next bytes (or end the document); False when the parser refused them."""
        try:
            if self.fed < len(self.data):
                self.parser.feed(memoryview(self.data)[self.fed : self.fed + _FEED_BYTES])
                self.fed += _FEED_BYTES
            else:
                self.parser.close()
                self.closed = True
        except ParseError:
            return False
        return True

    def children(self) -> Iterator[tuple[Element, int, int]]:
        """Each child of the root, whole, its tags made local, and the offsets of what lies
        between its tags; ends early with :attr:`failed` set when the reader gives up."""
        data, root, max_depth, keep, names = self.data, self.root, self.max_depth - 1, self.keep, _LOCAL_NAMES
        start_tag = _START_TAG.match(data, self.root_start)
        if start_tag is None:
            self.failed = True
            return
        position = inner = start_tag.end()
        given = 0
        while True:
            ended = self.closed
            index = given if keep else 0
            while len(root) - index > 1 or (ended and len(root) > index):
                child = root[index]
                span = None if _empty(start_tag) else _child_span(data, position)
                if span is None or _deeper_than(child, max_depth):
                    self.failed = True
                    return
                for element in child.iter():
                    tag = element.tag
                    if tag[:1] == "{":
                        element.tag = names.get(tag) or local_name(tag)
                if not keep:
                    del root[0]
                given += 1
                index = given if keep else 0
                yield child, span[0], span[1]
                position = span[2]
            if ended:
                break
            if not self._feed():
                self.failed = True
                return
        if _empty(start_tag):
            self.root_span = (inner, inner)
            return
        end = data.find(b"</", position)  # the root's end tag, and nothing but text before it
        if end < 0 or data.find(b"<", position) != end:
            self.failed = True
            return
        self.root_span = (inner, end)


def _plain_root_start(data: bytes, limits: XmlLimits) -> int:
    """Where the root's start tag is in a plain ``data``; -1 when it is not plain or may hold
    more elements than the limit."""
    # '!' and '?' are rare in records: one memchr pass each, and the slower search for the two
    # bytes only when one is there (a third of the parse's own CPU went to those searches)
    if b"!" in data and b"<!" in data:
        return -1
    # each element has a '<' and takes 4 bytes at least ('<a/>'): count only when that may matter
    if len(data) > 4 * limits.max_elements and data.count(b"<") > limits.max_elements:
        return -1
    root_start = data.find(b"<")
    if data.startswith(b"<?", root_start):  # the XML declaration
        declaration_end = data.find(b"?>", root_start)
        root_start = data.find(b"<", declaration_end) if declaration_end > 0 else -1
    if root_start < 0:
        return -1
    question = data.find(b"?", root_start)
    if question >= 0 and data.find(b"<?", question - 1) >= 0:
        return -1
    return root_start


def _child_span(data: bytes, position: int) -> tuple[int, int, int] | None:
    """The offsets of what lies between the tags of the root's child whose start tag is the
    next tag from ``position``, and the offset after its end tag; None where they cannot be
    told for sure (in a plain document every '<' opens a tag, and a child's end tag is the first
    one of its name after its start tag unless it holds an element of that very name)."""
    start = data.find(b"<", position)
    start_tag = _START_TAG.match(data, start) if start >= 0 else None
    if start_tag is None:
        return None
    if _empty(start_tag):
        return start_tag.end(), start_tag.end(), start_tag.end()
    name = start_tag.group(1)
    end = data.find(b"</" + name, start_tag.end())
    if end < 0 or data[end + 2 + len(name) : end + 3 + len(name)] not in (b">", b" ", b"\t", b"\n", b"\r"):
        return None
    if data.find(b"<" + name, start_tag.end(), end) >= 0:  # perhaps an element of the same name inside
        return None
    return start_tag.end(), end, data.find(b">", end) + 1


def _deeper_than(root: Element, max_depth: int) -> bool:
    """Whether ``root`` has elements nested deeper than ``max_depth`` levels (the root is 1);
    level by level, looking into an element only when it has children."""
    if max_depth < 1:
        return True
    parents = [root] if len(root) else []
    depth = 1
    while parents:
        depth += 1
        if depth > max_depth:
            return True
        parents = [child for parent in parents for child in parent if len(child)]
    return False


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
        # collector's heap, a tenth of a second or more every few seconds, and the slowest
        # replies waited for it).
        parser.StartElementHandler = parser.EndElementHandler = None
    spans = {}
    for element, offset in starts.items():
        start_tag = _START_TAG.match(data, offset)
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
