"""Bench: the live dashboard's response time for a full lab, 72 participants x 10 rounds.

Creates an H-F session of 72 participants with oTree (in memory, or beside ``--database-url``),
fills it as a finished session would be (every round of both games: choices, four chat
messages per WC round, the agents' turns and one model call per turn with a realistic prompt,
oTree's page-time records), then requests the dashboard's data through oTree's own ASGI app
(routing, middleware, global lock, JSON): the same path as the browser's poll every 3 s.
Baseline, measured in the same run: the data of oTree's own Data tab (``/session_data/<code>``,
every field of every round, what the admin already polls) for the same session. The figure
(last line) is the dashboard data's median response time, and its ratio to that baseline.

Run: ``.venv/bin/python bench/dashboard.py [--participants 72] [--rounds 10] [--repeat 15]
[--database-url postgresql://...]``. It never touches the lab's database: SQLite in memory by
default, or a new database on --database-url's PostgreSQL server, dropped at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path

PROJECT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PROJECT))


def fill_session(session, rounds: int, games=("game_with_chat", "game_without_chat")) -> None:
    """Rows of a finished session (or of its first ``rounds`` rounds of ``games``), written directly:
    the bench measures reading them."""
    import protocol
    from otree.common import get_models_module
    from otree.database import db
    from otree.models_concrete import PageTimeBatch

    rng = random.Random(7)
    started = time.time() - 3600
    page_lines = []
    prompt = json.dumps([{"role": "system", "content": "You are a participant. " * 120},
                         {"role": "user", "content": "Round history and the associate's message. " * 40}])
    for game_index, app in enumerate(games):
        module = get_models_module(app)
        with_chat = app == "game_with_chat"
        for player in module.Player.objects_filter(session=session):
            r = player.round_number
            if r > rounds:
                continue
            code = player.participant.code
            t0 = started + (game_index * rounds + r) * 90
            player.choice = rng.choice(protocol.CHOICES)
            player.choice_timed_out = rng.random() < 0.05
            player.decided_at = t0 + 60
            agent_choice = rng.choice(protocol.CHOICES)
            player.associate_choice = agent_choice
            player.payoff, player.associate_payoff = protocol.PAYOFFS[(player.choice, agent_choice)]
            kinds = ("message_1", "message_2", "decision") if with_chat else ("decision",)
            for stage in ((1, 2) if with_chat else ()):
                sent = rng.random() > 0.05
                module.Message.create(player=player, stage=stage, sender_code=code, sender_kind="human",
                                      receiver_code=player.associate_code, receiver_kind="agent",
                                      text="Let's both choose A this round" if sent else "", sent_in_time=sent,
                                      stage_started_at=t0, sent_at=t0 + 20 if sent else None,
                                      unsent_draft=None if sent else "half typed")
                module.Message.create(player=player, stage=stage, sender_code=player.associate_code,
                                      sender_kind="agent", receiver_code=code, receiver_kind="human",
                                      text="I will pick A if you do", sent_in_time=True, stage_started_at=t0,
                                      sent_at=t0 + 5, unsent_draft=None)
            for kind in kinds:
                fallback = rng.random() < 0.03
                module.AgentTurn.create(player=player, agent_id=player.associate_code, kind=kind,
                                        status="fallback" if fallback else "ok",
                                        text="I will pick A if you do" if kind != "decision" else None,
                                        choice=agent_choice if kind == "decision" else None,
                                        fallback_reason="timeout" if fallback else None,
                                        started_at=t0, deadline_at=t0 + 40, finished_at=t0 + 2)
                module.LlmCall.create(player=player, session_code=session.code, call_id=f"{code}-{app}-{r}-{kind}",
                                      agent_id=player.associate_code, round_number=r, turn=kind, attempt=1,
                                      provider="openai", model="gpt-4o", parameters="{}", prompt_version="v1",
                                      messages=prompt, raw_reply='{"message": "I will pick A if you do"}',
                                      parsed="I will pick A if you do", status="ok", input_tokens=900,
                                      output_tokens=40, cost=0.002, time_sent=t0, time_first_byte=t0 + 1,
                                      time_done=t0 + rng.uniform(0.8, 3.0), retries=0, simulated=False)
            pages = (["RoundStart", "Message1", "Read1", "Message2", "Read2", "Decision", "Result"] if with_chat
                     else ["RoundStart", "Decision", "Result"])
            for index, page in enumerate(pages):
                # everyone leaves RoundStart together; other pages end at each one's own pace
                completed = int(t0 + index * 10 + (0 if page == "RoundStart" else rng.uniform(0, 9)))
                page_lines.append(f"{session.code},{player.participant.id_in_session},{code},"
                                  f"{(game_index * rounds + r) * 10 + index},{app},{page},{completed},"
                                  f"{r},0,{int(page == 'RoundStart')}\n")
    for start in range(0, len(page_lines), 50):  # oTree writes its page times in batches of ~50
        db.add(PageTimeBatch(text="".join(page_lines[start:start + 50])))
    for participant in session.get_participants():
        participant.visited = True
        participant._current_app_name = "game_with_chat"
        participant._current_page_name = "Decision"
        participant._round_number = rounds
        participant._last_page_timestamp = int(time.time()) - rng.randint(0, 30)
        participant._index_in_pages = 40
    db.commit()


def timed_get(client, url: str, repeat: int) -> tuple[float, int]:
    durations = []
    size = 0
    for _ in range(repeat):
        started = time.perf_counter()
        response = client.get(url)
        durations.append(time.perf_counter() - started)
        assert response.status_code == 200, (url, response.status_code, response.text[:300])
        size = len(response.content)
    return statistics.median(durations), size


def bench_arguments(description: str, repeat: int) -> argparse.Namespace:
    """The options of the benches on a finished session (this one and bench/exports.py)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--participants", type=int, default=72)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=repeat)
    parser.add_argument("--database-url", default="")
    return parser.parse_args()


@contextlib.contextmanager
def finished_session(args):
    """An H-F session of ``args.participants`` x ``args.rounds`` created with oTree and filled as a
    finished one (``fill_session``), and a client of oTree's own ASGI app: (client, session code)."""
    os.environ.pop("OTREE_AUTH_LEVEL", None)
    os.environ.pop("OTREE_PRODUCTION", None)
    os.environ["LAB_MAX_ROUNDS_PER_GAME"] = str(args.rounds)
    from lab_load import bench_database
    from labserver.workdir import away_from_the_lab

    # Never in the lab's database: a folder of its own, with SQLite in memory, or a new PostgreSQL
    # database beside --database-url's, dropped at the end (bench_database).
    with bench_database(args.database_url, "finished_session") as database_url, \
            away_from_the_lab(database_url, PROJECT):
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

        yield TestClient(app), code


def main() -> None:
    args = bench_arguments(__doc__.splitlines()[0], repeat=15)
    with finished_session(args) as (client, code):
        measure(args, client, code)


def measure(args, client, code: str) -> None:
    timed_get(client, f"/LabDashboardData/{code}", 2)  # warm: imports, caches
    timed_get(client, f"/session_data/{code}", 2)
    dashboard, size = timed_get(client, f"/LabDashboardData/{code}", args.repeat)
    page, page_size = timed_get(client, f"/LabDashboard/{code}", max(3, args.repeat // 3))
    baseline, baseline_size = timed_get(client, f"/session_data/{code}", args.repeat)
    database = "PostgreSQL" if args.database_url.startswith("postgres") else "SQLite"
    print(f"{args.participants} participants x {args.rounds} rounds x 2 games ({database}): "
          f"dashboard data {size / 1024:.0f} KiB, page {page_size / 1024:.0f} KiB in {page * 1000:.0f} ms; "
          f"oTree's Data tab data {baseline_size / 1024:.0f} KiB in {baseline * 1000:.0f} ms")
    print(f"dashboard data response (median of {args.repeat}): {dashboard * 1000:.0f} ms = "
          f"{dashboard / baseline:.2f} x oTree's Data tab data")


if __name__ == "__main__":
    main()
