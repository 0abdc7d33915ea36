"""The replay (lab/record/replay.py, rendered by lab/experimenter/admin_views.py) as an experimenter reads it: the
associate's random (timed-out) choice flagged, messages in the order they were sent, every time
with its date and time zone, and for a message not sent in time when it was taken.

Bot sessions on SQLite and PostgreSQL: H-H (participant 2 misses the decision limit in round
1, participant 1 the message-1 limit in round 2: lab/agent_runtime/bots.py) and H-F with agents slower than
the decision limit (every agent decision is a random fallback).
"""

from __future__ import annotations

import json
import re

import pytest

from tests import processes
from tests.lab_server import PYTHON, completed_session_code, lab_env, run_bots

ROUNDS = 2
RENDER = """
import json, sys
from otree.main import setup
setup()
from otree.database import session_scope
from otree.models import Session
from lab.experimenter import admin_views
from lab.record import replay
out = {}
with session_scope():
    for code in sys.argv[1:]:
        s = Session.objects_get(code=code)
        pages = {pp.code: admin_views.render_participant(s, replay.participant_timeline(s, pp.code))
                 for pp in s.get_participants()}
        agents = {agent: admin_views.render_agent(s, replay.agent_timeline(s, game, agent))
                  for game, agent, _ in replay.agent_ids(s) if game == "WC"}
        ids = {pp.code: pp.id_in_session for pp in s.get_participants()}
        out[code] = dict(pages=pages, agents=agents, ids=ids)
print(json.dumps(out))
"""
# "2026-12-01 14:03:07 CET (UTC+0100)": a date, a time and the server's time zone
STAMP = r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} \S+ \(UTC[+-]\d{4}\)"
CARD_START = '<div class="card mb-2 lab-round" '


def _cards(page: str) -> list[tuple[str, int, str]]:
    """(game, round, the card's HTML) of each round's card, in page order."""
    cards = []
    for part in page.split(CARD_START)[1:]:
        game, round_number = re.match(r'data-game="(\w+)" data-round="(\d+)"', part).groups()
        cards.append((game, int(round_number), part.split("<details id=\"replay-pages\"", 1)[0]))
    return cards


def _session(project_copy, database, config, participants, **overrides) -> str:
    result = run_bots(project_copy, config, participants, {"rounds_per_game": ROUNDS, **overrides}, database,
                      database="lab")  # the replay reads it afterwards
    return completed_session_code(result)


@pytest.mark.server
def test_replay_flags_random_choices_orders_messages_and_dates_times(project_copy, database_url):
    database = database_url or "sqlite:///db.sqlite3"
    hh = _session(project_copy, database, "hh_informed_wc_first", 4)
    hf = _session(project_copy, database, "hf_uninformed_wc_first", 2, llm_provider="simulated",
                  llm_simulated_latency=2, decision_seconds=1)
    rendered = processes.run([PYTHON, "-c", RENDER, hh, hf], cwd=project_copy, capture_output=True, text=True,
                             timeout=300, env=lab_env(database, LAB_MAX_ROUNDS_PER_GAME=str(ROUNDS)))
    assert rendered.returncode == 0, rendered.stderr[-3000:]
    replays = json.loads(rendered.stdout.strip().splitlines()[-1])

    # H-H: whoever met participant 2 in round 1 sees the associate's choice flagged as random.
    pages, ids = replays[hh]["pages"], replays[hh]["ids"]
    late_decider = next(code for code, i in ids.items() if i == 2)
    for code, page in pages.items():
        for game, round_number, card in _cards(page):
            associate = re.search(r"participant=(\w+)", card.split("</div>", 1)[0])[1]
            flagged = "lab-associate-random" in card
            assert flagged is (associate == late_decider and round_number == 1), (code, game, round_number)
    # Participant 1's message 1 of round 2 was not sent in time: when it was taken is shown.
    late_sender = next(code for code, i in ids.items() if i == 1)
    wc_round_2 = next(card for game, r, card in _cards(pages[late_sender]) if game == "WC" and r == 2)
    assert re.search(r"taken at the limit " + STAMP, wc_round_2)

    # H-F: every agent decision fell back; the human's replay and the agent's own flag it.
    for page in replays[hf]["pages"].values():
        cards = _cards(page)
        assert len(cards) == 2 * ROUNDS and all("lab-associate-random" in card for _, _, card in cards)
    for page in replays[hf]["agents"].values():
        assert _cards(page) and all("agent chose" in card and "lab-associate-random" in card
                                    for _, _, card in _cards(page))

    # Every card: messages in the order they were sent (or taken), each time dated with its zone.
    for replay_pages in (replays[hh]["pages"], replays[hf]["pages"], replays[hf]["agents"]):
        for page in replay_pages.values():
            for game, _, card in _cards(page):
                times = [float(t) for t in re.findall(r'class="lab-message[^"]*" data-at="([\d.]+)"', card)]
                if game == "WC":
                    assert len(times) == 4 and times == sorted(times), card
                for when in re.findall(r'<small class="text-muted lab-when">(.*?)</small>', card):
                    assert re.fullmatch(r"(sent|taken at the limit) " + STAMP, when), when
                assert re.search(r" at " + STAMP, card)  # the decision's time
            shown = re.sub(r"<pre.*?</pre>", "", page, flags=re.S)  # prompts and replies are the models' text
            assert not re.search(r"(?<![\d-])\d{2}:\d{2}:\d{2}(?! \S+ \(UTC)", shown), "a time without date or zone"
