"""Nothing junk reaches a participant: a message that echoes the prompt's format or its
placeholder ("The message I want to send", "The MessageYouWannaSend", "Your Name") is refused by
the server's grammar and by the parser alike, tested on the echoes SmolLM2-135M delivered in zh
and en sessions before (tests/data/message_echoes.json), while good messages pass both; and in a
zh session with a local model the messages are Chinese (llm_chinese_messages)."""

from __future__ import annotations

import asyncio
import functools
import json
import re
import time
from pathlib import Path

import pytest

from agents import grammars
from agents.agent import PersonaAgent
from agents.config import ModelConfig
from agents.models import build_model
from agents.parsing import grammar_message, is_echo, parse_message
from agents.simulated import MESSAGES
from lab.base import session_settings
from tests.gbnf_matcher import matches as gbnf_matches

TABLE = json.loads((Path(__file__).parent / "data" / "message_echoes.json").read_text(encoding="utf-8"))
# Good messages: the simulated model's (zh and en), and ones that open like an echo and are not.
GOOD = sorted({m for options in MESSAGES.values() for m in options} | {
    "The plan: we both pick A", "Your turn to trust me: A", "My choice is A, yours?", "Messages aside, A is best",
    "You want A? Me too", "I want us both to pick A", "Thank you, A it is", "the first round went well, A again?",
    "A/A?", "B is a trap, let's do A", "Your first choice should be A", "The next round? A again",
    "Sent you my word: A", "This time A, promise", "我们都选A吧", "你想选什么？我选A", "上一轮对方选了B，这次我们合作吧"})
MESSAGE_SHAPES = [grammars.OutputShape("message", steps) for steps in (4, 0)]


@functools.lru_cache(maxsize=None)
def compiled_grammar(shape: grammars.OutputShape, max_tokens: int) -> re.Pattern:
    return re.compile(grammars.regex(shape, max_tokens))


def allowed_by_grammar(message: str, shape: grammars.OutputShape, max_tokens: int = 128) -> bool:
    """The grammar llama.cpp gets (GBNF; tests/gbnf_matcher.py) lets the message through; its
    regular-expression form (vLLM's) lets through the same."""
    reply = ("STEP 1: a\nSTEP 2: b\nSTEP 3: c\nSTEP 4: " if shape.steps else "Hi ") + f"<{message}>"
    by_gbnf = gbnf_matches(grammars.gbnf(shape, max_tokens), reply)
    assert by_gbnf == allowed_by_regex(message, shape, max_tokens), message
    return by_gbnf


def allowed_by_regex(message: str, shape: grammars.OutputShape, max_tokens: int = 128) -> bool:
    reply = ("STEP 1: a\nSTEP 2: b\nSTEP 3: c\nSTEP 4: " if shape.steps else "Hi ") + f"<{message}>"
    return compiled_grammar(shape, max_tokens).fullmatch(reply) is not None


def test_the_table_holds_at_least_fifty_real_echoes_of_both_languages():
    echoes = {row["message"] for row in TABLE["echoes"]}
    assert len(echoes) >= 50
    assert {row["language"] for row in TABLE["echoes"]} == {"zh", "en"}


@pytest.mark.parametrize("row", TABLE["echoes"], ids=lambda row: row["message"][:40])
def test_a_real_echo_is_refused_by_the_grammar_and_the_parser(row):
    message = row["message"]
    assert is_echo(message)
    assert parse_message(f"STEP 4: <{message}>") is None
    assert grammar_message(f"STEP 4: <{message}>") is None
    for shape in MESSAGE_SHAPES:
        assert not allowed_by_grammar(message, shape), (message, shape)
        assert not allowed_by_regex(message, shape), (message, shape)


@pytest.mark.parametrize("row", TABLE["echoes_within"], ids=lambda row: row["message"][:40])
def test_a_real_echo_of_the_placeholder_further_in_is_refused_by_the_parser(row):
    assert is_echo(row["message"]) and parse_message(f"STEP 4: <{row['message']}>") is None


@pytest.mark.parametrize("message", GOOD)
def test_a_good_message_passes_the_grammar_and_the_parser(message):
    assert not is_echo(message)
    assert parse_message(f"STEP 4: <{message}>") == message
    for shape in MESSAGE_SHAPES:
        assert allowed_by_grammar(message, shape), (message, shape)
    if re.search("[\u4e00-\u9fff]", message[0]):  # a Chinese message passes the Chinese grammar too
        assert allowed_by_grammar(message, grammars.OutputShape("message", 4, chinese=True))


def test_an_echo_is_refused_in_any_case_and_spacing_and_a_word_that_goes_on_is_not_one():
    for echo in ("THE MESSAGE YOU WANT TO SEND", "the message", "TheMessage", "The MessageYouWannaSend",
                 "YourFirst message", "your  name", "Message.", "msg!", "I wanna share", "A placeholder text"):
        assert is_echo(echo) or parse_message(f"<{echo}>") is None, echo
        assert not allowed_by_grammar(echo.replace("  ", " "), MESSAGE_SHAPES[1]), echo
    for fine in ("Messaging you: A", "The messenger", "Sent a smile: A"):
        assert not is_echo(fine) and allowed_by_grammar(fine, MESSAGE_SHAPES[1]), fine
    # an opening turned plural or past: the grammar and the parser bar it as the whole message
    # (the parser also with marks after it), and let it go on
    for whole in ("The messages", "your named", "THIS MESSAGEs", "Your first messages"):
        assert is_echo(whole) and not allowed_by_grammar(whole, MESSAGE_SHAPES[1]), whole
    for names in ("Your names?", "Your names are safe with me"):  # "your name" anywhere: the parser's
        assert is_echo(names) and allowed_by_grammar(names, MESSAGE_SHAPES[1]), names
    for going_on in ("Messages are fine", "My messaged plan"):
        assert allowed_by_grammar(going_on, MESSAGE_SHAPES[1]) and not is_echo(going_on), going_on
    # barred from ending or spacing after an opening, SmolLM2 ran it on in lower case: an echo still
    for run_on in ("messageyouwanttosendgofor_thegame_re", "Your first messagetexthere", "Mynameless plan"):
        assert is_echo(run_on) and not allowed_by_grammar(run_on, MESSAGE_SHAPES[1]), run_on
    # the placeholder further in (SmolLM2 under this grammar): the parser refuses it; the grammar,
    # which bars openings only, lets it through (agents/parsing.py)
    assert parse_message("STEP 4: <This is the message you want to send>") is None
    assert allowed_by_grammar("This is the message you want to send", MESSAGE_SHAPES[0])


def _local(fake, **extra) -> ModelConfig:
    return ModelConfig(**{**dict(provider="openai_compatible", model="local", base_url=fake.base_url_openai,
                                 max_tokens=128, request_timeout=10, max_retries=0, constrained_output="on"), **extra})


def _message_2(model, language="zh"):
    agent = PersonaAgent("agent-1", "fair", model, language=language, seed=1)
    return asyncio.run(agent.message_2(1, associate_message_1="你好", deadline=time.monotonic() + 10))


def test_a_zh_agent_of_a_local_model_writes_chinese_messages(fake_llm):
    """The grammar opens a zh message with a Han character; a reply without one (a server that
    did not obey) is refused, on record why, and drawn again. SmolLM2 delivered no Chinese
    character in zh sessions before: its messages were English echoes of the prompt."""
    replies = iter(["Sure! <Let's both choose A>", "好的！<咱们都选A吧>"])
    fake_llm.set(reply=lambda request, api: next(replies))
    turn = _message_2(build_model(_local(fake_llm)))
    assert (turn.status, turn.text) == ("reasked", "咱们都选A吧")
    first, second = (request for api, request in fake_llm.requests)
    assert re.search(r'^message ::= \[\u4e00-\u9fff\] ', first["grammar"], re.M)
    assert turn.calls[0].error == "the message inside <> was not in Chinese; the chat is in Chinese"
    assert second["messages"] == first["messages"]  # under the grammar: a new draw of the same prompt
    assert [c.parameters["chinese_messages"] for c in turn.calls] == [True, True]
    assert turn.calls[0].parameters["grammar"].startswith("message steps=0 chars=128 chinese sha256=")


def test_english_is_a_message_where_chinese_is_not_required(fake_llm):
    fake_llm.set(reply="Sure! <Let's both choose A>")
    for model, language in ((build_model(_local(fake_llm, chinese_messages="off")), "zh"),
                            (build_model(_local(fake_llm)), "en"),
                            (build_model(_local(fake_llm, constrained_output="off")), "zh")):  # auto: a grammar
        turn = _message_2(model, language)
        assert (turn.status, turn.text) == ("ok", "Let's both choose A"), (model.settings, language)
        assert turn.calls[0].parameters["chinese_messages"] is False
    assert "[\u4e00-\u9fff]" not in fake_llm.requests[0][1]["grammar"]


def test_the_session_records_whether_messages_must_be_chinese(fake_llm):
    fake_llm.set(grammar_fields={"grammar"})
    base = dict(associate_type="fair", label_setting="informed", game_order="WC-WoC", llm_provider="openai_compatible",
                llm_model="local", llm_base_url=fake_llm.base_url_openai, llm_max_tokens=128, llm_max_retries=0)
    for language, setting, expected in (("zh_hans", "", "on"), ("zh_hans", "off", "off")):
        config = dict(base, language=language, **({"llm_chinese_messages": setting} if setting else {}))
        record = {}
        session_settings.validate(config, 1, record=record)
        assert config["llm_chinese_messages"] == expected  # what the engine and the manifest read
        assert ("messages must be Chinese" in record["model_check"]["grammar"]) == (expected == "on")
