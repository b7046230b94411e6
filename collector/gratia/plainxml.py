"""safexml's fast path: a plain document parsed by the C ``XMLParser`` and ``TreeBuilder``.

A plain document is what gratia-probe sends: elements, text and at most an XML declaration (no
comment, CDATA section or processing instruction, no more ``<`` than ``limits.max_elements``).
The C parser builds its tree with no Python call per element, fed :data:`FEED_BYTES` at a time,
each child of the root taken as soon as it is whole; its depth is checked on its tree (parsing
is iterative, and the elements are bounded before it: each takes a ``<`` and four bytes at
least); its tags are cut to their local names; and its offsets are found in the bytes, where in
such a document every ``<`` opens a tag and a child's end tag is the first one of its name after
its start tag unless it holds an element of that very name (then this path gives up). It never
raises: a document it does not take to the end is :mod:`~collector.gratia.safexml`'s exact
parser's, whose messages are the ones a refused document gets.
"""

from __future__ import annotations

from collections.abc import Iterator
from xml.etree.ElementTree import Element, ParseError, TreeBuilder, XMLParser

from collector.gratia.xmltree import _LOCAL_NAMES, START_TAG, XmlDocument, XmlLimits, empty_tag, local_name

__all__ = ["FEED_BYTES", "PlainReader", "parse_plain"]

FEED_BYTES = 64 * 1024  # fed to the C parser at a time: some 30 records of an envelope


def parse_plain(data: bytes, limits: XmlLimits) -> XmlDocument | None:
    """The document of a plain ``data`` by the C parser; None when it is not plain or not
    within the limits (the module docstring says what is plain and why this is exact)."""
    reader = PlainReader.open(data, limits, keep=True)
    if reader is None:
        return None
    spans = {child: (start, end) for child, start, end in reader.children()}
    if reader.failed:
        return None
    spans[reader.root] = reader.root_span
    return XmlDocument(reader.root, data, spans)


class PlainReader:
    """A plain document read by the C parser, :data:`FEED_BYTES` at a time, its root's children
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
    def open(cls, data: bytes, limits: XmlLimits, *, keep: bool) -> PlainReader | None:
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
                self.parser.feed(memoryview(self.data)[self.fed : self.fed + FEED_BYTES])
                self.fed += FEED_BYTES
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
        start_tag = START_TAG.match(data, self.root_start)
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
                span = None if empty_tag(start_tag) else _child_span(data, position)
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
        if empty_tag(start_tag):
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
    start_tag = START_TAG.match(data, start) if start >= 0 else None
    if start_tag is None:
        return None
    if empty_tag(start_tag):
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
