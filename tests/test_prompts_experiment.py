"""The agents' prompts come from the session's experiment file: the paper's give the paper's prompts
byte for byte; another design's game rules, partner, messages and personas are its own."""

import asyncio
import json
from pathlib import Path

import pytest

import experiment_design as ed
from agents import prompts
from agents.agent import PersonaAgent
from agents.config import ModelConfig
from agents.models import build_model
from agents.types import TurnStatus

# Every prompt of the paper's agents as the builder rendered them before experiment files existed.
GOLDEN = json.loads((Path(__file__).parent / "data" / "paper_prompts.json").read_text(encoding="utf-8"))
HISTORY = [prompts.PastRound(1, "A", "B", 10, 80), prompts.PastRound(2, "B", "B", 40, 40)]


def load(name):
    return ed.load(ed.EXPERIMENTS_DIR / f"{name}.toml")


def paper_prompts(experiment):
    """The golden file's prompts, rendered for ``experiment`` (keys as the golden file's)."""
    out = {}
    for persona in ("cooperative", "fair", "selfish"):
        for language in ("zh", "en"):
            for game, chat in (("WC", True), ("WoC", False)):
                key = f"{persona}|{language}|{game}"
                out[f"{key}|system"] = prompts.system_prompt(persona, language, with_communication=chat,
                                                             experiment=experiment)
                if chat:
                    for round_number in (1, 3):
                        out[f"{key}|message_1|r{round_number}"] = prompts.message_1_prompt(
                            round_number, persona, language, experiment=experiment)
                    out[f"{key}|message_2"] = prompts.message_2_prompt("Let's both pick A", "Deal, A!", language,
                                                                       experiment=experiment)
                    out[f"{key}|message_2|unsent"] = prompts.message_2_prompt(None, None, language,
                                                                              experiment=experiment)
                    out[f"{key}|decision|r1"] = prompts.decision_prompt(
                        1, persona, history=[], total_payoff=0, own_message_1="m1", associate_message_1="a1",
                        own_message_2="m2", associate_message_2="a2", experiment=experiment)
                    out[f"{key}|decision|r3"] = prompts.decision_prompt(
                        3, persona, history=HISTORY, total_payoff=50, own_message_1="m1", associate_message_1=None,
                        own_message_2=None, associate_message_2="a2", experiment=experiment)
                else:
                    for round_number, history, total in ((1, [], 0), (3, HISTORY, 50)):
                        out[f"{key}|decision|r{round_number}"] = prompts.decision_prompt(
                            round_number, persona, history=history, total_payoff=total, with_communication=False,
                            experiment=experiment)
    out["reask|decision"] = prompts.reask_prompt(True, experiment=experiment)
    out["reask|decision|problem"] = prompts.reask_prompt(True, problem="no  choice found.", experiment=experiment)
    out["reask|message"] = prompts.reask_prompt(False, experiment=experiment)
    out["reask|message|too_long"] = prompts.reask_prompt(False, too_long=True, max_chars=120, experiment=experiment)
    out["reask|message|too_long|problem"] = prompts.reask_prompt(False, too_long=True, problem="it was too long",
                                                                 experiment=experiment)
    return out


@pytest.mark.parametrize("experiment", [None, "paper"])
def test_the_paper_s_experiment_gives_every_prompt_byte_for_byte_as_before(experiment):
    paper = load(experiment) if experiment else None
    # The agents are never told the participants' labels: each label setting has the same prompts.
    for label_setting in load("paper").design.treatments.label_settings:
        rendered = paper_prompts(paper)
        assert rendered.keys() == GOLDEN.keys(), label_setting
        for key, text in GOLDEN.items():
            assert rendered[key] == text, f"{label_setting}: {key}"


def test_the_stag_hunt_s_payoffs_are_its_agents_rules():
    system = prompts.system_prompt("fair", "en", experiment=load("stag_hunt"))
    assert "1. If both you and your associate choose A, both will receive 80." in system
    assert "2. If both you and your associate choose B, both will receive 50." in system
    assert "3. If you choose A and your associate chooses B, you will receive 10 and your associate will receive 50." \
        in system
    assert "4. If you choose B and your associate chooses A, you will receive 50 and your associate will receive 10." \
        in system
    assert "a DIFFERENT human whom you have never met before in each round" in system
    assert "70" not in system and "40" not in system


def test_a_fixed_partner_with_one_message_exchange_is_told_so():
    experiment = load("fixed_partner_one_message")
    system = prompts.system_prompt("fair", "zh", experiment=experiment)
    assert "Note that you are participating in a game where you will play with the same associate for all rounds." \
        in system
    assert "DIFFERENT" not in system
    assert "you can exchange one message with your associate." in system
    first = prompts.message_1_prompt(1, "fair", "zh", experiment=experiment)
    assert "An associate has been assigned to you by the system for all rounds." in first
    assert "you can exchange one message with your associate." in first
    assert first.endswith("Now you can send your message in Chinese.")
    later = prompts.message_1_prompt(2, "fair", "zh", experiment=experiment)
    assert "Your associate is the same as in the previous rounds." in later and "new associate" not in later
    decision = prompts.decision_prompt(2, "fair", history=HISTORY[:1], total_payoff=10, own_message_1="m1",
                                       associate_message_1="a1", experiment=experiment)
    assert "The following are the messages between you and your associate in this round.\nYou: m1\n" \
           "Your associate: a1\nIn round 1:" in decision
    assert "STEP 3: Review the past history of the game and remember that you play with the same associate in " \
           "every round." in decision
    woc = prompts.decision_prompt(1, "fair", history=[], total_payoff=0, with_communication=False,
                                  experiment=experiment)
    assert woc.startswith("Welcome to round 1.\nAn associate has been assigned to you by the system for all rounds.")


def test_a_persona_of_its_own_speaks_from_its_files_in_its_languages_only():
    experiment = load("tit_for_tat_en")
    roleplay = (ed.PROJECT_DIR / "prompts/personas/roleplay_tit_for_tat.j2").read_text(encoding="utf-8").strip()
    system = prompts.system_prompt("tit_for_tat", "en", experiment=experiment)
    assert roleplay in system and "FAIR-MINDED" not in system
    assert "STEP 3: Remember that you are a RECIPROCATING human" in prompts.message_1_prompt(
        1, "tit_for_tat", "en", experiment=experiment)
    decision = prompts.decision_prompt(1, "unconditional_cooperator", history=[], total_payoff=0,
                                       with_communication=False, experiment=experiment)
    assert "Remember that you are a STEADFASTLY COOPERATIVE human and make your choice." in decision
    with pytest.raises(ValueError, match="language"):
        prompts.system_prompt("tit_for_tat", "zh", experiment=experiment)
    with pytest.raises(ValueError, match="persona"):
        prompts.system_prompt("fair", "en", experiment=experiment)  # not a persona of this experiment
    with pytest.raises(ValueError, match="persona"):
        prompts.system_prompt("tit_for_tat", "en")  # the paper has no such persona
    # the persona's own files are part of the prompts' version
    assert prompts.prompt_version(experiment) != prompts.prompt_version()
    assert prompts.prompt_version(load("stag_hunt")) == prompts.prompt_version()  # its files are the paper's


def test_an_agent_plays_a_fixed_partner_game_with_one_exchange_and_records_its_experiment():
    experiment = load("fixed_partner_one_message")
    model = build_model(ModelConfig(provider="simulated", simulated_seed=3))

    async def two_rounds():
        agent = PersonaAgent("agent-1", "cooperative", model, language="en", seed=1, experiment=experiment)
        results = []
        for number in (1, 2):
            results.append(await agent.message_1(number, deadline=None))
            results.append(await agent.message_2(number, associate_message_1="A?", deadline=None))
            results.append(await agent.decide(number, associate_message_1="Let's both pick A", deadline=None))
            agent.record_outcome(number, results[-1].choice, "A")
        return agent, results

    agent, results = asyncio.run(two_rounds())
    first, second, decision = results[:3]
    assert first.status == TurnStatus.OK.value and first.text
    assert second.status == TurnStatus.FALLBACK.value  # one exchange: no second message is asked
    assert decision.choice == "A"
    prompt = decision.calls[0].messages[-1]["content"]
    assert "Your associate: Let's both pick A\nIn round" not in prompt  # round 1: no history yet
    assert f"You: {first.text}\nYour associate: Let's both pick A\nYour total payoff so far: 0 points." in prompt
    assert decision.calls[0].parameters["experiment"] == "fixed_partner_one_message"
    assert decision.calls[0].parameters["experiment_hash"] == experiment.canonical_hash
    assert agent.total_payoff == 140
    restored = PersonaAgent.from_state(agent.to_state(), model, experiment=experiment)
    assert restored.experiment is experiment and restored.chat_exchanges == 1


def test_the_paper_s_agent_records_as_before():
    model = build_model(ModelConfig(provider="simulated", simulated_seed=3))
    agent = PersonaAgent("agent-1", "fair", model, language="en", seed=1)
    result = asyncio.run(agent.decide(1, associate_message_2=None, deadline=None))
    assert "experiment" not in result.calls[0].parameters
    assert result.calls[0].prompt_version == prompts.prompt_version()


def test_the_simulated_model_plays_a_reciprocating_persona_tit_for_tat():
    experiment = load("tit_for_tat_en")
    model = build_model(ModelConfig(provider="simulated", simulated_seed=3))

    async def rounds(associate_choices):
        agent = PersonaAgent("agent-1", "tit_for_tat", model, language="en", seed=1, experiment=experiment,
                             with_communication=False)
        choices = []
        for number, associate in enumerate(associate_choices, start=1):
            choices.append((await agent.decide(number, deadline=None)).choice)
            agent.record_outcome(number, choices[-1], associate)
        return choices

    assert asyncio.run(rounds(["B", "A", "B", "B", "A"])) == ["A", "B", "A", "B", "B"]
