"""HTCondor's ClassAd functions, in place before fairacct parses an ad or an expression.

``stringListMember`` and the other ``stringList*`` functions, ``splitUserName``, ``splitSlotName``
and a few more are HTCondor's, not the ClassAd library's: HTCondor's configuration registers them,
and it runs when ``htcondor2`` is first imported. Every HTCondor daemon and tool evaluates with
them; a job's ``Requirements`` is full of ``stringListMember(TARGET.GLIDEIN_Site, DESIRED_Sites)``
(false without a target: an undefined item).

A function call is bound when its expression is parsed: one parsed before they are registered is a
call of an unknown function, error, for the expression's life. classad2 imports ``htcondor2``
itself, but only once it has parsed its first ``-long`` ad, and never for an expression
(``classad2.ExprTree``, what a ``-json`` dump's expressions become): left to it, a process's first
``-long`` ad evaluated such a ``Requirements`` to error and every later one to false, a ``-json``
dump read first was error throughout, and so was the expression worker's first ad (a process of its
own); a test comparing the reader with classad2 passed or failed by what its pytest worker had read
before. So every place that parses an ad or an expression to evaluate it calls
:func:`use_condor_functions` first; a command that reads no ad still never imports the bindings.
"""

from __future__ import annotations

__all__ = ["use_condor_functions"]


def use_condor_functions() -> None:
    """Register HTCondor's ClassAd functions in this process, before an ad or expression to be
    evaluated is parsed (the first call imports ``htcondor2``; later calls cost a dictionary
    lookup)."""
    import htcondor2  # noqa: F401 - the import is the point: it runs HTCondor's configuration
