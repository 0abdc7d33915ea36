"""One participant in headless Chromium plays a short H-F session against agents served by the
local fake LLM server (real OpenAI SDK, 1 s latency) through to payment; a second run with the
fake server failing every second call still finishes, the fallbacks flagged in the data."""

import pytest
import requests

from tests.browser_participant import Script, play_alone
from tests.fake_llm_server import FakeLLMServer

SHORT = dict(rounds_per_game=2, language="en", message_1_seconds=12, read_1_seconds=8, message_2_seconds=12,
             read_2_seconds=8, decision_seconds=10, result_seconds=8)


def _play_one(server, session) -> Script:
    script = Script(messages={1: "<b>hi</b> shall we both pick A?", 2: "ok A"}, choice="A")
    return play_alone(server.start_url(session["participants"][0]["code"]), script)


def _agent_config(fake, **extra):
    return dict(SHORT, llm_provider="openai_compatible", llm_model="fake-gpt", llm_base_url=fake.base_url_openai,
                llm_api_key_env="FAKE_LLM_KEY", **extra)


@pytest.mark.browser
@pytest.mark.server
def test_participant_plays_fair_agents_served_by_fake_server(lab_server):
    with FakeLLMServer(latency=1.0) as fake:
        server = lab_server(FAKE_LLM_KEY="dummy-key")
        session = server.create_session("hf_informed_wc_first", 1, **_agent_config(fake))
        script = _play_one(server, session)
    assert script.payout_text.endswith("CNY")
    # The agents' messages arrived on the read pages as text, like a human's.
    assert len(script.seen_associate_messages) == 4
    assert all(message and "did not send" not in message for message in script.seen_associate_messages)
    assert not script.dialogs
    # The human waited for the agent only while it answered (~1 s model latency; the stage limit
    # is 12 s), on the same wait pages as for a human associate.
    waits = [seconds for name, values in script.waited_seconds.items() if name.startswith("Wait")
             for seconds in values]
    assert max(waits, default=0) < 6, waits
    calls = server.export("payment", "custom_export_llm_calls", session["code"])
    assert calls and {c["status"] for c in calls} == {"ok"}
    assert all(float(c["time_done"]) - float(c["time_sent"]) >= 0.9 for c in calls), "latency is on the record"
    decisions = server.export("payment", "custom_export_decisions", session["code"])
    assert len(decisions) == 2 * 2 * 2  # human + agent, 2 games x 2 rounds
    # The experimenter's agents page: every agent, its state, its calls, the spending.
    report = requests.get(f"{server.base_url}/AdminReport/{session['code']}",
                          params=dict(app_name="game_with_chat", round_number=1), timeout=30).text
    assert "agent-1" in report and "agent-2" in report and "answered (decision)" in report
    assert "openai_compatible / fake-gpt" in report and "USD of budget" in report
    # What the model check found, wherever the experimenter looks: the answer to the creation
    # (REST), the session's pages, the dashboard and the agents page. The fake server takes no
    # grammar; its replies take 1 s: one agent fits the 10 s decision stage.
    found = session["created"]["model_check"]
    assert found["capacity_verdict"] == "fits" and found["grammar"].startswith("off: the server obeyed none")
    assert found["capacity"].startswith("capacity: the session fits.") and found["capacity"] in report
    links = requests.get(f"{server.base_url}/SessionStartLinks/{session['code']}", timeout=30).text
    assert 'id="lab-model-check"' in links and "capacity: the session fits." in links
    dashboard = requests.get(f"{server.base_url}/LabDashboardData/{session['code']}", timeout=30).json()
    assert dashboard["agents"]["model_capacity"] == found["capacity"]


@pytest.mark.browser
@pytest.mark.server
def test_session_finishes_when_every_second_model_call_fails(lab_server):
    with FakeLLMServer(latency=0.2) as fake:
        fake.set(mode="500", fail_every_nth=2)
        server = lab_server(FAKE_LLM_KEY="dummy-key")
        session = server.create_session("hc_uninformed_wc_first", 1, **_agent_config(fake, llm_max_retries=0))
        script = _play_one(server, session)
    assert script.payout_text.endswith("CNY")
    calls = server.export("payment", "custom_export_llm_calls", session["code"])
    assert {"ok", "provider_error"} <= {c["status"] for c in calls}
    messages = server.export("payment", "custom_export_messages", session["code"])
    decisions = server.export("payment", "custom_export_decisions", session["code"])
    agent_messages = [m for m in messages if m["sender_kind"] == "agent"]
    agent_decisions = [d for d in decisions if d["player_kind"] == "agent"]
    assert len(agent_messages) == 4 and len(agent_decisions) == 4, "every round complete"
    flagged = [m for m in agent_messages if m["sent_in_time"] == "False"] + \
              [d for d in agent_decisions if d["timed_out"] == "True"]
    assert flagged, "failed calls end in flagged fallbacks"
    # What the participant saw for a missing agent message is the late-human text.
    if any(m["sent_in_time"] == "False" for m in agent_messages):
        assert any("did not send" in seen for seen in script.seen_associate_messages)
