"""fairacct's dashboards (the saved objects of ``mappings/kibana/*.ndjson``) and their
installation through the saved-objects import API of Kibana or OpenSearch Dashboards.

One ``POST <url>/api/saved_objects/_import?overwrite=true`` with the NDJSON as a multipart
file, and the XSRF header each flavour asks for (``kbn-xsrf`` / ``osd-xsrf``). Credentials
are the store's (an API key or basic auth, each secret from a file or an environment
variable, never a literal). Importing again replaces the objects: it is idempotent.
"""

from __future__ import annotations

import base64
import json
import ssl
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from collector.errors import ConfigError, SinkError
from collector.sinks.elasticsearch.auth import Auth
from mappings import DIRECTORY

__all__ = ["FLAVOURS", "Imported", "install_dashboards", "saved_objects"]

FLAVOURS = {"kibana": "kbn-xsrf", "opensearch": "osd-xsrf"}


@dataclass(frozen=True)
class Imported:
    """What the import API said: objects imported, and the errors per object (type/id -> reason)."""

    count: int
    errors: dict[str, str]


def saved_objects(directory: Path | None = None) -> list[dict[str, Any]]:
    """Every saved object of ``<directory>/kibana/*.ndjson`` (default: the installed mappings/),
    the last of the same type and id winning, as the import API does."""
    folder = (directory or DIRECTORY) / "kibana"
    found: dict[tuple[str, str], dict[str, Any]] = {}
    for path in sorted(folder.glob("*.ndjson")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except ValueError as exc:
                raise ConfigError(f"{path} line {number}: not a JSON object ({exc})") from exc
            found[(obj["type"], obj["id"])] = obj
    return list(found.values())


def _body(objects: list[dict[str, Any]]) -> tuple[bytes, str]:
    boundary = f"fairacct-{uuid.uuid4().hex}"
    ndjson = "".join(json.dumps(o, separators=(",", ":"), sort_keys=True) + "\n" for o in objects)
    body = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="fairacct.ndjson"\r\n'
        f"Content-Type: application/ndjson\r\n\r\n{ndjson}\r\n--{boundary}--\r\n"
    )
    return body.encode(), f"multipart/form-data; boundary={boundary}"


def install_dashboards(
    url: str, *, flavour: str = "kibana", auth: Auth | None = None, timeout_s: float = 60.0
) -> Imported:
    """Import every saved object into the Kibana or OpenSearch Dashboards at ``url``
    (``http(s)://HOST:PORT[/BASEPATH]``). A refusal or an unreachable server raises
    :class:`SinkError` naming the URL and the reason."""
    if flavour not in FLAVOURS:
        raise ConfigError(f"--flavour: expected one of {', '.join(FLAVOURS)}, got {flavour!r}")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"--url: expected http(s)://HOST:PORT of Kibana or OpenSearch Dashboards, got {url!r}")
    body, content_type = _body(saved_objects())
    target = f"{url.rstrip('/')}/api/saved_objects/_import?overwrite=true"
    headers = {"Content-Type": content_type, FLAVOURS[flavour]: "true"}
    auth = auth or Auth()
    if auth.api_key is not None:
        headers["Authorization"] = f"ApiKey {auth.api_key.reveal()}"
    elif auth.username and auth.password is not None:
        token = base64.b64encode(f"{auth.username}:{auth.password.reveal()}".encode()).decode()
        headers["Authorization"] = f"Basic {token}"
    context = ssl.create_default_context(cafile=auth.ca_certs) if parts.scheme == "https" else None
    request = urllib.request.Request(target, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=timeout_s, context=context) as response:
            answer = json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as exc:
        reason = exc.read().decode("utf-8", "replace")[:500]
        raise SinkError(f"{flavour} {url}: importing the saved objects failed with {exc.code}: {reason}") from exc
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise SinkError(f"{flavour} {url}: cannot import the saved objects ({exc})") from exc
    errors = {f"{e.get('type')}/{e.get('id')}": json.dumps(e.get("error")) for e in answer.get("errors", [])}
    return Imported(int(answer.get("successCount", 0)), errors)
