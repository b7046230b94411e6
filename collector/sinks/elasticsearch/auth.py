"""Credentials and TLS for the cluster: secrets read from files or the environment, never
taken as literals, never logged, masked in ``repr``."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from collector.errors import ConfigError

__all__ = ["Auth", "Secret", "read_auth", "read_secret", "tls_options"]

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class Secret:
    """A secret that never prints: ``repr`` and ``str`` show ``***``."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "'***'"

    __str__ = __repr__


@dataclass(frozen=True)
class Auth:
    api_key: Secret | None = None
    username: str | None = None
    password: Secret | None = None
    ca_certs: str | None = None
    description: str = "none"


def read_secret(what: str, path: str | os.PathLike[str] | None, env: str | None) -> tuple[Secret, str] | None:
    """The secret in file ``path`` or in environment variable ``env`` (at most one given), and
    where it came from; None if neither is given. Errors never quote the secret."""
    if path is not None and env is not None:
        raise ConfigError(f"give {what}_file or {what}_env, not both")
    if path is not None:
        try:
            value = Path(path).read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise ConfigError(f"{what}_file: cannot read {os.fspath(path)!r} ({exc.strerror})") from exc
        source = f"file {os.fspath(path)}"
    elif env is not None:
        if not _ENV_NAME.fullmatch(env):
            # Likely the secret itself pasted in; do not echo it.
            raise ConfigError(
                f"{what}_env must be the name of an environment variable (letters, digits, '_'), not its value"
            )
        if env not in os.environ:
            raise ConfigError(f"{what}_env: the environment variable {env} is not set")
        value = os.environ[env].strip()
        source = f"env {env}"
    else:
        return None
    if not value:
        raise ConfigError(f"{what}_{'file' if path is not None else 'env'}: the {what} in {source} is empty")
    return Secret(value), source


def read_auth(
    *,
    https: bool,
    api_key_file: str | os.PathLike[str] | None,
    api_key_env: str | None,
    username: str | None,
    password_file: str | os.PathLike[str] | None,
    password_env: str | None,
    ca_certs_file: str | os.PathLike[str] | None,
    ca_certs_env: str | None,
) -> Auth:
    api_key = read_secret("api_key", api_key_file, api_key_env)
    password = read_secret("password", password_file, password_env)
    if api_key and (username or password):
        raise ConfigError(
            "give an API key (api_key_file or api_key_env) or basic auth (username and a password), not both"
        )
    if password and not username:
        raise ConfigError("password_file/password_env needs a username")
    if username and not password:
        raise ConfigError(f"username {username!r} needs a password: give password_file or password_env")
    if ca_certs_file is not None and ca_certs_env is not None:
        raise ConfigError("give ca_certs_file or ca_certs_env, not both")
    ca_certs = None
    if ca_certs_env is not None:
        if not _ENV_NAME.fullmatch(ca_certs_env):
            raise ConfigError(f"ca_certs_env must be the name of an environment variable, got {ca_certs_env!r}")
        if ca_certs_env not in os.environ:
            raise ConfigError(
                f"ca_certs_env: the environment variable {ca_certs_env} (the path of a CA bundle) is not set"
            )
        ca_certs = os.environ[ca_certs_env]
    elif ca_certs_file is not None:
        ca_certs = os.fspath(ca_certs_file)
    if ca_certs is not None:
        if not https:
            raise ConfigError("a CA bundle (ca_certs_file or ca_certs_env) is for https:// URLs only")
        if not Path(ca_certs).is_file():
            raise ConfigError(f"ca_certs: the CA bundle {ca_certs!r} is not a file")

    parts = []
    if api_key:
        parts.append(f"api_key=*** ({api_key[1]})")
    if username and password:
        parts.append(f"basic username={username!r} password=*** ({password[1]})")
    if ca_certs:
        parts.append(f"ca_certs={ca_certs}")
    return Auth(
        api_key=api_key[0] if api_key else None,
        username=username,
        password=password[0] if password else None,
        ca_certs=ca_certs,
        description="; ".join(parts) or "none",
    )


# -- the two flavours ---------------------------------------------------------------------------


def tls_options(url: str, verify_certs: bool, auth: Auth) -> dict[str, Any]:
    """The client options for TLS, the same in both flavours: none over plain HTTP."""
    if not url.startswith("https://"):
        return {}
    options: dict[str, Any] = {"verify_certs": verify_certs}
    if auth.ca_certs is not None:
        options["ca_certs"] = auth.ca_certs
    return options
