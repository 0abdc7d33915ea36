"""A session created on the admin's create-session page while the server is busy comes out whole,
and the sessions already running lose nothing (SQLite and PostgreSQL).

oTree's server has one database connection (SQLAlchemy's ``StaticPool``, PostgreSQL too), shared
by everything that touches the database and kept to one transaction at a time by its global
lock. Its admin page creates a session in a worker thread *without* that lock, so the creation's
transaction and those of the page requests, sockets and the lab's closed-tab watcher (which
looks at every online session, the new one included) ran on the same connection at once: one
committed or rolled back the other's work half-way. Measured: an online H-H session of 300,
created with nothing else running, came out with a player in no group (the watcher's looks
alone), or the creation failed with a foreign-key error; a 300-participant bench run created
that way stranded a whole cohort. The creation now holds the lock, as oTree's REST creation
always did: page requests wait for it (the creation page shows its progress meanwhile).
"""

from __future__ import annotations

import threading
import time

import pytest
import requests

from tests.test_online_entry import CODES
from tests.test_refused_session import create_with_admin_form

PARTICIPANTS = 120
APPS = ("instructions", "game_with_chat", "game_without_chat", "questionnaire", "payment")
SINGLES = ("game_with_chat", "game_without_chat", "payment")  # online H-H: a group of one each until the lobby


def players_out_of_place(server, session_code: str) -> dict:
    """Per app, the session's players with no group, and in the apps where an online H-H
    session's participants are each a group of one until their cohort forms, those who are not."""
    session = f"(SELECT id FROM otree_session WHERE code = '{session_code}')"
    sql = " UNION ALL ".join(
        f"SELECT '{app}', COUNT(*) FROM {app}_player WHERE session_id = {session} AND (group_id IS NULL"
        + (" OR id_in_group <> 1 OR group_id IN (SELECT group_id FROM {0}_player GROUP BY group_id "
           "HAVING COUNT(*) > 1)".format(app) if app in SINGLES else "") + ")" for app in APPS)
    sql += f" UNION ALL SELECT 'players', COUNT(*) FROM payment_player WHERE session_id = {session}"
    return {table: count for table, count in server.query(sql) if count}


@pytest.mark.server
def test_a_session_created_on_the_admin_page_while_others_run_comes_out_whole(lab_server, database_url):
    server = lab_server(database_url, LAB_MAX_ROUNDS_PER_GAME="2", FAKE_LLM_KEY="dummy-key")
    running = server.create_session("hh_informed_wc_first", 2, rounds_per_game=1)
    busy_participant = running["participants"][0]["code"]
    answers, stop = [], threading.Event()

    def participant_reloading() -> None:
        # Someone of the running session reloads their page all along: page requests, each
        # a transaction of its own on the server's one connection.
        while not stop.is_set():
            answers.append(requests.get(server.start_url(busy_participant), timeout=120).status_code)

    reloading = threading.Thread(target=participant_reloading)
    reloading.start()
    try:
        reply = create_with_admin_form(
            server, "hh_informed_wc_first", PARTICIPANTS, rounds_per_game=2, language="en", online=True,
            stand_in="agent", prolific_completion_codes=",".join(f"{k}={v}" for k, v in CODES.items()),
            llm_provider="openai_compatible", llm_model="fake-gpt", llm_base_url="http://127.0.0.1:9/v1",
            llm_api_key_env="FAKE_LLM_KEY", llm_check_model=False, dropout_closed_tab_seconds=5)
        time.sleep(1)
    finally:
        stop.set()
        reloading.join()

    assert "session_url" in reply, reply
    code = reply["session_url"].rstrip("/").rsplit("/", 1)[1]
    assert players_out_of_place(server, code) == {"players": PARTICIPANTS}
    sessions = requests.get(f"{server.base_url}/api/sessions", timeout=30).json()
    assert len(sessions) == 2 and {s["num_participants"] for s in sessions} == {2, PARTICIPANTS}
    assert answers and set(answers) == {200}, sorted(set(answers))
    assert "Traceback" not in server.log(), server.log()[-3000:]
