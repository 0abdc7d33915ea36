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
    import otree.export
    from otree import settings

    export_dir.mkdir(parents=True, exist_ok=True)
    for app in settings.OTREE_APPS:
        for function_name in sorted(otree.export.get_custom_export_functions(app)):
            path = export_dir / f"{app}_{function_name}_{session_code}.csv"
            with path.open("w", newline="", encoding="utf8") as fp:
                otree.export.custom_export_app(app, fp, session_code=session_code, function_name=function_name)
    with (export_dir / f"all_apps_wide_{session_code}.csv").open("w", newline="", encoding="utf8") as fp:
        otree.export.export_wide(fp, session_code=session_code)
    write_manifest_json(export_dir, session_code)


def write_manifest_json(export_dir: Path, session_code: str) -> Path:
    """The session's manifest (also in the CSV custom export "manifest") as one readable JSON file."""
    import json

    from otree.models import Session

    from lab.exports import session_manifest

    session = Session.objects_get(code=session_code)
    path = export_dir / f"manifest_{session_code}.json"
    path.write_text(json.dumps(session_manifest(session), indent=2, sort_keys=True, ensure_ascii=False, default=str),
                    encoding="utf8")
    return path
