"""fairacct as an HTCondor component: the pool's own configuration, read as HTCondor's tools read
it (``htcondor2.param``, the file ``CONDOR_CONFIG`` names or HTCondor's own search), so that a
fairacct TOML file holds only what is fairacct's own.

``fairacct probe run --condor`` (what the configuration snippet fairacct ships gives
condor_master to start) and ``fairacct config check --condor`` take from the pool:

=====================================  ===============================================================
fairacct key                           from the pool's configuration
=====================================  ===============================================================
``sources.live``                       true: the pool this host belongs to
``pool.collectors``                    ``COLLECTOR_HOST`` (its replicas, comma-separated, one entry)
``pool.update_interval_s``             ``STARTD.UPDATE_INTERVAL``, else ``UPDATE_INTERVAL`` (300 s)
``pool.max_interval_s``                ``CLASSAD_LIFETIME`` (900 s): how long the collector keeps the
                                       ads of a node gone silent, at least ``pool.interval_s``
``pool.condor_config``                 ``CONDOR_CONFIG``, when it is set
``pool.history_files``                 ``HISTORY`` of this host's schedd (``SCHEDD`` in ``DAEMON_LIST``), by
                                       its name (``SCHEDD_NAME``, ``FULL_HOSTNAME``): read from its files
``probe.state_dir``                    ``FAIRACCT_STATE_DIR``, else ``$(SPOOL)/fairacct``
``log.file``                           ``FAIRACCT_LOG``, else ``$(LOG)/FairacctLog``
=====================================  ===============================================================

and fairacct's own file, ``FAIRACCT_CONFIG`` (none by default: every key at its default), when
the command line gives no ``--config``. A key that file sets wins over the pool's (an operator's
explicit choice); a key it leaves out is the pool's, never a default that repeats it wrongly (a
``pool.update_interval_s`` of 300 s on a pool whose startds update every 10 s billed a dead startd's
slots for minutes).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from collector.errors import ConfigError

__all__ = ["DEFAULT_CLASSAD_LIFETIME_S", "DEFAULT_UPDATE_INTERVAL_S", "PoolConfiguration", "pool_configuration"]

DEFAULT_UPDATE_INTERVAL_S = 300.0
"""HTCondor's ``UPDATE_INTERVAL`` when the configuration says none (seconds)."""

DEFAULT_CLASSAD_LIFETIME_S = 900.0
"""HTCondor's ``CLASSAD_LIFETIME`` when the configuration says none (seconds)."""

_INTERVAL_S = 300.0  # pool.interval_s's default (probes/config/pool.py): a snapshot's cadence


@dataclass(frozen=True)
class PoolConfiguration:
    """What the pool's configuration says for fairacct: ``keys`` shaped as a TOML file's tables
    (``{"pool": {"update_interval_s": 10.0}, ...}``), the file fairacct's own configuration is in
    (``FAIRACCT_CONFIG``; None: none), and where each key came from (``said``: key -> knob)."""

    keys: dict[str, dict[str, Any]]
    config_file: str | None
    said: dict[str, str] = field(default_factory=dict)

    def under(self, raw: Mapping[str, Any]) -> dict[str, Any]:
        """``raw`` (a TOML file's tables) with the pool's keys where it sets none."""
        merged: dict[str, Any] = {k: dict(v) if isinstance(v, Mapping) else v for k, v in raw.items()}
        for table, values in self.keys.items():
            mine = merged.setdefault(table, {})
            if not isinstance(mine, dict):  # a TOML file's own error: parse_config words it
                continue
            for key, value in values.items():
                mine.setdefault(key, value)
        pool, own = merged.get("pool"), raw.get("pool")
        if isinstance(own, Mapping) and str(own.get("job_constraint", "")).strip() and "history_files" not in own:
            # a constraint is a query's: with one, the schedd is asked, not its files read
            assert isinstance(pool, dict)
            pool.pop("history_files", None)
        interval = pool.get("interval_s", _INTERVAL_S) if isinstance(pool, dict) else None
        if isinstance(interval, (int, float)) and not (isinstance(own, Mapping) and "max_interval_s" in own):
            # the collector's lifetime of an ad, but never less than a snapshot's cadence (the model's rule)
            assert isinstance(pool, dict)
            pool["max_interval_s"] = max(float(pool["max_interval_s"]), float(interval))
        return merged


def pool_configuration(condor_config: str | None = None) -> PoolConfiguration:
    """Read the pool's configuration: the file ``condor_config`` (default: ``CONDOR_CONFIG``, or
    HTCondor's own search when it is unset). A :class:`ConfigError` when HTCondor finds none."""
    if condor_config:
        os.environ["CONDOR_CONFIG"] = condor_config
    import htcondor2  # the bindings read CONDOR_CONFIG when imported: after it is set

    try:
        htcondor2.reload_config()
        param = htcondor2.param
        log, spool = param.get("LOG"), param.get("SPOOL")
    except Exception as exc:  # noqa: BLE001 - the bindings raise HTCondorException and plain errors alike
        raise ConfigError(f"the pool's configuration cannot be read ({exc})") from None
    if not log or not spool:
        raise ConfigError(
            "the pool's configuration names no LOG or SPOOL: is CONDOR_CONFIG this pool's (condor_config_val LOG)?"
        )
    said: dict[str, str] = {}

    def knob(key: str, *names: str) -> str | None:
        for name in names:
            value = param.get(name)
            if value not in (None, ""):
                said[key] = name
                return str(value)
        return None

    def seconds(key: str, default: float, *names: str) -> float:
        value = knob(key, *names)
        try:
            return float(value) if value is not None else default
        except ValueError:
            raise ConfigError(f"{names[-1]} = {value!r} in the pool's configuration: expected seconds") from None

    pool: dict[str, Any] = {
        "update_interval_s": seconds(
            "pool.update_interval_s", DEFAULT_UPDATE_INTERVAL_S, "STARTD.UPDATE_INTERVAL", "UPDATE_INTERVAL"
        ),
        "max_interval_s": seconds("pool.max_interval_s", DEFAULT_CLASSAD_LIFETIME_S, "CLASSAD_LIFETIME"),
    }
    if (collectors := knob("pool.collectors", "COLLECTOR_HOST")) is not None:
        pool["collectors"] = [collectors]
    if os.environ.get("CONDOR_CONFIG"):
        pool["condor_config"] = os.environ["CONDOR_CONFIG"]
        said["pool.condor_config"] = "CONDOR_CONFIG"
    if (history := _local_schedd_history(param)) is not None:
        pool["history_files"] = history
        said["pool.history_files"] = "HISTORY"
    state = knob("probe.state_dir", "FAIRACCT_STATE_DIR") or str(Path(spool) / "fairacct")
    log_file = knob("log.file", "FAIRACCT_LOG") or str(Path(log) / "FairacctLog")
    said.setdefault("probe.state_dir", "$(SPOOL)/fairacct")
    said.setdefault("log.file", "$(LOG)/FairacctLog")
    keys = {"sources": {"live": True}, "pool": pool, "probe": {"state_dir": state}, "log": {"file": log_file}}
    return PoolConfiguration(keys, knob("config", "FAIRACCT_CONFIG"), said)


def _local_schedd_history(param: Any) -> dict[str, str] | None:
    """``{schedd name: HISTORY}`` when this host runs a schedd (``SCHEDD`` in ``DAEMON_LIST``) whose
    history file the configuration names, once it exists: its history is then read from its files, not asked of it
    (``pool.history_files``). The name as HTCondor makes it: ``SCHEDD_NAME`` (with
    ``@FULL_HOSTNAME`` when it has no ``@``), else ``FULL_HOSTNAME``."""
    daemons = {d.strip().upper() for d in str(param.get("DAEMON_LIST") or "").replace(",", " ").split()}
    history, host = param.get("HISTORY"), param.get("FULL_HOSTNAME")
    if "SCHEDD" not in daemons or not history or not host or not Path(str(history)).is_absolute():
        return None
    if not Path(str(history)).is_file():  # no job has left its queue yet: the schedd is asked until then
        return None
    name = str(param.get("SCHEDD_NAME") or "")
    return {(name if "@" in name else f"{name}@{host}") if name else str(host): str(history)}
