"""One slot of a local model server shared by many agents (issue 25): the call due first goes
first, a call its stage can no longer wait for is not sent, and a wait that ends never keeps
the slot."""

from __future__ import annotations

import asyncio
import time

import pytest

from agents.grammars import OutputShape
from agents.models import CallOptions, call_options, current_call_options
from agents.models.layers import MIN_RECENT_REPLIES, RateLimitedModel
from agents.types import CallStatus, ModelReply


class SlowModel:
    """Answers after ``seconds``; notes the order in which calls reached it."""

    settings = None

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.sent: list[str] = []

    async def complete(self, messages, *, deadline: float) -> ModelReply:
        self.sent.append(messages[0]["content"])
        await asyncio.sleep(self.seconds)
        return ModelReply(CallStatus.OK.value, text="ok")


def one_slot(seconds: float, requests_per_minute=None) -> tuple[SlowModel, RateLimitedModel]:
    """A server answering one request at a time after ``seconds``, and the layer in front of it."""
    inner = SlowModel(seconds)
    return inner, RateLimitedModel(inner, concurrency=1, requests_per_minute=requests_per_minute)


def _call(model, name: str, seconds_left: float):
    return model.complete([{"role": "user", "content": name}], deadline=time.monotonic() + seconds_left)


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
        for number in range(MIN_RECENT_REPLIES):  # the model's replies of late take 0.5 s
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

    async def complete(self, messages, *, deadline: float) -> ModelReply:
        self.sent.append(messages[0]["content"])
        shape = current_call_options().shape
        await asyncio.sleep(self.decision_seconds if shape.kind == "decision" else self.seconds)
        return ModelReply(CallStatus.OK.value, text="ok")


def test_a_call_is_not_sent_by_the_median_of_calls_of_its_own_kind():
    """Decisions take a local server 2-3x a message's time: a decision is judged by decisions'
    replies of late, a message by messages', not both by the median of all."""
    inner = ShapedModel(0.05, decision_seconds=0.5)
    model = RateLimitedModel(inner, concurrency=1, requests_per_minute=None)
    decision, message = OutputShape("decision", 5), OutputShape("message", 4)

    async def shaped_call(shape, name, seconds_left):
        with call_options(CallOptions(shape=shape)):
            return await _call(model, name, seconds_left)

    async def scenario():
        for number in range(MIN_RECENT_REPLIES + 2):  # more messages than decisions of late
            assert (await shaped_call(message, f"message {number}", 30)).status == "ok"
        for number in range(MIN_RECENT_REPLIES):
            assert (await shaped_call(decision, f"decision {number}", 30)).status == "ok"
        assert model.expected_seconds() < 0.3 < model.expected_seconds(("decision", 5))
        return (await shaped_call(decision, "hopeless decision", 0.3),
                await shaped_call(message, "message that fits", 0.3))

    hopeless, fits = asyncio.run(scenario())
    assert hopeless.status == CallStatus.TIMEOUT.value and "not sent" in hopeless.error
    assert "hopeless decision" not in inner.sent
    assert fits.status == "ok"
