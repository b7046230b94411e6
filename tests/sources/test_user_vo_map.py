"""Gratia's user-vo-map for jobs and bills that carry no project (issue 25 item 8)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from collector.errors import ConfigError
from probes.config import parse_config
from probes.pipeline.reading import read_sources
from probes.sources.user_vo_map import fill_projects, read_user_vo_map

MAP = """\
#User-VO map
# #comment line, format of each regular line line is: account vo
# Next 2 lines with VO names, same order, all lowercase, with case (lines starting with #voi, #VOc)
#voi cms atlas osg
#VOc CMS ATLAS OSG
uscms01 cms
usatlas1 atlas

condorpool osg
"""


def test_the_map_reads_as_gratia_reads_it(tmp_path: Path) -> None:
    path = tmp_path / "user-vo-map"
    path.write_text(MAP)
    assert read_user_vo_map(path) == {"uscms01": "CMS", "usatlas1": "ATLAS", "condorpool": "OSG"}


def test_a_bad_line_is_named(tmp_path: Path) -> None:
    path = tmp_path / "user-vo-map"
    path.write_text("uscms01 cms\nalice bob carol\n")
    with pytest.raises(ConfigError, match=r"user-vo-map line 2: expected 'account vo', got 'alice bob carol'"):
        read_user_vo_map(path)


def test_only_missing_projects_are_filled_by_user_then_account() -> None:
    table = pd.DataFrame(
        {
            "user": ["uscms01", "alice", "bob", None],
            "submitter": ["uscms01@pool", "group_x.alice@pool", "bob@pool", "usatlas1@pool"],
            "project": [None, "Fusion", None, None],
        }
    )
    filled = fill_projects(table, {"uscms01": "CMS", "usatlas1": "ATLAS"})
    assert [None if pd.isna(p) else p for p in filled["project"]] == ["CMS", "Fusion", None, "ATLAS"]
    assert [None if pd.isna(p) else p for p in table["project"]] == [None, "Fusion", None, None]  # not in place


def test_a_real_pools_jobs_and_bills_get_their_vo(condor25: Path, tmp_path: Path) -> None:
    raw = {
        "sources": {"status_files": [str(condor25 / "status.ads")], "history": [str(condor25 / "history.ads")]},
    }
    plain = read_sources(parse_config(raw))
    assert plain.jobs is not None and plain.snapshot is not None
    users = sorted(set(plain.jobs.loc[plain.jobs["project"].isna(), "user"].dropna()))
    assert users, "the pool's history has jobs without a project"
    path = tmp_path / "user-vo-map"
    path.write_text(f"#voi vo1\n#VOc VO1\n{users[0]} vo1\n")
    mapped = read_sources(parse_config({**raw, "credentials": {"user_vo_map": str(path)}}))
    assert mapped.jobs is not None and mapped.snapshot is not None
    was = plain.jobs["project"].isna() & (plain.jobs["user"] == users[0])
    assert was.sum() > 0 and (mapped.jobs.loc[was, "project"] == "VO1").all()
    pd.testing.assert_series_equal(mapped.jobs.loc[~was, "project"], plain.jobs.loc[~was, "project"])
    bills = plain.snapshot.allocations
    billed = bills["project"].isna() & (bills["user"] == users[0])
    assert (mapped.snapshot.allocations.loc[billed, "project"] == "VO1").all()
