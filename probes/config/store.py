"""``[store]``: where the probe's records go, and how to reach it.

The keys a store's credentials take are :class:`collector.settings.SinkSettings`'s, described
there once for this section and the collector's ``[collector.store]``; the probe's store may
also be a fairacct collector (``collector+https://``), which it sends to with ``token_file``.
``[upstream]``: a Gratia collector that job records go to besides the store.
"""

from __future__ import annotations

from pydantic import Field, field_validator, model_validator

from collector.errors import ConfigError
from collector.settings import SinkSettings
from collector.sinks.registry import STORES, check_url, kind_of
from probes.config.fields import Section

__all__ = ["UPSTREAM", "UPSTREAM_JOBS", "StoreSettings", "UpstreamSettings"]

UPSTREAM = "upstream"
"""The outbox lane of ``[upstream]``: job records wait there for its Gratia collector."""
UPSTREAM_JOBS = f"{UPSTREAM}:job"
"""Their kind in the outbox (:func:`collector.parcels.lane_kind`), in ``fairacct outbox`` too."""


class _GratiaFields(Section):
    """How the records a Gratia collector receives name their sender: the store's (a
    ``gratia+https://`` store) and ``[upstream]``'s."""

    gratia_probe_name: str = Field(
        "",
        description="ProbeName of the records a gratia+https:// store receives; empty: condor-ap:<this host's FQDN>, "
        "the name gratia-probe's condor-ap package gives itself (so GRACC sees the same probe after a switch).",
    )
    gratia_site: str = Field(
        "",
        description="SiteName of the records a gratia+https:// store receives (the access point's site as OSG "
        "Topology names it, condor-ap's SiteName); required with a gratia+https:// URL.",
    )
    gratia_bundle_size: int = Field(
        100,
        ge=1,
        le=10000,
        description="JobUsageRecords to a request to a gratia+https:// store (GratiaCore's BundleSize).",
    )

    @model_validator(mode="after")
    def _site_named(self) -> _GratiaFields:
        # condor-ap refuses to run without a SiteName; an empty one sent every record as 'unknown'
        if str(getattr(self, "url", "")).startswith(STORES["gratia"].prefixes) and not self.gratia_site.strip():
            raise ValueError(
                "gratia_site: a Gratia sender must name the access point's site as OSG Topology has it "
                "(condor-ap's SiteName); empty, every record would reach GRACC as SiteName 'unknown'"
            )
        return self


class StoreSettings(SinkSettings, _GratiaFields):
    url: str = Field(
        "sqlite:///fairacct.sqlite",
        description="sqlite:///PATH (embedded, PATH relative to state_dir), http(s)://... (Elasticsearch), "
        "opensearch+http(s)://... (OpenSearch), collector+https://HOST[:PORT] "
        "(a fairacct collector, with token_file) or gratia+https://HOST/gratia-servlets/rmi (OSG's GRACC: job records "
        "as Gratia JobUsageRecords).",
    )
    token_file: str = Field(
        "",
        description="File holding this probe's bearer token for a collector+http(s):// store (never the token itself).",
    )

    @property
    def kind(self) -> str:
        """The store the URL names, as :data:`collector.sinks.STORES` names it ("sqlite", "gratia", ...)."""
        return kind_of(self.url)


class UpstreamSettings(_GratiaFields):
    """``[upstream]``: a Gratia collector (OSG's GRACC) that job records go to besides the store,
    from the same outbox: each leaves its lane only when that collector said ``OK``."""

    url: str = Field(
        "",
        description="gratia+https://HOST/gratia-servlets/rmi: job records go there too, as Gratia JobUsageRecords, "
        "besides the store; empty: nowhere else.",
    )
    ca_file: str = Field("", description="CA bundle to verify the Gratia collector's certificate (https).")

    @field_validator("url")
    @classmethod
    def _gratia_only(cls, url: str) -> str:
        if url and not url.startswith(STORES["gratia"].prefixes):
            raise ValueError(f"expected gratia+https://HOST/gratia-servlets/rmi or empty, got {url!r}")
        try:
            if url:
                check_url(url)
        except ConfigError as exc:
            raise ValueError(str(exc).removeprefix("store.url: ")) from None
        return url
