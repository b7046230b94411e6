"""``[awards]``: the allocation committee's awards the report and the XLSX export compare usage with."""

from __future__ import annotations

from pydantic import Field

from probes.config.fields import Section

__all__ = ["AwardSettings"]


class AwardSettings(Section):
    file: str = Field(
        "",
        description="The committee's awards: a CSV (project,resource,amount,period) or a TOML file of [[award]] "
        "tables, relative to this file; empty: the report and the export show usage alone (--awards gives one too).",
    )
