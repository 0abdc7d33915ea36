"""The offline simulated model through the real agent: persona rates, seeding, records, state."""

from __future__ import annotations

import asyncio
import json
import random
import time
from pathlib import Path

import pytest

import protocol
from agents.agent import PersonaAgent
from agents.config import ModelConfig, default_model_config
from agents.models import build_model
from agents.parsing import parse_choice
from agents.simulated import SimulatedModel
from agents.types import CallStatus, ChatMessage, TurnStatus

GAMES = 1000


def proposes_a(text):
    return text is not None and "A" in text and "B" not in text


async def play_game(agent: PersonaAgent, rng: random.Random, rounds: int = protocol.ROUNDS_PER_GAME):
    """One game against a scripted human-like associate; returns per-round facts."""
    facts = []
    for number in range(1, rounds + 1):
        associate_promises = rng.random() < 0.8
        associate_line = "咱们都选A吧" if associate_promises else "这局我选B"
        first = await agent.message_1(number, deadline=None)
        second = await agent.message_2(number, associate_message_1=associate_line, deadline=None)
        decision = await agent.decide(number, associate_message_2="好" if associate_promises else "嗯",
                                      deadline=None)
        associate_choice = "A" if associate_promises and rng.random() < 0.6 else "B"
        exploited_before = bool(facts) and facts[-1]["choice"] == "A" and facts[-1]["associate_choice"] == "B"
        facts.append(dict(promised=proposes_a(first.text) or proposes_a(second.text), choice=decision.choice,
                          associate_promised=associate_promises, associate_choice=associate_choice,
                          exploited_before=exploited_before,
                          statuses={first.status, second.status, decision.status}))
        agent.record_outcome(number, decision.choice, associate_choice)
    return facts


@pytest.fixture(scope="module")
def persona_facts():
    """1,000 seeded games, a third per persona, all through PersonaAgent and the parser."""

    async def all_games():
        model = build_model(ModelConfig(provider="simulated", simulated_seed=11))
        facts = {persona: [] for persona in protocol.PERSONAS}
        for game in range(GAMES):
            persona = protocol.PERSONAS[game % 3]
            # memory="round": the same decisions, less conversation to copy into each record
            agent = PersonaAgent(f"agent-{game}", persona, model, seed=game, memory="round")
            facts[persona] += await play_game(agent, random.Random(game))
        return facts

    return asyncio.run(all_games())


def rate(rows, predicate):
    return sum(1 for row in rows if predicate(row)) / len(rows)


def test_every_simulated_turn_parses(persona_facts):
    for rows in persona_facts.values():
        assert all(row["statuses"] == {TurnStatus.OK.value} for row in rows)


def test_cooperative_always_proposes_and_plays_a(persona_facts):
    rows = persona_facts["cooperative"]
    assert rate(rows, lambda r: r["promised"]) == 1.0
    assert rate(rows, lambda r: r["choice"] == "A") == 1.0


def test_fair_keeps_its_word_about_nine_times_in_ten(persona_facts):
    rows = persona_facts["fair"]
    assert rate(rows, lambda r: r["promised"]) == 1.0
    agreed = [r for r in rows if r["associate_promised"] and not r["exploited_before"]]
    assert rate(agreed, lambda r: r["choice"] == "B") == pytest.approx(0.10, abs=0.02)
    after_exploited = [r for r in rows if r["associate_promised"] and r["exploited_before"]]
    assert rate(after_exploited, lambda r: r["choice"] == "B") > 0.3
    unpromised = [r for r in rows if not r["associate_promised"]]
    assert rate(unpromised, lambda r: r["choice"] == "B") > 0.5


def test_selfish_often_promises_a_and_mostly_plays_b(persona_facts):
    rows = persona_facts["selfish"]
    assert 0.75 <= rate(rows, lambda r: r["promised"]) <= 0.98  # either message may promise
    assert rate(rows, lambda r: r["choice"] == "B") == pytest.approx(0.9, abs=0.03)
    promised = [r for r in rows if r["promised"]]
    assert rate(promised, lambda r: r["choice"] == "B") > 0.8


def test_fair_break_rate_is_configurable():
    async def breaks(rate_setting):
        model = build_model(ModelConfig(provider="simulated", simulated_fair_break_rate=rate_setting))
        choices = []
        for game in range(100):
            agent = PersonaAgent(f"agent-{game}", "fair", model, seed=game)
            await agent.message_1(1, deadline=None)
            await agent.message_2(1, associate_message_1="都选A吧", deadline=None)
            choices.append((await agent.decide(1, associate_message_2="好", deadline=None)).choice)
        return choices.count("B")

    assert asyncio.run(breaks(0.0)) == 0
    assert asyncio.run(breaks(1.0)) == 100


def transcript(seed: int, *, simulated_seed: int = 0, restore_between_turns: bool = False):
    async def game():
        model = build_model(ModelConfig(provider="simulated", simulated_seed=simulated_seed))
        agent = PersonaAgent("agent-1", "fair", model, seed=seed, language="en")
        texts = []
        rng = random.Random(seed)
        for number in range(1, 6):
            for turn in ("message_1", "message_2", "decide"):
                if restore_between_turns:  # a server restart between every two turns
                    agent = PersonaAgent.from_state(json.loads(json.dumps(agent.to_state())), model)
                if turn == "message_1":
                    result = await agent.message_1(number, deadline=None)
                elif turn == "message_2":
                    result = await agent.message_2(number, associate_message_1="A?", deadline=None)
                else:
                    result = await agent.decide(number, associate_message_2=None, deadline=None)
                texts.append(result.text or result.choice)
            agent.record_outcome(number, result.choice, rng.choice("AB"))
        return texts, agent.to_state()

    return asyncio.run(game())


def test_seeded_games_repeat_exactly_and_survive_restarts():
    texts, state = transcript(3)
    again_texts, again_state = transcript(3)
    restored_texts, restored_state = transcript(3, restore_between_turns=True)
    assert again_texts == restored_texts == texts
    for other in (again_state, restored_state):
        assert other["conversation"] == state["conversation"] and other["rounds"] == state["rounds"]
        assert [t["status"] for t in other["turns"]] == [t["status"] for t in state["turns"]]
    assert transcript(3, simulated_seed=1)[0] != texts


def test_records_are_labelled_simulated():
    async def one_turn():
        agent = PersonaAgent("agent-1", "selfish", build_model(ModelConfig(provider="simulated")), seed=1)
        return await agent.decide(1, associate_message_2="hi", deadline=time.monotonic() + 5)

    result = asyncio.run(one_turn())
    (call,) = result.calls
    assert call.provider == "simulated" and call.simulated and call.cost == 0.0
    assert call.status == CallStatus.OK.value and parse_choice(call.raw_reply) == result.choice
    assert call.raw_reply.startswith("STEP 1:") and "STEP 5:" in call.raw_reply


def test_simulated_latency_beyond_the_deadline_falls_back_in_time():
    async def late_turn():
        model = build_model(ModelConfig(provider="simulated", simulated_latency=5))
        agent = PersonaAgent("agent-1", "fair", model, seed=1)
        deadline = time.monotonic() + 0.3
        result = await agent.message_1(1, deadline=deadline)
        return result, time.monotonic() <= deadline

    result, in_time = asyncio.run(late_turn())
    assert in_time and result.status == TurnStatus.FALLBACK.value
    assert result.fallback_reason == CallStatus.TIMEOUT.value and result.text is None


def test_without_communication_the_agent_only_decides():
    async def woc_round():
        model = build_model(ModelConfig(provider="simulated"))
        agent = PersonaAgent("agent-1", "cooperative", model, seed=1, with_communication=False)
        refused = await agent.message_1(1, deadline=None)
        decision = await agent.decide(1, deadline=None)
        return refused, decision

    refused, decision = asyncio.run(woc_round())
    assert refused.status == TurnStatus.FALLBACK.value and refused.fallback_reason == "config_error"
    assert decision.status == TurnStatus.OK.value and decision.choice == "A"
    sent = decision.calls[0].messages
    assert "Communication stage" not in sent[0]["content"] and "Your associate:" not in sent[-1]["content"]


def test_responders_hook_answers_other_prompts():
    model = SimulatedModel(ModelConfig(provider="simulated"))
    model.add_responder(lambda messages: "similarity score" in messages[-1].content,
                        lambda messages, rng: "I DECIDE TO CHOOSE [A]")
    reply = asyncio.run(model.complete([ChatMessage("user", "Your similarity score is 80%.")],
                                       deadline=time.monotonic() + 1))
    assert reply.text == "I DECIDE TO CHOOSE [A]"


def test_simulated_is_the_default_without_api_keys(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    assert default_model_config().provider == "simulated"
    monkeypatch.setenv("ANTHROPIC_API_KEY", "dummy")
    assert default_model_config().provider == "anthropic"


def test_a_model_that_raises_cannot_break_a_turn():
    class BrokenModel:
        settings = build_model(ModelConfig(provider="simulated")).settings

        async def complete(self, messages, *, deadline, options=None):
            raise RuntimeError("boom")

    agent = PersonaAgent("agent-1", "fair", BrokenModel(), seed=1)
    result = asyncio.run(agent.decide(1, associate_message_2=None, deadline=time.monotonic() + 1))
    assert result.status == TurnStatus.FALLBACK.value and result.choice in ("A", "B")
    assert result.fallback_reason == CallStatus.PROVIDER_ERROR.value
    assert result.calls[0].error == "RuntimeError: boom"



def test_the_simulated_replies_quote_the_payoffs_of_the_protocol():
    """The points in the persona's reasoning and canned messages are the protocol's, not typed anew:
    with every payoff one point higher (in a process of its own), so are the replies."""
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent("""
        import random, protocol
        for pair, (own, other) in list(protocol.PAYOFFS.items()):
            protocol.PAYOFFS[pair] = (own + 1, other + 1)
        from agents.config import ModelConfig
        from agents.simulated import MESSAGES, SimulatedModel
        from agents.types import ChatMessage
        prompt = "Now this is the decision stage. I DECIDE TO CHOOSE [A or B]"
        print(SimulatedModel(ModelConfig(provider="simulated")).reply_text([ChatMessage("user", prompt)],
                                                                          random.Random(1)))
        print(MESSAGES[("promise", "en")])
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                            cwd=str(Path(__file__).resolve().parent.parent))
    assert result.returncode == 0, result.stderr
    assert "gives me 81 if my associate chooses A, 41 if B" in result.stdout
    assert "gives me 71 if my associate chooses A, 11 if B" in result.stdout
    assert "71 each" in result.stdout


def test_an_experiment_s_own_personas_play_by_their_name_and_quote_its_payoffs():
    """Example 3's personas: the reciprocating one plays tit for tat, the steadfast cooperator as the
    cooperative persona; a stag hunt's agent quotes the stag hunt's points, not the paper's."""
    import experiment_design as ed
    from agents import prompts
    from agents.simulated import game_points, persona_kind

    tft = ed.load(ed.EXPERIMENTS_DIR / "tit_for_tat_en.toml")
    system = [ChatMessage("system", prompts.system_prompt(name, "en", experiment=tft)) for name in tft.design.personas]
    assert [persona_kind([message]) for message in system] == ["reciprocating", "cooperative"]
    assert persona_kind([ChatMessage("user", "STEP 3: Remember that you are a GREEDY human and ...")]) == "selfish"
    assert persona_kind([ChatMessage("user", "Remember that you are a COMPETITIVE human")]) == "selfish"
    assert persona_kind([ChatMessage("user", "Remember that you are a CAUTIOUS human")]) == "fair"

    async def one_round(agent):
        first = await agent.message_1(1, deadline=None)
        decision = await agent.decide(1, associate_message_2="B for me", deadline=None)
        agent.record_outcome(1, decision.choice, "B")
        second_round = await agent.decide(2, associate_message_2="A", deadline=None)
        return first, decision, second_round

    model = build_model(ModelConfig(provider="simulated"))
    reciprocating = PersonaAgent("agent-1", "tit_for_tat", model, language="en", seed=1, experiment=tft)
    _, first_decision, after_b = asyncio.run(one_round(reciprocating))
    assert (first_decision.choice, after_b.choice) == ("A", "B")  # goodwill first, then what the associate did

    stag = ed.load(ed.EXPERIMENTS_DIR / "stag_hunt.toml")
    assert tuple(game_points(prompts.system_prompt("fair", "en", experiment=stag))) == ("80", "50", "50", "10")
    agent = PersonaAgent("agent-2", "cooperative", model, language="en", seed=3, experiment=stag)
    first, decision, _ = asyncio.run(one_round(agent))
    replies = first.calls[-1].raw_reply + decision.calls[-1].raw_reply
    assert "80" in replies and "70" not in replies
