"""Where ads come from, and the tables they become.

Files written by HTCondor's tools and a live pool (through htcondor2) produce the same tables
(slots, allocations, idle, jobs) in HTCondor's units; workload logs (SWF, Alea machines files)
produce the jobs and machines the penalty is priced with.

- :mod:`~probes.sources.inputs`: opening an input and telling it is not what was expected;
- :mod:`~probes.sources.classad`: reading ClassAds as columns, fast and exactly;
- :mod:`~probes.sources.status`, :mod:`~probes.sources.queue`, :mod:`~probes.sources.history`:
  the slots and allocations, idle and jobs tables;
- :mod:`~probes.sources.live`: the same from a running pool;
- :mod:`~probes.sources.workloads`: SWF logs and Alea machines files;
- :mod:`~probes.sources.checkpoints`: every rule of where a source was read up to;
- :mod:`~probes.sources.report`: what reading found besides values, and the quarantine;
- :mod:`~probes.sources.settings`: the few settings the readers take.
"""
