"""Tokens and addresses (issue 54, point 12), against a real collector process and a real client:
two token files holding one token resolved silently to the later name; removing the token
directory revoked nothing; with ``listen_address = "::"`` a proxy on 127.0.0.1 was seen as
``::ffff:127.0.0.1`` and not trusted."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import orjson

from .conftest import FAIRACCT, Collector, record
from .test_gratia import ping

RESCAN_S = 2.5  # the token directory is looked at again 2 s after the last look, at the next request


TOKENS = {"p1": "token-one", "p2": "token-two"}


def post(c: Collector, probe: str, doc_id: str) -> httpx.Response:
    """A record of ``probe``'s, sent with the token ``probe``'s file held when the collector started."""
    head = {"Content-Type": "application/json", "Authorization": f"Bearer {TOKENS[probe]}"}
    return httpx.post(f"{c.url}/v1/records", content=orjson.dumps([record(doc_id, probe)]), headers=head, timeout=30)


def write_token(folder: Path, probe: str, token: str) -> None:
    (folder / probe).write_text(token + "\n")
    os.chmod(folder / probe, 0o600)


def test_two_token_files_with_one_token_refuse_the_start_naming_both(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens"
    tokens.mkdir()
    for probe, token in (("fairacct@ce01", "shared"), ("fairacct@ce02", "other"), ("fairacct@ce03", "shared")):
        write_token(tokens, probe, token)
    config = tmp_path / "c.toml"
    config.write_text(f'[collector]\ntoken_dir = "{tokens}"\nstate_dir = "{tmp_path}/state"\nport = 0\n')
    proc = subprocess.run([FAIRACCT, "collector", "serve", "--config", str(config)], capture_output=True, text=True,
                          timeout=20, check=False)  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().endswith(
        f"collector token_dir: {tokens}/fairacct@ce01 and {tokens}/fairacct@ce03 hold the same token, so it "
        "cannot say which probe sends: give each probe a token of its own (openssl rand -hex 32)"
    ), proc.stderr
    assert "shared" not in proc.stderr


def test_a_token_two_files_hold_is_refused_on_reload_for_both(start_collector: Any) -> None:
    c = start_collector(tokens=TOKENS)
    folder = c.root / "tokens"
    write_token(folder, "p3", "token-one")  # p1's token, copied under another name
    time.sleep(RESCAN_S)
    assert post(c, "p1", "a").status_code == 401  # the one that came first is refused too
    assert post(c, "p2", "b").status_code == 202  # the others are read as ever
    assert (
        f"token files {folder}/p1 and {folder}/p3 hold the same token, so it cannot say which probe sends: "
        "both are refused until each probe has a token of its own"
    ) in c.log
    (folder / "p3").unlink()
    time.sleep(RESCAN_S)
    assert post(c, "p1", "c").status_code == 202
    assert "token-one" not in c.log


def test_a_token_directory_removed_or_emptied_revokes_every_token(start_collector: Any) -> None:
    c = start_collector(tokens=TOKENS)
    folder = c.root / "tokens"
    for path in folder.iterdir():  # emptied
        path.unlink()
    time.sleep(RESCAN_S)
    assert [post(c, t, "e").status_code for t in ("p1", "p2")] == [401, 401]
    write_token(folder, "p1", "token-one")
    time.sleep(RESCAN_S)
    assert post(c, "p1", "f").status_code == 202
    shutil.rmtree(folder)  # removed
    time.sleep(RESCAN_S)
    assert post(c, "p1", "g").status_code == 401
    assert f"collector token_dir: {folder}: no such directory; every token is refused (1 revoked)" in c.log
    folder.mkdir()
    write_token(folder, "p2", "token-two")
    time.sleep(RESCAN_S)
    assert [post(c, t, "h").status_code for t in ("p1", "p2")] == [401, 202]


def test_an_ipv4_client_of_a_dual_stack_collector_is_its_ipv4_address(start_collector: Any) -> None:
    """Listening on "::", the collector gets IPv4 peers as ::ffff:a.b.c.d: the proxy on 127.0.0.1
    was not trusted, and its X-Forwarded-For not believed. Each address is now compared, and shown,
    as the IPv4 address it is; a network written in the IPv4-mapped form is read as IPv4 too."""
    c = start_collector(listen_address="::", trusted_proxies=["127.0.0.1"], gratia_senders=[
        {"probe": "condor:ce01.example.org", "networks": ["::ffff:127.0.0.2"], "sites": ["SiteA"]}])  # fmt: skip
    before = len(c.log)
    head = {"Content-Type": "application/x-www-form-urlencoded", "X-Forwarded-For": "127.0.0.2"}
    form = b"command=update&arg1=xxx&from=condor:ce01.example.org"
    proxied = httpx.post(f"{c.url}/gratia-servlets/rmi", content=form, headers=head, timeout=30)
    assert (proxied.status_code, proxied.text) == (200, "OK")
    with httpx.Client(transport=httpx.HTTPTransport(local_address="127.0.0.3"), timeout=30) as stranger:
        refused = stranger.post(f"{c.url}/gratia-servlets/rmi", content=form, headers=head)  # not the proxy
    assert refused.status_code == 400 and "address 127.0.0.3 is not among" in refused.text, refused.text
    assert ping(c).status_code == 400  # 127.0.0.1 itself is not the sender's
    assert post(c, "p1", "v4").status_code == 202
    deadline = time.monotonic() + 10
    while c.log[before:].count("fairacct.collector.access") < 4:
        assert time.monotonic() < deadline, c.log
        time.sleep(0.05)
    lines = [line for line in c.log[before:].splitlines() if "fairacct.collector.access" in line]
    addresses = [re.search(r" INFO (\S+) POST ", line).group(1) for line in lines]  # type: ignore[union-attr]
    assert addresses == ["127.0.0.2", "127.0.0.3", "127.0.0.1", "127.0.0.1"], lines
    assert "::ffff:" not in c.log
