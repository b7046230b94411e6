"""The service's flush says which records the store held already (issue 39, point 5): a history
read again (a backfill) is not reported as new records."""

from __future__ import annotations

from pathlib import Path

from collector.outbox import Outbox
from probes.sources.checkpoints import checkpoint_key

from .conftest import fake_service


def test_a_flush_after_a_backfill_says_the_jobs_were_stored_already(tmp_path: Path, condor25: Path) -> None:
    state = tmp_path / "state"
    service = fake_service(state, condor25, f"sqlite:///{state / 'fairacct.sqlite'}")
    service.run_job("snapshot")
    assert service.run_job("history") == "42 new jobs"
    first = service.run_job("flush")
    # condor25's dump: 2 slots, 6 allocations, 3 fairness buckets and 42 jobs, all new to the store
    assert first == "sent 53 records (6 allocation, 3 fairness, 42 job, 2 slot; 53 new, 0 already stored), 0 waiting"

    with Outbox(state / "outbox.sqlite") as outbox:  # as `probe checkpoints --reset vm` does
        outbox.forget_checkpoint(checkpoint_key("vm"))
    assert service.run_job("history") == "42 new jobs"  # read again
    assert service.run_job("flush") == "sent 42 records (42 job; 0 new, 42 already stored), 0 waiting"
