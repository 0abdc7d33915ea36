"""What a participant types reaches the data clean on SQLite and PostgreSQL (NUL and other
control characters removed, CR LF as one line break, invalid UTF-8 dropped, never an error
page), and a stage's deadline is the server's: a post that arrives after it counts as timed out
whatever the client says."""

import pytest

from lab.shared_pages.pages import DEADLINE_GRACE_SECONDS
from tests.http_participant import HttpParticipant

# Short limits: the late posts below arrive 0.6-0.7 s after them (the case).
LIMITS = dict(rounds_per_game=1, language="en", message_1_seconds=30, read_1_seconds=30, message_2_seconds=4,
              read_2_seconds=30, decision_seconds=4, result_seconds=30, llm_provider="simulated")
LATE = 0.6


class HostileParticipant(HttpParticipant):
    def answer(self, page):
        if page == "Demographics":
            return {"age": "21", "gender": "female", "major": "Eco\x00nom\x1bics"}
        return super().answer(page)


@pytest.mark.server
def test_control_characters_removed_and_late_posts_time_out(lab_server, database_url):
    assert DEADLINE_GRACE_SECONDS < LATE
    server = lab_server(database_url)
    session = server.create_session("hf_informed_wc_first", 1, **LIMITS)
    code = session["participants"][0]["code"]

    class AtMessage1(Exception):
        pass

    def stop_at_message_1(participant, page, index):
        if page == "Message1":
            raise AtMessage1

    # Message 2 and the decisions are posted 0.6 s after their limits, without timeout_happened.
    participant = HostileParticipant(server.base_url, code, messages={1: "unused", 2: "late\x00 draft\r\n!"},
                                     think_seconds=lambda page: 4 + LATE if page in ("Message2", "Decision") else 0)
    participant.on_page = stop_at_message_1
    with pytest.raises(AtMessage1):
        participant.play()
    # Message 1 as raw form data: NUL, CR LF, ESC, an invalid UTF-8 byte, an emoji.
    message_1_url = participant.http.get(participant.url, timeout=30).url
    assert "/Message1/" in message_1_url
    response = participant.http.post(
        message_1_url, data=b"message_1=hi%00there%0D%0Ayou%1B%FF%F0%9F%98%80",
        headers={"Content-Type": "application/x-www-form-urlencoded"}, timeout=30)
    assert response.status_code == 200 and "/Message1/" not in response.url, response.text[:500]
    participant.on_page = None
    participant.play(timeout=300)
    assert participant.done

    stored = server.query("SELECT stage, text, sent_in_time, unsent_draft FROM game_with_chat_message "
                          "WHERE sender_kind = 'human' ORDER BY stage")
    assert [(stage, text, bool(sent), draft) for stage, text, sent, draft in stored] == [
        (1, "hithere\nyou😀", True, None),
        (2, "", False, "late draft\n!"),  # late: not delivered, the draft kept, cleaned
    ]
    decisions = server.export("payment", "custom_export_decisions", session["code"])
    own = [d for d in decisions if d["player_kind"] == "human"]
    assert len(own) == 2 and all(d["timed_out"] == "True" for d in own), own
    [row] = server.export("payment", "custom_export", session["code"])
    assert row["major"] == "Economics"


@pytest.mark.server
def test_posts_within_the_limit_are_in_time(lab_server):
    server = lab_server()
    session = server.create_session("hf_informed_wc_first", 1, **LIMITS)
    code = session["participants"][0]["code"]
    participant = HttpParticipant(server.base_url, code, messages={1: "hello", 2: "A?"},
                                  think_seconds=lambda page: 2.5 if page in ("Message2", "Decision") else 0)
    participant.play(timeout=300)
    messages = server.export("payment", "custom_export_messages", session["code"])
    assert [m["sent_in_time"] for m in messages if m["sender_kind"] == "human"] == ["True", "True"]
    decisions = server.export("payment", "custom_export_decisions", session["code"])
    assert [d["timed_out"] for d in decisions if d["player_kind"] == "human"] == ["False", "False"]
