"""oTree's participant, player and extra-model lookups go through SQLAlchemy's
compiled-query cache (lab/server/baked_lookups.py), and give what oTree's own code gives: the same rows, the same errors,
on SQLite and PostgreSQL. Run in-process with oTree's own setup and a real database.
"""

import json

from tests import processes
from tests.lab_server import PYTHON, lab_env

SCRIPT = r"""
import json
from otree.main import setup
setup()
import otree.session
from otree.database import db, session_scope
from otree.models import Participant
from sqlalchemy.sql import compiler
import game_with_chat as wc

original = wc.Player.objects_get.__func__._lab_otree_original
compiled = []
real_init = compiler.SQLCompiler.__init__
def counting_init(self, *args, **kwargs):
    compiled.append(1)
    real_init(self, *args, **kwargs)
compiler.SQLCompiler.__init__ = counting_init

def error_of(call):
    try:
        call()
    except Exception as error:
        return type(error).__name__ + (f" {error.status_code}" if hasattr(error, "status_code") else "")
    return None

with session_scope():
    session = otree.session.create_session("hh_uninformed_wc_first", num_participants=4,
                                           modified_session_config_fields=dict(rounds_per_game=2))
    session_id = session.id
result = {}
with session_scope():
    participants = db.query(Participant).filter_by(session_id=session_id).order_by(Participant.id).all()
    same = []
    for p in participants:
        for round_number in (1, 2):
            ours = wc.Player.objects_get(participant=p, round_number=round_number)
            theirs = original(wc.Player, participant=p, round_number=round_number)
            same.append(ours is theirs and ours.participant_id == p.id and ours.round_number == round_number)
        same.append(db.get_or_404(Participant, code=p.code) is p)
    result["same rows"] = all(same) and len(same) == 12
    first = participants[0]
    # None is IS NULL, not a bound value: oTree's own path answers it
    result["null criterion"] = wc.Player.objects_get(participant=first, round_number=1, choice=None).participant_id == first.id
    result["by id"] = wc.Player.objects_get(id=wc.Player.objects_get(participant=first, round_number=2).id).round_number
    result["no row"] = error_of(lambda: wc.Player.objects_get(participant=first, round_number=99))
    result["oTree's no row"] = error_of(lambda: original(wc.Player, participant=first, round_number=99))
    result["many rows"] = error_of(lambda: wc.Player.objects_get(round_number=1))
    result["oTree's many rows"] = error_of(lambda: original(wc.Player, round_number=1))
    result["unknown participant"] = error_of(lambda: db.get_or_404(Participant, code="no-such-code"))
    # A changed row is flushed before the lookup reads, as oTree's own query does.
    first.label = "seat-1"
    result["autoflush"] = db.get_or_404(Participant, label="seat-1") is first
    # ExtraModel.filter: the rows of a link, in id order, as oTree's own gives them.
    filter_original = wc.Message.filter.__func__._lab_otree_original
    player = wc.Player.objects_get(participant=first, round_number=1)
    for stage in (2, 1, 2):
        wc.Message.create(player=player, stage=stage, sender_code=first.code, sender_kind="human", text=f"s{stage}")
    other = wc.Player.objects_get(participant=participants[1], round_number=1)
    wc.Message.create(player=other, stage=1, sender_code="x", sender_kind="human", text="other")
    ours = [m.id for m in wc.Message.filter(player=player)]
    result["extra rows"] = ours == [m.id for m in filter_original(wc.Message, player=player)] and len(ours) == 3 \
        and ours == sorted(ours)
    result["extra rows by two fields"] = [m.text for m in wc.Message.filter(player=player, stage=2)]
    result["extra rows, a criterion None"] = len(wc.Message.filter(player=player, unsent_draft=None))
    result["extra rows, no instance"] = error_of(lambda: wc.Message.filter(stage=1))
    del compiled[:]
    for _ in range(20):
        for p in participants:
            wc.Player.objects_get(participant=p, round_number=1)
            db.get_or_404(Participant, code=p.code)
        wc.Message.filter(player=player)
    result["compilations for 180 lookups"] = len(compiled)
    del compiled[:]
    for p in participants:
        original(wc.Player, participant=p, round_number=1)
    result["oTree's compilations for 4 lookups"] = len(compiled)
print("RESULT " + json.dumps(result))
"""


def test_lookups_match_otrees_own_and_compile_once(project_copy, database_url):
    # SQLite ('') is oTree's db.sqlite3 in the project copy, on disk.
    out = processes.run([PYTHON, "-c", SCRIPT], cwd=project_copy, env=lab_env(database_url), capture_output=True,
                        text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.split("RESULT ", 1)[1])
    assert result["same rows"]
    assert result["null criterion"]
    assert result["by id"] == 2
    assert result["no row"] == result["oTree's no row"] == "NoResultFound"
    assert result["many rows"] == result["oTree's many rows"] == "MultipleResultsFound"
    assert result["unknown participant"] == "HTTPException 404"
    assert result["autoflush"]
    assert result["extra rows"]
    assert result["extra rows by two fields"] == ["s2", "s2"]
    assert result["extra rows, a criterion None"] == 3
    assert result["extra rows, no instance"] == "ValueError"  # oTree's guard against a forgotten link
    # Once per shape at most (both shapes were compiled above); oTree compiles on every call.
    assert result["compilations for 180 lookups"] == 0
    assert result["oTree's compilations for 4 lookups"] >= 4
