"""What a Gratia probe sends, made into documents: an envelope of records, or one bare record.

gratia-probe bundles its records into ``<RecordEnvelope>`` (``command=multiupdate``); a probe
that does not bundle, or a file, may hold one bare ``<JobUsageRecord>``/``<UsageRecord>``.
:func:`envelope_docs` takes either and gives, in one :class:`EnvelopeResult`:

* ``docs``: one document per JobUsageRecord or UsageRecord (collector/gratia/rawdoc.py says
  which fields), in envelope order, and in ``positions`` the index of each among the envelope's
  elements (0-based), for a caller that refuses one by its place;
* ``skipped``: how many elements of each other tag the envelope held (``StorageElement``,
  ``StorageElementRecord``, ``Subcluster``, ``ProbeDetails``, anything): acknowledged and not
  stored, never an error, as GRACC's collector acknowledges what it does not know;
* ``quarantined``: ``(index, reason)`` for each record that GRACC's raw pipeline sets aside
  (no EndTime nor StartTime, a StartTime at the epoch, a number or time its index cannot hold:
  collector/gratia/rawdoc.py), ``index`` being its position among the envelope's elements
  (0-based; a bare record is 0): not stored, and no reason to refuse the others;
* ``errors``: ``(index, reason)`` for each record that GRACC's collector cannot read (a time
  that is not RFC 3339, an ``Origin`` ``hop`` that is not an integer). The other records are
  converted all the same; GRACC's collector unmarshals the envelope whole, so for it such an
  envelope is not well-formed and is refused whole, as the caller may still do.

A document that cannot be read at all (too big, too deep, a DTD or an entity, not UTF-8, not
XML, a root that is neither an envelope nor a Gratia record) raises :class:`RecordError`.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from collector.errors import RecordError
from collector.gratia.rawdoc import QUARANTINE, raw_doc
from collector.gratia.safexml import DEFAULT_LIMITS, XmlLimits, inner_xml, parse_xml, stream_children
from collector.gratia.usagerecord import RECORD_TAGS, record_fields

__all__ = ["ENVELOPE_TAG", "OTHER_TAGS", "EnvelopeResult", "envelope_docs"]

ENVELOPE_TAG = "RecordEnvelope"
# The other record types gratia-probe sends; accepted, counted and not stored, also as a root.
OTHER_TAGS = frozenset(
    {
        "ComputeElement", "ComputeElementRecord", "MetricRecord", "ProbeDetails",
        "StorageElement", "StorageElementRecord", "Subcluster",
    }
)  # fmt: skip


@dataclass(frozen=True)
class EnvelopeResult:
    """What became of each element of an envelope (see the module docstring)."""

    docs: list[dict[str, Any]] = field(default_factory=list)
    positions: list[int] = field(default_factory=list)
    skipped: Counter[str] = field(default_factory=Counter)
    quarantined: list[tuple[int, str]] = field(default_factory=list)
    errors: list[tuple[int, str]] = field(default_factory=list)

    @property
    def total(self) -> int:
        """Elements the envelope held: documents, skipped, quarantined and refused."""
        return len(self.docs) + sum(self.skipped.values()) + len(self.quarantined) + len(self.errors)


def envelope_docs(
    xml: bytes | str, *, probe: str | None = None, received: float | None = None, limits: XmlLimits = DEFAULT_LIMITS
) -> EnvelopeResult:
    """The documents of a ``<RecordEnvelope>`` or of one bare record (see the module docstring).

    ``xml``: the envelope as received (UTF-8 bytes; a ``str`` is encoded). ``probe``: the
    sender's name (the form's ``from``), stored in each document's ``probe``. ``received``:
    when it arrived (UNIX seconds; collector/gratia/rawdoc.py). ``limits``: what the XML may
    hold (collector/gratia/safexml.py). RecordError when the XML cannot be read.
    """
    root, children = stream_children(xml, limits)  # an envelope's records, one at a time
    root_tag = root.tag
    result = EnvelopeResult()
    if root_tag == ENVELOPE_TAG:
        elements = children
    elif root_tag in RECORD_TAGS or root_tag in OTHER_TAGS:
        document = parse_xml(xml, limits)  # a bare record: its fields are the root's children
        elements = iter([(document.root, inner_xml(document, document.root))])
    else:
        raise RecordError(
            f"expected <{ENVELOPE_TAG}> or a bare <JobUsageRecord>/<UsageRecord> at the root, got <{root_tag}>"
        )
    for index, (element, inner) in enumerate(elements):
        tag = element.tag
        if tag not in RECORD_TAGS:
            result.skipped[tag] += 1
            continue
        try:
            raw = f"<{tag}>{inner.decode('utf-8')}</{tag}>"  # GRACC's RawXML
            doc = raw_doc(record_fields(element, raw), probe=probe, received=received)
        except RecordError as exc:
            result.errors.append((index, exc.reason))
            continue
        if QUARANTINE in doc:
            result.quarantined.append((index, doc[QUARANTINE]))
        else:
            result.docs.append(doc)
            result.positions.append(index)
    return result
