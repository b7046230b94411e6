"""Whether what a configuration names can be reached: ``fairacct config check --connect``.

Each thing is tried as the probe (or the collector) would use it, storing nothing, within one
deadline (``timeout_s``): the pool's collectors (each group of replicas, by an htcondor2
``locateAll`` of the schedds, in a worker process killed at the deadline, as every live query is), the store
(:meth:`~collector.sinks.base.Sink.ping`: the embedded store's write lock, Elasticsearch's
cluster with the credentials, a fairacct collector's ``/healthz`` and the probe's token, a
Gratia collector's answer) and, in a collector's configuration, the collector's own store. Each
gives one :class:`Reached`: what was tried, and ``ok`` or the one-line reason it failed.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from collector.errors import ElasticsearchError, FairacctError

if TYPE_CHECKING:
    from collector.settings import SinkSettings
    from probes.config import ProbeConfig

__all__ = ["Reached", "collector_only", "reach"]

_CREDENTIALS_HINT = "; check {key}.username with password_file or password_env, or {key}.api_key_file or api_key_env"
_PRIVILEGE_HINT = "; the credentials of {key} are accepted, without the privilege this needs"


@dataclass(frozen=True)
class Reached:
    """One thing tried: what (``name``), whether it answered as it should (``ok``), and what it
    said or why it failed (``said``, one line)."""

    name: str
    ok: bool
    said: str


def reach(config: ProbeConfig, *, timeout_s: float) -> list[Reached]:
    """Try what ``config`` names, each within ``timeout_s`` seconds: the pool's collectors when
    ``sources.live`` is on, the probe's store unless the file is a collector's alone (it sets
    no section but ``[collector]`` and ``[log]``: the probe's default store is no concern of a
    collector's host), and the collector's store when the file configures a collector service
    (``[collector.store]``)."""
    tried = _pool(config, timeout_s) if config.sources.live else []
    if not collector_only(config):
        tried.append(_store("store", config.store, config.probe.state_dir, timeout_s))
    if "store" in config.collector.model_fields_set:
        tried.append(_store("collector.store", config.collector.store, config.collector.state_dir, timeout_s))
    return tried


def collector_only(config: ProbeConfig) -> bool:
    """Whether the file configures a collector service alone: ``[collector]``, and ``[log]`` at most."""
    return "collector" in config.model_fields_set and config.model_fields_set <= {"collector", "log"}


def _pool(config: ProbeConfig, timeout_s: float) -> list[Reached]:
    """Each group of the pool's collector replicas, asked for the schedds it knows (as a history
    pass asks first), the first replica to answer for its group."""
    import htcondor2

    from probes.sources.live.calls import Calls, collector_name, replica_groups

    pool = config.pool.model_copy(update={"timeout_s": min(timeout_s, config.pool.timeout_s)})
    tried = []
    calls = Calls(pool)
    try:
        for group in replica_groups(pool.collectors):
            name = "pool collector " + ", ".join(collector_name(a) for a in group)
            try:
                ads, answered = calls.failover(
                    group, "locate schedds", lambda c: c.locateAll(htcondor2.DaemonType.Schedd)
                )
            except FairacctError as exc:
                tried.append(Reached(name, False, str(exc)))
                continue
            names = sorted({str(ad.get("Name", "?")) for ad in ads})
            said = f"{answered} answered, {len(names)} schedd(s) known" + (f": {', '.join(names)}" if names else "")
            if unknown := sorted(set(pool.schedds) - set(names)):
                said += f"; not among them (pool.schedds): {', '.join(unknown)}"
            tried.append(Reached(name, True, said))
    finally:
        if calls.bindings is not None:
            calls.bindings.close()
    return tried


def _store(key: str, store: SinkSettings, base: Path, timeout_s: float) -> Reached:
    """The store of ``store`` (``key`` names its section), pinged, its index templates checked;
    an embedded store not made yet: its directory writable (the first write makes it, not this)."""
    from collector.sinks import Opening, describe_url, open_store, sqlite_path

    name = f"{key} {describe_url(store.url, base)}"
    path = sqlite_path(store.url, base)
    try:
        if path is not None and not path.exists():
            return Reached(name, *_directory_writable(path))
        sink = open_store(store, Opening(base, timeout_s=timeout_s))
        try:
            said = sink.ping()
            check = sink.check_templates()
        finally:
            sink.close()
    except ElasticsearchError as exc:
        hint = {401: _CREDENTIALS_HINT, 403: _PRIVILEGE_HINT}.get(exc.status or 0, "").format(key=key)
        return Reached(name, False, f"{exc}{hint}")
    except FairacctError as exc:
        return Reached(name, False, str(exc))
    if not check.ok and not store.install_templates:
        missing = ", ".join([*check.missing, *check.differ])
        return Reached(name, False, f"{said}; index templates missing or outdated ({missing}): run `fairacct "
                                    "mappings install` (or set install_templates = true)")  # fmt: skip
    return Reached(name, True, said)


def _directory_writable(path: Path) -> tuple[bool, str]:
    """Whether the embedded store ``path``, not made yet, can be made: the nearest directory of
    it that exists is writable by this user."""
    folder = path.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if folder.is_dir() and os.access(folder, os.W_OK | os.X_OK):
        return True, f"not made yet; {folder} is writable (the first write makes it)"
    return False, f"not made yet, and {folder} is not writable by user id {os.geteuid()}"
