"""``fairacct fairness``: demand against allocation, Jain's index and starvation per user
(Sedighi et al. 2014), from a status dump and the queue; the records, with --store-records."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from probes.cli.common import EXIT_OK, print_doc, probe_name, read
from probes.cli.options import add_options

if TYPE_CHECKING:
    from probes.config import ProbeConfig

__all__ = ["HELP", "add_arguments", "run"]

HELP = "demand vs allocation, Jain's index and starvation per user (Sedighi et al. 2014)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_options(parser, "--status-file", "--idle-file", "--store")
    parser.add_argument("--bucket", type=float, metavar="SECONDS", help="time bucket (default: fairness.bucket_s)")
    parser.add_argument(
        "--fraction",
        type=float,
        help="starved at or below this fraction of an equal share (default: fairness.fraction)",
    )
    parser.add_argument(
        "--store-records",
        action="store_true",
        help="also store the fairness records, delivered as `probe once` delivers",
    )


def run(args: argparse.Namespace, config: ProbeConfig) -> int:
    """Seed 002 (see probes.pipeline.analytics)."""
    from probes.cli import analytics_views
    from probes.pipeline import analytics
    from probes.pipeline.lane import Batch, RecordLane
    from probes.pipeline.records import fairness_docs
    from probes.pipeline.verdict import judge

    result = read(args, config, "status_files", "idle_files", option="--status-file")
    assert result.snapshot is not None
    bucket_s = config.fairness.bucket_s if args.bucket is None else args.bucket
    fraction = config.fairness.fraction if args.fraction is None else args.fraction
    fair = analytics.fairness_report(result.snapshot.allocations, result.idle, bucket_s=bucket_s, fraction=fraction)
    status = EXIT_OK
    if args.store_records:
        docs = fairness_docs(fair.shares, fair.buckets, pool=config.pool.name, probe=probe_name())
        lane = RecordLane(config)  # the probe's one way to the store: templates checked, [upstream] sent too
        with lane.open() as outbox:
            lane.commit(outbox, [Batch(docs)])
            delivered = judge(lane.deliver(outbox))  # what the store did not take waits, and is said
        for reason in delivered.reasons:
            print(f"fairacct: {reason.text}", file=sys.stderr)
        status = delivered.exit_status  # as `probe once`'s: 3 while records wait, 1 when refused for good
    print_doc(args, analytics_views.fairness_json(fair), analytics_views.fairness_sections(fair))
    return status
