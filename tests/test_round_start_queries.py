"""Zero wait: the request that starts a round's agent turns costs the same few
database statements whatever the number of participants.

RoundStart is a wait page for everyone: the last participant to arrive starts every agent's
first turn of the round, and all the others' page loads queue behind that one request. Its
statements are counted in-process (oTree's own setup, an in-memory database, the simulated
model) with 4 and with 24 participants.
"""

import json

from tests import processes
from tests.lab_server import PYTHON, lab_env

SCRIPT = r"""
import json, os, sys
os.environ["OTREE_IN_MEMORY"] = "1"
from otree.main import setup
setup()
import otree.session
from otree.database import engine, session_scope
from sqlalchemy import event
from lab.agent_runtime.engine import ENGINE
from lab.agent_runtime.turns import RUNNING, turn_key
import game_with_chat as wc, game_without_chat as woc

statements = []
event.listen(engine, "before_cursor_execute", lambda *args: statements.append(args[2]))
result = {}
for n in (4, 24):
    with session_scope():
        session = otree.session.create_session("hf_uninformed_wc_first", num_participants=n,
            modified_session_config_fields=dict(rounds_per_game=2, llm_provider="simulated", llm_simulated_latency=5))
        session_id = session.id
    for app in (wc, woc):
        with session_scope():
            subsession = app.Subsession.objects_get(session_id=session_id, round_number=1)
            del statements[:]
            app.start_agent_turns(subsession)
            count = len(statements)
            app.start_agent_turns(subsession)  # a second call (a reload) starts nothing twice
        with session_scope():
            subsession = app.Subsession.objects_get(session_id=session_id, round_number=1)
            turns = [t for p in subsession.get_players() for t in app.AgentTurn.filter(player=p)]
            result[f"{app.GAME}-{n}"] = dict(
                statements=count, turns=len(turns), kinds=sorted({t.kind for t in turns}),
                running=sum(t.status == RUNNING for t in turns),
                engine=sum(ENGINE.future(turn_key(t.player, app.TABLES, t.kind)) is not None
                           for t in turns))
CODES = "completed=C1,screened_out=S1,lobby_timeout=L1,partner_dropped=P1,timed_out=T1"
# Online a participant's round starts when they arrive (their group alone): the seats read for
# it are theirs, not every agent's of the session (300 rows per arrival at 300 participants).
seats_loaded = []
for app in (wc, woc):
    event.listen(app.AgentSeat, "load", lambda target, context: seats_loaded.append(target.id))
for n in (4, 24):
    with session_scope():
        session = otree.session.create_session("hf_uninformed_wc_first", num_participants=n,
            modified_session_config_fields=dict(rounds_per_game=2, online=True, llm_provider="simulated",
                                                llm_simulated_latency=5, prolific_completion_codes=CODES))
        session_id = session.id
    for app in (wc, woc):
        with session_scope():
            subsession = app.Subsession.objects_get(session_id=session_id, round_number=1)
            player = subsession.get_players()[0]
            del seats_loaded[:]
            app.start_agent_turns(subsession, players=[player])
            result[f"online-{app.GAME}-{n}"] = dict(seats_loaded=len(seats_loaded),
                                                    turns=len(app.AgentTurn.filter(player=player)))
print("RESULT " + json.dumps(result))
"""


def test_round_start_statements_do_not_grow_with_participants(project_copy):
    out = processes.run([PYTHON, "-c", SCRIPT], cwd=project_copy, env=lab_env(), capture_output=True, text=True,
                        timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.split("RESULT ", 1)[1])
    for game, first in (("WC", "message_1"), ("WoC", "decision")):
        small, large = result[f"{game}-4"], result[f"{game}-24"]
        for n, counts in ((4, small), (24, large)):
            # every agent's first turn, running on the engine, once
            assert counts["turns"] == n and counts["running"] == n and counts["engine"] == n, counts
            assert counts["kinds"] == [first], counts
        assert large["statements"] == small["statements"] <= 10, result
        for n in (4, 24):  # online, one arrival: its own turn, at most its own seat read
            assert result[f"online-{game}-{n}"] == dict(seats_loaded=result[f"online-{game}-4"]["seats_loaded"],
                                                        turns=1), result
            assert result[f"online-{game}-{n}"]["seats_loaded"] <= 1, result


WAIT_PAGE_SCRIPT = r"""
import json, os
os.environ["OTREE_IN_MEMORY"] = "1"
from otree.main import setup
setup()
import otree.session
from otree.api import WaitPage
from otree.database import db, engine, session_scope
from otree.lookup import get_page_lookup
from sqlalchemy import event
import game_with_chat as wc, payment

statements = []
event.listen(engine, "before_cursor_execute", lambda *args: statements.append(args[2]))
CODES = "completed=C1,screened_out=S1,lobby_timeout=L1,partner_dropped=P1,timed_out=T1"
result = {}
for online in (False, True):
    fields = dict(rounds_per_game=2, llm_provider="simulated", online=online)
    if online:
        fields["prolific_completion_codes"] = CODES
    with session_scope():
        session = otree.session.create_session("hf_uninformed_wc_first", num_participants=4,
                                               modified_session_config_fields=fields)
        code = session.code
    for app, name in ((wc, "RoundStart"), (payment, "AllFinished")):
        with session_scope():
            participant = otree.session.Session.objects_get(code=code).get_participants()[0]
            index = next(i for i in range(1, participant._max_page_index + 1)
                         if get_page_lookup(code, i).page_class.__name__ == name)
            participant._index_in_pages = index
            page = get_page_lookup(code, index).page_class.instantiate_without_request()
            page.set_attributes(participant)
            page.wait_for_all_groups  # the session's "online" noted once per server
            db._db.expire_all()  # as after oTree's commit mid-request: every row is read again
            participant._index_in_pages  # ... as oTree's step reads the participant's anyway
            del statements[:]
            per_session = [page.wait_for_all_groups for _ in range(9)]
            asked = len(statements)
            owner = page._group_or_subsession
            ours = sorted(p.id for p in page._get_participants_for_this_waitpage(owner))
            otrees = sorted(p.id for p in WaitPage._get_participants_for_this_waitpage(page, owner))
            result[f"{name}-{'online' if online else 'lab'}"] = dict(
                per_session=sorted(set(per_session)), statements=asked, ours=ours, otrees=otrees)
print("RESULT " + json.dumps(result))
"""


def test_wait_pages_ask_the_session_once_and_find_oTrees_participants(project_copy):
    """A round start and the payment's wait ask ``wait_for_all_groups`` about nine times a request;
    the answer (the lab: the whole session; online: the group) costs no query after the first,
    not even after a commit mid-request (the session's row was read again then), and the participants the page waits for are those of oTree's own query."""
    out = processes.run([PYTHON, "-c", WAIT_PAGE_SCRIPT], cwd=project_copy, env=lab_env(), capture_output=True,
                        text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.split("RESULT ", 1)[1])
    for name in ("RoundStart", "AllFinished"):
        lab, online = result[f"{name}-lab"], result[f"{name}-online"]
        assert lab["per_session"] == [True] and online["per_session"] == [False], result
        assert lab["statements"] == online["statements"] == 0, result
        assert lab["ours"] == lab["otrees"] and len(lab["ours"]) == 4, result  # everyone of the session
        assert online["ours"] == online["otrees"] and len(online["ours"]) == 1, result  # the participant alone
