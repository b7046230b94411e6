"""APEL's own server (../shared/apel): MariaDB in a temporary directory with APEL's schema, APEL's
loader and summariser. One server per test session (it costs seconds to start); each test gets it
emptied of the records the previous one loaded.

Without ../shared/apel, MariaDB (``make apel-server`` installs it) or APEL's Python dependencies
(the ``apel-test`` extra) the tests that use it skip and say which is missing.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

APEL_DIR = Path(__file__).resolve().parents[3].parent / "shared" / "apel"
_DEPS = ("dirq", "iso8601", "future", "daemon", "pymysql")

# what APEL's loader fills and the summariser derives, and the names (the first spelling loaded
# is the one APEL shows): emptied between tests
_TABLES = (
    "JobRecords", "Summaries", "NormalisedSummaries", "SuperSummaries", "HybridSuperSummaries", "SyncRecords",
    "LastUpdated", "Sites", "DNs", "SubmitHosts", "MachineNames", "Queues", "VOs", "VORoles", "VOGroups",
)  # fmt: skip


def _missing() -> str | None:
    if not (APEL_DIR / "start-apel-server.sh").is_file():
        return f"APEL's server scripts are not at {APEL_DIR} (../shared/apel)"
    if not (shutil.which("mariadbd") or shutil.which("mysqld")) or not shutil.which("mariadb"):
        return "MariaDB is not installed (`make apel-server` installs Debian's mariadb-server)"
    absent = [m for m in _DEPS if importlib.util.find_spec(m) is None]
    if absent:
        return f"APEL's Python dependencies are missing: {', '.join(absent)} (pip install -e '.[apel-test]')"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class ApelServer:
    """A running APEL server: ``load`` puts message files through APEL's loader and summariser,
    ``rows`` reads a view."""

    home: Path
    socket_path: str
    port: int
    db_cfg: Path
    src: Path
    loads: int = 0

    def load(self, messages: Path) -> str:
        """Load every message file under ``messages`` and summarise; APEL's output (AssertionError,
        with APEL's reasons, when a message is rejected)."""
        self.loads += 1
        work = self.home / f"work{self.loads}"
        work.mkdir()
        r = subprocess.run(
            [sys.executable, str(APEL_DIR / "apel-load.py"), str(self.src), str(self.db_cfg), str(work), str(messages)],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert r.returncode == 0, f"APEL rejected a message:\n{r.stdout}\n{r.stderr}"
        assert "summariser exit 0" in r.stdout, f"APEL's summariser failed:\n{r.stdout}\n{work / 'summariser.log'}"
        return r.stdout

    def rows(self, sql: str) -> list[dict[str, Any]]:
        import pymysql

        conn = pymysql.connect(
            unix_socket=self.socket_path, user="root", database="apelserver", cursorclass=pymysql.cursors.DictCursor
        )
        try:
            with conn.cursor() as cur:
                cur.execute(sql)
                return list(cur.fetchall())
        finally:
            conn.close()

    def empty(self) -> None:
        import pymysql

        conn = pymysql.connect(unix_socket=self.socket_path, user="root", database="apelserver")
        try:
            with conn.cursor() as cur:
                for table in _TABLES:
                    cur.execute(f"DELETE FROM {table}")
            conn.commit()
        finally:
            conn.close()


@pytest.fixture(scope="session")
def _apel_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApelServer]:
    reason = _missing()
    if reason:
        pytest.skip(reason)
    home = tmp_path_factory.mktemp("apelserver")
    # As root, the script runs MariaDB as user mysql, which must reach and write the directory:
    # pytest's own temporary root is private (0700), so the database has a temporary directory
    # of its own, open to mysql, removed at the end.
    db = Path(tempfile.mkdtemp(prefix="fairacct-apeldb-"))
    if os.geteuid() == 0:
        db.chmod(0o755)
        shutil.chown(db, "mysql", "mysql")
    r = subprocess.run(
        ["bash", str(APEL_DIR / "start-apel-server.sh"), str(db), str(_free_port())],
        capture_output=True,
        text=True,
        timeout=120,
    )
    try:
        assert r.returncode == 0, f"APEL's server did not start:\n{r.stdout}\n{r.stderr}"
        env = dict(line.split("=", 1) for line in r.stdout.splitlines() if "=" in line)
        yield ApelServer(
            home, env["APEL_DB_SOCKET"], int(env["APEL_DB_PORT"]), Path(env["APEL_DB_CFG"]), Path(env["APEL_SRC"])
        )
    finally:
        subprocess.run(["bash", str(APEL_DIR / "stop-apel-server.sh"), str(db)], capture_output=True, timeout=60)
        shutil.rmtree(db, ignore_errors=True)


@pytest.fixture
def apel_server(_apel_session: ApelServer) -> ApelServer:
    """APEL's server, emptied of what earlier tests loaded."""
    _apel_session.empty()
    return _apel_session
