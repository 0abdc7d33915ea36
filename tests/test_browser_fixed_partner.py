"""Example 2 (experiments/fixed_partner_one_message.toml) in headless Chromium: one participant
against fair agents (the offline simulated model) reads the fixed-partner rules, answers the quiz's
"same associate twice?" with yes, writes one message a round, reads the agent's reply, decides and
sees the result, and never meets a Message 2 page."""

import pytest

from tests.browser_participant import Script, play_alone
from tests.lab_server import QUIZ_ANSWERS

SHORT = dict(rounds_per_game=2, language="en", message_1_seconds=15, read_1_seconds=10, decision_seconds=12,
             result_seconds=10, llm_provider="simulated")


@pytest.mark.browser
@pytest.mark.server
def test_a_participant_plays_example_2_with_one_message_a_round(lab_server):
    server = lab_server()
    session = server.create_session("fixed_partner_one_message_hf_informed_wc_first", 1, **SHORT)
    script = Script(messages={1: "Shall we both pick A?"}, choice="A",
                    quiz_answers=dict(QUIZ_ANSWERS, quiz_same_associate="True"),
                    keep_text_of=("Rules", "GameIntro", "Message1", "Quiz"))

    play_alone(server.start_url(session["participants"][0]["code"]), script)
    assert script.payout_text.endswith("CNY")
    assert script.pages.count("Quiz") == 1, "yes is the right answer with a fixed partner"
    assert not {"Message2", "Read2", "WaitMessage2"} & set(script.pages), script.pages
    assert script.pages.count("Message1") == script.pages.count("Read1") == 2
    assert "one associate for all its rounds" in script.page_texts["Rules"][0]
    assert any("exchange one message" in text for text in script.page_texts["GameIntro"])
    assert all("the same as in the other rounds of this game" in text for text in script.page_texts["Message1"])
    # The agent's reply, as text, each round; then the result of each of the 4 rounds.
    assert len(script.seen_associate_messages) == 2
    assert all(message and "did not send" not in message for message in script.seen_associate_messages)
    assert len(script.seen_results) == 4
    messages = server.export("payment", "custom_export_messages", session["code"])
    assert sorted((m["sender_kind"], m["round"], m["stage"]) for m in messages) == [
        ("agent", "1", "1"), ("agent", "2", "1"), ("human", "1", "1"), ("human", "2", "1")]
    decisions = server.export("payment", "custom_export_decisions", session["code"])
    human = [d for d in decisions if d["player_kind"] == "human"]
    assert len({d["associate_code"] for d in human if d["game"] == "WC"}) == 1
    assert len({d["associate_code"] for d in human if d["game"] == "WoC"}) == 1
    assert {d["associate_code"] for d in human if d["game"] == "WC"} != {
        d["associate_code"] for d in human if d["game"] == "WoC"}
