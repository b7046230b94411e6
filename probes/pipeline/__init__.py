"""From tables to records: the configuration meets the math.

- :mod:`~probes.pipeline.overhead`: a snapshot's accounting, once (true overhead, histogram,
  idle-demand cross-check, bills); :mod:`~probes.pipeline.matching`: its exact cross-check;
- :mod:`~probes.pipeline.usage`: penalty and fairshare reports (machines, pricing, FS files);
- :mod:`~probes.pipeline.records`: every record kind, built in one place;
- :mod:`~probes.pipeline.reading`: what a cycle reads (a snapshot, a history), from files or a
  live pool;
- :mod:`~probes.pipeline.cycle`: the cycle's steps (snapshot, history, fairshare windows), the
  outbox commit and the delivery, run by ``probe once`` and the service alike.
"""
