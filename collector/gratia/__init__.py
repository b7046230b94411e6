"""Gratia records, as real Gratia probes send them to GRACC, made into documents exactly as
GRACC's collector makes them (opensciencegrid/gracc-collector). Pure parsing: the HTTP
endpoint calls these.

* :func:`envelope_docs` (envelope.py): a ``<RecordEnvelope>`` or one bare record -> documents,
  other record types counted, bad records reported with their index and reason;
* :func:`decode_rmi` (wire.py): the body of ``POST /gratia-servlets/rmi`` -> a typed request,
  and the reply texts GRACC gives;
* safexml.py (hostile XML refused; the document it builds in xmltree.py, its fast path in
  plainxml.py), isotime.py (durations and times as Go reads them), usagerecord.py (a record's
  fields), rawdoc.py (CoreHours, id, timestamp).
"""

from collector.gratia.envelope import EnvelopeResult, envelope_docs
from collector.gratia.safexml import DEFAULT_LIMITS, XmlLimits
from collector.gratia.wire import MultiUpdate, Ping, decode_rmi

__all__ = ["DEFAULT_LIMITS", "EnvelopeResult", "MultiUpdate", "Ping", "XmlLimits", "decode_rmi", "envelope_docs"]
