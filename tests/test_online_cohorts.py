"""The lobby's cohorts (lab/online/lobby.py) in-process, on oTree's own setup with an in-memory
database: two cohorts seated in an online H-H session of 9 places, 3 rounds, cohorts of 4. In
every round of both games each member is paired with a member of their own cohort, nobody meets
the same associate twice in a game, the payment app groups each cohort together, the one never
seated stays alone, and no empty group is left behind. A session of a design of one game (the tests'
one_game_chat.toml) seats its cohort in that game alone."""

import json

from tests import processes
from tests.lab_server import PYTHON, lab_env
from tests.test_online_entry import CODES

SCRIPT = r"""
import json, os
os.environ["OTREE_IN_MEMORY"] = "1"
from otree.main import setup
setup()
import otree.session
from otree.database import session_scope
from otree.models import Participant
import game_with_chat as wc, game_without_chat as woc, payment
from lab.online import lobby

with session_scope():
    session = otree.session.create_session("hh_informed_wc_first", num_participants=9,
        modified_session_config_fields=dict(rounds_per_game=3, online=True, online_cohort_size=4,
                                            prolific_completion_codes=os.environ["CODES"]))
    session_id = session.id
with session_scope():
    session = otree.session.Session.objects_get(id=session_id)
    people = sorted(Participant.objects_filter(session=session), key=lambda p: p.id_in_session)
    # Arrival order differs from the order of places.
    numbers = [lobby.seat_cohort(session, [people[i] for i in (6, 1, 3, 0)]),
               lobby.seat_cohort(session, [people[i] for i in (2, 5, 4, 7)])]
with session_scope():
    session = otree.session.Session.objects_get(id=session_id)
    people = sorted(Participant.objects_filter(session=session), key=lambda p: p.id_in_session)
    result = dict(numbers=numbers, cohort={p.id_in_session: p.vars.get("online_cohort") for p in people})
    for app in (wc, woc):
        rounds = {}
        for r in range(1, 4):
            sub = app.Subsession.objects_get(session_id=session_id, round_number=r)
            rounds[r] = [sorted(pl.participant.id_in_session for pl in g.get_players()) for g in sub.get_groups()]
            for pl in sub.get_players():
                if len(pl.group.get_players()) == 2:
                    other = pl.get_others_in_group()[0]
                    assert pl.associate_code == other.participant.code and pl.associate_kind == "human"
        rounds["empty_groups"] = sum(not g.get_players() for r in range(1, 11)
                                     for g in app.Subsession.objects_get(session_id=session_id, round_number=r).get_groups())
        result[app.GAME] = rounds
    sub = payment.Subsession.objects_get(session_id=session_id)
    result["payment"] = sorted(sorted(pl.participant.id_in_session for pl in g.get_players()) for g in sub.get_groups())
with session_scope():
    one_game = otree.session.create_session("test_one_chat_hh_informed_wc_only", num_participants=4,
        modified_session_config_fields=dict(rounds_per_game=3, online=True, online_cohort_size=4,
                                            prolific_completion_codes=os.environ["CODES"]))
    one_game_id = one_game.id
with session_scope():
    one_game = otree.session.Session.objects_get(id=one_game_id)
    lobby.seat_cohort(one_game, list(Participant.objects_filter(session=one_game)))
with session_scope():
    result["one_game"] = [sorted(len(g.get_players()) for g in wc.Subsession.objects_get(
        session_id=one_game_id, round_number=r).get_groups()) for r in range(1, 4)]
print("RESULT " + json.dumps(result))
"""


def test_two_cohorts_paired_within_themselves(project_copy):
    codes = ",".join(f"{k}={v}" for k, v in CODES.items())
    out = processes.run([PYTHON, "-c", SCRIPT], cwd=project_copy, env=lab_env(CODES=codes, LAB_TEST_EXPERIMENTS="1"),
                        capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.split("RESULT ", 1)[1])
    assert result["numbers"] == [1, 2]
    first, second = {7, 2, 4, 1}, {3, 6, 5, 8}
    assert {int(k) for k, v in result["cohort"].items() if v == 1} == first
    assert {int(k) for k, v in result["cohort"].items() if v == 2} == second
    assert result["cohort"]["9"] is None
    for game in ("WC", "WoC"):
        met = {}
        for r in ("1", "2", "3"):
            groups = result[game][r]
            assert [9] in groups, "the one never seated stays alone"
            pairs = [g for g in groups if len(g) == 2]
            assert len(pairs) == 4 and sorted(len(g) for g in groups) == [1, 2, 2, 2, 2]
            for a, b in pairs:
                assert {a, b} <= first or {a, b} <= second, f"a pair across cohorts in {game} round {r}"
                met.setdefault(a, []).append(b)
                met.setdefault(b, []).append(a)
        assert all(len(set(others)) == 3 for others in met.values()), f"someone met an associate twice in {game}"
        assert result[game]["empty_groups"] == 0
    assert result["payment"] == [[1, 2, 4, 7], [3, 5, 6, 8], [9]]
    assert result["one_game"] == [[2, 2]] * 3  # the game with chat only: its rounds paired, no other game's
