"""Rehearsals and benches leave the lab's database alone: ``labserver bots`` and
bench/dashboard.py run in a project folder whose ./db.sqlite3 was written by the lab's server,
succeed, and the lab's files are byte for byte what they were; a SQLite DATABASE_URL is where
the rehearsal lands, unless it is the lab's file by another name (a symbolic or a hard link);
only ``--database lab`` plays in the lab's database. Given a PostgreSQL DATABASE_URL (a lab
exports its own) or ``--database-url``, the rehearsal and bench/dashboard.py work in a new
database beside it and drop it after.

(bench/lab_load.py and bench/lookups.py run their servers and sessions in project copies of
their own, bench/agent_turns.py uses no database: none of them opens a lab's ./db.sqlite3.)
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests import processes
from tests.lab_server import PYTHON, LabServer, lab_env, run_bots

BOTS = dict(config="hh_uninformed_wc_first", participants=4, overrides={"rounds_per_game": 1})


@pytest.fixture
def lab_folder(project_copy) -> Path:
    """A project folder where the lab's server (prodserver, SQLite) made a session, then stopped."""
    server = LabServer(project_copy).start()
    try:
        server.create_session("hh_uninformed_wc_first", 4, rounds_per_game=1)
    finally:
        server.stop()
    assert session_codes(project_copy / "db.sqlite3") and (project_copy / "db.sqlite3").stat().st_size > 0
    return project_copy


def lab_files(folder: Path) -> dict:
    """Every SQLite file of the lab's folder (database, WAL, journals) by name, as hashes."""
    return {path.name: hashlib.sha256(path.read_bytes()).hexdigest() for path in sorted(folder.glob("*.sqlite3*"))}


def session_codes(database: Path) -> list:
    """The sessions in a SQLite database, read from a copy (even a reader writes to the WAL index)."""
    with tempfile.TemporaryDirectory() as folder:
        for path in database.parent.glob(database.name + "*"):
            if not path.name.endswith("-shm"):
                shutil.copy(path, Path(folder) / path.name)
        connection = sqlite3.connect(Path(folder) / database.name)
        try:
            return [code for (code,) in connection.execute("SELECT code FROM otree_session ORDER BY id")]
        finally:
            connection.close()


def postgres_column(database_url: str, sql: str, *params) -> list:
    """The first column of a query's rows, on a connection of its own, closed after."""
    import psycopg2

    connection = psycopg2.connect(database_url)
    try:
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            return [row[0] for row in cursor.fetchall()]
    finally:
        connection.close()


def postgres_tables(database_url: str) -> list:
    return postgres_column(database_url,
                           "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' ORDER BY 1")


def postgres_databases(database_url: str, like: str) -> list:
    return postgres_column(database_url, "SELECT datname FROM pg_database WHERE datname LIKE %s", like)


def played_code(result: subprocess.CompletedProcess) -> str:
    [line] = [line for line in result.stdout.splitlines() if line.startswith("Bots completed session ")]
    return line.split()[3]


@pytest.mark.server
def test_bots_leave_the_lab_database_alone(lab_folder, database_url, tmp_path):
    """Default (SQLite in memory) and DATABASE_URL=PostgreSQL (as a lab exports it for its own
    database): the rehearsal plays and exports, and the lab's files and session list are
    unchanged; on PostgreSQL DATABASE_URL's database is as it was (empty here) and the
    rehearsal's own, beside it, is gone."""
    before, sessions_before = lab_files(lab_folder), session_codes(lab_folder / "db.sqlite3")
    result = run_bots(lab_folder, **BOTS, database_url=database_url, export_dir=tmp_path / "export")
    code = played_code(result)
    assert (tmp_path / "export" / f"manifest_{code}.json").exists()
    assert lab_files(lab_folder) == before
    assert session_codes(lab_folder / "db.sqlite3") == sessions_before
    if database_url:
        assert postgres_tables(database_url) == []
        assert postgres_databases(database_url, "lab_rehearsal_%") == []
        assert "a database of their own beside DATABASE_URL's" in result.stdout, result.stdout


@pytest.mark.server
def test_a_sqlite_database_url_is_where_the_rehearsal_lands(lab_folder, tmp_path):
    elsewhere = tmp_path / "x" / "elsewhere.sqlite3"
    before, sessions_before = lab_files(lab_folder), session_codes(lab_folder / "db.sqlite3")
    code = played_code(run_bots(lab_folder, **BOTS, database_url=f"sqlite:///{elsewhere}"))
    assert session_codes(elsewhere) == [code]
    assert lab_files(lab_folder) == before and session_codes(lab_folder / "db.sqlite3") == sessions_before
    # A relative path is from the folder the rehearsal was started in.
    code = played_code(run_bots(lab_folder, **BOTS, database_url="sqlite:///rehearsals/r.sqlite3"))
    assert session_codes(lab_folder / "rehearsals" / "r.sqlite3") == [code]
    assert lab_files(lab_folder) == before


@pytest.mark.server
def test_only_database_lab_plays_in_the_lab_database(lab_folder):
    before, sessions_before = lab_files(lab_folder), session_codes(lab_folder / "db.sqlite3")
    # DATABASE_URL naming the lab's own file is refused, with the way to ask for it.
    refused = processes.run([PYTHON, "-m", "labserver", "bots", BOTS["config"], "4", "--set", "rounds_per_game=1"],
                            cwd=lab_folder, env=lab_env("sqlite:///db.sqlite3"), capture_output=True, text=True,
                            timeout=600)
    assert refused.returncode != 0 and "--database lab" in refused.stderr, refused.stderr[-2000:]
    assert "delete" not in (refused.stdout + refused.stderr).lower()
    assert lab_files(lab_folder) == before
    # The lab's file by another name: a symbolic link, a hard link (the same inode).
    (lab_folder / "soft.sqlite3").symlink_to(lab_folder / "db.sqlite3")
    os.link(lab_folder / "db.sqlite3", lab_folder / "hard.sqlite3")
    for name in ("soft.sqlite3", "hard.sqlite3"):
        refused = processes.run([PYTHON, "-m", "labserver", "bots", BOTS["config"], "4", "--set", "rounds_per_game=1"],
                                cwd=lab_folder, env=lab_env(f"sqlite:///{name}"), capture_output=True, text=True,
                                timeout=600)
        assert refused.returncode != 0 and "the lab's own database" in refused.stderr, (name, refused.stderr[-2000:])
    (lab_folder / "soft.sqlite3").unlink()
    (lab_folder / "hard.sqlite3").unlink()
    assert lab_files(lab_folder) == before
    # Asked for: the rehearsal is in the lab's database, beside the lab's session.
    result = processes.run([PYTHON, "-m", "labserver", "bots", BOTS["config"], "4", "--set", "rounds_per_game=1",
                             "--database", "lab"], cwd=lab_folder, env=lab_env(), capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    assert session_codes(lab_folder / "db.sqlite3") == sessions_before + [played_code(result)]


@pytest.mark.server
def test_dashboard_bench_leaves_the_lab_database_alone(lab_folder, database_url):
    """bench/dashboard.py, started from a project folder holding a lab's database (the bench
    works from the project it sits in)."""
    bench = lab_folder / "bench_here"
    bench.mkdir()
    for script in ("dashboard.py", "lab_load.py"):  # dashboard.py takes bench_database from lab_load.py
        shutil.copy(Path(__file__).resolve().parent.parent / "bench" / script, bench / script)
    before, sessions_before = lab_files(lab_folder), session_codes(lab_folder / "db.sqlite3")
    tables_before = postgres_tables(database_url) if database_url else None
    args = [PYTHON, str(bench / "dashboard.py"), "--participants", "4", "--rounds", "1", "--repeat", "1"]
    if database_url:
        args += ["--database-url", database_url]
    result = processes.run(args, cwd=lab_folder, env=lab_env(), capture_output=True, text=True, timeout=600)
    assert result.returncode == 0 and "dashboard data response" in result.stdout, (result.stdout + result.stderr)[-3000:]
    assert lab_files(lab_folder) == before and session_codes(lab_folder / "db.sqlite3") == sessions_before
    if database_url:  # --database-url's database as it was; the bench's own beside it, dropped
        assert postgres_tables(database_url) == tables_before
        assert postgres_databases(database_url, "lab_bench_finished_session_%") == []
