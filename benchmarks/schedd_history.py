"""A schedd's history file made from a ``condor_history -long`` dump, in the order a test chooses.

A schedd appends each job to its history file (the ``HISTORY`` parameter) when the job leaves
the queue, as its ad followed by a banner line::

    ...ad lines...
    *** Offset = 3128 ClusterId = 1 ProcId = 0 Owner = "condorpool" CompletionDate = 1795683153 CurrentTime = 1795683153

(``Offset`` is where the banner before it starts, 0 for the first: a chain that a backward reader
can follow; ``CurrentTime`` is when it was written; as HTCondor 25.0.13's schedd writes it). So
the file is in queue-exit order, which is not end-time order: a removed job, a job held and then
removed, or one whose output took long to transfer is written after jobs that ended later.
:func:`write_history` writes the ads of a dump in that form, in any order, so that a real schedd
serves them; :func:`realistic_order` is the order of a real schedd (mostly by end time, a few
per cent of the jobs late by seconds to hours), and the generated history's own order
(``benchmarks/generate_history.py``, whose neighbours are out of order by up to two days) is
far less ordered than that.

Usage: ``python benchmarks/schedd_history.py DUMP OUT [--realistic] [--seed S]``
"""

from __future__ import annotations

import argparse
import mmap
import os
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = ["Dump", "append_job", "banner", "read_dump", "realistic_order", "write_history"]

_INT = {name: re.compile(rb"^" + name.encode() + rb" = (-?\d+)$", re.MULTILINE) for name in
        ("ClusterId", "ProcId", "CompletionDate", "EnteredCurrentStatus")}  # fmt: skip
_OWNER = re.compile(rb'^Owner = "([^"\n]*)"$', re.MULTILINE)


@dataclass
class Dump:
    """Where each ad of a ``-long`` dump is (byte ranges, without the blank line after), and
    what its banner needs: cluster, proc, owner, completion date and end time."""

    starts: np.ndarray
    ends: np.ndarray
    cluster: np.ndarray
    proc: np.ndarray
    owner: list[str]
    completion: np.ndarray
    end_time: np.ndarray  # CompletionDate when positive, else EnteredCurrentStatus (a removed job)

    def __len__(self) -> int:
        return len(self.starts)


def read_dump(path: str | os.PathLike[str]) -> Dump:
    """Index the ads of a ``condor_history -long`` dump (blank lines between ads)."""
    starts, ends, cluster, proc, owner, completion, entered = [], [], [], [], [], [], []
    with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
        at, size = 0, len(data)
        while at < size:
            stop = data.find(b"\n\n", at)
            stop = size if stop < 0 else stop + 1
            ad = data[at:stop]
            if ad.strip():
                starts.append(at)
                ends.append(stop)
                cluster.append(_int(ad, "ClusterId"))
                proc.append(_int(ad, "ProcId"))
                found = _OWNER.search(ad)
                owner.append(found.group(1).decode() if found else "")
                completion.append(_int(ad, "CompletionDate"))
                entered.append(_int(ad, "EnteredCurrentStatus"))
            at = stop + 1
    done = np.array(completion, dtype=np.int64)
    return Dump(
        np.array(starts, dtype=np.int64), np.array(ends, dtype=np.int64),
        np.array(cluster, dtype=np.int64), np.array(proc, dtype=np.int64), owner, done,
        np.where(done > 0, done, np.array(entered, dtype=np.int64)),
    )  # fmt: skip


def _int(ad: bytes, name: str) -> int:
    found = _INT[name].search(ad)
    return int(found.group(1)) if found else 0


def realistic_order(dump: Dump, seed: int = 0, late_share: float = 0.03, late_max_s: float = 6 * 3600) -> np.ndarray:
    """A real schedd's order of the dump's ads: by end time, except ``late_share`` of the jobs,
    each written late by 1 s to ``late_max_s`` (log-uniform: most by seconds or minutes)."""
    rng = np.random.default_rng(seed)
    late = rng.random(len(dump)) < late_share
    delay = np.where(late, np.exp(rng.uniform(0, np.log(late_max_s), len(dump))), 0.0)
    return np.lexsort((np.arange(len(dump)), dump.end_time + delay))


def banner(offset: int, cluster: int, proc: int, owner: str, completion: int, written: int) -> str:
    """The line a schedd writes after a job's ad in its history file (``offset``: where the banner
    before it starts)."""
    return (
        f'*** Offset = {offset} ClusterId = {cluster} ProcId = {proc} Owner = "{owner}" '
        f"CompletionDate = {completion} CurrentTime = {written}\n"
    )


def write_history(dump_path: str | os.PathLike[str], out: str | os.PathLike[str], order: np.ndarray | None = None,
                  dump: Dump | None = None) -> int:  # fmt: skip
    """Write the ads of a ``-long`` dump to ``out`` as a schedd's history file, in ``order``
    (positions in the dump; default: the dump's own order). Returns the number of ads.

    ``out`` is written over, not replaced: a schedd keeps its history file open (appending), so a
    new file in its place would never see the jobs it finishes later."""
    dump = read_dump(dump_path) if dump is None else dump
    order = np.arange(len(dump)) if order is None else np.asarray(order)
    written, previous = 0, 0  # bytes written, where the last banner starts
    with (
        open(dump_path, "rb") as fh,
        mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data,
        open(out, "wb") as dst,
    ):
        for i in order.tolist():
            ad = data[dump.starts[i] : dump.ends[i]]
            if not ad.endswith(b"\n"):
                ad += b"\n"
            line = banner(previous, int(dump.cluster[i]), int(dump.proc[i]), dump.owner[i],
                          int(dump.completion[i]), int(dump.end_time[i])).encode()  # fmt: skip
            dst.write(ad)
            dst.write(line)
            previous = written + len(ad)
            written = previous + len(line)
    return len(order)


def append_job(history: str | os.PathLike[str], ad: str, cluster: int, proc: int, owner: str, completion: int,
               written: int) -> None:  # fmt: skip
    """Append one job to a history file as its schedd does: its ad (``Name = value`` lines), then
    its banner, chained to the last one."""
    with open(history, "r+b") as fh:
        size = fh.seek(0, os.SEEK_END)
        start = fh.seek(max(0, size - (1 << 16)))
        tail = fh.read()
        at = tail.rfind(b"\n***")  # the last banner: a history file ends with one
        if at >= 0:
            previous = start + at + 1
        elif start == 0 and (tail.startswith(b"***") or not tail):
            previous = 0
        else:
            raise ValueError(f"{history}: no banner in its last 64 KiB; not a history file")
        line = banner(previous, cluster, proc, owner, completion, written)
        fh.write((ad if ad.endswith("\n") else ad + "\n").encode() + line.encode())


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dump", type=Path, help="a condor_history -long dump")
    parser.add_argument("out", type=Path, help="the history file to write (over, if it exists)")
    parser.add_argument("--realistic", action="store_true", help="a real schedd's order (else the dump's)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    dump = read_dump(args.dump)
    order = realistic_order(dump, args.seed) if args.realistic else None
    n = write_history(args.dump, args.out, order, dump)
    print(f"{args.out}: {n:,} ads", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
