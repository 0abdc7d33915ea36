"""Constrained output against the local fake server (real OpenAI SDK): the paper's format sent as the
server's grammar per stage (llama.cpp's ``grammar``, vLLM's ``structured_outputs`` /
``guided_regex``), ``llm_constrained_output`` auto probed once at the model check, the re-ask
that says what was wrong, the Test model's attempts one persona at a time."""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import re
import time

import pytest

from agents import grammars, prompts
from agents.agent import PersonaAgent
from agents.probe import probe_personas
from agents.config import ConfigError, ModelConfig
from agents.models import build_model
from agents.parsing import grammar_message
from lab.base import session_settings
from lab.base.session_settings import SessionConfigError
from tests.fake_llm_server import FakeLLMServer

DECISION_OK = ("STEP 1: B gives 80 or 40\nSTEP 2: A gives 70 or 10\nSTEP 3: new associate\nSTEP 4: trust\n"
               "STEP 5: fair\nI DECIDE TO CHOOSE [A]")
MESSAGE_OK = "STEP 1: B: 80/10\nSTEP 2: A: 70/70\nSTEP 3: A/A\nSTEP 4: <Let's both choose A!>"


def config(fake, **extra) -> ModelConfig:
    fields = dict(provider="openai_compatible", model="local", base_url=fake.base_url_openai, max_tokens=128,
                  request_timeout=10, max_retries=0, temperature=0.7, seed=5)
    return ModelConfig(**{**fields, **extra})


def play_round(model, language="en") -> list:
    agent = PersonaAgent("agent-1", "fair", model, language=language, seed=1)

    async def run():
        deadline = time.monotonic() + 30
        first = await agent.message_1(1, deadline=deadline)
        second = await agent.message_2(1, associate_message_1="hi", deadline=deadline)
        decision = await agent.decide(1, associate_message_2="A?", deadline=deadline)
        return [first, second, decision]

    return asyncio.run(run())


def chat_requests(fake) -> list[dict]:
    return [request for api, request in fake.requests if api == "openai"]


def test_each_stage_sends_the_papers_format_as_llama_cpp_grammar(fake_llm):
    turns = play_round(build_model(config(fake_llm, constrained_output="on", grammar_format="gbnf")))
    assert [t.status for t in turns] == ["ok", "ok", "ok"]
    message_1, message_2, decision = (r["grammar"] for r in chat_requests(fake_llm))
    # message 1: the prompt's STEP 1-4, the last ending in exactly one <...> of 1-300 characters,
    # here 1-128: no more than max_tokens
    assert message_1.startswith('root ::= "STEP 1: " step "\\n" "STEP 2: "')
    assert '"STEP 4: " lead "<" message ">"' in message_1
    # (or one of the words the parser takes for no message or an echo's opening, and then more:
    # agents/grammars.py; or a word character, and then a mark soon: not a bare word like "<file_sep>")
    assert re.search(r"^message ::= \( \[\^[^\]]*\] \[\^[^\]]*\]\{0,127\} \| \[[^\]]*\] marked1 \| \[aA\] message\d+ ",
                     message_1, re.M)
    # message 2: its prompt asks no steps: free text, then the message
    assert message_2.startswith('root ::= lead "<" message ">"') and "STEP" not in message_2
    # the decision: the prompt's STEP 1-5, then the paper's sentence with A or B
    assert '"STEP 5: " step "\\n" "I DECIDE TO CHOOSE [" [AB] "]"' in decision
    # and on every call's record
    for turn in turns:
        parameters = turn.calls[0].parameters
        assert parameters["constrained_output"] == "on" and parameters["grammar_format"] == "gbnf"
        shape, sent = turn.calls[0].parameters["grammar"], chat_requests(fake_llm)[turns.index(turn)]["grammar"]
        assert shape.startswith("decision steps=5 " if turn.turn == "decision" else "message steps=")
        assert shape.endswith(hashlib.sha256(json.dumps({"grammar": sent}, ensure_ascii=False).encode())
                              .hexdigest()[:12])


@pytest.mark.parametrize("grammar_format", ["structured_outputs", "guided_regex"])
def test_vllm_gets_the_same_shape_as_a_regex(fake_llm, grammar_format):
    fake_llm.set(reply=lambda request, api: DECISION_OK if "I DECIDE" in request["messages"][-1]["content"]
                 else MESSAGE_OK)
    turns = play_round(build_model(config(fake_llm, constrained_output="on", grammar_format=grammar_format)))
    assert [t.status for t in turns] == ["ok", "ok", "ok"]
    sent = [r[grammar_format] for r in chat_requests(fake_llm)]
    regexes = [s["regex"] for s in sent] if grammar_format == "structured_outputs" else sent
    assert re.fullmatch(regexes[0], MESSAGE_OK)
    assert re.fullmatch(regexes[1], "Hi! <Let's both choose A>")
    assert re.fullmatch(regexes[2], DECISION_OK)
    assert not re.fullmatch(regexes[2], DECISION_OK + "\nJust kidding, B.")
    assert not re.fullmatch(regexes[1], "Hi! <one> and <two>")
    # not the prompt's own format example echoed back (the parser takes it for no message)
    assert not re.fullmatch(regexes[1], "Hi! <The message you want to send>")
    # "<|im_end|>" is the chat template's stop sequence: the server would cut the reply there
    assert not re.fullmatch(regexes[1], "Hi! <|im_end|>")
    assert re.fullmatch(regexes[1], "Hi! <Then let's both choose A>")
    assert not re.fullmatch(regexes[1], "Hi! <" + "a" * 301 + ">")


def test_off_and_cloud_providers_send_the_papers_prompts_unconstrained(fake_llm, monkeypatch):
    play_round(build_model(config(fake_llm, constrained_output="off")))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    cloud = ModelConfig(provider="openai", model="gpt-4o", base_url=fake_llm.base_url_openai, max_retries=0)
    assert cloud.constrained_output == "auto" and cloud.grammar() is None
    turns = play_round(build_model(cloud))
    requests = chat_requests(fake_llm)
    assert len(requests) == 6
    assert not any(key in r for r in requests for key in ("grammar", "structured_outputs", "guided_regex"))
    assert requests[3]["messages"][-1]["content"] == prompts.message_1_prompt(1, "fair", "en")
    assert {t.calls[0].parameters["constrained_output"] for t in turns} == {"off"}
    with pytest.raises(ConfigError, match="constrained_output 'on' needs an openai_compatible server"):
        ModelConfig.build(provider="openai", constrained_output="on")


def session_config(fake, **extra) -> dict:
    return {**dict(associate_type="fair", label_setting="informed", game_order="WC-WoC",
                   llm_provider="openai_compatible", llm_model="local", llm_base_url=fake.base_url_openai,
                   llm_max_tokens=128, llm_max_retries=0, llm_request_timeout=10), **extra}


@pytest.mark.parametrize("obeys, expected", [({"grammar"}, ("on", "gbnf")),
                                             ({"structured_outputs"}, ("on", "structured_outputs")),
                                             ({"guided_regex"}, ("on", "guided_regex")),
                                             (None, ("off", ""))])
def test_auto_is_probed_once_at_the_model_check(fake_llm, obeys, expected):
    fake_llm.set(grammar_fields=obeys)
    config, record = session_config(fake_llm), {}
    session_settings.validate(config, 1, record=record)
    assert (config["llm_constrained_output"], config["llm_grammar_format"]) == expected
    resolved = ModelConfig.from_session_config(config)  # what the engine and the manifest read
    assert resolved.constrained_output == expected[0] and (resolved.grammar() or "") == expected[1]
    assert record["model_check"]["constrained_output"] == expected[0]
    probes = [r for r in chat_requests(fake_llm) if "GRAMMAR" in json.dumps(r)]  # grammars.PROBE_TEXT, escaped or not
    formats = ["gbnf", "structured_outputs", "guided_regex"]
    assert len(probes) == (formats.index(expected[1]) + 1 if obeys else 3)  # tried in turn until one is obeyed


def test_on_is_refused_when_the_server_takes_no_grammar(fake_llm):
    fake_llm.set(reject_unknown_fields=True)
    with pytest.raises(SessionConfigError, match="llm_constrained_output is on, but the server"):
        session_settings.validate(session_config(fake_llm, llm_constrained_output="on"), 1)


def test_cloud_providers_are_never_probed_and_stay_off(fake_llm, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    config = session_config(fake_llm, llm_provider="openai", llm_model="gpt-4o")
    session_settings.validate(config, 1)
    assert config["llm_constrained_output"] == "off"
    assert fake_llm.request_count == 1  # the model check's one call, no probe
    assert "grammar" not in chat_requests(fake_llm)[0]


def test_under_the_grammar_a_reask_is_a_new_draw_of_the_same_prompt_at_a_slightly_higher_temperature(fake_llm):
    """The server shapes the reply, so what was wrong is what the model wrote; shown its reply, a
    small model writes it again (SmolLM2: the same echo three times), so it is not shown it."""
    echo = "STEP 1: B: 80/10\nSTEP 2: A: 70/70\nSTEP 3: A/A\nSTEP 4: <The message you want to send>"
    replies = iter([echo, MESSAGE_OK, "I will pick A, probably.", DECISION_OK])
    fake_llm.set(reply=lambda request, api: next(replies))
    agent = PersonaAgent("agent-1", "fair", build_model(config(fake_llm, constrained_output="on")), language="en",
                         seed=1)

    async def run():
        deadline = time.monotonic() + 30
        return (await agent.message_1(1, deadline=deadline),
                await agent.decide(1, associate_message_2="A?", deadline=deadline))

    message, decision = asyncio.run(run())
    assert (message.status, message.text, decision.status, decision.choice) == ("reasked", "Let's both choose A!",
                                                                                  "reasked", "A")
    first, second, third, fourth = chat_requests(fake_llm)
    assert second["messages"] == first["messages"] and fourth["messages"] == third["messages"]
    assert (first["temperature"], first["seed"]) == (0.7, 5)
    assert (second["temperature"], second["seed"]) == (0.9, 6)  # never the identical request
    assert second["grammar"] == first["grammar"]
    # the attempt rows say so: attempt 2, its temperature and seed, what was wrong with attempt 1
    calls = message.calls + decision.calls
    assert [(c.attempt, c.parameters["temperature"], c.parameters["seed"]) for c in calls] == [
        (1, 0.7, 5), (2, 0.9, 6), (1, 0.7, 5), (2, 0.9, 6)]
    assert calls[0].status == "parse_error"
    assert calls[0].error == "the text inside <> repeated the instructions' words instead of saying something to your associate"
    assert calls[2].error == "it did not end with the sentence I DECIDE TO CHOOSE [A] or I DECIDE TO CHOOSE [B]"
    # the agent remembers the prompt and the reply it used, not the malformed one
    remembered = [entry["content"] for entry in agent.conversation]
    assert echo not in remembered and "I will pick A, probably." not in remembered
    assert remembered[-2:] == [third["messages"][-1]["content"], DECISION_OK]


def test_without_the_grammar_the_reask_says_what_was_wrong_never_quoting_the_placeholder(fake_llm):
    replies = iter(["STEP 4: <The message you want to send>", MESSAGE_OK])
    fake_llm.set(reply=lambda request, api: next(replies))
    agent = PersonaAgent("agent-1", "fair", build_model(config(fake_llm, constrained_output="off")), language="en",
                         seed=1)
    message = asyncio.run(agent.message_1(1, deadline=time.monotonic() + 30))
    assert (message.status, message.text) == ("reasked", "Let's both choose A!")
    first, second = chat_requests(fake_llm)
    assert second["messages"][-2] == {"role": "assistant", "content": "STEP 4: <The message you want to send>"}
    assert second["messages"][-1]["content"].splitlines()[-1] == (
        "What was wrong with your last reply: the text inside <> repeated the instructions' words instead of "
        "saying something to your associate.")
    assert (second["temperature"], second["seed"]) == (0.9, 6)


def test_test_model_runs_the_personas_one_after_another_and_shows_each_attempt():
    replies = {"cooperative": ["no brackets", MESSAGE_OK]}

    def reply(request, api):
        persona = next(p for p in replies if prompts.PERSONA_NAMES[p] in request["messages"][0]["content"]) \
            if any(prompts.PERSONA_NAMES[p] in request["messages"][0]["content"] for p in replies) else None
        return replies[persona].pop(0) if persona and replies[persona] else MESSAGE_OK

    with FakeLLMServer(reply=reply, latency=0.3) as own_server:  # nothing in flight from other tests
        results = probe_personas(build_model(config(own_server)), language="en", seconds=20, concurrency=1)
    assert own_server.peak_in_flight == 1
    assert [r["persona"] for r in results] == ["cooperative", "fair", "selfish"]
    cooperative = results[0]
    assert [(a["attempt"], a["status"]) for a in cooperative["attempts"]] == [(1, "parse_error"), (2, "ok")]
    assert cooperative["attempts"][0]["reply"] == "no brackets"
    assert cooperative["attempts"][1]["reply"] == MESSAGE_OK
    assert all(a["input_tokens"] and a["output_tokens"] for a in cooperative["attempts"])
    assert cooperative["attempts"][0]["output_tokens"] != cooperative["attempts"][1]["output_tokens"]


def test_test_model_route_lists_every_attempt_apart(fake_llm):
    from lab.agent_runtime import model_probe

    fake_llm.set(reply=lambda request, api: "no brackets" if len(request["messages"]) == 2 else MESSAGE_OK)
    model_probe.TEST_TARGETS["S1"] = dict(config=config(fake_llm), language="en", with_chat=True)
    outcome = model_probe.run_model_test("S1")
    assert outcome["concurrency"] == 1
    rows = [(r["persona"], r["attempt"], r["attempt_status"], r["reply"]) for r in outcome["results"]]
    assert rows == [(p, n, s, t) for p in ("cooperative", "fair", "selfish")
                    for n, s, t in ((1, "parse_error", "no brackets"), (2, "ok", MESSAGE_OK))]
    assert all(re.fullmatch(r"\d+/\d+", r["tokens"]) for r in outcome["results"])


def test_a_constrained_reply_that_ends_with_the_last_token_allowed_is_whole(fake_llm):
    # finish_reason "length" although the grammar's shape was complete (its ">" was the last token)
    fake_llm.set(mode="truncated", reply="STEP 4: <Both A?>" * 2)
    constrained = PersonaAgent("agent-1", "fair", build_model(config(fake_llm, constrained_output="on")), seed=1,
                               language="en")
    turn = asyncio.run(constrained.message_2(1, associate_message_1="hi", deadline=time.monotonic() + 10))
    assert (turn.status, turn.text, turn.calls[0].flags) == ("ok", "Both A?", "complete_at_limit")
    fake_llm.set(reply="STEP 4: <Both A?> and more" * 2)  # cut inside the text: truncated, re-asked
    turn = asyncio.run(constrained.message_2(2, associate_message_1="hi", deadline=time.monotonic() + 10))
    assert turn.calls[0].status == "length" and len(turn.calls) == 2
    unconstrained = PersonaAgent("agent-2", "fair", build_model(config(fake_llm, constrained_output="off")), seed=1)
    fake_llm.set(reply="STEP 4: <Both A?>" * 2)
    turn = asyncio.run(unconstrained.message_2(1, associate_message_1="hi", deadline=time.monotonic() + 10))
    assert turn.calls[0].status == "length"  # without a grammar nothing says the reply was whole


def test_a_grammar_shaped_message_is_the_final_brackets_even_if_it_reads_like_a_tag(fake_llm):
    # SmolLM2 under the grammar ended 38 of 600 replies in "<em>"-like words: the grammar admits no
    # markup there, so it is the model's message (shown escaped), not a tag to strip
    fake_llm.set(reply="STEP 4: so I will say<em>")
    constrained = PersonaAgent("agent-1", "fair", build_model(config(fake_llm, constrained_output="on")), seed=1,
                               language="en")
    turn = asyncio.run(constrained.message_2(1, associate_message_1="hi", deadline=time.monotonic() + 10))
    assert (turn.status, turn.text, len(turn.calls)) == ("ok", "em", 1)
    fake_llm.set(reply="STEP 4: so I will say<the message you want to send>")  # still a placeholder
    turn = asyncio.run(constrained.message_2(2, associate_message_1="hi", deadline=time.monotonic() + 10))
    assert turn.calls[0].status == "parse_error"
    unconstrained = PersonaAgent("agent-2", "fair", build_model(config(fake_llm, constrained_output="off")), seed=1)
    fake_llm.set(reply="STEP 4: so I will say<em>")  # free text: a tag is never a message
    turn = asyncio.run(unconstrained.message_2(1, associate_message_1="hi", deadline=time.monotonic() + 10))
    assert turn.calls[0].status == "parse_error"


def test_the_grammar_bars_what_the_parser_takes_for_no_message_in_any_case():
    # SmolLM2 under the grammar ended whole rounds in "<message>" and "<br>", every agent alike
    shape = grammars.OutputShape("message", 0)
    pattern = grammars.regex(shape, 128)
    for echoed in ("The message you want to send", "the message you want to send", "THE MESSAGE YOU WANT TO SEND",
                   "message", "Message.", "your message", "br", "BR", "br/", "message'",
                   "The message you want to send.1.1.2.3.4.5", "br /", "BR/ ", "message /", "The message you want",
                   "message to you"):
        assert not re.fullmatch(pattern, f"Hi! <{echoed}>"), echoed
    for message in ("Then A", "t!", "messages!", "Messaging you: A", "bring it", "b.", "em?", "A.", "我们都选A",
                    "OK, A"):
        assert re.fullmatch(pattern, f"Hi! <{message}>"), message
    # whatever the grammar allows, the parser takes for a message (short strings, three limits)
    compiled = [re.compile(grammars.regex(shape, limit)) for limit in (3, 4, 128)]
    for length in range(1, 5):
        for letters in itertools.product("bBrm/ .e'sx", repeat=length):
            text = "".join(letters)
            for limit, grammar in zip((3, 4, 128), compiled):
                if grammar.fullmatch(f"<{text}>"):
                    assert grammar_message(f"<{text}>") is not None, (text, limit)


def test_a_message_is_never_a_bare_word_as_chat_models_special_tokens_are():
    # The grammar checks a token by its text: SmolLM2's one token "<file_sep>" satisfied "<" message
    # ">" whole, and llama.cpp's server leaves special tokens out of the reply, which then ended
    # with no message (a round of twenty clones: "STEP 4: To send your message in English." only).
    for limit in (3, 40, 128):
        pattern = grammars.regex(grammars.OutputShape("message", 0), limit)
        for special in ("file_sep", "repo_name", "reponame", "think", "start_of_turn", "pad", "s", "A", "OK",
                        "x" * (grammars.MAX_WORD_RUN + 1) + " and more"):
            assert not re.fullmatch(pattern, f"Hi <{special}>"), (special, limit)
        for message in ("A.", "OK!", "B,A", "我们都选A"[: limit], "x" * (grammars.MAX_WORD_RUN - 1) + "!"):
            if len(message) <= limit:
                assert re.fullmatch(pattern, f"Hi <{message}>"), (message, limit)
    # the word characters, spelt as characters and as a class, are one set
    assert {chr(c) for c in range(128) if re.fullmatch(f"[{grammars._WORD}]", chr(c))} == set(grammars._WORD_CHARS)
    # the same language in GBNF: every marked rule named is defined
    gbnf = grammars.gbnf(grammars.OutputShape("message", 4), 128)
    defined = {line.split(" ::= ")[0] for line in gbnf.splitlines()}
    assert set(re.findall(r"\b(marked\d+|message\d*)\b", gbnf)) <= defined | {"message"}


def test_a_decision_under_the_grammar_is_its_final_line_whatever_its_reasoning_says(fake_llm):
    """SmolLM2 under the decision grammar: "STEP 2: I decide to choose B" in its reasoning, then
    the forced last line. It was refused as "chose both A and B" and re-asked, a slot lost on a
    one-request server; the last line is the decision. Without the grammar both sentences are the
    model's own words and they conflict: re-asked, as before."""
    reply = ("STEP 1: B gives me 80 or 40\nSTEP 2: I decide to choose B because it pays more\nSTEP 3: new associate\n"
             "STEP 4: I DECIDE TO CHOOSE B, or not\nSTEP 5: fair\nI DECIDE TO CHOOSE [A]")
    fake_llm.set(reply=reply)
    constrained = PersonaAgent("agent-1", "fair", build_model(config(fake_llm, constrained_output="on")), seed=1,
                               language="en")
    turn = asyncio.run(constrained.decide(1, associate_message_2="A?", deadline=time.monotonic() + 10))
    assert (turn.status, turn.choice, len(turn.calls), turn.calls[0].parsed) == ("ok", "A", 1, "A")
    unconstrained = PersonaAgent("agent-2", "fair", build_model(config(fake_llm, constrained_output="off")), seed=1)
    turn = asyncio.run(unconstrained.decide(1, associate_message_2="A?", deadline=time.monotonic() + 10))
    assert turn.calls[0].status == "parse_error" and turn.calls[0].error == "it chose both A and B"
