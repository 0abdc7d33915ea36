"""Online sessions under load, with dropouts: does anyone wait for someone who left?

Per kind (H-H, H-F), two runs on fresh servers (``otree prodserver`` in production mode, the
participants' client here, the same client as bench/lab_load.py): --small participants (72) and
--participants (300). Each participant arrives at a random moment of the first --arrival-seconds
(a Poisson stream), keeps one page socket open as a browser tab does (``/lab_notices``: what
the server's closed-tab watcher sees), thinks as in bench/lab_load.py, and --leave-share of them
(15 %) close their tab at a random page after their first and never come back. The sessions
are online (``online = true``, stand-in agents, ``dropout_closed_tab_seconds`` =
--closed-tab-seconds); both games, --rounds rounds each. As online participants do, each arrives
by the study link (PROLIFIC_PID, STUDY_ID, SESSION_ID), takes the instructions and the quiz, waits
in the lobby until a cohort forms (H-H), answers the questionnaires, and ends on the exit page
with a completion code: the whole online path (lab_load.py runs the game apps only).

Per run: participants completed (of those who stayed), stranded (a wait, past the session's first
round start, longer than the stage limit it waits for plus 30 s), stand-in pair-rounds (from the
database), page p95, server CPU per participant-round. Printed last: completed, stranded
(target 0), stand-in pair-rounds, p95 at 300 / p95 at 72 (target <= 1.5), CPU per
participant-round at 300 / at 72 (target <= 1.2).

    .venv/bin/python bench/online_load.py [--database-url postgresql://...] [--participants 300]
        [--small 72] [--rounds 2] [--arrival-seconds 120] [--leave-share 0.15] [--only hh|hf]

LAB_BENCH_THINK_SCALE=0.2 shortens every think time (a smoke run; not for the figures).
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from lab_load import (BENCH, LIMITS, PRODUCTION, SERVER_TRACE_SETTINGS, BenchParticipant,  # noqa: E402
                      FakeProviderProcess, _percentile, bench_database, cpu_seconds, create_session)
from tests.http_participant import PageSockets  # noqa: E402
from tests.lab_server import LabServer, make_project_copy  # noqa: E402

CONFIG = "{}_informed_wc_first"
# The stage each wait page waits for, and its limit (LIMITS); the round starts wait for the results.
WAITED_STAGE = {"WaitMessage1": "message_1_seconds", "WaitMessage2": "message_2_seconds",
                "WaitDecision": "decision_seconds", "RoundStart": "result_seconds"}
STRANDED_MARGIN_SECONDS = 30
CODES = "completed=BCOMPLETE,screened_out=BSCREEN,lobby_timeout=BLOBBY,partner_dropped=BPARTNER,timed_out=BTIMEOUT"
# The whole online path (the payment reads the questionnaire's answers): the project's settings.
ONLINE_SETTINGS = f"""
exec(compile(open({str(BENCH.parent / 'settings.py')!r}).read(), "settings.py", "exec"))
"""


def online_project(work: Path) -> Path:
    make_project_copy(work)
    (work / "settings.py").unlink()
    (work / "settings.py").write_text(ONLINE_SETTINGS + SERVER_TRACE_SETTINGS)
    return work


def study_link(session: dict, number: int) -> str:
    return (f"{session['session_wide_url']}?PROLIFIC_PID=bench{number:019d}&STUDY_ID=benchstudy"
            f"&SESSION_ID=benchsub{number:016d}")


class Left(Exception):
    """The participant closed their tab."""


class OnlineParticipant(BenchParticipant):
    """Arrives at ``arrives_at`` by the study link, holds a tab open from the first page on, and
    (if ``leave_after``) closes it for good after that many requests."""

    leave_after = None
    left = False

    def _request(self, method, url, page, **kwargs):
        if self.leave_after is not None and getattr(self, "requests", 0) >= self.leave_after:
            raise Left()
        return super()._request(method, url, page, **kwargs)


def stand_in_pair_rounds(database_url: str, workdir: Path) -> int:
    import sqlalchemy

    engine = sqlalchemy.create_engine(database_url or f"sqlite:///{workdir / 'db.sqlite3'}")
    total = 0
    with engine.connect() as connection:
        for app in ("game_with_chat", "game_without_chat"):
            total += connection.execute(sqlalchemy.text(
                f"SELECT COUNT(DISTINCT group_id) FROM {app}_player WHERE dropout = 'stand_in' "
                "AND choice IS NOT NULL")).scalar()
    engine.dispose()
    return total


def run(kind: str, participants: int, args, database_url: str) -> dict:
    rng = random.Random(f"{kind}-{participants}")
    with tempfile.TemporaryDirectory() as tmp, FakeProviderProcess(0.0) as fake:
        workdir = online_project(Path(tmp) / "project")
        fields = dict(language="en", online=True, stand_in="agent", dropout_closed_tab_seconds=args.closed_tab_seconds,
                      prolific_completion_codes=CODES, online_lobby_seconds=args.arrival_seconds + 120,
                      llm_provider="openai_compatible", llm_model="fake-gpt", llm_base_url=fake.base_url_openai,
                      llm_api_key_env="FAKE_LLM_KEY", llm_requests_per_minute=6000, session_budget=0,
                      llm_check_model=False)
        server = LabServer(workdir, database_url, FAKE_LLM_KEY="bench-dummy-key",
                           LAB_MAX_ROUNDS_PER_GAME=str(args.rounds), **PRODUCTION).start()
        tabs = None
        try:
            session = create_session(server, CONFIG.format(kind), participants, rounds_per_game=args.rounds,
                                     **LIMITS, **fields)
            tabs = PageSockets(server.base_url)
            players = [OnlineParticipant(server.base_url, "", entry_url=study_link(session, number), page_sockets=tabs)
                       for number in range(participants)]
            arrival = 0.0
            for player in players:  # a Poisson stream over the arrival window
                arrival += rng.expovariate(participants / args.arrival_seconds)
                player.arrives_at = min(arrival, args.arrival_seconds)
            for player in rng.sample(players, round(args.leave_share * participants)):
                player.leave_after = rng.randint(2, 12 * args.rounds * 2)  # a random page after the first

            def attend(player):
                time.sleep(player.arrives_at)
                try:
                    player.play(timeout=1800)
                except Left:
                    player.left = True
                finally:
                    if player.code:
                        tabs.close(player.code)

            cpu_before, started = cpu_seconds(server.process.pid), time.monotonic()
            threads = [threading.Thread(target=attend, args=(p,)) for p in players]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            cpu, wall = cpu_seconds(server.process.pid) - cpu_before, time.monotonic() - started
            stand_ins = stand_in_pair_rounds(database_url, workdir)
        finally:
            if tabs is not None:
                tabs.close_all()
            server.stop()
    stayed = [p for p in players if not p.left]
    stranded, stranded_at = set(), {}
    for p in players:
        for app, page, round_number, _, _, waited in p.landings[1:]:  # past the session's first round start
            limit = LIMITS.get(WAITED_STAGE.get(page, ""), 0)
            if waited > limit + STRANDED_MARGIN_SECONDS:
                stranded.add(p.code)
                where = f"{app}/{page}/r{round_number}"
                stranded_at[where] = max(stranded_at.get(where, 0.0), waited)
    times = sorted(t.seconds for p in players for t in p.timings)
    return dict(kind=kind, participants=participants, stayed=len(stayed), completed=sum(p.done for p in stayed),
                left=len(players) - len(stayed), stranded=len(stranded), stranded_at=stranded_at, stand_in_pair_rounds=stand_ins,
                p95=_percentile(times, 95), cpu_per_round=cpu / (participants * args.rounds * 2), wall=wall)


def describe(r: dict) -> str:
    return (f"{r['kind'].upper()} {r['participants']:>4}: completed {r['completed']}/{r['stayed']} who stayed "
            f"({r['left']} left), stranded {r['stranded']}, stand-in pair-rounds {r['stand_in_pair_rounds']}, "
            f"page p95 {r['p95']:.3f} s, server CPU {r['cpu_per_round']:.3f} s/participant-round [{r['wall']:.0f} s]"
            + ("".join(f"\n    stranded at {where}: longest wait {seconds:.0f} s"
                       for where, seconds in sorted(r["stranded_at"].items()))))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--participants", type=int, default=300)
    parser.add_argument("--small", type=int, default=72)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--arrival-seconds", type=float, default=120)
    parser.add_argument("--leave-share", type=float, default=0.15)
    parser.add_argument("--closed-tab-seconds", type=float, default=20,
                        help="the sessions' dropout_closed_tab_seconds (default 20; the config's default is 90)")
    parser.add_argument("--database-url", default="", help="PostgreSQL server URL; default: SQLite in a temp folder")
    parser.add_argument("--only", choices=["hh", "hf"], action="append")
    args = parser.parse_args()
    results = {}
    for kind in args.only or ["hh", "hf"]:
        for size in (args.small, args.participants):
            with bench_database(args.database_url, f"online_{kind}_{size}") as database_url:
                results[(kind, size)] = run(kind, size, args, database_url)
            print(describe(results[(kind, size)]), flush=True)
    figures = []
    for kind in args.only or ["hh", "hf"]:
        small, large = results[(kind, args.small)], results[(kind, args.participants)]
        figures.append(f"{kind.upper()}: completed {small['completed'] + large['completed']}/"
                       f"{small['stayed'] + large['stayed']}, stranded {small['stranded'] + large['stranded']} "
                       f"[target 0], stand-in pair-rounds {small['stand_in_pair_rounds'] + large['stand_in_pair_rounds']}"
                       f", p95 {args.participants}/{args.small} {large['p95'] / small['p95']:.2f} [target <= 1.5], "
                       f"CPU/participant-round {args.participants}/{args.small} "
                       f"{large['cpu_per_round'] / small['cpu_per_round']:.2f} [target <= 1.2]")
    print("online load: " + "; ".join(figures))


if __name__ == "__main__":
    main()
