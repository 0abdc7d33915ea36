"""The similarity testbed through the agents package's real provider adapters, against the
local fake OpenAI/Anthropic server: requests, replies, limits and failures end up on the record."""

from __future__ import annotations

import re

import pytest

from agents.similarity.config import SimilarityConfig
from agents.similarity.runner import run
from tests.fake_llm_server import FakeLLMServer

QUESTIONS = '''
[[questions]]
id = "q1"
text = "Tea or coffee?"
options = ["Tea", "Coffee"]

[[questions]]
id = "q2"
text = "Mountains or sea?"
options = ["Mountains", "Sea", "Neither"]
'''
THRESHOLD_REPLY = 70  # the fake models cooperate from this stated similarity on


def last_user_text(request: dict) -> str:
    user = [m["content"] for m in request.get("messages", []) if m.get("role") == "user"][-1]
    if isinstance(user, list):  # Anthropic content blocks
        user = " ".join(block.get("text", "") for block in user)
    return user


def similarity_aware_reply(request: dict, api: str) -> str:
    """A fake model that reads the testbed's prompts: cooperates above 70 % stated similarity."""
    prompt = last_user_text(request)
    if "LABELS:" in prompt:
        return "It compares expected payoffs.\nLABELS: expected_value_calculation"
    if "SIMILARITY:" in prompt:
        return "Mostly like me.\nSIMILARITY: 80" if api == "openai" else "Somewhat.\nSIMILARITY: 60"
    if "ANSWER:" in prompt:
        return "Simple.\nANSWER: A"
    similar = re.search(r"you are (\d+(?:\.\d+)?)% similar", prompt)
    choice = "A" if similar and float(similar.group(1)) >= THRESHOLD_REPLY else "B"
    return f"Step by step.\nI DECIDE TO CHOOSE [{choice}]"


@pytest.fixture
def server(monkeypatch):
    monkeypatch.setenv("FAKE_OPENAI_KEY", "dummy-openai")
    monkeypatch.setenv("FAKE_ANTHROPIC_KEY", "dummy-anthropic")
    with FakeLLMServer() as fake:
        yield fake


def config_for(server: FakeLLMServer, tmp_path, **overrides) -> SimilarityConfig:
    questions = tmp_path / "questions.toml"
    questions.write_text(QUESTIONS)
    limits = {"max_retries": 0, "retry_base_delay": 0.0, "request_timeout": 10.0,
              "requests_per_minute": None}
    data = {
        # The anthropic SDK installed (2.14) takes no temperature argument, so the Anthropic
        # model keeps the provider default here.
        "run_id": "fake", "samples": 2, "call_timeout_s": 20, "temperature": "per_model",
        "models": [
            {"label": "fake-gpt", "provider": "openai_compatible", "model": "fake-gpt",
             "base_url": server.base_url_openai, "api_key_env": "FAKE_OPENAI_KEY", "concurrency": 2,
             "temperature": 1.0, "price_input_per_mtok": 1.0, "price_output_per_mtok": 2.0, **limits},
            {"label": "fake-claude", "provider": "anthropic", "model": "fake-claude",
             "base_url": server.base_url_anthropic, "api_key_env": "FAKE_ANTHROPIC_KEY",
             "concurrency": 2, **limits},
        ],
        "sweep": {"step": 50, "framings": ["similar", "dissimilar"]},
        "grounding": {"questions_path": str(questions), "endogenous_views": ["answers"]},
        "public_goods": {"enabled": False},
        "judge": {"model": {"provider": "openai_compatible", "model": "fake-judge",
                            "base_url": server.base_url_openai, "api_key_env": "FAKE_OPENAI_KEY",
                            **limits},
                  "categories": [{"name": "expected_value_calculation", "description": "EV"}],
                  "max_decisions": 5},
    }
    data.update(overrides)
    return SimilarityConfig(**data)


def test_a_run_against_the_fake_providers(server, tmp_path):
    server.set(reply=similarity_aware_reply, latency=0.02)
    config = config_for(server, tmp_path)
    tables = run(config, tmp_path)
    frames = tables.frames(config.run_id)
    decisions, calls = frames["decisions"], frames["calls"]

    assert (calls["status"] == "ok").all() and len(calls) == server.request_count
    assert set(calls["provider"]) == {"openai_compatible", "anthropic"}
    assert calls.loc[calls["model_label"] == "fake-gpt", "cost"].gt(0).all()  # priced in the config
    # the providers saw the signal and the fake models' answers came back as choices
    sweep = decisions[decisions["experiment"] == "sweep"]
    for _, row in sweep.iterrows():
        stated_similarity = row["similarity"] if row["framing"] == "similar" else None
        expected = "A" if stated_similarity is not None and stated_similarity >= THRESHOLD_REPLY else "B"
        assert row["choice"] == expected
    assert any("you are 100% similar" in last_user_text(r) for api, r in server.requests if api == "anthropic")
    assert any("you are 50% different" in last_user_text(r) for api, r in server.requests if api == "openai")
    # every model answered A to both questions: full agreement, so grounded games at 100 %
    exogenous = frames["scores"][frames["scores"]["kind"] == "exogenous"]
    assert (exogenous["score"] == 100).all()
    endogenous = frames["scores"][frames["scores"]["kind"] == "endogenous"]
    assert set(endogenous["score"]) == {80.0, 60.0}
    grounded = decisions[decisions["experiment"] == "exogenous"]
    assert (grounded["choice"] == "A").all()
    labels = frames["judge_labels"]
    assert (labels["judge_model"] == "fake-judge").all() and labels["assigned"].all()
    assert labels["decision_call_id"].nunique() == 5
    # concurrency is bounded by the model wrappers (2 per model, 2 models + judge)
    assert server.peak_in_flight <= 6


def test_provider_failures_are_recorded_and_the_run_finishes(server, tmp_path):
    server.set(reply=similarity_aware_reply, mode="500", fail_every_nth=3)
    config = config_for(server, tmp_path, grounding={"enabled": False}, cache=False,
                        judge={"enabled": False})
    tables = run(config, tmp_path)
    frames = tables.frames(config.run_id)
    statuses = frames["calls"]["status"].value_counts()
    assert statuses["provider_error"] > 0 and statuses["ok"] > 0
    failed = frames["decisions"][frames["decisions"]["status"] == "provider_error"]
    assert failed["choice"].isna().all()
    assert frames["calls"].loc[frames["calls"]["status"] == "provider_error", "error"].str.contains("500").all()
