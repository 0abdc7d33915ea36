"""Agents on the real SDKs against the local fake server: every fault ends by the deadline.

The OpenAI and Anthropic SDKs talk HTTP to ``tests.fake_llm_server`` (no internet, dummy keys).
Each fault — slow replies, 429 with a long Retry-After, 500, dropped connections, malformed
JSON, truncated replies — must end the turn within its deadline with the right status, and
nothing may raise out of a turn.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time

import pytest

from agents.agent import PersonaAgent
from agents.config import ConfigError, ModelConfig
from agents.models import Budget, build_model, redact
from agents.types import CallStatus, TurnStatus
from tests.fake_llm_server import DEFAULT_MESSAGE_REPLY, FakeLLMServer

DUMMY_KEY = "sk-test-dummy-key-0123456789"
KEY_ENV = "FAKE_LLM_TEST_KEY"
APIS = ("openai", "anthropic")


@pytest.fixture(autouse=True)
def key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, DUMMY_KEY)


def model_config(fake_llm: FakeLLMServer, api: str, **overrides) -> ModelConfig:
    fields = dict(
        provider=api, model="fake-model", api_key_env=KEY_ENV,
        base_url=fake_llm.base_url_openai if api == "openai" else fake_llm.base_url_anthropic,
        max_retries=3, retry_base_delay=0.05, retry_max_delay=0.2, request_timeout=5,
        price_input_per_mtok=1.0, price_output_per_mtok=2.0,
    )
    fields.update(overrides)
    return ModelConfig(**fields)


def new_agent(fake_llm, api, *, persona="fair", seed=7, **overrides) -> PersonaAgent:
    return PersonaAgent("agent-1", persona, build_model(model_config(fake_llm, api, **overrides)), seed=seed)


def run_turn(agent: PersonaAgent, seconds: float, kind: str = "message_1"):
    """Run one turn with a deadline ``seconds`` away; return (result, finished before deadline)."""

    async def turn():
        deadline = time.monotonic() + seconds
        if kind == "decision":
            result = await agent.decide(1, associate_message_2="A?", deadline=deadline)
        else:
            result = await agent.message_1(1, deadline=deadline)
        return result, time.monotonic() <= deadline

    return asyncio.run(turn())


@pytest.mark.parametrize("api", APIS)
def test_a_good_reply_is_parsed_and_fully_recorded(fake_llm, api):
    result, in_time = run_turn(new_agent(fake_llm, api), 5)
    assert in_time and result.status == TurnStatus.OK.value
    assert result.text == "Let's both choose A, we each get 70!"
    (call,) = result.calls
    assert call.status == CallStatus.OK.value and call.attempt == 1 and call.retries == 0
    assert call.provider == api and call.model == "fake-model" and not call.simulated
    assert call.raw_reply == DEFAULT_MESSAGE_REPLY and call.parsed == result.text
    assert call.messages[0]["role"] == "system" and call.messages[-1]["content"].startswith("Welcome to round 1.")
    assert call.input_tokens > 0 and call.output_tokens > 0
    assert call.cost == pytest.approx((call.input_tokens * 1.0 + call.output_tokens * 2.0) / 1e6)
    assert call.time_sent <= call.time_first_byte <= call.time_done
    assert len(call.prompt_version) == 12
    sent = fake_llm.requests[0][1]
    assert sent["model"] == "fake-model"
    assert (sent.get("max_tokens") or sent.get("max_completion_tokens")) == 1024


@pytest.mark.parametrize("api", APIS)
def test_temperature_and_seed_are_sent_as_configured(fake_llm, api):
    model = build_model(model_config(fake_llm, api, temperature=0.7, seed=11))
    result, _ = run_turn(PersonaAgent("agent-1", "fair", model, seed=7), 5)
    assert result.status == TurnStatus.OK.value, result.calls[-1].error
    sent = fake_llm.requests[0][1]
    assert sent["temperature"] == 0.7
    assert result.calls[0].parameters["temperature"] == 0.7
    if api == "openai":
        assert sent["seed"] == 11  # the Messages API has no seed


@pytest.mark.parametrize("api", APIS)
def test_a_slow_provider_times_out_by_the_deadline(fake_llm, api):
    fake_llm.set(mode="slow", slow_seconds=10)
    result, in_time = run_turn(new_agent(fake_llm, api), 1.0)
    assert in_time
    assert result.status == TurnStatus.FALLBACK.value and result.fallback_reason == CallStatus.TIMEOUT.value
    assert result.text is None


@pytest.mark.parametrize("api", APIS)
def test_a_long_retry_after_gives_up_at_once(fake_llm, api):
    fake_llm.set(mode="429", retry_after=30)
    started = time.monotonic()
    result, in_time = run_turn(new_agent(fake_llm, api), 3.0)
    assert in_time and time.monotonic() - started < 1.5  # waiting 30 s could never fit
    assert result.fallback_reason == CallStatus.RATE_LIMITED.value
    assert fake_llm.request_count == 1
    assert "Retry" in result.calls[0].error or "deadline" in result.calls[0].error


@pytest.mark.parametrize("api", APIS)
def test_rate_limits_are_retried_within_the_deadline(fake_llm, api):
    fake_llm.set(mode="429", retry_after=0)
    result, in_time = run_turn(new_agent(fake_llm, api), 3.0)
    assert in_time and result.fallback_reason == CallStatus.RATE_LIMITED.value
    assert result.calls[0].retries == 3 and fake_llm.request_count == 4


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("mode", ["500", "drop", "malformed"])
def test_server_errors_end_as_provider_errors(fake_llm, api, mode):
    fake_llm.set(mode=mode)
    result, in_time = run_turn(new_agent(fake_llm, api), 3.0)
    assert in_time and result.status == TurnStatus.FALLBACK.value
    assert result.fallback_reason == CallStatus.PROVIDER_ERROR.value
    assert result.calls[0].retries == 3 and fake_llm.request_count == 4


@pytest.mark.parametrize("api", APIS)
def test_every_second_call_failing_is_absorbed_by_a_retry(fake_llm, api):
    fake_llm.set(mode="500", fail_every_nth=2)
    agent = new_agent(fake_llm, api)
    first, _ = run_turn(agent, 3.0)
    second, in_time = run_turn(agent, 3.0, "decision")
    assert first.status == second.status == TurnStatus.OK.value and in_time
    assert second.calls[0].retries == 1 and second.choice == "A"
    assert "HTTP 500" in second.calls[0].error


@pytest.mark.parametrize("api", APIS)
def test_a_truncated_decision_is_reasked_then_falls_back_to_a_seeded_random_choice(fake_llm, api):
    fake_llm.set(mode="truncated")
    agent = new_agent(fake_llm, api)
    result, in_time = run_turn(agent, 5.0, "decision")
    assert in_time and result.status == TurnStatus.FALLBACK.value
    assert result.fallback_reason == CallStatus.LENGTH.value
    assert [c.status for c in result.calls] == [CallStatus.LENGTH.value] * 2
    assert result.choice in ("A", "B")
    assert new_agent(fake_llm, api)._random_choice(1) == result.choice  # seeded: the same again
    # The agent remembers the fallback: its conversation ends with the random choice.
    assert agent.conversation[-1]["role"] == "assistant" and f"[{result.choice}]" in agent.conversation[-1]["content"]


@pytest.mark.parametrize("api", APIS)
def test_a_malformed_reply_is_reasked_once(fake_llm, api):
    replies = iter(["Sure! Let's both choose A.", "<好，都选A吧！>"])
    fake_llm.set(reply=lambda request, _api: next(replies))
    result, in_time = run_turn(new_agent(fake_llm, api), 5.0)
    assert in_time and result.status == TurnStatus.REASKED.value and result.text == "好，都选A吧！"
    first, second = result.calls
    assert first.status == CallStatus.PARSE_ERROR.value and second.attempt == 2
    assert second.messages[-2] == {"role": "assistant", "content": "Sure! Let's both choose A."}
    assert "did not contain a message inside <>" in second.messages[-1]["content"]


def test_with_two_reasks_the_second_shows_only_the_latest_malformed_reply(fake_llm):
    replies = iter(["Sure! Let's both choose A.", "<Your message>", "<Deal, A together.>"])
    fake_llm.set(reply=lambda request, _api: next(replies))
    model = build_model(model_config(fake_llm, "openai", reasks=2, temperature=0.5, seed=3))
    result, in_time = run_turn(PersonaAgent("agent-1", "fair", model, seed=7), 5.0)
    assert in_time and result.status == TurnStatus.REASKED.value and result.text == "Deal, A together."
    assert [(c.attempt, c.status) for c in result.calls] == [(1, "parse_error"), (2, "parse_error"), (3, "ok")]
    third = result.calls[2]
    assert [m["content"] for m in third.messages].count("Sure! Let's both choose A.") == 0
    assert third.messages[-2] == {"role": "assistant", "content": "<Your message>"}
    assert [(c.parameters["temperature"], c.parameters["seed"]) for c in result.calls] == [(0.5, 3), (0.7, 4), (0.9, 5)]


def test_one_reask_by_default_and_none_when_set_to_zero(fake_llm):
    fake_llm.set(reply="no brackets here")
    assert [c.attempt for c in run_turn(new_agent(fake_llm, "openai"), 5.0)[0].calls] == [1, 2]
    assert [c.attempt for c in run_turn(new_agent(fake_llm, "openai", reasks=0), 5.0)[0].calls] == [1]


@pytest.mark.parametrize("api", APIS)
def test_no_reask_without_time_left(fake_llm, api):
    fake_llm.set(reply="no brackets here", latency=0.5)  # the reply leaves < 1 s of a 1.4 s stage
    result, in_time = run_turn(new_agent(fake_llm, api), 1.4)
    assert in_time and result.fallback_reason == CallStatus.PARSE_ERROR.value and len(result.calls) == 1


def test_a_passed_deadline_sends_nothing(fake_llm):
    agent = new_agent(fake_llm, "openai")
    result = asyncio.run(agent.message_1(1, deadline=time.monotonic() - 1))
    assert result.status == TurnStatus.FALLBACK.value and result.fallback_reason == CallStatus.TIMEOUT.value
    assert fake_llm.request_count == 0


def test_a_spent_budget_stops_sending(fake_llm):
    budget = Budget(1e-9)
    model = build_model(model_config(fake_llm, "openai"), budget=budget)
    agent = PersonaAgent("agent-1", "fair", model, seed=1)
    first = asyncio.run(agent.message_1(1, deadline=time.monotonic() + 5))
    second = asyncio.run(agent.message_1(2, deadline=time.monotonic() + 5))
    assert first.status == TurnStatus.OK.value and budget.spent == pytest.approx(first.calls[0].cost)
    assert second.fallback_reason == CallStatus.BUDGET.value and fake_llm.request_count == 1


def test_requests_per_minute_limit_refuses_beyond_the_deadline(fake_llm):
    model = build_model(model_config(fake_llm, "openai", requests_per_minute=2))
    agents = [PersonaAgent(f"agent-{i}", "fair", model, seed=i) for i in range(3)]

    async def all_turns():
        deadline = time.monotonic() + 1.0
        return await asyncio.gather(*(a.message_1(1, deadline=deadline) for a in agents))

    results = asyncio.run(all_turns())
    assert sorted(r.status for r in results) == ["fallback", "ok", "ok"]
    assert fake_llm.request_count == 2


def test_concurrency_limit_holds_and_waits_count_against_the_deadline():
    # Waves of 0.5 s: a loaded CI machine adds SDK overhead to each, and the first wave must
    # still end well inside the short deadline below.
    with FakeLLMServer(latency=0.5) as own_server:  # no slow requests left over from other tests
        model = build_model(model_config(own_server, "anthropic", concurrency=2))
        agents = [PersonaAgent(f"agent-{i}", "cooperative", model, seed=i) for i in range(6)]

        async def all_turns(seconds):
            deadline = time.monotonic() + seconds
            return await asyncio.gather(*(a.message_1(1, deadline=deadline) for a in agents))

        assert all(r.status == TurnStatus.OK.value for r in asyncio.run(all_turns(10.0)))
        assert own_server.peak_in_flight == 2
        # Three waves of 0.5 s do not fit in 1.25 s: the last wave times out waiting for a slot.
        results = asyncio.run(all_turns(1.25))
        late = [r for r in results if r.status == TurnStatus.FALLBACK.value]
        assert 2 <= len(late) < len(results)
        assert all(r.fallback_reason == CallStatus.TIMEOUT.value for r in late)


def test_cancellation_by_the_caller_propagates_and_is_remembered(fake_llm):
    fake_llm.set(mode="slow", slow_seconds=10)
    agent = new_agent(fake_llm, "openai")

    async def cancel_midway():
        task = asyncio.create_task(agent.message_1(1, deadline=time.monotonic() + 5))
        await asyncio.sleep(0.3)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(cancel_midway())
    assert agent.turns[-1]["fallback_reason"] == CallStatus.CANCELLED.value
    assert agent.conversation[-1]["content"] == "(I sent no message in time.)"


def test_one_model_serves_several_event_loops(fake_llm):
    model = build_model(model_config(fake_llm, "openai"))
    outcomes = []

    def in_new_loop():
        agent = PersonaAgent("agent-t", "fair", model, seed=1)
        outcomes.append(asyncio.run(agent.message_1(1, deadline=time.monotonic() + 5)).status)

    in_new_loop()
    in_new_loop()  # a second asyncio.run: a new client, not the closed loop's
    worker = threading.Thread(target=in_new_loop)  # the lab's dedicated agent thread
    worker.start()
    worker.join()
    assert outcomes == ["ok"] * 3


def test_gemini_and_openai_compatible_go_through_the_openai_sdk(fake_llm, monkeypatch):
    monkeypatch.setenv("GEMINI_API_KEY", DUMMY_KEY)
    gemini = ModelConfig(provider="gemini", model="gemini-2.5-flash", base_url=fake_llm.base_url_openai, seed=3)
    local = ModelConfig(provider="openai_compatible", model="llama", base_url=fake_llm.base_url_openai)
    for cfg in (gemini, local):
        agent = PersonaAgent("agent-1", "fair", build_model(cfg), seed=1)
        assert asyncio.run(agent.message_1(1, deadline=time.monotonic() + 5)).status == "ok"
    gemini_request, local_request = (body for _, body in fake_llm.requests)
    assert gemini_request["seed"] == 3 and gemini_request["max_tokens"] == 1024
    assert "seed" not in local_request


def test_keys_never_reach_records_or_errors(fake_llm):
    fake_llm.set(mode="500")
    agent = new_agent(fake_llm, "anthropic")
    result, _ = run_turn(agent, 2.0)
    dumped = json.dumps([c.to_dict() for c in result.calls]) + json.dumps(agent.to_state())
    assert DUMMY_KEY not in dumped and KEY_ENV in json.dumps(model_config(fake_llm, "openai").model_dump())
    assert DUMMY_KEY not in redact(f"Incorrect API key provided: {DUMMY_KEY}")
    assert "secret-xyz" not in redact("bad key secret-xyz", "secret-xyz")
    assert "AIzaSyA12345678901" not in redact("key=AIzaSyA12345678901")


def test_a_missing_key_is_a_config_error_at_build_time(fake_llm, monkeypatch):
    monkeypatch.delenv(KEY_ENV)
    with pytest.raises(ConfigError, match=KEY_ENV):
        build_model(model_config(fake_llm, "openai"))
