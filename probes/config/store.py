"""``[store]``: where the probe's records go, and how to reach it.

The keys a store's credentials take are :class:`collector.settings.SinkSettings`'s, described
there once for this section and the collector's ``[collector.store]``; the probe's store may
also be a fairacct collector (``collector+https://``), which it sends to with ``token_file``.
"""

from __future__ import annotations

from pydantic import Field

from collector.settings import SinkSettings

__all__ = ["StoreSettings"]


class StoreSettings(SinkSettings):
    url: str = Field(
        "sqlite:///fairacct.sqlite",
        description="sqlite:///PATH (embedded, PATH relative to state_dir), http(s)://... (Elasticsearch), "
        "opensearch+http(s)://... (OpenSearch) or collector+https://HOST[:PORT] "
        "(a fairacct collector, with token_file).",
    )
    token_file: str = Field(
        "",
        description="File holding this probe's bearer token for a collector+http(s):// store (never the token itself).",
    )

    def auth(self) -> dict[str, str]:
        """The sink's settings that are set, as the sink names them (secrets by reference, never
        by value): the collector sink's, or as :meth:`SinkSettings.auth`."""
        if self.url.startswith("collector+"):
            return {"token_file": self.token_file} | ({"ca_file": self.ca_file} if self.ca_file else {})
        return super().auth()
