"""``[collector]`` and ``[collector.store]``: the collector service's settings, described in
:mod:`collector.settings` (the collector never imports the probes); here, what becomes of a
file written before the collector's store had a section of its own.

Such a file gives the collector's store in ``[store]``, the probe's section. It still works:
``collector serve`` sends to that ``[store]`` and says so in one line on stderr
(:data:`COLLECTOR_STORE_NOTE`), until the keys are moved to ``[collector.store]``. A file with
both uses ``[collector.store]``; a ``[store]`` naming another collector (``collector+https://``)
is refused, as it always was.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from collector.errors import ConfigError
from collector.settings import CollectorStoreSettings
from probes.config.store import StoreSettings

__all__ = ["COLLECTOR_STORE_NOTE", "collector_store", "store_for_collector"]

COLLECTOR_STORE_NOTE = (
    "the collector's store is read from [store], as before [collector.store] existed; "
    "move those keys to [collector.store] ([store] is the probe's store)"
)


def store_for_collector(store: StoreSettings) -> CollectorStoreSettings:
    """The probe's ``[store]`` as the collector's store (its ``token_file`` and ``gratia_*``, a
    probe's, left out); ConfigError naming ``store.url`` when it is another collector."""
    hint = " (without [collector.store], the collector's store is read from [store]; give it its own there)"
    probe_only = {"token_file", "gratia_probe_name", "gratia_site", "gratia_bundle_size"}
    return collector_store(store.model_dump(exclude=probe_only), "store", hint)


def collector_store(raw: Mapping[str, Any], key: str, hint: str = "") -> CollectorStoreSettings:
    """``raw`` as the collector's store; a bad value is a ConfigError naming it under ``key``
    (followed by ``hint``)."""
    try:
        return CollectorStoreSettings.model_validate(raw)
    except ValidationError as exc:
        problems = (
            f"{key}.{'.'.join(map(str, e['loc']))}: {e.get('ctx', {}).get('error', e['msg'])}" for e in exc.errors()
        )
        raise ConfigError("; ".join(problems) + hint) from None
