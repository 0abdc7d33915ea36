"""One slot of a local model server shared by many agents: the call due first goes first, a call
its stage can no longer wait for is not sent (judged by the calls of its kind, those cut off
unanswered counted as at least as long as they ran), a wait that ends never keeps the slot, and a
call the lab gives up on stops the server's work (streamed)."""

from __future__ import annotations

import asyncio
import time

import pytest

from agents.grammars import OutputShape
from agents.models import CallOptions
from agents.agent import PersonaAgent
from agents.config import ModelConfig
from agents.models import build_model
from agents.models.layers import UNANSWERED_GROWTH, RateLimitedModel
from agents.types import CallStatus, ModelReply


class SlowModel:
    """Answers after ``seconds``; notes the order in which calls reached it."""

    settings = None

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.sent: list[str] = []

    async def complete(self, messages, *, deadline: float, options=None) -> ModelReply:
        self.sent.append(messages[0]["content"])
        await asyncio.sleep(self.seconds)
        return ModelReply(CallStatus.OK.value, text="ok")


def one_slot(seconds: float, requests_per_minute=None) -> tuple[SlowModel, RateLimitedModel]:
    """A server answering one request at a time after ``seconds``, and the layer in front of it."""
    inner = SlowModel(seconds)
    return inner, RateLimitedModel(inner, concurrency=1, requests_per_minute=requests_per_minute)


# A call asking for a message after four reasoning steps: its kind is what durations are learnt by.
MESSAGE_CALL = CallOptions(shape=OutputShape("message", 4))


def _call(model, name: str, seconds_left: float, options: CallOptions = CallOptions()):
    return model.complete([{"role": "user", "content": name}], deadline=time.monotonic() + seconds_left,
                          options=options)


def test_the_call_due_first_gets_the_free_slot_first():
    inner, model = one_slot(0.2)

    async def scenario():
        busy = asyncio.create_task(_call(model, "busy", 30))
        await asyncio.sleep(0.05)
        message = asyncio.create_task(_call(model, "message, due in 60 s", 60))  # queued first
        await asyncio.sleep(0.01)
        decision = asyncio.create_task(_call(model, "decision, due in 40 s", 40))
        return await asyncio.gather(busy, message, decision)

    replies = asyncio.run(scenario())
    assert [r.status for r in replies] == ["ok", "ok", "ok"]
    assert inner.sent == ["busy", "decision, due in 40 s", "message, due in 60 s"]


@pytest.mark.parametrize("requests_per_minute", [None, 100000])
def test_a_call_its_deadline_cannot_wait_for_is_not_sent(requests_per_minute):
    """Not sent, a timeout (the stage ran out), also where a per-minute window is set: it is not
    the window's doing (reported as rate_limited, the simulation took it for a provider failure
    and stopped the game's repeat)."""
    inner, model = one_slot(0.5, requests_per_minute)

    async def scenario():
        for number in range(3):  # the model's replies of late take 0.5 s
            assert (await _call(model, f"warm-up {number}", 30)).status == "ok"
        hopeless = await _call(model, "hopeless", 0.3)  # less than the median reply left
        hopeful = await _call(model, "hopeful", 5)
        return hopeless, hopeful

    hopeless, hopeful = asyncio.run(scenario())
    assert hopeless.status == CallStatus.TIMEOUT.value and "not sent" in hopeless.error
    assert "hopeless" not in inner.sent
    assert hopeful.status == "ok"


def test_waits_that_end_leave_the_slot_free():
    inner, model = one_slot(0.3)

    async def scenario():
        busy = asyncio.create_task(_call(model, "busy", 30))
        await asyncio.sleep(0.05)
        # These wait for the slot past their deadline, or are cancelled while they wait.
        late = [asyncio.create_task(_call(model, f"late {n}", 0.4)) for n in range(3)]
        cancelled = asyncio.create_task(_call(model, "cancelled", 30))
        await asyncio.sleep(0.05)
        cancelled.cancel()
        results = await asyncio.gather(busy, *late, return_exceptions=True)
        started = time.monotonic()
        after = await _call(model, "after", 5)
        return results, after, time.monotonic() - started

    results, after, took = asyncio.run(scenario())
    assert results[0].status == "ok"
    assert all(r.status == CallStatus.TIMEOUT.value for r in results[1:])
    assert after.status == "ok" and took < 0.5  # straight to the free slot
    assert inner.sent == ["busy", "after"]


class ShapedModel(SlowModel):
    """Decisions take ``decision_seconds``, messages ``seconds`` (a decision's prompt is longer)."""

    def __init__(self, seconds: float, decision_seconds: float) -> None:
        super().__init__(seconds)
        self.decision_seconds = decision_seconds

    async def complete(self, messages, *, deadline: float, options=None) -> ModelReply:
        self.sent.append(messages[0]["content"])
        shape = options.shape
        await asyncio.sleep(self.decision_seconds if shape.kind == "decision" else self.seconds)
        return ModelReply(CallStatus.OK.value, text="ok")


def test_a_call_is_not_sent_by_the_median_of_calls_of_its_own_kind():
    """Decisions take a local server 2-3x a message's time: a decision is judged by decisions'
    replies of late, a message by messages', not both by the median of all."""
    inner = ShapedModel(0.05, decision_seconds=0.5)
    model = RateLimitedModel(inner, concurrency=1, requests_per_minute=None)
    decision, message = OutputShape("decision", 5), OutputShape("message", 4)

    async def shaped_call(shape, name, seconds_left):
        return await _call(model, name, seconds_left, CallOptions(shape=shape))

    async def scenario():
        for number in range(5):  # more messages than decisions of late
            assert (await shaped_call(message, f"message {number}", 30)).status == "ok"
        for number in range(2):
            assert (await shaped_call(decision, f"decision {number}", 30)).status == "ok"
        assert model.expected_seconds(("message", 4)) < 0.3 < model.expected_seconds(("decision", 5))
        return (await shaped_call(decision, "hopeless decision", 0.3),
                await shaped_call(message, "message that fits", 0.3))

    hopeless, fits = asyncio.run(scenario())
    assert hopeless.status == CallStatus.TIMEOUT.value and "not sent" in hopeless.error
    assert "hopeless decision" not in inner.sent
    assert fits.status == "ok"


class DeadlineModel(SlowModel):
    """A server whose replies take ``seconds``; a call cut off at its deadline comes back as the
    adapter reports it: a timeout that was sent (retryable)."""

    async def complete(self, messages, *, deadline: float, options=None) -> ModelReply:
        self.sent.append(messages[0]["content"])
        left = deadline - time.monotonic()
        if left < self.seconds:
            await asyncio.sleep(max(0.0, left))
            return ModelReply(CallStatus.TIMEOUT.value, error="no reply in time", retryable=True)
        await asyncio.sleep(self.seconds)
        return ModelReply(CallStatus.OK.value, text="ok")


def test_calls_cut_off_unanswered_grow_the_estimate_and_the_message_cites_what_was_measured():
    """A server slower than any deadline: the first call is sent (nothing measured), cut off; the
    estimate is then longer than it ran, so the next call with less time is not sent. Were only
    answered calls counted, the estimate would stay at its floor and every call would be sent."""
    inner = DeadlineModel(1.0)
    model = RateLimitedModel(inner, concurrency=1, requests_per_minute=None)
    async def scenario():
        first = await _call(model, "first, cut off", 0.3, MESSAGE_CALL)
        refused = await _call(model, "hopeless", 0.4, MESSAGE_CALL)
        answered = await _call(model, "with time", 2.0, MESSAGE_CALL)
        refused_again = await _call(model, "hopeless again", 0.9, MESSAGE_CALL)
        return first, refused, answered, refused_again

    first, refused, answered, refused_again = asyncio.run(scenario())
    assert first.status == CallStatus.TIMEOUT.value and "not sent" not in (first.error or "")
    assert inner.sent == ["first, cut off", "with time"]
    assert refused.status == CallStatus.TIMEOUT.value and refused.error.startswith("not sent: 0.4 s were left")
    assert "message calls (4 steps) of this model take about 0.4 s" not in refused.error
    assert f"1 of the last 1 were cut off unanswered after up to 0.3 s: {UNANSWERED_GROWTH:g} x that" \
        in refused.error
    assert answered.status == "ok"
    # the median of one answer (1.0 s) and one cut off at 0.3 s (at least that long): 1.0 s
    assert "take about 1.0 s (the median of the last 1 answered and 1 cut off unanswered" in refused_again.error
    assert 0.99 <= model.expected_seconds(("message", 4)) < 1.2


def test_forgetting_the_calls_cut_off_sends_the_next_call_and_keeps_the_answers():
    """After an experimenter's pause (the server perhaps restarted) the calls cut off are forgotten:
    a call refused before for the time they ran is sent; the answered calls' median stays."""
    inner = DeadlineModel(1.0)
    model = RateLimitedModel(inner, concurrency=1, requests_per_minute=None)
    async def scenario():
        await _call(model, "cut off", 0.3, MESSAGE_CALL)
        refused = await _call(model, "refused", 0.35, MESSAGE_CALL)
        forgotten = model.forget_cut_off_calls()
        sent = await _call(model, "sent after the pause", 0.35, MESSAGE_CALL)
        model.forget_cut_off_calls()
        await _call(model, "answered", 2.0, MESSAGE_CALL)
        return refused, forgotten, sent

    refused, forgotten, sent = asyncio.run(scenario())
    assert refused.error.startswith("not sent") and forgotten == 1  # a call not sent ran for nothing
    assert inner.sent == ["cut off", "sent after the pause", "answered"]
    assert "not sent" not in (sent.error or "")
    assert model.forget_cut_off_calls() == 0
    assert 0.99 <= model.expected_seconds(("message", 4)) < 1.2  # the answer stays


def test_a_call_cut_off_by_its_caller_counts_as_at_least_as_long_as_it_ran():
    """A page settling the turn by the fallback cancels the call: it ran that long unanswered."""
    inner = SlowModel(5.0)
    model = RateLimitedModel(inner, concurrency=1, requests_per_minute=None)

    async def scenario():
        abandoned = asyncio.create_task(_call(model, "abandoned", 30))
        await asyncio.sleep(0.4)
        abandoned.cancel()
        with pytest.raises(asyncio.CancelledError):
            await abandoned
        return await _call(model, "hopeless", 0.5)

    hopeless = asyncio.run(scenario())
    assert 0.4 * UNANSWERED_GROWTH <= model.expected_seconds() < 0.5 * UNANSWERED_GROWTH + 0.1
    assert hopeless.status == CallStatus.TIMEOUT.value and "not sent" in hopeless.error
    assert inner.sent == ["abandoned"]


def test_a_wait_for_the_slot_with_nothing_measured_says_so():
    inner, model = one_slot(1.0)

    async def scenario():
        busy = asyncio.create_task(_call(model, "busy", 30))
        await asyncio.sleep(0.05)
        return await _call(model, "waiting", 0.5), await busy

    waiting, busy = asyncio.run(scenario())
    assert busy.status == "ok" and waiting.status == CallStatus.TIMEOUT.value
    assert waiting.error == ("not sent: no slot came free before the deadline; no reply of this kind has "
                             "been measured yet")


def _local_model(fake, **extra):
    return build_model(ModelConfig(provider="openai_compatible", model="local", base_url=fake.base_url_openai,
                                   max_tokens=128, request_timeout=30, max_retries=0, concurrency=1, **extra))


def test_decisions_a_stage_cannot_fit_on_one_slot_are_not_sent(fake_llm):
    """Three decisions at once on one slot, with time for two and a half: two are answered, the
    third is not sent (it would end after its stage), not computed in vain, also by a model with
    fewer than five answers of late."""
    fake_llm.set(latency=0.5)
    model = _local_model(fake_llm)
    agents = [PersonaAgent(f"agent-{n}", "fair", model, language="en", seed=n) for n in range(4)]

    async def decisions():
        for round_number in (1, 2, 3):  # decisions measured (their median: not the SDK's first call in a loop)
            warm_up = await agents[3].decide(round_number, associate_message_2="A?", deadline=time.monotonic() + 30)
            assert warm_up.status == "ok"
        took = model.inner.inner.expected_seconds(("decision", 5))
        # the agents hand back a tenth of their time: 2.7 calls' time leaves 2.4 for the calls
        deadline = time.monotonic() + 2.7 * took / 0.9
        return await asyncio.gather(*(a.decide(1, associate_message_2="A?", deadline=deadline) for a in agents[:3]))

    turns = asyncio.run(decisions())
    assert sorted(t.status for t in turns) == ["fallback", "ok", "ok"]
    late = next(t for t in turns if t.status == "fallback")
    assert late.fallback_reason == CallStatus.TIMEOUT.value and "not sent: no slot came free" in late.calls[0].error
    assert late.calls[0].flags == "not_sent"  # on the call's row: a timeout that never reached the server
    assert fake_llm.request_count == 5


def test_a_streamed_call_the_lab_gives_up_on_stops_the_server(fake_llm):
    """A local server's reply is streamed: at the turn's deadline the stream is closed and the
    server stops writing (llama-cpp-python computes an unstreamed request to the end)."""
    fake_llm.set(token_seconds=0.05, reply="STEP 4: " + "word " * 200 + "<A?>")  # ~13 s of tokens
    agent = PersonaAgent("agent-1", "fair", _local_model(fake_llm), language="en", seed=1)
    # 3 s: time for the call to be sent on a loaded machine (at 1 s it was once not sent at all)
    turn = asyncio.run(agent.message_2(1, associate_message_1="hi", deadline=time.monotonic() + 3.0))
    assert turn.status == "fallback" and turn.fallback_reason == CallStatus.TIMEOUT.value
    deadline = time.monotonic() + 5
    while not fake_llm.served and time.monotonic() < deadline:
        time.sleep(0.05)
    [served] = fake_llm.served
    assert served["stream"] and served["client_left"] and served["seconds"] < 4.0  # of ~13 s of tokens


def test_a_streamed_reply_is_read_whole_with_its_first_token_timed(fake_llm):
    fake_llm.set(latency=0.3, token_seconds=0.01, stream_usage=False)
    agent = PersonaAgent("agent-1", "fair", _local_model(fake_llm), language="en", seed=1)
    turn = asyncio.run(agent.message_1(1, deadline=time.monotonic() + 10))
    call = turn.calls[0]
    assert (turn.status, turn.text) == ("ok", "Let's both choose A, we each get 70!")
    assert fake_llm.requests[0][1]["stream"] is True
    assert call.input_tokens is None and call.output_tokens > 20  # no usage streamed: its pieces counted
    assert call.time_sent + 0.25 < call.time_first_byte < call.time_done
    fake_llm.set(cut_stream=True)  # llama-cpp-python's reply interrupted by another request
    turn = asyncio.run(agent.message_1(2, deadline=time.monotonic() + 10))
    assert turn.calls[0].status == CallStatus.PROVIDER_ERROR.value
    assert "--interrupt_requests false" in turn.calls[0].error
