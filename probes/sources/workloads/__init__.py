"""Workload logs of other schedulers: SWF (and MetaCentrum's variant) and Alea machines files,
read into the jobs and machines tables the penalty and fairshare are computed on."""
