"""The fake LLM server other tests and benches rely on: its modes, counters and concurrency."""

from __future__ import annotations

import asyncio
import time

import anthropic
import openai
import pytest

from tests.fake_llm_server import DEFAULT_DECISION_REPLY, DEFAULT_MESSAGE_REPLY, FakeLLMServer


@pytest.fixture(scope="module")
def server():
    with FakeLLMServer() as running:
        yield running


@pytest.fixture(autouse=True)
def fresh(server):
    server.reset()


def ask_openai(server, content="hi", **settings):
    async def call():
        client = openai.AsyncOpenAI(base_url=server.base_url_openai, api_key="dummy", max_retries=0, timeout=5)
        try:
            return await client.chat.completions.create(model="m", messages=[{"role": "user", "content": content}])
        finally:
            await client.close()

    server.set(**settings)
    return asyncio.run(call())


def ask_anthropic(server, content="hi", **settings):
    async def call():
        client = anthropic.AsyncAnthropic(base_url=server.base_url_anthropic, api_key="dummy", max_retries=0,
                                          timeout=5)
        try:
            return await client.messages.create(model="m", max_tokens=50,
                                                messages=[{"role": "user", "content": content}])
        finally:
            await client.close()

    server.set(**settings)
    return asyncio.run(call())


def test_default_replies_follow_the_paper_format(server):
    assert ask_openai(server).choices[0].message.content == DEFAULT_MESSAGE_REPLY
    decision = ask_anthropic(server, "… complete the sentence: ‘I DECIDE TO CHOOSE []’")
    assert decision.content[0].text == DEFAULT_DECISION_REPLY
    assert decision.usage.input_tokens > 0
    assert server.request_count == 2 and [api for api, _ in server.requests] == ["openai", "anthropic"]


def test_scripted_and_computed_replies(server):
    assert ask_openai(server, reply="<fixed>").choices[0].message.content == "<fixed>"
    echoed = ask_anthropic(server, "ping", reply=lambda request, api: f"{api}:{request['messages'][-1]['content']}")
    assert echoed.content[0].text == "anthropic:ping"


@pytest.mark.parametrize("mode, error", [("429", openai.RateLimitError), ("500", openai.InternalServerError),
                                         ("drop", openai.APIConnectionError), ("malformed", ValueError)])
def test_fault_modes_reach_the_sdk(server, mode, error):
    with pytest.raises(error):
        ask_openai(server, mode=mode)


def test_retry_after_header_and_truncation(server):
    with pytest.raises(anthropic.RateLimitError) as raised:
        ask_anthropic(server, mode="429", retry_after=7)
    assert raised.value.response.headers["retry-after"] == "7"
    assert ask_anthropic(server, mode="truncated").stop_reason == "max_tokens"
    assert ask_openai(server, mode="truncated").choices[0].finish_reason == "length"


def test_fail_every_nth_fails_only_those(server):
    server.set(mode="500", fail_every_nth=2)
    ask_openai(server)
    with pytest.raises(openai.InternalServerError):
        ask_openai(server)
    ask_openai(server)


def test_a_hundred_slow_requests_at_once(server):
    server.set(latency=0.5)

    async def many():
        client = openai.AsyncOpenAI(base_url=server.base_url_openai, api_key="dummy", max_retries=0, timeout=10)
        started = time.monotonic()
        await asyncio.gather(*(client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
                               for _ in range(100)))
        await client.close()
        return time.monotonic() - started

    assert asyncio.run(many()) < 5.0  # one after another would take 50 s
    assert server.peak_in_flight == 100 and server.request_count == 100


def test_unknown_settings_are_refused(server):
    with pytest.raises(TypeError):
        server.set(latncy=1)
    with pytest.raises(ValueError):
        server.set(mode="teapot")
