"""kill -9 the production server mid-round with agent turns in flight, start it again, finish
the session: every submitted message and decision is there, every round complete.

The server comes back in another environment: an OpenAI key and base URL (tests/fake_llm_server.py)
appear, and the key variable of a second session's model is gone. Each session keeps the model
resolved when it was created: the first, created with llm_provider empty and no key, plays on
with the simulated model; the second's model cannot be called any more, which the dashboard and
the log say, and its agents' turns fall back, flagged."""

import threading

import pytest
import requests

from tests.http_participant import HttpParticipant

SHORT = dict(rounds_per_game=2, language="en", message_1_seconds=10, read_1_seconds=6, message_2_seconds=10,
             read_2_seconds=6, decision_seconds=8, result_seconds=6, llm_simulated_latency=1.5)
NO_KEYS = dict(OPENAI_API_KEY="", ANTHROPIC_API_KEY="", OPENAI_BASE_URL="")
KEY_VARIABLE = "LAB_RESTART_TEST_KEY"


@pytest.mark.server
def test_server_killed_mid_round_resumes_and_loses_nothing(lab_server, database_url, fake_llm):
    server = lab_server(database_url, LAB_MAX_ROUNDS_PER_GAME="2", **NO_KEYS, **{KEY_VARIABLE: "sk-test-key-of-the-first-server"})
    session = server.create_session("hf_informed_wc_first", 2, **SHORT)  # llm_provider "": the environment's
    keyed = server.create_session("hf_informed_wc_first", 1, **dict(
        SHORT, rounds_per_game=1, llm_provider="openai", llm_base_url=fake_llm.base_url_openai,
        llm_api_key_env=KEY_VARIABLE, llm_max_retries=0))
    model_checks = fake_llm.request_count  # the second session's check call at its creation
    killed = threading.Event()

    def kill_when_agent_thinks(participant, page, index):
        # First participant waits for the agent's first message: its turn is in flight.
        if page == "WaitMessage1" and not killed.is_set():
            killed.set()
            del server.env[KEY_VARIABLE]
            server.env.update(OPENAI_API_KEY="sk-test-key-set-after-the-creation", OPENAI_BASE_URL=fake_llm.base_url_openai)
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

    # The model frozen at creation: simulated before the kill and after it, though the server
    # now has an OpenAI key; nothing reached the (fake) OpenAI server.
    calls = server.export("payment", "custom_export_llm_calls", code)
    assert calls and {(call["provider"], call["model"]) for call in calls} == {("simulated", "simulated-persona")}
    assert fake_llm.request_count == model_checks

    # The other session's model needs a variable this server lacks: the dashboard says so before
    # any turn, the log once its agents need it, and their turns fall back, flagged.
    health = requests.get(f"{server.base_url}/LabDashboardData/{keyed['code']}", timeout=30).json()["agents"]
    assert health["model"] == "openai / gpt-4o", health
    assert f"{KEY_VARIABLE} is not set" in health["model_problem"], health
    assert requests.get(f"{server.base_url}/LabDashboardData/{code}", timeout=30).json()["agents"]["model_problem"] is None
    alone = HttpParticipant(server.base_url, keyed["participants"][0]["code"]).play(timeout=300)
    assert alone.done
    agent_rows = [d for d in server.export("payment", "custom_export_decisions", keyed["code"])
                  if d["player_kind"] == "agent"]
    assert len(agent_rows) == 2 and all(row["timed_out"] == "True" for row in agent_rows), agent_rows
    keyed_calls = server.export("payment", "custom_export_llm_calls", keyed["code"])
    assert keyed_calls and all(call["status"] == "config_error" and KEY_VARIABLE in call["error"]
                               for call in keyed_calls), keyed_calls
    assert f"Session {keyed['code']}: this server cannot call its model openai / gpt-4o" in server.log()
    assert fake_llm.request_count == model_checks
