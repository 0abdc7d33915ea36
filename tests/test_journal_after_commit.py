"""A settled call leaves the call journal only once its ``LlmCall`` row is committed
(lab/agent_runtime/journal.py, ``forget_when_committed``).

Settling a turn writes its calls as ``LlmCall`` rows in the page's transaction. Were the journal's
rows deleted at that moment, before the commit, a server killed (or a transaction rolled back) in
between would lose the calls from both records, and with them their cost from the budget. Here a
settle whose transaction rolls back keeps the call in the journal, the next start's
recovery puts it on record once, and a committed settle empties the journal.
"""

import json

from tests import processes
from tests.lab_server import PYTHON, lab_env

SCRIPT = r"""
import json
from otree.main import setup
setup()
import otree.session
from otree.database import session_scope
from agents.types import CallRecord
from lab.agent_runtime.journal import call_journal, forget_when_committed
from lab.agent_runtime.startup import recover_journaled_calls
from lab.agent_runtime.turns import _store_call
import game_with_chat as app

def record(call_id):
    return CallRecord(call_id=call_id, agent_id="agent-1", round_number=1, turn="message_1", attempt=1,
                      provider="simulated", model="persona", parameters={}, prompt_version="v",
                      messages=[{"role": "user", "content": "hi"}], raw_reply="hello", parsed="hello",
                      status="ok", cost=0.01, prompt_tokens=5)

def settle_calls(player, call_ids):
    # What settle() does with a turn's calls: their rows, then the journal's rows go.
    for call_id in call_ids:
        _store_call(player, app.TABLES, record(call_id).to_dict())
    forget_when_committed(call_ids)

def journaled():
    return sorted(row[4]["call_id"] for row in call_journal().orphans())

def on_record():
    return sorted(c.call_id for c in app.LlmCall.filter())

result = {}
with session_scope():
    session = otree.session.create_session("hf_informed_wc_first", num_participants=1,
                                           modified_session_config_fields=dict(rounds_per_game=1,
                                                                               llm_provider="simulated"))
    session_id = session.id
journal = call_journal()
with session_scope():
    player = app.Player.objects_first(session_id=session_id, round_number=1)
    context = (player.session.code, app.GAME, player.id)
for call_id in ("lost-commit", "committed"):
    journal.write(context, record(call_id), "done")

try:
    with session_scope():
        settle_calls(app.Player.objects_first(session_id=session_id, round_number=1), ["lost-commit"])
        result["journaled_before_the_commit"] = journaled()
        raise RuntimeError("the request dies before its commit")
except RuntimeError:
    pass
with session_scope():
    result["after_rollback"] = dict(journaled=journaled(), on_record=on_record())

with session_scope():
    settle_calls(app.Player.objects_first(session_id=session_id, round_number=1), ["committed"])
with session_scope():
    result["after_commit"] = dict(journaled=journaled(), on_record=on_record())

with session_scope():  # the next start
    result["recovered"] = recover_journaled_calls()
with session_scope():
    result["after_recovery"] = dict(journaled=journaled(), on_record=on_record())
with session_scope():
    result["recovered_again"] = recover_journaled_calls()
print("RESULT " + json.dumps(result))
"""


def test_a_call_leaves_the_journal_only_when_its_row_is_committed(project_copy, tmp_path, database_url):
    env = lab_env(database_url, LAB_CALL_JOURNAL=str(tmp_path / "journal.sqlite3"))
    out = processes.run([PYTHON, "-c", SCRIPT], cwd=project_copy, env=env, capture_output=True, text=True,
                        timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.split("RESULT ", 1)[1])
    assert result["journaled_before_the_commit"] == ["committed", "lost-commit"]
    assert result["after_rollback"] == dict(journaled=["committed", "lost-commit"], on_record=[])
    assert result["after_commit"] == dict(journaled=["lost-commit"], on_record=["committed"])
    assert result["recovered"] == 1
    assert result["after_recovery"] == dict(journaled=[], on_record=["committed", "lost-commit"])
    assert result["recovered_again"] == 0
