"""The readers' few settings: their defaults are the configuration's, and the configuration
hands each reader exactly its part."""

from __future__ import annotations

from probes.config import ProbeConfig, parse_config
from probes.sources.settings import JobReading, SlotReading


def test_the_defaults_are_the_configurations() -> None:
    assert ProbeConfig().slot_reading() == SlotReading()
    assert ProbeConfig().job_reading() == JobReading()


def test_the_configuration_hands_each_reader_its_part() -> None:
    config = parse_config(
        {
            "pool": {"name": "cms-t2", "interval_s": 120},
            "credentials": {"user": ["x509UserProxyVOName"], "qos": ["JobQOS"]},
            "site": {"attributes": ["GLIDEIN_CMSSite"], "default": "T2_XX"},
            "machines": {"speed_attribute": "HEPSPEC", "cost_attribute": "Cost", "class_attributes": ["CPUModel"]},
            "sources": {"slot_attributes": ["Arch"], "job_attributes": ["ExitBySignal"]},
            "partitions": [{"name": "all", "match": "Cpus > 0", "cpus": 1}],
        }
    )
    slots = config.slot_reading()
    assert (slots.pool, slots.interval_s, slots.site_attributes, slots.site_default) == (
        "cms-t2", 120.0, ("GLIDEIN_CMSSite",), "T2_XX"
    )  # fmt: skip
    assert (slots.speed_attribute, slots.cost_attribute, slots.extra_attributes) == ("HEPSPEC", "Cost", ("Arch",))
    assert slots.partitions == (("all", "Cpus > 0"),)
    assert config.slot_reading(with_class_attributes=True).extra_attributes == ("Arch", "CPUModel")
    jobs = config.job_reading()
    assert (jobs.user, jobs.qos, jobs.group) == (
        ("x509UserProxyVOName",),
        ("JobQOS",),
        ("AcctGroup", "AccountingGroup"),
    )
    assert (jobs.speed_attribute, jobs.extra_attributes, jobs.site_default) == ("HEPSPEC", ("ExitBySignal",), "T2_XX")
