"""Fixtures shared by the suite: databases, an isolated copy of the project, oTree servers.

oTree always keeps SQLite in ./db.sqlite3 of its working directory, so every server or bot
run works in its own temporary folder that links to the project's files.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

PROJECT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
PG_ADMIN_URL = os.environ.get("LAB_TEST_PG_ADMIN_URL", "postgresql://postgres@127.0.0.1:5432/test")
# What a project copy links to: everything oTree and the apps import or read.
PROJECT_ENTRIES = [
    "settings.py", "protocol.py", "lab", "labserver", "agents", "prompts", "locale", "_static",
    "_templates", "_rooms", "instructions", "game_with_chat", "game_without_chat",
    "questionnaire", "payment", "tests",
]


def _postgres_available() -> bool:
    try:
        import psycopg2

        psycopg2.connect(PG_ADMIN_URL, connect_timeout=3).close()
        return True
    except Exception:
        return False


POSTGRES_AVAILABLE = _postgres_available()


@pytest.fixture
def postgres_url():
    """A fresh, empty PostgreSQL database for one test; dropped afterwards."""
    if not POSTGRES_AVAILABLE:
        pytest.skip(f"PostgreSQL not reachable at {PG_ADMIN_URL}")
    import psycopg2

    name = f"lab_test_{uuid.uuid4().hex[:12]}"
    admin = psycopg2.connect(PG_ADMIN_URL)
    admin.autocommit = True
    admin.cursor().execute(f'CREATE DATABASE "{name}"')
    url = PG_ADMIN_URL.rsplit("/", 1)[0] + f"/{name}"
    try:
        yield url
    finally:
        cursor = admin.cursor()
        cursor.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (name,))
        cursor.execute(f'DROP DATABASE IF EXISTS "{name}"')
        admin.close()


@pytest.fixture(params=["sqlite", "postgres"])
def database_url(request):
    """Parametrises a test over SQLite ('' = oTree's ./db.sqlite3) and PostgreSQL."""
    if request.param == "sqlite":
        return ""
    return request.getfixturevalue("postgres_url")


@pytest.fixture
def project_copy(tmp_path) -> Path:
    """A working directory that sees the project's files but has its own database."""
    work = tmp_path / "project"
    work.mkdir()
    for entry in PROJECT_ENTRIES:
        source = PROJECT / entry
        if source.exists():
            (work / entry).symlink_to(source)
    return work


def lab_env(database_url: str = "", **extra) -> dict:
    env = dict(os.environ)
    env.pop("DATABASE_URL", None)
    for key in ("OTREE_PRODUCTION", "OTREE_AUTH_LEVEL", "OTREE_IN_MEMORY"):
        env.pop(key, None)
    if database_url:
        env["DATABASE_URL"] = database_url
    env["PATH"] = f"{Path(PYTHON).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = str(PROJECT)
    env.update(extra)
    return env


def run_bots(workdir: Path, config: str, participants: int, overrides: dict, database_url: str = "",
             export_dir: Path | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    args = [PYTHON, "-m", "labserver", "bots", config, str(participants)]
    args += [arg for key, value in overrides.items() for arg in ("--set", f"{key}={value}")]
    if export_dir:
        args += ["--export", str(export_dir)]
    result = subprocess.run(args, cwd=workdir, env=lab_env(database_url), capture_output=True, text=True,
                            timeout=timeout)
    if result.returncode != 0:
        tail = "\n".join((result.stdout + result.stderr).splitlines()[-40:])
        raise AssertionError(f"bots failed for {config}:\n{tail}")
    return result


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, process: subprocess.Popen, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"server exited with code {process.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.2)
    raise AssertionError(f"server did not listen on port {port} within {timeout} s")
