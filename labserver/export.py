"""``python -m labserver export SESSION_CODE --out DIR``: the session's data package as a zip.

The same zip as the session's *Data package* tab in oTree's admin (lab/record/data_package.py), read
straight from the database DATABASE_URL points at (SQLite: ./db.sqlite3 of the working folder),
so it needs neither a running server nor the REST key.
"""

from __future__ import annotations

from pathlib import Path


def export_session(session_code: str, out_dir: Path) -> Path:
    from otree.main import setup

    setup()
    from otree.database import session_scope
    from otree.models import Session

    from lab.record.data_package import session_zip, zip_name

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    with session_scope():
        if Session.objects_filter(code=session_code).first() is None:
            raise SystemExit(f"No session {session_code!r} in this database.")
        data = session_zip(session_code)
    path = out_dir / zip_name(session_code)
    path.write_bytes(data)
    return path


def bonus_file(session_code: str, out_dir: Path, *, who: str, difference: bool) -> int:
    """``python -m labserver bonus``: the session's bonus file (lab/online/bonus.py) written to
    ``out_dir``; its path on stdout, the note (or the refusal, exit status 3) on stderr."""
    import sys

    from otree.main import setup

    setup()
    from otree.database import db, session_scope
    from otree.models import Session

    from lab.online import bonus

    out_dir = Path(out_dir)
    with session_scope():
        session = Session.objects_filter(code=session_code).first()
        if session is None:
            raise SystemExit(f"No session {session_code!r} in this database.")
        try:
            text, note = bonus.bonus_file(session, who, difference=difference)
        except bonus.BonusRefused as refused:
            db.rollback()
            print(f"REFUSED: {refused}", file=sys.stderr)
            return 3
        number = len(bonus.payouts(session_code))
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / bonus.file_name(session_code, number)
    path.write_text(text, encoding="utf-8")
    print(path)
    print(f"WARNING: {note}", file=sys.stderr)
    return 0
