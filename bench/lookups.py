"""What a page request's two row lookups cost: oTree's own code against the lab's compiled-query
cache (lab/server/baked_lookups.py).

Every page request looks up its participant by code and its player by participant and round
(and the player again for each page oTree steps over). In-process, oTree's own setup, a real
SQLite file (or a new PostgreSQL database beside --database-url's), a lab H-H session of 72;
each lookup is repeated --repeat times, both ways interleaved in blocks. Printed last: cached ÷ oTree's time per lookup.

    .venv/bin/python bench/lookups.py [--repeat 3000] [--database-url URL]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


BLOCK = 100  # lookups per timed block; the two ways alternate block by block


def measure(database_url: str, repeat: int) -> dict:
    """Seconds spent on ``repeat`` participant + player lookups, oTree's way and cached."""
    if database_url:
        os.environ["DATABASE_URL"] = database_url
    else:
        os.environ.pop("DATABASE_URL", None)
    from otree.main import setup

    setup()
    import otree.session
    from otree.database import db, session_scope
    from otree.models import Participant

    import game_with_chat as wc

    otree_objects_get = wc.Player.objects_get.__func__._lab_otree_original
    with session_scope():
        session = otree.session.create_session("hh_uninformed_wc_first", num_participants=72,
                                               modified_session_config_fields=dict(rounds_per_game=2))
        session_id = session.id
    timings = {"oTree's": 0.0, "cached": 0.0}
    with session_scope():
        participants = db.query(Participant).filter_by(session_id=session_id).all()
        codes = [p.code for p in participants]

        def lookups_otree(n: int) -> None:
            for i in range(n):
                p = participants[i % len(participants)]
                db.query(Participant).filter_by(code=codes[i % len(codes)]).one()  # oTree's get_or_404
                otree_objects_get(wc.Player, participant=p, round_number=1 + i % 2)

        def lookups_cached(n: int) -> None:
            for i in range(n):
                p = participants[i % len(participants)]
                db.get_or_404(Participant, code=codes[i % len(codes)])
                wc.Player.objects_get(participant=p, round_number=1 + i % 2)

        for _ in range(max(1, repeat // BLOCK)):
            for name, lookups in (("oTree's", lookups_otree), ("cached", lookups_cached)):
                started = time.perf_counter()
                lookups(BLOCK)
                timings[name] += time.perf_counter() - started
    return timings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3000)
    parser.add_argument("--database-url", default="",
                        help="a PostgreSQL server URL (a new database is made beside it, and dropped); "
                             "default: SQLite in a temp folder")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "bench"))
    from lab_load import bench_database
    from tests.lab_server import make_project_copy

    # oTree keeps its SQLite file in the working directory, whatever a sqlite:// URL names.
    os.chdir(make_project_copy(Path(tempfile.mkdtemp(prefix="lab-lookups-")) / "project"))
    with bench_database(args.database_url, "lookups") as database_url:
        timings = measure(database_url, args.repeat)
    pairs = max(1, args.repeat // BLOCK) * BLOCK
    for name, seconds in timings.items():
        print(f"{name:<8} participant + player lookup: {seconds / pairs * 1e6:.0f} µs")
    ratio = timings["cached"] / timings["oTree's"]
    print(f"cached / oTree's time per participant + player lookup: {ratio:.2f}")


if __name__ == "__main__":
    main()
