"""The directory queue APEL's ``ssmsend`` sends from: a ``dirq`` QueueSimple, one file per
message, which ssmsend locks, sends and removes.

A month re-sent replaces the month: APEL keys summaries by site and month (and sync records
too), so the repository replaces what it held with what it gets. Here likewise, before a
message is added, the messages still queued (not yet sent) of the same header, site and
month are removed (the site as APEL's server tells sites apart: its collation), so that a second
run leaves exactly one month's messages, never two. A
message ssmsend holds locked while it sends is left to it (APEL replaces it by the new one).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field

from dirq.QueueSimple import QueueSimple

from collector.apel.keys import general_ci_key
from collector.errors import ConfigError

__all__ = ["Delivered", "deliver", "message_key"]


@dataclass
class Delivered:
    """What :func:`deliver` did: the names of the messages added, and of those replaced."""

    added: list[str] = field(default_factory=list)
    replaced: list[str] = field(default_factory=list)
    busy: list[str] = field(default_factory=list)  # locked by ssmsend: left to it


def message_key(text: str) -> tuple[str, str, int, int] | None:
    """(header, Site, Year, Month) of a message's first record, the site under APEL's collation
    (:func:`collector.apel.keys.general_ci_key`); None when it has none (not ours)."""
    lines = text.splitlines()
    if not lines:
        return None
    found: dict[str, str] = {}
    for line in lines[1:]:
        if line.strip() == "%%":
            break
        name, _, value = line.partition(":")
        found[name.strip()] = value.strip()
    try:
        return lines[0].strip(), general_ci_key(found["Site"]), int(found["Year"]), int(found["Month"])
    except (KeyError, ValueError):
        return None


def deliver(directory: str | os.PathLike[str], messages: Sequence[str]) -> Delivered:
    """Put ``messages`` into the directory queue at ``directory`` (made if absent), first
    removing the queued messages of the same header, site and month."""
    try:
        queue = QueueSimple(os.fspath(directory))
    except OSError as exc:
        raise ConfigError(f"{os.fspath(directory)}: cannot open the outgoing directory queue ({exc})") from exc
    keys = {message_key(m) for m in messages} - {None}
    done = Delivered()
    for name in list(queue):
        if not queue.lock(name):  # ssmsend is sending it, or it went meanwhile
            done.busy.append(name)
            continue
        try:
            key = message_key(_text(queue.get(name)))
        except OSError:
            queue.unlock(name)
            continue
        if key in keys:
            queue.remove(name)
            done.replaced.append(name)
        else:
            queue.unlock(name)
    for text in messages:
        done.added.append(queue.add(text))
    return done


def _text(data: str | bytes) -> str:
    return data.decode("utf-8", "replace") if isinstance(data, bytes) else data
