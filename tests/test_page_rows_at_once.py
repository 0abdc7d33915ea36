"""A page the server renders reads its group, subsession and session in one query
(lab/shared_pages/pages.py, ``PageRowsAtOnce``), where oTree's ``get_context_data`` read each with a query of
its own, and a wait page read its session twice (lab/server/baked_lookups.py, ``_loaded_by_id``). Every
query is a round trip under oTree's global lock, which every participant's page waits for.

In-process: oTree's own app (Starlette's test client) on a real database, SQLite and PostgreSQL;
the statements each page load sends are counted at the database engine, and the page is what a
participant sees.
"""

import json

from tests import processes
from tests.lab_server import PYTHON, lab_env

SCRIPT = r"""
import json, re
from otree.main import setup
setup()
import otree.session
from otree.database import engine, session_scope
from sqlalchemy import event
from starlette.testclient import TestClient
from otree.asgi import app

with session_scope():
    session = otree.session.create_session("hh_uninformed_wc_first", num_participants=2,
                                           modified_session_config_fields=dict(rounds_per_game=1, language="en"))
    code = session.get_participants()[0].code

statements = []
event.listen(engine, "before_cursor_execute", lambda *args: statements.append(args[2]))
SELECTED = re.compile(r"\b(\w+)\.id AS \1_id\b")  # the tables a SELECT loads rows of


def load(client, url):
    del statements[:]
    response = client.get(url)
    return dict(status=response.status_code, title="<h2" in response.text and "Welcome</h2>" in response.text,
                selects=[sorted(set(SELECTED.findall(s))) for s in statements if s.lstrip().upper().startswith("SELECT")])


result = {}
with TestClient(app) as client:
    page = str(client.get(f"/InitializeParticipant/{code}").url)  # redirected to the first page
    result["first"] = load(client, page)
    result["reload"] = load(client, page)
    # oTree's own reads, for comparison: the lab's two changes undone.
    import lab.server.baked_lookups, lab.shared_pages.pages
    lab.shared_pages.pages.load_page_rows = lambda page: []
    lab.server.baked_lookups._loaded_by_id = lambda *args: None
    result["oTree's reads"] = load(client, page)
print("RESULT " + json.dumps(result))
"""


def page_rows(load: dict) -> list:
    """The SELECTs of a page load that read the page's group, subsession or session."""
    wanted = ("instructions_group", "instructions_subsession", "otree_session")
    return [tables for tables in load["selects"] if set(tables) & set(wanted)]


def test_a_rendered_page_reads_its_group_subsession_and_session_at_once(project_copy, database_url):
    out = processes.run([PYTHON, "-c", SCRIPT], cwd=project_copy, env=lab_env(database_url), capture_output=True,
                        text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.split("RESULT ", 1)[1])
    for name in ("first", "reload", "oTree's reads"):
        assert result[name]["status"] == 200 and result[name]["title"], name  # the participant sees the page
    for name in ("first", "reload"):
        assert page_rows(result[name]) == [["instructions_group", "instructions_subsession", "otree_session"]], \
            result[name]
    # Without the lab's changes: one query each, as oTree reads them.
    assert sorted(page_rows(result["oTree's reads"])) == [["instructions_group"], ["instructions_subsession"],
                                                          ["otree_session"]]
    assert len(result["oTree's reads"]["selects"]) == len(result["reload"]["selects"]) + 2
