"""How long creating a session holds the server (oTree's global lock: every page of every other
session on the server waits meanwhile).

Creates, on a fresh production server each (``otree prodserver``, the bench's PostgreSQL database
or SQLite), the sessions a lab and an online study create: a lab H-H session of 72 with the
paper's 10 rounds per game, and online H-H and H-F sessions of 300 (2 rounds per game, as in
bench/online_load.py), through the REST API as bench/online_load.py does. Prints each creation's
seconds, the longest last.

    .venv/bin/python bench/session_creation.py [--database-url postgresql://...]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from lab_load import LIMITS, PRODUCTION, FakeProviderProcess, bench_database, create_session  # noqa: E402
from online_load import CODES, CONFIG, online_project  # noqa: E402
from tests.lab_server import LabServer  # noqa: E402

# (label, kind, participants, rounds per game, online)
SESSIONS = [("lab H-H", "hh", 72, 10, False), ("online H-H", "hh", 300, 2, True), ("online H-F", "hf", 300, 2, True)]


def creation_seconds(kind: str, participants: int, rounds: int, online: bool, database_url: str) -> float:
    with tempfile.TemporaryDirectory() as tmp, FakeProviderProcess(0.0) as fake:
        work = online_project(Path(tmp) / "project")
        server = LabServer(work, database_url, FAKE_LLM_KEY="bench-dummy-key", LAB_MAX_ROUNDS_PER_GAME=str(rounds),
                           **PRODUCTION).start()
        fields = dict(language="en", llm_provider="openai_compatible", llm_model="fake-gpt",
                      llm_base_url=fake.base_url_openai, llm_api_key_env="FAKE_LLM_KEY", llm_check_model=False)
        if online:
            fields.update(online=True, stand_in="agent", prolific_completion_codes=CODES, online_lobby_seconds=240)
        try:
            started = time.monotonic()
            create_session(server, CONFIG.format(kind), participants, rounds_per_game=rounds, **LIMITS, **fields)
            return time.monotonic() - started
        finally:
            server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database-url", default="", help="PostgreSQL server URL; default: SQLite in a temp folder")
    args = parser.parse_args()
    figures = []
    for label, kind, participants, rounds, online in SESSIONS:
        with bench_database(args.database_url, f"create_{kind}_{participants}") as database_url:
            seconds = creation_seconds(kind, participants, rounds, online, database_url)
        figures.append((seconds, f"{label} {participants} x {rounds} rounds: {seconds:.1f} s"))
        print(figures[-1][1], flush=True)
    print("session creation (the server's lock held): " + "; ".join(text for _, text in figures)
          + f"; longest {max(figures)[0]:.1f} s")


if __name__ == "__main__":
    main()
