"""Play a session with oTree's bots, with session-config overrides, on any database.

``otree test`` always uses an in-memory SQLite database and the config exactly as written.
This runs the same bots (each app's ``tests.py``) but (1) on the database DATABASE_URL points
at, PostgreSQL included, (2) with overrides such as ``rounds_per_game=3`` so the suite stays
fast, and (3) exports every custom export (all ``custom_export*`` functions), which is what
the analysis package reads, and the session's manifest as JSON beside them (docs/DATA.md).
"""

from __future__ import annotations

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


def run(config_name: str, num_participants: int, overrides: dict, export_dir: Path | None) -> str:
    """Create the session, play it with bots, export; return the session code."""
    if not os.environ.get("DATABASE_URL"):
        os.environ["OTREE_IN_MEMORY"] = "1"
    # Bots and the server share one process: a short GIL switch interval stops every
    # request's thread hop from costing a full 5 ms scheduling slice.
    sys.setswitchinterval(0.0002)
    from otree.main import setup

    setup()
    import otree.session
    from otree.bots.runner import run_bots
    from otree.database import session_scope

    started = time.monotonic()
    with session_scope():
        session = otree.session.create_session(
            config_name, num_participants=num_participants, modified_session_config_fields=overrides
        )
        session_id, session_code = session.id, session.code
    with session_scope():
        run_bots(session_id)
    print(f"Bots completed session {session_code} ({config_name}, {num_participants} participants) "
          f"in {time.monotonic() - started:.1f} s")
    if export_dir:
        with session_scope():
            export_all(export_dir, session_code)
    return session_code


def export_all(export_dir: Path, session_code: str) -> None:
    """The session's data package (lab/data_package.py) in export_dir: every custom export (what
    the analysis reads), oTree's own exports, the manifest as JSON, README.txt, datapackage.json."""
    from lab.data_package import write_folder

    write_folder(export_dir, session_code)
