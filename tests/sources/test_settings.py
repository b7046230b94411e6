"""The readers' few settings: each is a key of the configuration, its default written there
once, and the configuration hands each reader exactly its part."""

from __future__ import annotations

import ast
from dataclasses import MISSING, fields
from typing import Any

import pytest

from probes.config import ProbeConfig, parse_config
from probes.sources.settings import JobReading, SlotReading

from ..conftest import ROOT


@pytest.mark.parametrize("reading", [SlotReading, JobReading])
def test_every_setting_is_a_key_of_the_configuration_and_its_default_is_that_keys(reading: Any) -> None:
    default = ProbeConfig()
    for f in fields(reading):
        if f.name == "partitions":  # the configuration's [[partitions]], as (name, match)
            assert f.default == tuple((p.name, p.match) for p in default.partitions)
            continue
        if f.name == "gratia":  # no key: whether the probe reports to GRACC, from [store] and [upstream]
            assert f.default is False and default.job_reading().gratia is False
            continue
        section, key = f.metadata["key"]
        value = getattr(getattr(default, section), key)
        assert f.default == (tuple(value) if isinstance(value, list) else value), (f.name, section, key)
        assert f.default_factory is MISSING


def test_no_default_is_written_in_the_readers_settings() -> None:
    """Issue 38: the defaults were written here and in the configuration, and a test held the two
    copies equal. Now no field of the readers' settings is given a literal."""
    tree = ast.parse((ROOT / "probes/sources/settings.py").read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name in ("SlotReading", "JobReading"):
            for item in node.body:
                derived = isinstance(item, ast.AnnAssign) and ast.unparse(item.target) == "gratia"  # not a copied key
                if isinstance(item, ast.AnnAssign) and item.value is not None and not derived:
                    assert isinstance(item.value, ast.Call), ast.unparse(item)
                    literals = [n for n in ast.walk(item.value) if isinstance(n, ast.Constant)]
                    assert all(isinstance(c.value, str) and c.value.isidentifier() for c in literals), ast.unparse(item)


@pytest.mark.parametrize(
    ("settings", "gratia"),
    [
        ({}, False),
        ({"store": {"url": "gratia+https://gracc.example.org/gratia-servlets/rmi", "gratia_site": "AP"}}, True),
        ({"upstream": {"url": "gratia+https://gracc.example.org/gratia-servlets/rmi", "gratia_site": "AP"}}, True),
    ],
)
def test_condor_aps_reading_is_a_gratia_senders(settings: dict[str, Any], gratia: bool) -> None:
    """The job attributes condor-ap reads cost the reader about a fifth more: only a probe that
    reports to GRACC reads them."""
    assert parse_config(settings).job_reading().gratia is gratia


def test_the_default_configuration_gives_the_defaults() -> None:
    assert ProbeConfig().slot_reading() == SlotReading()
    assert ProbeConfig().job_reading() == JobReading()


def test_the_configuration_hands_each_reader_its_part() -> None:
    config = parse_config(
        {
            "pool": {"name": "cms-t2", "interval_s": 120},
            "credentials": {"user": ["x509UserProxyVOName"], "qos": ["JobQOS"], "slot_group": ["Grp"]},
            "site": {"attributes": ["GLIDEIN_CMSSite"], "resource_attributes": ["CE"], "default": "T2_XX"},
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
    assert (slots.partitions, slots.resource_attributes, slots.group) == ((("all", "Cpus > 0"),), ("CE",), ("Grp",))
    assert config.slot_reading(with_class_attributes=True).extra_attributes == ("Arch", "CPUModel")
    jobs = config.job_reading()
    assert (jobs.user, jobs.qos, jobs.group) == (
        ("x509UserProxyVOName",),
        ("JobQOS",),
        ("AcctGroup", "AccountingGroup"),
    )
    assert (jobs.speed_attribute, jobs.extra_attributes, jobs.site_default) == ("HEPSPEC", ("ExitBySignal",), "T2_XX")
    assert jobs.resource_attributes == ("CE",)
