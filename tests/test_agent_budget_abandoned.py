"""A budget is a promise: a model call abandoned when a page settles its turn by the fallback
counts against the session's budget at once, on record once (also after a restart), and no call
is sent once the budget is spent.

The engine normally ends a slow call itself at the turn's deadline (before the page's grace is
over); ``LAB_AGENT_ENGINE_LAG_SECONDS`` makes it run behind, as a blocked or overloaded engine
thread does, so that the page settles the turn while the call is still with the (slow) model.
"""

from __future__ import annotations

import re
import threading
import time

import pytest
import requests

from agents.agent import PENDING
from agents.models import Budget
from agents.types import CallRecord
from lab.agent_runtime.engine import AgentEngine
from tests.fake_llm_server import FakeLLMServer
from tests.http_participant import HttpParticipant
from tests.lab_server import journal_rows

PRICE = 100.0  # USD per million tokens, input and output: 1e-4 USD a token
MAX_TOKENS = 2000
LIMITS = dict(rounds_per_game=1, language="en", message_1_seconds=4, read_1_seconds=6, message_2_seconds=4,
              read_2_seconds=6, decision_seconds=4, result_seconds=6, llm_check_model=False)


def _model(fake, **extra):
    return dict(llm_provider="openai_compatible", llm_model="fake", llm_base_url=fake.base_url_openai,
                llm_max_retries=0, llm_max_tokens=MAX_TOKENS, llm_price_input_per_mtok=PRICE,
                llm_price_output_per_mtok=PRICE, **extra)


def _estimate(call: dict) -> float:
    return (int(call["prompt_tokens"]) + MAX_TOKENS) * PRICE / 1_000_000


def _spent(server, code: str, app: str) -> float:
    report = requests.get(f"{server.base_url}/AdminReport/{code}", params=dict(app_name=app, round_number=1),
                          timeout=30).text
    return float(re.search(r"Spent so far: <b>([\d.]+)</b>", report)[1])


def _play_until(participant: HttpParticipant, page_name: str) -> threading.Thread:
    reached = threading.Event()

    def stop(p, page, index):
        if page == page_name:
            reached.set()
            raise SystemExit  # the participant stays on the page

    participant.on_page = stop

    def play():
        try:
            participant.play(timeout=120)
        except (SystemExit, Exception):
            pass

    thread = threading.Thread(target=play)
    thread.start()
    thread.join(timeout=150)
    assert reached.is_set(), participant.pages
    participant.on_page = None
    return thread


@pytest.mark.server
def test_an_abandoned_call_is_spent_at_once_and_on_record_once(lab_server, database_url):
    with FakeLLMServer(latency=60.0) as fake:  # far slower than the 4 s decision
        server = lab_server(database_url, LAB_AGENT_ENGINE_LAG_SECONDS="30")
        session = server.create_session("hf_informed_woc_first", 1, **LIMITS, **_model(fake))
        code = session["code"]
        participant = HttpParticipant(server.base_url, session["participants"][0]["code"])
        # Decision, then the wait for the agent: at its deadline + grace the page settles the
        # turn by the fallback while the call is still with the model.
        _play_until(participant, "Result")
        assert fake.request_count == 1

        # At once, without a restart: the call is on record, its estimate spent.
        calls = server.export("payment", "custom_export_llm_calls", code)
        # Beside it, the fallback's own record (status timeout: the stage limit passed, nothing sent).
        assert sorted(c["status"] for c in calls) == ["abandoned", "timeout"], calls
        [call] = [c for c in calls if c["status"] == "abandoned"]
        [fallback] = [c for c in calls if c["status"] == "timeout"]
        assert not fallback["cost"] and not fallback["time_first_byte"]
        assert call["turn"] == "decision" and "abandoned" in call["flags"].split(",")
        assert float(call["cost"]) == pytest.approx(_estimate(call)) and float(call["cost"]) > 0
        decisions = server.export("payment", "custom_export_decisions", code)
        assert [d["timed_out"] for d in decisions if d["player_kind"] == "agent"] == ["True"]
        assert _spent(server, code, "game_without_chat") == pytest.approx(float(call["cost"]), abs=1e-4)

        # A kill -9 and a new start: the journal does not make a second row of it.
        assert [state for state, _ in journal_rows(server)] == ["abandoned"]
        server.restart(kill=True)
        after = server.export("payment", "custom_export_llm_calls", code)
        assert sorted((c["call_id"], c["status"], c["cost"]) for c in after) == sorted(
            (c["call_id"], c["status"], c["cost"]) for c in calls)
        assert _spent(server, code, "game_without_chat") == pytest.approx(float(call["cost"]), abs=1e-4)
        assert journal_rows(server) == [], "the journal's abandoned row is cleared at the start"


@pytest.mark.server
@pytest.mark.parametrize("engine_lag, status", [("30", "abandoned"), ("0", "timeout")])
def test_an_unanswered_call_spends_the_budget_and_the_next_call_is_not_sent(lab_server, database_url, engine_lag,
                                                                            status):
    """A budget for one or two ordinary calls: the first message, sent and never answered
    (estimated at a full reply), spends it, so the agent's second message and decision are
    refused, never sent. Whether the page abandoned the call (the engine running behind) or the
    engine cut it off at the turn's deadline (status timeout)."""
    budget = 0.15
    with FakeLLMServer(latency=60.0) as fake:
        server = lab_server(database_url, LAB_AGENT_ENGINE_LAG_SECONDS=engine_lag)
        session = server.create_session("hf_informed_wc_first", 1, **LIMITS, **_model(fake, session_budget=budget))
        code = session["code"]
        participant = HttpParticipant(server.base_url, session["participants"][0]["code"],
                                      messages={1: "hello", 2: "A?"})
        _play_until(participant, "Read1")  # message 1 settled by the fallback, message 2 started
        fake.set(latency=0.0)  # a call sent from now on would reach the fake at once
        participant.play(timeout=240)
        assert participant.done

    assert fake.request_count == 1, [request["messages"][-1]["content"][:80] for _, request in fake.requests]
    calls = server.export("payment", "custom_export_llm_calls", code)
    [unanswered] = [c for c in calls if c["cost"]]
    assert (unanswered["game"], unanswered["turn"], unanswered["status"]) == ("WC", "message_1", status)
    assert float(unanswered["cost"]) == pytest.approx(_estimate(unanswered)) and float(unanswered["cost"]) >= budget
    assert ("abandoned" if status == "abandoned" else "cost_estimated") in unanswered["flags"].split(",")
    ordinary = (int(unanswered["prompt_tokens"]) + 100) * PRICE / 1_000_000  # a reply of ~100 tokens
    assert ordinary < budget, "the budget would pay for an ordinary call"
    refused = [c for c in calls if c["status"] == "budget"]
    assert {(c["game"], c["turn"]) for c in refused} == {("WC", "message_2"), ("WC", "decision"), ("WoC", "decision")}


# --- The engine's bookkeeping, without a server -------------------------------------------------
def _record(call_id: str, cost=None) -> CallRecord:
    return CallRecord(call_id=call_id, agent_id="a", round_number=1, turn="decision", attempt=1,
                      provider="openai_compatible", model="m", parameters={}, prompt_version="v",
                      messages=[], raw_reply=None, parsed=None, status=PENDING, cost=cost, prompt_tokens=500)


def test_a_reply_after_the_abandonment_is_not_counted_twice():
    engine = AgentEngine()
    budget = Budget(1.0)
    engine._budgets["S"] = budget
    engine.call_started("k", _record("done-before"))
    engine.call_finished("k", "S", _record("done-before", cost=0.01))
    budget.charge(0.01)  # what BudgetedModel charged as its reply came
    engine.call_started("k", _record("in-flight"))

    taken = engine.abandon_calls("k", "S", lambda record: 0.25)
    assert [(state, record["call_id"], cost) for state, record, cost in taken] == [
        ("done", "done-before", None), (PENDING, "in-flight", 0.25)]
    assert budget.spent == pytest.approx(0.26)  # the estimate, at once

    budget.charge(0.04)  # the reply came after all: BudgetedModel charges its real cost...
    assert engine.call_finished("k", "S", _record("in-flight", cost=0.04)) is False  # ...taken back
    assert budget.spent == pytest.approx(0.26)
    assert engine.abandon_calls("k", "S", lambda record: 0.25) == []  # nothing is abandoned twice
    assert budget.spent == pytest.approx(0.26)


def test_a_cancelled_abandoned_call_keeps_its_estimate():
    engine = AgentEngine()
    budget = Budget(0.2)
    engine._budgets["S"] = budget
    engine.call_started("k", _record("c"))
    engine.abandon_calls("k", "S", lambda record: 0.25)
    assert budget.exhausted
    cancelled = _record("c")
    cancelled.status = "cancelled"
    assert engine.call_finished("k", "S", cancelled) is False
    assert budget.spent == pytest.approx(0.25) and budget.exhausted


# --- A request sent and never answered, through the real SDK and the fake server ----------------
@pytest.mark.parametrize("charge_unanswered", [True, False])
def test_a_request_cut_off_by_the_deadline_is_charged_its_estimate(charge_unanswered):
    """The lab's models (``charge_unanswered``) charge a sent request that the deadline cut off
    as prompt + max_tokens, and the call's record says so; other users of ``build_model`` (the
    simulations) keep counting nothing for it."""
    import asyncio

    from agents.agent import PersonaAgent
    from agents.config import ModelConfig
    from agents.models import build_model

    with FakeLLMServer(latency=30.0) as fake:
        cfg = ModelConfig(provider="openai_compatible", model="fake", base_url=fake.base_url_openai,
                          max_retries=0, max_tokens=MAX_TOKENS, price_input_per_mtok=PRICE,
                          price_output_per_mtok=PRICE)
        budget = Budget(10.0)
        model = build_model(cfg, budget=budget, charge_unanswered=charge_unanswered)
        agent = PersonaAgent("agent-1", "fair", model, language="en", seed=1)

        async def turn():
            return await agent.message_1(1, deadline=time.monotonic() + 2.0)

        result = asyncio.run(turn())
        assert fake.request_count == 1
    [call] = result.calls
    assert result.status == "fallback" and call.status == "timeout"
    if charge_unanswered:
        estimate = (call.prompt_tokens + MAX_TOKENS) * PRICE / 1_000_000
        assert call.cost == pytest.approx(estimate) and "cost_estimated" in call.flags.split(",")
        assert budget.spent == pytest.approx(estimate)
    else:
        assert call.cost is None and budget.spent == 0
