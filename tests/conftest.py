"""Fixtures shared by the suite: databases, an isolated copy of the project, oTree servers."""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

import pytest

from tests.fake_llm_server import FakeLLMServer
from tests.lab_server import make_project_copy

PG_ADMIN_URL = os.environ.get("LAB_TEST_PG_ADMIN_URL", "postgresql://postgres@127.0.0.1:5432/test")


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
    import psycopg2.errors

    name = f"lab_test_{uuid.uuid4().hex[:12]}"
    admin = psycopg2.connect(PG_ADMIN_URL)
    admin.autocommit = True
    admin.cursor().execute(f'CREATE DATABASE "{name}"')
    url = PG_ADMIN_URL.rsplit("/", 1)[0] + f"/{name}"
    try:
        yield url
    finally:
        # FORCE (PostgreSQL 13+) ends the connections and drops in one statement: terminating them
        # first, then dropping, lost the race to a lab server's pool reconnecting as it died.
        cursor = admin.cursor()
        for attempt in range(5):
            try:
                cursor.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
                break
            except psycopg2.errors.ObjectInUse:
                if attempt == 4:
                    raise
                time.sleep(0.5)
        admin.close()


@pytest.fixture(params=["sqlite", "postgres"])
def database_url(request):
    """Parametrises a test over SQLite ('' = oTree's ./db.sqlite3) and PostgreSQL."""
    if request.param == "sqlite":
        return ""
    return request.getfixturevalue("postgres_url")


@pytest.fixture(scope="module")
def fake_llm_server_of_module():
    """One fake LLM server (tests/fake_llm_server.py) for all the tests of a module that use it."""
    with FakeLLMServer() as running:
        yield running


@pytest.fixture
def fake_llm(fake_llm_server_of_module) -> FakeLLMServer:
    """The module's fake LLM server, back at its defaults (replies, latency, faults, counters)."""
    fake_llm_server_of_module.reset()
    return fake_llm_server_of_module


@pytest.fixture
def project_copy(tmp_path) -> Path:
    return make_project_copy(tmp_path / "project")


SERVER_LOG_TAIL_LINES = 60


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A failed test that ran lab servers reports the tail of each server's log beside its
    traceback: CI keeps nothing else of a server once the test has ended."""
    outcome = yield
    report = outcome.get_result()
    if report.when != "call" or not report.failed:
        return
    for server in getattr(item, "lab_servers", ()):
        tail = "\n".join(server.log().splitlines()[-SERVER_LOG_TAIL_LINES:])
        report.sections.append((f"lab server log, port {server.port} (last {SERVER_LOG_TAIL_LINES} lines)", tail))


@pytest.fixture
def lab_server(project_copy, request):
    from tests.lab_server import LabServer

    servers = []
    request.node.lab_servers = servers

    def start(database_url: str = "", **env) -> LabServer:
        server = LabServer(project_copy, database_url, **env).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop(kill=True)


def pytest_collection_modifyitems(config, items):
    """One worker runs every test of a real model (SmolLM2 on llama.cpp, on every core): two at once
    halved each one's speed, and the capacity check then refused a session (`--dist loadgroup`, Makefile)."""
    for item in items:
        if item.get_closest_marker("real_model"):
            item.add_marker(pytest.mark.xdist_group("real_model"))
