"""``[apel]``: APEL messages for WLCG accounting (``fairacct apel``)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from probes.config.fields import Section

__all__ = ["ApelSettings"]


class ApelSettings(Section):
    site: str = Field(
        "",
        description="Site name APEL knows (GOCDB) for every message; empty: each record's own site "
        "(the job's [site] attributes, a Gratia record's SiteName).",
    )
    benchmark_type: Literal["HEPscore23", "HEPSPEC"] = Field(
        "HEPSPEC",
        description="What machines.speed_attribute (the hosts' benchmark per core) measures: HEPscore23 or HEPSPEC "
        "(HS06). APEL reads a v0.3 summary as HEPSPEC; a HEPscore23 site sends the v0.4 normalised summary.",
    )
    infrastructure: str = Field(
        "grid", description="APEL's Infrastructure (InfrastructureType of job records): grid or local."
    )
    vo_attribute: Literal["group", "project", "user"] = Field(
        "group", description="Job record field giving the VO of a job without x509UserProxyVOName or FQAN."
    )
    vo_map: dict[str, str] = Field(
        default_factory=dict,
        description=(
            'VO of each value of vo_attribute (e.g. group_cms = "cms"); a value not named is no VO (its jobs left '
            "out, said)."
        ),
    )
    site_benchmarks: dict[str, Annotated[float, Field(gt=0)]] = Field(
        default_factory=dict,
        description="Benchmark per core of each SiteName, for Gratia records (they carry none); "
        "a site not named is not normalised.",
    )
    gratia_vos: list[str] = Field(
        default_factory=lambda: ["atlas", "alice", "belle", "cms", "enmr.eu", "lhcb"],
        description="The VOs whose Gratia records --source gratia sends, as OSG's gracc-apel (its vo_list, "
        "the default); compared case-insensitively.",
    )
    outgoing: str = Field(
        "", description="Directory queue (dirq QueueSimple) ssmsend sends from; empty: --out or standard output."
    )
