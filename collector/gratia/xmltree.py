"""The document both of safexml's parsers build: an ``xml.etree.ElementTree`` tree, its names,
and the byte offsets of its root and the root's children.

An element's tag is its local name alone: Gratia records are read, as Go's decoder reads them,
by local name whatever the namespace (``urwg:``, ``urf:`` or none). Attribute names keep theirs,
as ElementTree writes them (``'{URI}local'``, or ``'local'`` outside any namespace:
:func:`split_name`), which the attribute rules need. For the root and its children, the byte
offsets of what lies between their tags are kept, so that a record's original XML can be cut
out of the envelope verbatim (:func:`inner_xml`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple, TypeVar
from xml.etree.ElementTree import Element

__all__ = [
    "DEFAULT_LIMITS", "EXPAT_SEPARATOR", "START_TAG", "XmlDocument", "XmlLimits", "chardata", "element_tree_name",
    "empty_tag", "inner_xml", "local_name", "split_name",
]  # fmt: skip

EXPAT_SEPARATOR = " "  # between a namespace URI and a local name in expat's names; never in an XML name
#: A start tag (expat has checked it is well formed): the name, attributes with quoted values
#: (which may hold '>'), then '>' or '/>'.
START_TAG = re.compile(rb"""<([^\s/>]+)(?:\s+[^\s=]+\s*=\s*(?:"[^"]*"|'[^']*'))*\s*/?>""")


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


def empty_tag(start_tag: re.Match[bytes]) -> bool:
    """Whether a start tag matched by :data:`START_TAG` is an empty-element tag (``<a/>``)."""
    return start_tag.string[start_tag.end() - 2] == 0x2F  # '/'


def inner_xml(document: XmlDocument, element: Element) -> bytes:
    """The bytes between ``element``'s start and end tags in the source, verbatim (Go's
    ``xml:",innerxml"``); for the root and its children, the only elements whose offsets are kept."""
    span = document.spans.get(element)
    if span is None:
        raise ValueError(f"<{element.tag}> is not the root nor one of its children: no offsets kept")
    return document.source[span[0] : span[1]]


_EXPAT_NAMES: dict[str, str] = {}


def element_tree_name(name: str) -> str:
    """An expat name as ElementTree writes it: ``'URI local'`` -> ``'{URI}local'``, cached."""
    return _cached(_EXPAT_NAMES, name, _universal)


def _universal(name: str) -> str:
    ns, _, local = name.rpartition(EXPAT_SEPARATOR)
    return f"{{{ns}}}{local}" if ns else local
