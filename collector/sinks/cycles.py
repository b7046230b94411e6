"""A client library's exception, let go of without the cyclic garbage collector.

urllib3, elastic_transport and opensearch-py raise exceptions that sit in reference cycles with
the frames they were raised through: a frame keeps the exception in a local (urllib3's
``urlopen`` its ``new_e``, ``Retry.increment`` its ``error``, elastic_transport's node its
``err``) while the exception's traceback keeps that frame. Those frames hold the request's
body (the sink's and the client's encoding of it: two copies, 2.3 MB for a bulk of 1,000
records of 1 KB, each attempt), and only Python's cyclic garbage collector frees them. In a
long-lived process with a large heap (the collector service: its modules, the event loop, the
requests' records) its full passes are rare, each waiting until a quarter of the heap's
objects are new; so while a store refused or reset connections every attempt left its bodies
behind: the service grew by hundreds of MB an hour with 1 KB records, by GB a minute with
records of several MB (issue 54, point 3), and what a late pass freed was seldom given back to
the system. A store that
answers 503 made no such cycle (its error is built from an answer, not raised through
urllib3), hence the difference.

:func:`break_cycles` clears the locals of the frames such an exception went through once they
have finished, so that it and everything it held are freed as soon as the sink lets go of it,
by reference counting alone. Its traceback stays readable (files, lines, functions): only the
frames' variables go.
"""

from __future__ import annotations

import traceback
from collections.abc import Iterator
from typing import TypeVar

__all__ = ["break_cycles", "chained"]

E = TypeVar("E", bound=BaseException)


def break_cycles(exc: E) -> E:
    """``exc``, with the locals of the finished frames of its traceback cleared, and of every
    exception it was raised from or with (``__cause__``, ``__context__``, elastic_transport's
    ``errors``, urllib3's ``reason``, exceptions among its ``args``). Frames still running (the
    caller's) are left as they are. Call it in the ``except`` clause that translates ``exc``,
    before raising: ``raise SinkError(...) from break_cycles(exc)``."""
    for item in chained(exc):
        if item.__traceback__ is not None:
            traceback.clear_frames(item.__traceback__)  # a running frame raises RuntimeError: skipped
    return exc


def chained(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and every exception it was raised from or with, each once, at any depth:
    ``__cause__``, ``__context__``, elastic_transport's ``errors``, urllib3's ``reason``, and
    exceptions among ``args``."""
    seen: set[int] = set()
    todo: list[object] = [exc]
    while todo:
        item = todo.pop()
        if not isinstance(item, BaseException) or id(item) in seen:
            continue
        seen.add(id(item))
        yield item
        errors = getattr(item, "errors", ())
        todo += [item.__cause__, item.__context__, getattr(item, "reason", None), *item.args]
        todo += errors if isinstance(errors, (tuple, list)) else []
