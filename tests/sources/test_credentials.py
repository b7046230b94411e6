"""One name per user: jobs, allocations and idle demand name a user by the account alone."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from probes.sources.credentials import account_name, account_names
from probes.sources.history import read_history
from probes.sources.queue import read_idle
from probes.sources.status import read_status


def test_the_account_of_each_spelling_htcondor_uses() -> None:
    assert account_name("alice") == "alice"  # Owner
    assert account_name("alice@cs.wisc.edu") == "alice"  # User, RemoteOwner
    # RemoteUser of a job in an accounting group: the submitter the negotiator charges
    assert account_name("group_cms.prod.alice@pool", "group_cms.prod.alice@pool") == "alice"
    # a user name with a dot outside any group keeps it: only the group's own prefix is dropped
    assert account_name("john.smith@pool") == "john.smith"
    assert account_name("john.smith@pool", "group_atlas.john.smith") == "john.smith"
    assert account_name(None) is None and account_name("@pool") is None
    names = np.array(["a@x", None, "group_g.b@x", "a@x"], dtype=object)
    groups = np.array([None, None, "group_g.b", None], dtype=object)
    assert account_names(names, groups).tolist() == ["a", None, "b", "a"]
    assert account_names(names).tolist() == ["a", None, "group_g.b", "a"]


def test_one_pool_names_its_user_the_same_in_every_table(condor25: Path) -> None:
    """condor25's jobs carry Owner = "condoruser", User = "condoruser@localpool"; its slots
    RemoteUser/RemoteOwner = "condoruser@localpool" (../shared/fixtures/README.md)."""
    jobs, _ = read_history([condor25 / "history.ads"])
    status, _ = read_status([condor25 / "status.ads"])
    idle, _ = read_idle([condor25 / "queue.ads"])
    assert set(jobs["user"].dropna()) == {"condoruser"}
    assert set(status.allocations["user"].dropna()) == {"condoruser"}
    assert set(idle["users"]) == {"condoruser"}
