"""Play a session with oTree's bots, with session-config overrides, on any database.

``otree test`` always uses an in-memory SQLite database and the config exactly as written.
This runs the same bots (each app's ``tests.py``) but (1) on the database DATABASE_URL points
at, PostgreSQL or a SQLite file, (2) with overrides such as ``rounds_per_game=3`` so the suite
stays fast, and (3) exports every custom export (all ``custom_export*`` functions), which is
what the analysis package reads, and the session's manifest as JSON beside them (docs/DATA.md).

A rehearsal never reads or writes the lab's own database, whatever DATABASE_URL says: it runs
in a folder of its own (labserver/workdir.py), and on PostgreSQL in a new database beside the one
DATABASE_URL names (a lab exports the URL of its own database), dropped when the rehearsal ends;
on a SQLite file DATABASE_URL names, never the lab's ./db.sqlite3 by any name (a symbolic or a
hard link to it included); without DATABASE_URL on SQLite in memory. ``database="lab"``
(``--database lab``) plays it in the lab's database instead.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from pathlib import Path


def parse_overrides(pairs: list[str]) -> dict:
    """``key=value`` strings to typed session-config values (int, float, bool or str)."""
    overrides = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep:
            raise SystemExit(f"--set expects key=value, got {pair!r}")
        value: object = raw
        for convert in (int, float):
            try:
                value = convert(raw)
                break
            except ValueError:
                continue
        if raw in ("True", "False"):
            value = raw == "True"
        overrides[key] = value
    return overrides


REHEARSAL, LAB = "rehearsal", "lab"


def rehearsal_database_url() -> str:
    """DATABASE_URL ('' for SQLite in memory; PostgreSQL: the server the rehearsal's own database is
    created on); never the lab's ./db.sqlite3 of this folder."""
    from labserver.server import database_problem
    from labserver.workdir import names_lab_database

    database_url = os.environ.get("DATABASE_URL", "").strip()
    if database_url:
        problem = database_problem(database_url)
        if problem:
            raise SystemExit(f"Not started: {problem}")
        if names_lab_database(database_url, Path.cwd()):
            raise SystemExit("Not started: DATABASE_URL names the lab's own database (./db.sqlite3, by this or "
                             "another name); a rehearsal leaves it alone. Unset DATABASE_URL (SQLite in memory), "
                             "name another file, or give --database lab to play in the lab's database.")
    return database_url


def run(config_name: str, num_participants: int, overrides: dict, export_dir: Path | None,
        database: str = REHEARSAL) -> str:
    """Create the session, play it with bots, export; return the session code. ``database``:
    REHEARSAL (a database of its own beside DATABASE_URL's on PostgreSQL, dropped at the end; a
    SQLite file it names; else SQLite in memory; never the lab's database) or LAB (what the lab's
    server in this folder uses: DATABASE_URL, else ./db.sqlite3)."""
    from labserver.workdir import (OTREE_SQLITE_FILE, away_from_the_lab, database_beside, describe, is_postgresql,
                                   lab_sqlite_file)

    export_dir = export_dir.absolute() if export_dir else None  # before any change of folder
    if database == LAB:
        database_url = os.environ.get("DATABASE_URL", "").strip()
        if not database_url or database_url.startswith("sqlite"):  # oTree's test: SQLite is ./db.sqlite3
            os.environ["DATABASE_URL"] = f"sqlite:///{OTREE_SQLITE_FILE}"  # on disk, not loaded into memory
            shown = f"SQLite file {lab_sqlite_file(Path.cwd())}"
        else:
            shown = describe(database_url)
        os.environ.pop("OTREE_IN_MEMORY", None)
        print(f"Bots play in the lab's database: {shown}", flush=True)
        return _play(config_name, num_participants, overrides, export_dir)
    database_url = rehearsal_database_url()
    if not is_postgresql(database_url):
        print(f"Bots play in: {describe(database_url)}", flush=True)
        with away_from_the_lab(database_url):
            return _play(config_name, num_participants, overrides, export_dir)
    with contextlib.ExitStack() as stack:
        try:
            own_database = stack.enter_context(database_beside(database_url, "rehearsal"))
        except psycopg2_errors() as error:
            raise SystemExit(f"Not started: a rehearsal on PostgreSQL plays in a database of its own, created "
                             f"beside DATABASE_URL's ({describe(database_url)}), and this failed: {error}".strip())
        print(f"Bots play in: {describe(own_database)}, a database of their own beside DATABASE_URL's, dropped at "
              "the end", flush=True)
        with away_from_the_lab(own_database):
            return _play(config_name, num_participants, overrides, export_dir)


def psycopg2_errors() -> tuple:
    """What creating or dropping the rehearsal's database raises when the server refuses (no
    CREATEDB right, unreachable)."""
    import psycopg2

    return (psycopg2.OperationalError, psycopg2.ProgrammingError)


def _play(config_name: str, num_participants: int, overrides: dict, export_dir: Path | None) -> str:
    # Bots and the server share one process: a short GIL switch interval stops every
    # request's thread hop from costing a full 5 ms scheduling slice.
    sys.setswitchinterval(0.0002)
    from otree.main import setup

    setup()
    import otree.session
    from otree.bots.runner import run_bots
    from otree.database import session_scope

    from lab.experimenter.session_creation import SessionRefused

    started = time.monotonic()
    try:
        with session_scope():
            session = otree.session.create_session(
                config_name, num_participants=num_participants, modified_session_config_fields=overrides
            )
            session_id, session_code = session.id, session.code
    except SessionRefused as refusal:
        raise SystemExit(f"Session refused: {refusal}") from None
    with session_scope():
        run_bots(session_id)
    print(f"Bots completed session {session_code} ({config_name}, {num_participants} participants) "
          f"in {time.monotonic() - started:.1f} s")
    if export_dir:
        with session_scope():
            export_all(export_dir, session_code)
    return session_code


def export_all(export_dir: Path, session_code: str) -> None:
    """The session's data package (lab/record/data_package.py) in export_dir: every custom export (what
    the analysis reads), oTree's own exports, the manifest as JSON, README.txt, datapackage.json."""
    from lab.record.data_package import write_folder

    write_folder(export_dir, session_code)
