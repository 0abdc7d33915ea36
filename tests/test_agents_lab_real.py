"""The lab on real-model failure modes: the model check at session creation, the
"Test model" button, the fallback warning, and calls in flight at a kill -9."""

from __future__ import annotations

import json
import threading
import time

import pytest
import requests

from lab.base.session_settings import SessionConfigError, validate
from tests.fake_llm_server import FakeLLMServer
from tests.http_participant import HttpParticipant
from tests.lab_server import journal_rows


def _agent_config(**extra):
    return {**dict(associate_type="fair", label_setting="informed", game_order="WC-WoC"), **extra}


def test_session_creation_calls_the_model_a_fixed_number_of_times(fake_llm):
    """The model check's calls, however many agents the session has: the check and the capacity
    measure (two agents' decision prompts and a reply: agents/capacity.py; constraint off); with
    `auto`, also one probe per grammar format the server may take."""
    session_vars = {}
    validate(_agent_config(llm_provider="openai_compatible", llm_model="m", llm_base_url=fake_llm.base_url_openai,
                           llm_constrained_output="off"), 2, record=session_vars)
    assert fake_llm.request_count == 4
    # What the dashboard shows as the model check's status (lab/experimenter/dashboard.py model_check_status).
    assert session_vars["model_check"]["status"] == "ok" and session_vars["model_check"]["model"] == "m"
    counts = []
    for participants in (2, 12):
        before = fake_llm.request_count
        validate(_agent_config(llm_provider="openai_compatible", llm_model="m", llm_base_url=fake_llm.base_url_openai),
                 participants)
        counts.append(fake_llm.request_count - before)
    from agents import grammars

    assert counts[0] == counts[1] <= 4 + len(grammars.GRAMMAR_FORMATS)


def test_session_creation_refuses_an_unknown_model_in_plain_words(fake_llm):
    fake_llm.set(models={"served-model"})
    session_vars = {}
    with pytest.raises(SessionConfigError, match=r"does not know the model.*typo-model.*does not exist"):
        validate(_agent_config(llm_provider="openai_compatible", llm_model="typo-model", llm_max_retries=0,
                               llm_base_url=fake_llm.base_url_openai), 2, record=session_vars)
    assert session_vars["model_check"]["status"] == "failed"


def test_session_creation_refuses_an_unreachable_server():
    with pytest.raises(SessionConfigError, match=r"127\.0\.0\.1:9.*could not be reached.*Connection error.*llm_check_model"):
        validate(_agent_config(llm_provider="openai_compatible", llm_model="m", llm_max_retries=0,
                               llm_base_url="http://127.0.0.1:9/v1", llm_request_timeout=5), 2)


def test_the_check_can_be_switched_off_for_an_offline_demo():
    validate(_agent_config(llm_provider="openai_compatible", llm_model="m", llm_check_model=False,
                           llm_base_url="http://127.0.0.1:9/v1"), 2)


def test_simulated_agents_need_no_check():
    assert validate(_agent_config(), 2).with_agents


def test_memory_is_a_session_setting():
    with pytest.raises(SessionConfigError, match="llm_memory"):
        validate(_agent_config(llm_memory="forever"), 2)
    validate(_agent_config(llm_memory="game", llm_context_window=8192), 2)


SHORT = dict(rounds_per_game=1, language="en", message_1_seconds=30, read_1_seconds=6, message_2_seconds=30,
             read_2_seconds=6, decision_seconds=30, result_seconds=6, llm_check_model=False)


@pytest.mark.server
def test_a_call_in_flight_at_a_kill_is_recorded_and_its_turn_resumed_at_start(lab_server, database_url):
    """kill -9 while the agent's first message is with the (slow) model: at the restart, before
    any page is touched, the call is on record as interrupted and the turn runs again."""
    with FakeLLMServer(latency=6.0) as model_server:
        server = lab_server(database_url)
        session = server.create_session(
            "hf_informed_wc_first", 1, llm_provider="openai_compatible", llm_model="fake",
            llm_base_url=model_server.base_url_openai, llm_max_retries=0, **SHORT)
        participant = HttpParticipant(server.base_url, session["participants"][0]["code"],
                                      messages={1: "hello", 2: "A?"})
        reached = threading.Event()

        def stop_at_wait(p, page, index):
            if page == "AgentWaitMessage1":
                reached.set()
                raise SystemExit  # leave the participant there (a human staying on the page)

        participant.on_page = stop_at_wait
        player = threading.Thread(target=lambda: _quietly(participant.play, timeout=120))
        player.start()
        deadline = time.time() + 90
        while not model_server.request_count and time.time() < deadline:
            time.sleep(0.2)
        assert model_server.request_count >= 1, server.log()[-2000:]
        pending = [json.loads(r) for state, r in journal_rows(server) if state == "pending"]
        assert pending and pending[0]["status"] == "pending" and pending[0]["prompt_tokens"] > 0
        sent_before_kill = model_server.request_count
        server.restart(kill=True)
        # No page is requested: the startup resumes the turn, which calls the model again.
        deadline = time.time() + 30
        while model_server.request_count == sent_before_kill and time.time() < deadline:
            time.sleep(0.2)
        assert model_server.request_count > sent_before_kill, server.log()[-3000:]
        player.join(timeout=5)
        assert "resumed" in server.log()
        # The participant carries on; the export has the interrupted call and the redone one.
        participant.on_page = None
        participant.play(timeout=300)
        assert participant.done, server.log()[-3000:]
        calls = server.export("payment", "custom_export_llm_calls", session["code"])
        statuses = [c["status"] for c in calls if c["turn"] == "message_1" and c["game"] == "WC"]
        assert "interrupted" in statuses and "ok" in statuses, statuses
        interrupted = [c for c in calls if c["status"] == "interrupted"][0]
        assert "interrupted" in interrupted["flags"] and interrupted["prompt_tokens"]


def _quietly(function, **kwargs):
    try:
        function(**kwargs)
    except (SystemExit, Exception):
        pass


@pytest.mark.server
def test_agents_page_warns_of_fallbacks_and_tests_the_model(lab_server, database_url):
    """Every call fails (the check switched off, as for a demo): the page warns in red; the
    "Test model" button then shows one turn per persona once the model works again."""
    with FakeLLMServer() as model_server:
        model_server.set(mode="500")
        server = lab_server(database_url)
        session = server.create_session(
            "hf_informed_wc_first", 1, llm_provider="openai_compatible", llm_model="fake",
            llm_base_url=model_server.base_url_openai, llm_max_retries=0,
            **{**SHORT, "message_1_seconds": 4, "message_2_seconds": 4, "decision_seconds": 4})
        participant = HttpParticipant(server.base_url, session["participants"][0]["code"])
        participant.play(timeout=300)
        report_url = f"{server.base_url}/AdminReport/{session['code']}"
        report = requests.get(report_url, params=dict(app_name="game_with_chat", round_number=1), timeout=30).text
        assert "of the last 3 agent turns fell back" in report and "provider_error (3)" in report
        assert "Test model" in report and "treatment H-F · persona fair (FAIR-MINDED)" in report
        model_server.set(mode="ok")
        tested = requests.post(f"{server.base_url}/lab/agents/test_model/{session['code']}", timeout=120)
        assert tested.status_code == 200, tested.text
        results = tested.json()["results"]
        assert [r["persona"] for r in results] == ["cooperative", "fair", "selfish"]
        assert all(r["status"] == "ok" and r["parsed"] for r in results)
        report = requests.get(report_url, params=dict(app_name="game_with_chat", round_number=1), timeout=30).text
        assert "Model test at" in report and "both choose A, we each get 70!" in report


ADMIN_PASSWORD = "admin-pw-for-tests"


def _admin_login(server) -> requests.Session:
    import re

    admin = requests.Session()
    form = admin.get(f"{server.base_url}/login", timeout=30).text
    token = re.search(r'name="csrftoken"\s+value="([^"]+)"', form) or re.search(r'value="([^"]+)"\s+name="csrftoken"', form)
    assert token, form[:2000]
    response = admin.post(f"{server.base_url}/login", data=dict(username="admin", password=ADMIN_PASSWORD,
                                                                 csrftoken=token[1]), timeout=30)
    assert response.ok and "/login" not in response.url, (response.status_code, response.url)
    return admin


@pytest.mark.server
@pytest.mark.parametrize("auth_level", ["STUDY", "DEMO"])
def test_test_model_needs_the_admin_login(lab_server, database_url, auth_level):
    """With oTree's admin login on, "Test model" (which spends money on model calls) is refused
    without the login and sends nothing; logged in as the admin, it runs one turn per persona."""
    with FakeLLMServer() as model_server:
        server = lab_server(database_url, OTREE_AUTH_LEVEL=auth_level, OTREE_ADMIN_PASSWORD=ADMIN_PASSWORD,
                            OTREE_REST_KEY="rest-key-for-tests")
        session = server.create_session(
            "hf_informed_wc_first", 1, llm_provider="openai_compatible", llm_model="fake",
            llm_base_url=model_server.base_url_openai, llm_max_retries=0, **SHORT)
        code = session["code"]
        test_url = f"{server.base_url}/lab/agents/test_model/{code}"
        report_url = f"{server.base_url}/AdminReport/{code}"
        report_params = dict(app_name="game_with_chat", round_number=1)

        # Anonymous: the route refuses and no call is made. (oTree's STUDY level sends the agents
        # page to the login; its DEMO level shows admin reports to anyone, but a model call
        # costs money: the button still needs the login.)
        anonymous = requests.get(report_url, params=report_params, allow_redirects=False, timeout=30)
        if auth_level == "STUDY":
            assert anonymous.status_code in (302, 303) and "login" in anonymous.headers["location"].lower()
        else:
            assert anonymous.status_code == 200 and "Test model" in anonymous.text
        refused = requests.post(test_url, timeout=60)
        assert refused.status_code == 403 and "log in" in refused.json()["error"], refused.text
        assert model_server.request_count == 0

        # The admin: the agents page, then the button's request.
        admin = _admin_login(server)
        report = admin.get(report_url, params=report_params, timeout=30)
        assert report.ok and "Test model" in report.text
        assert model_server.request_count == 0
        tested = admin.post(test_url, timeout=120)
        assert tested.status_code == 200, tested.text
        results = tested.json()["results"]
        assert [r["persona"] for r in results] == ["cooperative", "fair", "selfish"]
        assert all(r["status"] == "ok" and r["parsed"] for r in results), results
        assert model_server.request_count == 3

        # Logged out again: refused again.
        admin.get(f"{server.base_url}/logout", timeout=30)
        assert admin.post(test_url, timeout=60).status_code == 403
        assert model_server.request_count == 3
