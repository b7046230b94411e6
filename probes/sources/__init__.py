"""Where ads come from: files written by HTCondor's tools (and, later, a live pool).

Every source produces the same tables (slots, allocations, idle, jobs) in HTCondor's units.
"""
