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

The readers (``long``, ``objects``) are imported when one of their names is first asked for,
not with the package: they bring the compiled scanner and numba (0.2-0.3 CPU-s of a command),
which a command that reads no ClassAd (``fairshare``, ``summarize``, ``export``, ...) never
needs, while it does need :class:`Attr` and :class:`Kind` (the credentials' attributes).

The differential tests (of the source tree) prove that every path gives classad2's values.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from collector.lazy import lazy_names
from probes.sources.classad.model import AdColumns, Attr, Kind, fallbacks, to_classad, unique_attrs

if TYPE_CHECKING:
    from probes.sources.classad.long import collect, iter_ad_files, iter_ads, iter_ads_range, read_ad_files, read_ads
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
    "iter_ads_range",
    "read_ad_files",
    "read_ads",
    "to_classad",
    "unique_attrs",
]

_LAZY = {
    "collect": "long",
    "iter_ad_files": "long",
    "iter_ads": "long",
    "iter_ads_range": "long",
    "read_ad_files": "long",
    "read_ads": "long",
    "columns_from_classads": "objects",
}
"""The readers' names, by the module that defines them (imported on first use)."""


__getattr__ = lazy_names(__name__, _LAZY, globals())
