"""A participant who closes the tab mid-game: oTree's prodserver advances them at each limit,
the agent's turns complete, and the data say what happened (message not sent, random choice)."""

import time

import pytest
import requests

from tests.http_participant import PAGE_RE, HttpParticipant

LIMITS = dict(rounds_per_game=1, language="en", message_1_seconds=3, read_1_seconds=2, message_2_seconds=3,
              read_2_seconds=2, decision_seconds=3, result_seconds=2, llm_provider="simulated")


@pytest.mark.server
def test_closed_tab_is_advanced_by_the_server_and_flagged(lab_server):
    server = lab_server()
    session = server.create_session("hf_informed_wc_first", 1, **LIMITS)
    code = session["participants"][0]["code"]
    participant = HttpParticipant(server.base_url, code)

    class TabClosed(Exception):
        pass

    def close_tab_on_first_message_page(p, page, index):
        if page == "Message1":
            raise TabClosed  # the page was rendered (its limit runs), then nobody answers

    participant.on_page = close_tab_on_first_message_page
    with pytest.raises(TabClosed):
        participant.play()

    deadline = time.monotonic() + 150
    current = ""
    while time.monotonic() < deadline:
        # Where the server has moved the participant (the start URL redirects there).
        response = requests.get(f"{server.base_url}/InitializeParticipant/{code}", timeout=30,
                                allow_redirects=False)
        current = response.headers.get("location", "")
        if "game_without_chat" in current:
            break
        time.sleep(3)
    assert "game_without_chat" in current, f"still on {current}; log:\n{server.log()[-2000:]}"

    messages = server.export("payment", "custom_export_messages", session["code"])
    human = [m for m in messages if m["sender_kind"] == "human"]
    agent = [m for m in messages if m["sender_kind"] == "agent"]
    assert [m["sent_in_time"] for m in human] == ["False", "False"]
    assert len(agent) == 2
    decisions = server.export("payment", "custom_export_decisions", session["code"])
    [own] = [d for d in decisions if d["player_kind"] == "human"]
    assert own["timed_out"] == "True" and own["choice"] in ("A", "B")
    assert [d["player_kind"] for d in decisions].count("agent") == 1
    assert PAGE_RE.search(current)
