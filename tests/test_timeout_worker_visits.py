"""oTree's worker visits, after a wait page, only the participants whose page has not been shown
(lab/server/timeout_worker.py, fix 4).

After every wait page oTree's worker loads, 10 s later, the page each participant should be on,
so that a closed tab's next page starts its timer. A participant whose browser has shown that
page already (its timer runs) needs no visit: at a round start of 72 those visits were some 50
page renders queued with the participants' own submissions. Everyone else is visited as oTree
visits them: on the wait page still, just moved on and not yet shown the page, or a closed tab.
The end-to-end case (a closed tab moved on at a round start and still timed out) is in
tests/test_round_start_moves_everyone_on.py.
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
from otree.database import session_scope
from otree.models.participant import Participant
from lab.server.timeout_worker import unvisited_participants

WAIT_PAGE = 5
with session_scope():
    session = otree.session.create_session("hh_informed_wc_first", num_participants=6,
                                           modified_session_config_fields=dict(rounds_per_game=1))
    on_wait_page, shown, not_yet_shown, closed_tab, further, other = session.get_participants()
    on_wait_page._index_in_pages = WAIT_PAGE
    for p in (shown, not_yet_shown, closed_tab):
        p._index_in_pages = WAIT_PAGE + 1
    shown._timeout_page_index = WAIT_PAGE + 1        # its browser has shown the page: timer running
    not_yet_shown._timeout_page_index = WAIT_PAGE - 1
    closed_tab._timeout_page_index = None
    further._index_in_pages, further._timeout_page_index = WAIT_PAGE + 2, WAIT_PAGE + 2
    other._index_in_pages = WAIT_PAGE + 1             # not among the wait page's participants
    names = {p.id: name for p, name in zip(session.get_participants(),
             ["on_wait_page", "shown", "not_yet_shown", "closed_tab", "further", "other"])}
    ids = [p.id for p in session.get_participants() if names[p.id] != "other"]
with session_scope():
    visited = sorted(names[p.id] for p in unvisited_participants(ids, WAIT_PAGE))
print("RESULT " + json.dumps(visited))
"""


def test_the_worker_visits_only_participants_whose_page_was_not_shown(project_copy):
    out = processes.run([PYTHON, "-c", SCRIPT], cwd=project_copy, env=lab_env(), capture_output=True, text=True,
                        timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    visited = json.loads(out.stdout.split("RESULT ", 1)[1])
    assert visited == ["closed_tab", "not_yet_shown", "on_wait_page"]
