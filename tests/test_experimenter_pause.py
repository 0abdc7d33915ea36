"""Pausing a session from the dashboard (lab/server/pause.py), where no browser helps: the production
server's timeout worker and the agents' turns.

- A closed tab on a timed page is not submitted by oTree's timeout worker while the session is
  paused, however long past its deadline; on resume the worker submits it when the time it had
  left has run out, not at once.
- A page first shown during a pause (a submission in flight as it began) gets its whole time
  from the resume, and the time left that a page shows stands still while paused.
- An agent's turn whose model call its deadline cut off during the pause is redone on resume
  with the time the deadline left (the model answers then), and the participant reads the
  agent's message, not "did not send a message in time". Both calls are on record.
"""

import json
import re
import time

import pytest
import requests

from tests.admin_client import AUTH_ENV, AdminClient
from tests.fake_llm_server import FakeLLMServer
from tests.http_participant import PAGE_RE, HttpParticipant

READ_1_SECONDS = 6
WORKER_MARGIN_SECONDS = 6  # oTree's worker submits this long after a deadline
WORKER_POLL_SECONDS = 3


class LeftThePage(Exception):
    pass


def stop_on(page_name: str):
    def on_page(participant, page, index):
        if page == page_name:
            raise LeftThePage  # the page was rendered (its time runs), then nobody answers
    return on_page


def page_of(server, participant_code: str) -> str:
    """The page the server has the participant on (the start link redirects there)."""
    response = requests.get(f"{server.base_url}/InitializeParticipant/{participant_code}", timeout=30,
                            allow_redirects=False)
    match = PAGE_RE.search(response.headers.get("location", ""))
    return match["page"] if match else response.headers.get("location", "")


@pytest.mark.server
def test_closed_tab_is_held_while_paused_and_submitted_when_its_time_left_runs_out(lab_server, database_url):
    server = lab_server(database_url, LAB_MAX_ROUNDS_PER_GAME="1", **AUTH_ENV)
    session = server.create_session("hf_informed_wc_first", 1, rounds_per_game=1, language="en",
                                    llm_provider="simulated", llm_simulated_latency=0, message_1_seconds=60,
                                    read_1_seconds=READ_1_SECONDS, message_2_seconds=60)
    code, participant = session["code"], session["participants"][0]["code"]
    admin = AdminClient(server.base_url)
    player = HttpParticipant(server.base_url, participant, on_page=stop_on("Read1"))
    with pytest.raises(LeftThePage):
        player.play()
    shown = time.monotonic()
    assert admin.act(code, "pause").status_code == 200
    # Refused, nothing written: a second pause, an unknown action, an empty message, an advance of
    # a page the participant has left (the experimenter saw an older one), no such participant.
    refused = [admin.act(code, "pause"), admin.act(code, "dance"),
               admin.act(code, "message", participant=participant, text=" \n "),
               admin.act(code, "advance", participant=participant, page_index="2"),
               admin.act(code, "advance", participant="nobody")]
    assert [r.status_code for r in refused] == [409, 400, 400, 409, 404]
    assert "moved on" in refused[3].json()["error"]
    # Past the deadline, the worker's margin and two of its polls: without the pause, submitted.
    time.sleep(READ_1_SECONDS + WORKER_MARGIN_SECONDS + 2 * WORKER_POLL_SECONDS - (time.monotonic() - shown))
    assert page_of(server, participant) == "Read1"
    assert admin.act(code, "resume").status_code == 200
    resumed = time.monotonic()
    time.sleep(READ_1_SECONDS)  # the time it had left (at most) has not run out with oTree's margin
    assert page_of(server, participant) == "Read1", "submitted before its time left had run out"
    while page_of(server, participant) == "Read1":
        assert time.monotonic() - resumed < READ_1_SECONDS + WORKER_MARGIN_SECONDS + 4 * WORKER_POLL_SECONDS, \
            f"not submitted after the resume; log:\n{server.log()[-2000:]}"
        time.sleep(1)
    assert admin.act(code, "resume").status_code == 409  # not paused
    rows = admin.interventions(code)
    assert [r["action"] for r in rows] == ["pause", "resume"]
    moved = json.loads(rows[1]["detail"])
    assert moved["page_deadlines"] == 1 and moved["worker_tasks"] >= 1


def time_left(server, participant_code: str) -> tuple[str, float]:
    """The page the participant is on and the time left its timer shows (oTree's TimeLimit.js)."""
    response = requests.get(f"{server.base_url}/InitializeParticipant/{participant_code}", timeout=30)
    found = re.search(r"var remainingTimeoutSeconds = ([0-9.]+);", response.text)
    return PAGE_RE.search(response.url)["page"], float(found.group(1)) if found else float("nan")


@pytest.mark.server
def test_a_page_first_shown_during_the_pause_gets_its_whole_time_from_the_resume(lab_server, database_url):
    message_2_seconds = 30
    server = lab_server(database_url, LAB_MAX_ROUNDS_PER_GAME="1", **AUTH_ENV)
    session = server.create_session("hf_informed_wc_first", 1, rounds_per_game=1, language="en",
                                    llm_provider="simulated", llm_simulated_latency=0, message_1_seconds=60,
                                    read_1_seconds=60, message_2_seconds=message_2_seconds)
    code, participant = session["code"], session["participants"][0]["code"]
    admin = AdminClient(server.base_url)
    player = HttpParticipant(server.base_url, participant, on_page=stop_on("Read1"))
    with pytest.raises(LeftThePage):
        player.play()
    assert admin.act(code, "pause").status_code == 200
    time.sleep(3)
    player.on_page = stop_on("Message2")  # Read1 submitted during the pause: Message2 is shown now
    with pytest.raises(LeftThePage):
        player.play()
    page, left = time_left(server, participant)
    assert page == "Message2" and left == pytest.approx(message_2_seconds, abs=0.5)
    time.sleep(4)
    assert time_left(server, participant)[1] == pytest.approx(message_2_seconds, abs=0.5), "it ran while paused"
    assert admin.act(code, "resume").status_code == 200
    time.sleep(2)
    page, left = time_left(server, participant)
    assert page == "Message2" and left == pytest.approx(message_2_seconds - 2, abs=1)


@pytest.mark.server
def test_agent_turn_cut_off_during_the_pause_is_redone_on_resume(lab_server, database_url):
    message_1_seconds = 10
    with FakeLLMServer(latency=3 * message_1_seconds) as fake:
        server = lab_server(database_url, LAB_MAX_ROUNDS_PER_GAME="1", FAKE_LLM_KEY="dummy-key", **AUTH_ENV)
        session = server.create_session(
            "hf_informed_wc_first", 1, rounds_per_game=1, language="en", message_1_seconds=message_1_seconds,
            read_1_seconds=60, message_2_seconds=60, llm_provider="openai_compatible", llm_model="fake-gpt",
            llm_base_url=fake.base_url_openai, llm_api_key_env="FAKE_LLM_KEY", llm_max_retries=0, llm_check_model=False)
        code, participant = session["code"], session["participants"][0]["code"]
        admin = AdminClient(server.base_url)
        player = HttpParticipant(server.base_url, participant, on_page=stop_on("Message1"))
        with pytest.raises(LeftThePage):
            player.play()  # the agent's message 1 turn runs since the round started
        started = time.monotonic()
        assert admin.act(code, "pause").status_code == 200
        time.sleep(message_1_seconds + 3 - (time.monotonic() - started))  # its deadline passes, paused
        fake.set(latency=0.2)  # the model answers quickly from now on
        assert admin.act(code, "resume").status_code == 200
        time.sleep(2)
        # The participant, back at the page, sends message 1 and reads the agent's.
        player.on_page = stop_on("Message2")
        with pytest.raises(LeftThePage):
            player.play()
        messages = admin.export("custom_export_messages", code)
        calls = admin.export("custom_export_llm_calls", code)
        rows = admin.interventions(code)
    [agent_first] = [m for m in messages if m["sender_kind"] == "agent" and m["stage"] == "1"]
    assert agent_first["sent_in_time"] == "True" and agent_first["text"]
    first_turn = [c for c in calls if c["turn"] == "message_1"]
    assert [c["status"] for c in first_turn] == ["timeout", "ok"], [(c["status"], c["error"]) for c in first_turn]
    assert json.loads(rows[-1]["detail"])["turns_redone"] == 1


def test_time_on_a_page_leaves_the_pauses_out():
    from lab.experimenter.interventions import pauses
    from lab.server.pause import paused_seconds

    record = [dict(action="pause", at=100.0), dict(action="resume", at=130.0), dict(action="message", at=140.0),
              dict(action="pause", at=150.0)]
    assert pauses(record) == [(100.0, 130.0), (150.0, None)]
    assert paused_seconds(pauses(record), 90.0, 160.0) == 30 + 10  # the second pause runs on
    assert paused_seconds(pauses(record), 120.0, 140.0) == 10
    assert paused_seconds(pauses(record), 131.0, 149.0) == 0
