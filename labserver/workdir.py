"""Where oTree runs when it must leave the lab's database alone: rehearsals and benches.

On PostgreSQL they work in a database of their own, created beside the one DATABASE_URL names
and dropped at the end (``database_beside``): the URL a lab exports names its own database.

oTree keeps SQLite in ``./db.sqlite3`` of its working directory whatever path a ``sqlite://``
URL names, and even in memory (bots, ``otree test``) it opens that file to load it and to
compare its schema version: a file written by the lab's server stops it with "Please delete
your database". So a rehearsal runs in a folder of its own that links to every file of the
project except its SQLite files (the lab's database and the model calls' journals), and a
SQLite file it is asked to use becomes that folder's ``./db.sqlite3`` by a link (SQLite
follows the link: its journal and WAL files go beside the real file).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
import time
import uuid
from pathlib import Path
from typing import Iterator, Optional

PROJECT = Path(__file__).resolve().parent.parent
OTREE_SQLITE_FILE = "db.sqlite3"  # otree.database.DB_FILE, relative to the working directory


def is_sqlite_state(name: str) -> bool:
    """A database file of a lab folder: db.sqlite3 (with -wal, -shm, -journal) or a call journal."""
    return ".sqlite3" in name


def link_project(folder: Path, project: Path = PROJECT) -> Path:
    """``folder`` made to see every entry of ``project`` (by symbolic links) but its SQLite files."""
    folder.mkdir(parents=True, exist_ok=True)
    for entry in sorted(project.iterdir()):
        if not is_sqlite_state(entry.name):
            (folder / entry.name).symlink_to(entry)
    return folder


def sqlite_file(database_url: str, base: Path) -> Optional[Path]:
    """The file a ``sqlite:///PATH`` URL names (a relative PATH from ``base``); None for another
    database or SQLite in memory."""
    from sqlalchemy.engine.url import make_url

    url = make_url(database_url)
    if url.get_backend_name() != "sqlite" or url.database in (None, "", ":memory:"):
        return None
    return (base / url.database).absolute()


def lab_sqlite_file(folder: Path) -> Path:
    """The lab's own database when its server runs in ``folder`` on SQLite."""
    return (folder / OTREE_SQLITE_FILE).absolute()


def names_lab_database(database_url: str, folder: Path) -> bool:
    """Whether ``database_url`` is SQLite in ``folder``'s own ./db.sqlite3 (the lab's file) by any
    name: the path, a symbolic link or a hard link to it (the same file: SQLite would keep a
    journal of its own beside the other name, and the two writers corrupt the file)."""
    named = sqlite_file(database_url, folder)
    if named is None:
        return False
    lab = lab_sqlite_file(folder)
    if os.path.realpath(named) == os.path.realpath(lab):
        return True
    try:
        return os.path.samefile(named, lab)
    except OSError:  # one of them does not exist: not the same file
        return False


def is_postgresql(database_url: str) -> bool:
    from sqlalchemy.engine.url import make_url

    return bool(database_url) and make_url(database_url).get_backend_name() == "postgresql"


def _postgresql_url(database_url: str, **parts) -> str:
    """``database_url`` in libpq's form (no ``+driver``), with ``parts`` (e.g. database) replaced."""
    import copy

    from sqlalchemy.engine.url import make_url

    url = copy.copy(make_url(database_url))  # SQLAlchemy 1.3: a URL's parts are attributes
    url.drivername = "postgresql"
    for key, value in parts.items():
        setattr(url, key, value)
    return str(url)


@contextlib.contextmanager
def database_beside(database_url: str, label: str) -> Iterator[str]:
    """For PostgreSQL: the URL of a new, empty database on the server ``database_url`` names
    (whose own database is only connected to, to create the new one and drop it), dropped at the
    end, its connections ended first; for SQLite ('') nothing."""
    if not database_url:
        yield ""
        return
    import psycopg2

    name = f"lab_{re.sub(r'[^a-z0-9_]', '_', label.lower())[:30]}_{int(time.time())}_{uuid.uuid4().hex[:6]}"
    admin = psycopg2.connect(_postgresql_url(database_url))
    admin.autocommit = True
    try:
        admin.cursor().execute(f'CREATE DATABASE "{name}"')
        yield _postgresql_url(database_url, database=name)
    finally:
        cursor = admin.cursor()
        cursor.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (name,))
        cursor.execute(f'DROP DATABASE IF EXISTS "{name}"')
        admin.close()


def describe(database_url: str) -> str:
    """The database as a start line names it (password masked)."""
    from labserver.server import masked_database_url

    if not database_url:
        return "SQLite in memory (kept nowhere)"
    named = sqlite_file(database_url, Path.cwd())
    return f"SQLite file {named}" if named else masked_database_url(database_url)


@contextlib.contextmanager
def away_from_the_lab(database_url: str = "", project: Path = PROJECT) -> Iterator[Path]:
    """Run the block in a new folder linked to ``project`` (``link_project``), with oTree's
    database chosen in the environment: ``database_url`` when it names PostgreSQL or a SQLite
    file (a relative path from the current folder), else SQLite in memory. Set up before oTree
    is imported: it reads the environment and opens ./db.sqlite3 at import. The journal of
    model calls is the folder's own too (LAB_CALL_JOURNAL may name the lab's). The folder is
    removed and the working directory restored at the end (never the SQLite file named)."""
    named = sqlite_file(database_url, Path.cwd()) if database_url else None
    started_in = Path.cwd()
    folder = Path(tempfile.mkdtemp(prefix="lab-rehearsal-"))
    try:
        link_project(folder / "project", project)
        if named is not None:
            named.parent.mkdir(parents=True, exist_ok=True)
            (folder / "project" / OTREE_SQLITE_FILE).symlink_to(named)
            os.environ["DATABASE_URL"] = f"sqlite:///{OTREE_SQLITE_FILE}"
            os.environ.pop("OTREE_IN_MEMORY", None)
        elif database_url:
            os.environ["DATABASE_URL"] = database_url
            os.environ.pop("OTREE_IN_MEMORY", None)
        else:
            os.environ.pop("DATABASE_URL", None)
            os.environ["OTREE_IN_MEMORY"] = "1"
        os.environ.pop("LAB_CALL_JOURNAL", None)
        os.chdir(folder / "project")
        yield folder / "project"
    finally:
        os.chdir(started_in)
        shutil.rmtree(folder, ignore_errors=True)
