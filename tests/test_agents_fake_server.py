"""The fake LLM server other tests and benches rely on: its modes, counters and concurrency."""

from __future__ import annotations

import asyncio
import time

import anthropic
import openai
import pytest

from tests.fake_llm_server import DEFAULT_DECISION_REPLY, DEFAULT_MESSAGE_REPLY


def ask_openai(fake_llm, content="hi", **settings):
    async def call():
        client = openai.AsyncOpenAI(base_url=fake_llm.base_url_openai, api_key="dummy", max_retries=0, timeout=5)
        try:
            return await client.chat.completions.create(model="m", messages=[{"role": "user", "content": content}])
        finally:
            await client.close()

    fake_llm.set(**settings)
    return asyncio.run(call())


def ask_anthropic(fake_llm, content="hi", **settings):
    async def call():
        client = anthropic.AsyncAnthropic(base_url=fake_llm.base_url_anthropic, api_key="dummy", max_retries=0,
                                          timeout=5)
        try:
            return await client.messages.create(model="m", max_tokens=50,
                                                messages=[{"role": "user", "content": content}])
        finally:
            await client.close()

    fake_llm.set(**settings)
    return asyncio.run(call())


def test_default_replies_follow_the_paper_format(fake_llm):
    assert ask_openai(fake_llm).choices[0].message.content == DEFAULT_MESSAGE_REPLY
    decision = ask_anthropic(fake_llm, "… complete the sentence: ‘I DECIDE TO CHOOSE []’")
    assert decision.content[0].text == DEFAULT_DECISION_REPLY
    assert decision.usage.input_tokens > 0
    assert fake_llm.request_count == 2 and [api for api, _ in fake_llm.requests] == ["openai", "anthropic"]


def test_scripted_and_computed_replies(fake_llm):
    assert ask_openai(fake_llm, reply="<fixed>").choices[0].message.content == "<fixed>"
    echoed = ask_anthropic(fake_llm, "ping", reply=lambda request, api: f"{api}:{request['messages'][-1]['content']}")
    assert echoed.content[0].text == "anthropic:ping"


@pytest.mark.parametrize("mode, error", [("429", openai.RateLimitError), ("500", openai.InternalServerError),
                                         ("drop", openai.APIConnectionError), ("malformed", ValueError)])
def test_fault_modes_reach_the_sdk(fake_llm, mode, error):
    with pytest.raises(error):
        ask_openai(fake_llm, mode=mode)


def test_retry_after_header_and_truncation(fake_llm):
    with pytest.raises(anthropic.RateLimitError) as raised:
        ask_anthropic(fake_llm, mode="429", retry_after=7)
    assert raised.value.response.headers["retry-after"] == "7"
    assert ask_anthropic(fake_llm, mode="truncated").stop_reason == "max_tokens"
    assert ask_openai(fake_llm, mode="truncated").choices[0].finish_reason == "length"


def test_fail_every_nth_fails_only_those(fake_llm):
    fake_llm.set(mode="500", fail_every_nth=2)
    ask_openai(fake_llm)
    with pytest.raises(openai.InternalServerError):
        ask_openai(fake_llm)
    ask_openai(fake_llm)


def test_a_hundred_slow_requests_at_once(fake_llm):
    fake_llm.set(latency=0.5)

    async def many():
        client = openai.AsyncOpenAI(base_url=fake_llm.base_url_openai, api_key="dummy", max_retries=0, timeout=10)
        started = time.monotonic()
        await asyncio.gather(*(client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
                               for _ in range(100)))
        await client.close()
        return time.monotonic() - started

    assert asyncio.run(many()) < 5.0  # one after another would take 50 s
    assert fake_llm.peak_in_flight == 100 and fake_llm.request_count == 100


def test_unknown_settings_are_refused(fake_llm):
    with pytest.raises(TypeError):
        fake_llm.set(latncy=1)
    with pytest.raises(ValueError):
        fake_llm.set(mode="teapot")
