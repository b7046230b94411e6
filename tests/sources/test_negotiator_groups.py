"""A submitter's group as the negotiator charges it (probes/sources/negotiator_groups.py): the
rule of its accountant, by hand, as HTCondor 25.0.13 was measured to apply it with
``GROUP_NAMES = group_phys, group_phys.cms`` (see the module docstring)."""

from __future__ import annotations

import pandas as pd
import pytest

from probes.sources.negotiator_groups import NO_GROUP, accounting_groups, negotiator_group, with_negotiator_groups

GROUPS = {"group_phys": "group_phys", "group_phys.cms": "group_phys.cms"}


@pytest.mark.parametrize(
    ("submitter", "group"),
    [
        ("group_phys.cms.alice.smith@pool", "group_phys.cms"),  # a user with a dot: the deepest known group
        ("group_phys.cms.alice@pool", "group_phys.cms"),
        ("group_phys.dan@pool", "group_phys"),
        ("group_phys.zzz.eve@pool", "group_phys"),  # an unknown subgroup: its known parent
        ("Group_Phys.CMS.eve@pool", "group_phys.cms"),  # case-insensitive, spelled as configured
        ("group_other.bob@pool", NO_GROUP),  # a group the negotiator does not know
        ("condorpool@pool", NO_GROUP),  # no group at all
        ("group_phys.cms@pool", "group_phys"),  # the last component is the user's, even here
        ("group_phys", NO_GROUP),  # not a submitter's name
    ],
)
def test_a_submitter_is_in_the_deepest_group_its_name_walks_down_to(submitter: str, group: str) -> None:
    assert negotiator_group(submitter, GROUPS) == group


def test_the_groups_are_the_accounting_ads_that_are_groups() -> None:
    ads = [
        {"Name": "<none>", "IsAccountingGroup": True},
        {"Name": "group_phys", "IsAccountingGroup": True},
        {"Name": "group_phys.cms", "IsAccountingGroup": True},
        {"Name": "group_phys.cms.alice@pool", "IsAccountingGroup": False},
        {"IsAccountingGroup": True},  # no name: nothing to know
    ]
    assert accounting_groups(ads) == {"group_phys", "group_phys.cms"}


def test_a_table_takes_the_negotiators_groups_and_keeps_its_own_when_they_are_unknown() -> None:
    table = pd.DataFrame(
        {
            "submitter": ["group_phys.cms.alice.smith@pool", "group_other.bob@pool", "condorpool@pool", None],
            "group": ["group_phys.cms", "group_other", None, "group_x"],
            "cpus": [1, 2, 3, 4],
        }
    )
    before = table.copy()
    named = with_negotiator_groups(table, frozenset(GROUPS))
    assert named["group"].tolist() == ["group_phys.cms", NO_GROUP, NO_GROUP, "group_x"]  # no submitter: as it was
    assert named["cpus"].tolist() == [1, 2, 3, 4]
    assert table.equals(before)  # a new table
    assert with_negotiator_groups(table, None) is table  # unknown (a file-based probe): as declared
    assert with_negotiator_groups(table, frozenset())["group"].tolist()[:3] == [NO_GROUP] * 3  # no GROUP_NAMES
