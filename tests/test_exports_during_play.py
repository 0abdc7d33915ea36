"""Exports taken while a session runs lose nothing of it (SQLite and PostgreSQL).

oTree runs its exports and the admin's Data tab without its global lock, on the server's one
database connection (``StaticPool``, PostgreSQL too) while page requests write on it: an export
letting go of the connection rolled back what a page had flushed and not yet committed. 16
participants playing while two clients downloaded the custom exports in a loop, on PostgreSQL:
a pair's decisions lost and their Result page a 500 from then on (lab/server/request_lock.py now keeps
exports under the lock). And an export taken mid-round, between a choice and the associate's,
was itself a 500 (the associate's choice read as a required field).
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from tests.http_participant import HttpParticipant

PARTICIPANTS = 16
ROUNDS = 2
LIMITS = dict(rounds_per_game=ROUNDS, language="en", message_1_seconds=30, read_1_seconds=20, message_2_seconds=30,
              read_2_seconds=20, decision_seconds=30, result_seconds=20)
EXPORTS = ("custom_export_decisions", "custom_export_messages", "custom_export")


@pytest.mark.server
def test_exports_while_participants_play_lose_nothing(lab_server, database_url):
    server = lab_server(database_url, LAB_MAX_ROUNDS_PER_GAME=str(ROUNDS))
    session = server.create_session("hh_informed_wc_first", PARTICIPANTS, **LIMITS)
    code = session["code"]
    stop, statuses, mid_session_rows = threading.Event(), [], []

    def experimenter_downloading() -> None:
        while not stop.is_set():
            for function_name in EXPORTS:
                response = requests.get(f"{server.base_url}/api/export_app_custom", timeout=60, params=dict(
                    app="payment", function_name=function_name, session_code=code))
                statuses.append(response.status_code)
                if function_name == "custom_export_decisions" and response.ok:
                    mid_session_rows.append(response.content.decode("utf-8-sig").count("\n"))
            statuses.append(requests.get(f"{server.base_url}/SessionData/{code}", timeout=60).status_code)

    downloading = [threading.Thread(target=experimenter_downloading) for _ in range(2)]
    for thread in downloading:
        thread.start()
    try:
        with ThreadPoolExecutor(PARTICIPANTS) as pool:
            players = list(pool.map(lambda p: HttpParticipant(server.base_url, p["code"]).play(timeout=400),
                                    session["participants"]))
    finally:
        stop.set()
        for thread in downloading:
            thread.join()

    assert all(player.done for player in players)
    assert statuses and set(statuses) == {200}, sorted(set(statuses))
    assert len(set(mid_session_rows)) > 1, "no export was taken while the decisions came in"
    decisions = server.export("payment", "custom_export_decisions", code)
    assert len(decisions) == PARTICIPANTS * 2 * ROUNDS
    assert all(row["associate_choice"] in ("A", "B") and row["payoff"] != "" for row in decisions)
    messages = server.export("payment", "custom_export_messages", code)
    assert len(messages) == PARTICIPANTS * 2 * ROUNDS  # two messages a round each, game with chat
    log = server.log()
    assert "Traceback" not in log and " 500 " not in log, [line for line in log.splitlines() if " 500 " in line][:5]
