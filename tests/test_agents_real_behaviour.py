"""Agents against what real models do, through the real OpenAI SDK and the fake server:
reasoning, HTML, conflicting or retracted decisions, refusals, over-long messages, memory and
context windows, the call journal and the model check."""

from __future__ import annotations

import asyncio
import time

import pytest

import protocol
from agents.agent import PENDING, CallJournal, PersonaAgent
from agents.probe import probe_personas
from agents.config import ModelConfig
from agents.models import build_model, check_model
from agents.models.check import CHECK_TOKENS
from agents.parsing import cut_message, parse_message
from agents.tokens import count_message_tokens, known_context_window
from agents.types import CallStatus, TurnStatus
from tests.fake_llm_server import DEFAULT_DECISION_REPLY


def model_for(fake_llm, **fields):
    fields = {"provider": "openai_compatible", "model": "fake-model", "base_url": fake_llm.base_url_openai,
              "max_retries": 0, "request_timeout": 10, "max_tokens": 200, **fields}
    return build_model(ModelConfig.build(**fields))


def agent_for(fake_llm, memory=None, **fields):
    return PersonaAgent("agent-1", "fair", model_for(fake_llm, **fields), language="en", seed=1, memory=memory)


def run(coroutine):
    return asyncio.run(coroutine)


def deadline(seconds=20.0):
    return time.monotonic() + seconds


# --- reasoning models and odd answers -------------------------------------------------------------
@pytest.mark.parametrize("reply, expected", [
    ("<think>The other one said A. Let me write a tag <maybe>.</think> STEP 4: <Let's both choose A>",
     "Let's both choose A"),
    ("STEP 4: <b>Let's both choose A</b> <Deal?>", "Deal?"),
    ("STEP 4: <img src=x onerror=alert(1)> <A for both of us>", "A for both of us"),
])
def test_reasoning_and_html_are_never_messages(reply, expected):
    assert parse_message(reply) == expected


@pytest.mark.parametrize("reply", [
    "<think>Let's both choose A</think>",
    "STEP 4: <b>咱们都选A吧</b>",
    "STEP 4: <img src=x onerror=alert(1)>",
    "</think>",
])
def test_a_tag_alone_is_no_message(reply):
    assert parse_message(reply) is None


def test_reasoning_field_goes_to_the_record_not_the_reply(fake_llm):
    fake_llm.set(reply="STEP 4: <Both A?>", reasoning="I DECIDE TO CHOOSE [B] <secret plan>")
    result = run(agent_for(fake_llm).message_1(1, deadline=deadline()))
    assert result.status == TurnStatus.OK.value and result.text == "Both A?"
    assert "secret plan" in result.calls[0].reasoning


def test_think_block_decision_is_not_read(fake_llm):
    fake_llm.set(reply="<think>Maybe I DECIDE TO CHOOSE [B]</think> Final answer: I DECIDE TO CHOOSE [A]")
    result = run(agent_for(fake_llm).decide(1, deadline=deadline()))
    assert result.choice == "A" and "CHOOSE [B]" in result.calls[0].reasoning


@pytest.mark.parametrize("reply", [
    "I DECIDE TO CHOOSE A and B",
    "I DECIDE TO CHOOSE [A]. Just kidding, wait, no.",
    "Initially I DECIDE TO CHOOSE [A]... on reflection, I DECIDE TO CHOOSE [B]",
])
def test_conflicting_decisions_are_reasked_then_flagged_never_guessed(fake_llm, reply):
    fake_llm.set(reply=reply)
    result = run(agent_for(fake_llm).decide(1, deadline=deadline()))
    assert result.status == TurnStatus.FALLBACK.value
    assert result.fallback_reason == CallStatus.PARSE_ERROR.value
    assert [c.status for c in result.calls] == [CallStatus.PARSE_ERROR.value] * 2  # asked, re-asked


def test_a_plain_text_refusal_is_recorded_as_refusal(fake_llm):
    fake_llm.set(reply="I'm sorry, but I can't help with that.")
    result = run(agent_for(fake_llm).message_1(1, deadline=deadline()))
    assert [c.status for c in result.calls] == [CallStatus.REFUSAL.value] * 2
    assert result.fallback_reason == CallStatus.REFUSAL.value


def test_an_overlong_message_is_reasked_then_cut_at_a_word_and_flagged(fake_llm):
    long_message = "Let's both choose A this round, " * 15  # ~480 characters
    fake_llm.set(reply=f"STEP 4: <{long_message}>")
    result = run(agent_for(fake_llm).message_1(1, deadline=deadline()))
    assert len(result.calls) == 2 and "message_too_long" in result.calls[0].flags
    assert "shorter" in result.calls[1].messages[-1]["content"]
    assert result.status == TurnStatus.REASKED.value
    assert result.flags == "message_too_long,message_cut"
    assert len(result.text) <= protocol.MESSAGE_MAX_CHARS
    assert long_message.startswith(result.text) and result.text.endswith(("round,", "A", "this", "choose", "both"))


def test_an_overlong_message_shortened_on_reask_is_sent_whole(fake_llm):
    replies = iter([f"<{'word ' * 100}>", "<Both A, deal?>"])
    fake_llm.set(reply=lambda request, api: next(replies))
    result = run(agent_for(fake_llm).message_1(1, deadline=deadline()))
    assert result.status == TurnStatus.REASKED.value and result.text == "Both A, deal?"
    assert result.flags == "message_too_long"


def test_cut_message_prefers_sentences_then_words():
    assert cut_message("Both A. Then we both get seventy points each time", 30) == "Both A. Then we both get"
    assert cut_message("We both pick A. Deal? Yes, definitely we will", 24) == "We both pick A. Deal?"
    assert cut_message("咱们都选A吧，各拿70，公平又划算，好不好呀朋友们", 16) == "咱们都选A吧，各拿70，"
    assert cut_message("short", 30) == "short"


# --- memory and context windows -------------------------------------------------------------------
def play_rounds(agent, rounds):
    for r in range(1, rounds + 1):
        run(agent.message_1(r, deadline=deadline()))
        run(agent.message_2(r, associate_message_1="Both A?", deadline=deadline()))
        decision = run(agent.decide(r, associate_message_2="Yes, A.", deadline=deadline()))
        agent.record_outcome(r, decision.choice or "A", "A")
    return decision


def test_memory_defaults_to_round_and_game_resends_every_round(fake_llm):
    round_agent = agent_for(fake_llm)
    assert round_agent.memory == "round"
    game_agent = agent_for(fake_llm, memory="game")
    last_round = play_rounds(round_agent, 3).calls[0]
    last_game = play_rounds(game_agent, 3).calls[0]
    assert all(m["content"] != round_agent.conversation[0]["content"] for m in last_round.messages[1:])
    assert len(last_game.messages) > len(last_round.messages)
    # the history lines reach the round-memory agent all the same
    assert "In round 2" in last_round.messages[-1]["content"]
    assert last_round.prompt_tokens < last_game.prompt_tokens
    assert last_round.parameters["memory"] == "round" and last_game.parameters["memory"] == "game"


def test_game_memory_drops_oldest_rounds_to_fit_the_window(fake_llm):
    agent = agent_for(fake_llm, memory="game")
    play_rounds(agent, 3)
    window_needed = count_message_tokens(agent.model and [
        {"content": agent._system_prompt()}, *agent.conversation], "openai_compatible")
    small = agent_for(fake_llm, memory="game", context_window=window_needed)  # fits about one round less
    small.conversation, small.rounds = agent.conversation, agent.rounds
    fake_llm.reset()
    fake_llm.set(reply=DEFAULT_DECISION_REPLY)
    result = run(small.decide(4, associate_message_2=None, deadline=deadline()))
    call = result.calls[0]
    assert call.trimmed >= 1 and call.prompt_tokens + 200 <= window_needed
    assert result.status == TurnStatus.OK.value
    sent_rounds = str(fake_llm.requests[0][1]["messages"])
    assert agent.conversation[0]["content"][:60] not in sent_rounds  # round 1's message prompt dropped


def test_a_prompt_that_cannot_fit_is_refused_unsent(fake_llm):
    agent = agent_for(fake_llm, context_window=300)
    result = run(agent.message_1(1, deadline=deadline()))
    assert fake_llm.request_count == 0
    assert result.status == TurnStatus.FALLBACK.value
    assert result.fallback_reason == CallStatus.CONTEXT_OVERFLOW.value
    assert "context window of 300 tokens" in result.calls[0].error and result.calls[0].prompt_tokens > 300


def test_a_server_context_error_is_context_overflow_not_retried(fake_llm):
    fake_llm.set(context_window=500)
    result = run(agent_for(fake_llm, max_retries=3).message_1(1, deadline=deadline()))
    assert result.fallback_reason == CallStatus.CONTEXT_OVERFLOW.value
    assert fake_llm.request_count == 1


def test_context_windows_of_the_configured_models():
    assert known_context_window("gpt-4-0613") == 8192
    assert known_context_window("gpt-4o-2024-05-13") == 128000
    assert ModelConfig(provider="openai", model="gpt-4-0613").resolved_context_window() == 8192
    assert ModelConfig(provider="openai", model="gpt-4-0613", context_window=4096).resolved_context_window() == 4096
    assert ModelConfig(provider="openai_compatible", base_url="http://x/v1", model="local").resolved_context_window() is None


def test_the_paper_model_fits_ten_rounds_with_round_memory_not_game_memory():
    """The issue's figures: with memory "game" the prompt passes gpt-4-0613's 8,192 tokens."""
    cfg = dict(provider="simulated", simulated_seed=3)
    for memory, should_fit in (("round", True), ("game", False)):
        agent = PersonaAgent("a", "fair", build_model(ModelConfig(**cfg)), language="zh", seed=1, memory=memory)
        play_rounds(agent, 9)
        decision = run(agent.decide(10, associate_message_2="好", deadline=deadline()))
        tokens = count_message_tokens(decision.calls[0].messages, "openai")
        assert (tokens + 1024 <= 8192) == should_fit, (memory, tokens)


# --- the journal: a record before sending, completed after ---------------------------------------
class ListJournal(CallJournal):
    def __init__(self, fake_llm):
        self.fake_llm, self.events = fake_llm, []

    def started(self, record):
        self.events.append(("started", record.status, self.fake_llm.request_count, record.prompt_tokens))

    def finished(self, record):
        self.events.append(("finished", record.status, self.fake_llm.request_count, record.prompt_tokens))


def test_every_call_is_journaled_before_it_is_sent(fake_llm):
    agent = agent_for(fake_llm)
    agent.journal = ListJournal(fake_llm)
    run(agent.message_1(1, deadline=deadline()))
    (started, s_status, s_count, tokens), (finished, f_status, f_count, _) = agent.journal.events
    assert (started, s_status, s_count) == ("started", PENDING, 0) and tokens > 0
    assert (finished, f_status, f_count) == ("finished", CallStatus.OK.value, 1)


def test_a_turn_returns_before_its_deadline_under_latency(fake_llm):
    fake_llm.set(latency=30)
    agent = agent_for(fake_llm)
    end = time.monotonic() + 5
    result = run(agent.decide(1, deadline=end))
    assert time.monotonic() <= end - 0.3  # a tenth of the time is kept back (at most 0.5 s)
    assert result.status == TurnStatus.FALLBACK.value and result.fallback_reason == CallStatus.TIMEOUT.value


# --- the model check and the test button ------------------------------------------------------------
def test_model_check_passes_a_working_model(fake_llm):
    problem, reply = check_model(ModelConfig.build(provider="openai_compatible", model="m",
                                                   base_url=fake_llm.base_url_openai))
    assert problem is None and reply.status == CallStatus.OK.value
    # "OK" needs a token or two: the check does not wait for a reply of the session's llm_max_tokens
    [(_, request)] = fake_llm.requests
    assert request["max_tokens"] == CHECK_TOKENS < ModelConfig().max_tokens


def test_model_check_names_an_unknown_model(fake_llm):
    fake_llm.set(models={"real-model"})
    problem, _ = check_model(ModelConfig.build(provider="openai_compatible", model="no-such-model",
                                               base_url=fake_llm.base_url_openai, max_retries=0))
    assert "does not know the model" in problem and "no-such-model" in problem and "does not exist" in problem


def test_model_check_names_an_unreachable_server():
    problem, _ = check_model(ModelConfig.build(provider="openai_compatible", model="m", max_retries=0,
                                               base_url="http://127.0.0.1:9/v1", request_timeout=5))
    assert "could not be reached" in problem and "127.0.0.1:9" in problem


def test_model_check_of_the_simulated_model_is_trivial():
    assert check_model(ModelConfig(provider="simulated"))[0] is None


def test_probe_shows_each_persona(fake_llm):
    results = probe_personas(model_for(fake_llm), language="en")
    assert [r["persona"] for r in results] == ["cooperative", "fair", "selfish"]
    assert all(r["status"] == "ok" and r["parsed"] and r["latency"] is not None for r in results)
    assert fake_llm.request_count == 3
