"""Bench: how long each export of a finished lab session holds the server.

An export runs under oTree's global lock (lab/request_lock.py says why), so every page of every
session on the server waits while one is written. Creates an H-F session of 72 participants x 10
rounds with oTree (in memory, or on ``--database-url``), fills it as bench/dashboard.py does (choices,
chat messages, the agents' turns, one model call per turn with a realistic prompt, page times),
then downloads each export through oTree's own ASGI app (routing, middleware, lock): the lab's
data package (``/LabDataPackage/<code>``), the lab's custom exports, oTree's wide export (the
baseline, measured in the same run). The figure (last line) is the data package's median time
and its ratio to oTree's wide export.

Run: ``.venv/bin/python bench/exports.py [--participants 72] [--rounds 10] [--repeat 3]
[--database-url postgresql://...]``. It never uses the lab's ./db.sqlite3 (labserver/workdir.py).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

PROJECT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PROJECT))
sys.path.insert(0, str(PROJECT / "bench"))

from dashboard import fill_session, timed_get  # noqa: E402

CUSTOM_EXPORTS = ("custom_export", "custom_export_decisions", "custom_export_messages", "custom_export_llm_calls",
                  "custom_export_manifest")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--participants", type=int, default=72)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--database-url", default="")
    args = parser.parse_args()

    os.environ.pop("OTREE_AUTH_LEVEL", None)
    os.environ.pop("OTREE_PRODUCTION", None)
    os.environ["LAB_MAX_ROUNDS_PER_GAME"] = str(args.rounds)
    from labserver.workdir import away_from_the_lab

    with away_from_the_lab(args.database_url, PROJECT):
        measure(args)


def measure(args) -> None:
    from otree.main import setup

    setup()
    import otree.session
    from otree.database import session_scope

    with session_scope():
        session = otree.session.create_session(
            "hf_informed_wc_first", num_participants=args.participants,
            modified_session_config_fields=dict(rounds_per_game=args.rounds, llm_provider="simulated"))
        code = session.code
        fill_session(session, args.rounds)

    from otree.asgi import app
    from starlette.testclient import TestClient

    client = TestClient(app)
    urls = {"oTree's wide export (baseline)": f"/api/export_wide?session_code={code}",
            "data package": f"/LabDataPackage/{code}",
            **{name: f"/api/export_app_custom?app=payment&function_name={name}&session_code={code}"
               for name in CUSTOM_EXPORTS}}
    timed_get(client, urls["data package"], 1)  # warm: imports, caches
    seconds = {}
    for label, url in urls.items():
        seconds[label], size = timed_get(client, url, args.repeat)
        print(f"{label:<32} {seconds[label]:6.3f} s  {size / 1024:7.0f} KiB", flush=True)
    database = "PostgreSQL" if args.database_url.startswith("postgres") else "SQLite"
    baseline = seconds["oTree's wide export (baseline)"]
    print(f"data package of {args.participants} participants x {args.rounds} rounds ({database}, median of "
          f"{args.repeat}): {seconds['data package']:.2f} s = {seconds['data package'] / baseline:.1f} x oTree's wide export")


if __name__ == "__main__":
    main()
