"""Fast, exact reading of the attributes fairacct needs from ClassAds, as columns.

- :mod:`~probes.sources.classad.model`: what is wanted (:class:`Attr`, :class:`Kind`) and what
  is read (:class:`AdColumns`); an ad as a classad2 object;
- :mod:`~probes.sources.classad.long`: the ``-long`` form (dumps, history files, per-job
  files), a chunk at a time, through the compiled scan of :mod:`~probes.sources.classad.kernel`;
- :mod:`~probes.sources.classad.json_form`: the ``-json`` form;
- :mod:`~probes.sources.classad.literals`: values become column entries;
- :mod:`~probes.sources.classad.limits`: a value out of its attribute's range makes its ad
  malformed (quarantined, the rest read);
- :mod:`~probes.sources.classad.objects`: the same columns from classad2 objects (a live pool);
- :mod:`~probes.sources.classad.columns`: columns grown chunk by chunk, allocated once.

``tests/sources/classad/test_differential.py`` proves that every path gives classad2's values.
"""

from __future__ import annotations

from probes.sources.classad.long import collect, iter_ad_files, iter_ads, read_ad_files, read_ads
from probes.sources.classad.model import AdColumns, Attr, Kind, fallbacks, to_classad, unique_attrs
from probes.sources.classad.objects import columns_from_classads

__all__ = [
    "AdColumns",
    "Attr",
    "Kind",
    "collect",
    "columns_from_classads",
    "fallbacks",
    "iter_ad_files",
    "iter_ads",
    "read_ad_files",
    "read_ads",
    "to_classad",
    "unique_attrs",
]
