"""kill -9 the production server mid-round with agent turns in flight, start it again, finish
the session: every submitted message and decision is there, every round complete."""

import threading

import pytest

from tests.http_participant import HttpParticipant

SHORT = dict(rounds_per_game=2, language="en", message_1_seconds=10, read_1_seconds=6, message_2_seconds=10,
             read_2_seconds=6, decision_seconds=8, result_seconds=6,
             llm_provider="simulated", llm_simulated_latency=1.5)


@pytest.mark.server
def test_server_killed_mid_round_resumes_and_loses_nothing(lab_server, database_url):
    server = lab_server(database_url)
    session = server.create_session("hf_informed_wc_first", 2, **SHORT)
    killed = threading.Event()

    def kill_when_agent_thinks(participant, page, index):
        # First participant waits for the agent's first message: its turn is in flight.
        if page == "WaitMessage1" and not killed.is_set():
            killed.set()
            server.restart(kill=True)

    participants = [HttpParticipant(server.base_url, p["code"], messages={1: f"hello from {i}", 2: "A?"})
                    for i, p in enumerate(session["participants"])]
    participants[0].on_page = kill_when_agent_thinks
    threads = [threading.Thread(target=p.play, kwargs=dict(timeout=300)) for p in participants]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=320)
    assert killed.is_set(), "the server was killed mid-round"
    assert all(p.done for p in participants), server.log()[-3000:]

    code = session["code"]
    decisions = server.export("payment", "custom_export_decisions", code)
    for participant in participants:
        for game in ("WC", "WoC"):
            human = [d for d in decisions if d["player_code"] == participant.code and d["game"] == game]
            agents = [d for d in decisions if d["associate_code"] == participant.code and d["game"] == game]
            assert sorted(int(d["round"]) for d in human) == [1, 2]
            assert sorted(int(d["round"]) for d in agents) == [1, 2]
    messages = server.export("payment", "custom_export_messages", code)
    human_messages = {(m["sender_code"], m["round"], m["stage"]): m for m in messages if m["sender_kind"] == "human"}
    agent_messages = [m for m in messages if m["sender_kind"] == "agent"]
    assert len(human_messages) == 2 * 2 * 2 and len(agent_messages) == 2 * 2 * 2
    # The message submitted just before the kill survived it.
    first = participants[0]
    assert human_messages[(first.code, "1", "1")]["text"] == "hello from 0"
