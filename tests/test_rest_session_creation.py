"""Creating a session over oTree's REST API (``POST /api/sessions``: scripts, the benches) does
not hold up the sessions already running (PostgreSQL, the production database).

oTree ran the creation on the server's event loop under its global lock: every participant's
page, and on the loop every socket and ping, waited for it (25 s for 300 participants; an agent
session's model check, up to its timeout, inside it). The admin's create-session page already
creates in a worker thread without the lock; REST now does the same on PostgreSQL. On SQLite
(one connection shared by the whole server) it stays under the lock, as oTree has it.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from tests.fake_llm_server import FakeLLMServer

CHECK_SECONDS = 3  # each answer of the model to the creation's calls (the check, the server's inspection)


@pytest.mark.server
def test_a_session_created_over_rest_does_not_hold_up_a_running_one(lab_server, database_url):
    if not database_url:
        pytest.skip("SQLite: REST creation stays under oTree's lock (one shared connection)")
    with FakeLLMServer(latency=CHECK_SECONDS) as fake:
        server = lab_server(database_url, FAKE_LLM_KEY="dummy-key")
        running = server.create_session("hh_informed_wc_first", 2, rounds_per_game=1)
        participant = running["participants"][0]["code"]
        with ThreadPoolExecutor(1) as pool:
            creating = pool.submit(
                server.create_session, "hf_informed_wc_first", 4, timeout=120, rounds_per_game=1, llm_provider="openai_compatible",
                llm_model="fake-gpt", llm_base_url=fake.base_url_openai, llm_api_key_env="FAKE_LLM_KEY",
                llm_max_retries=0, llm_check_model=True)
            deadline = time.monotonic() + 30
            while fake.request_count == 0 and time.monotonic() < deadline:
                time.sleep(0.05)
            assert fake.request_count == 1, "the creation's model check never reached the model"

            # While the creation waits for the model: the running session's participant starts,
            # and the session list answers.
            started = time.monotonic()
            page = requests.get(server.start_url(participant), timeout=90)
            listed = requests.get(f"{server.base_url}/api/sessions", timeout=90)
            waited = time.monotonic() - started
            still_creating = not creating.done()
            created = creating.result(timeout=120)

    assert page.ok and "/instructions/Welcome/" in page.url, (page.status_code, page.url)
    assert listed.ok and running["code"] in [s["code"] for s in listed.json()]
    assert still_creating, "the creation ended before the participant was answered: nothing was measured"
    assert waited < 2.0, f"the participant waited {waited:.1f} s for another session's creation"
    # The new session is whole: its participants, its agents' seats, its start links.
    assert created["num_participants"] == 4 and len(created["participants"]) == 4
    session_list = requests.get(f"{server.base_url}/api/sessions", timeout=30).json()
    assert {s["code"] for s in session_list} == {running["code"], created["code"]}
    assert requests.get(server.start_url(created["participants"][0]["code"]), timeout=30).ok
    assert "Traceback" not in server.log()


@pytest.mark.server
def test_a_refused_session_over_rest_still_leaves_nothing_and_says_why(lab_server, database_url):
    """Off the lock too, a refusal is a 400 with the message and the session list stays empty."""
    server = lab_server(database_url)
    refused = requests.post(f"{server.base_url}/api/sessions", json=dict(
        session_config_name="hh_informed_wc_first", num_participants=3,
        modified_session_config_fields=dict(rounds_per_game=1)), timeout=60)
    assert refused.status_code == 400 and "even" in refused.text.lower(), refused.text[:500]
    assert requests.get(f"{server.base_url}/api/sessions", timeout=30).json() == []
